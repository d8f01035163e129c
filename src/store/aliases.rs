//! `account_alias`: the old accounts an account claims to be, from which
//! a move to it is allowed (see [`super::moves`]).

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bool, Nullable};
use diesel_async::RunQueryDsl;

use super::PgConn;
use crate::model::UserId;

/// Adds `alias` to `user`'s aliases (at most `max`); `Some(true)` when
/// added, `Some(false)` when it was one already, `None` when `user` has
/// `max` already.
pub(crate) async fn add_alias(
    conn: &mut PgConn,
    user: UserId,
    alias: UserId,
    max: i64,
) -> diesel::QueryResult<Option<bool>> {
    #[derive(QueryableByName)]
    struct Added {
        #[diesel(sql_type = Nullable<Bool>)]
        added: Option<bool>,
    }
    use diesel_async::AsyncConnection as _;
    conn.transaction(async |conn| {
        // The owner's row, locked first (FOR NO KEY UPDATE: it does not
        // block the foreign-key checks of others' writes): the count below,
        // read after it in a statement of its own, sees every alias added
        // before, so two adds at once cannot pass the limit together.
        diesel::sql_query("SELECT 1 FROM users WHERE id = $1 FOR NO KEY UPDATE")
            .bind::<BigInt, _>(user.get())
            .execute(conn)
            .await?;
        let row: Added = diesel::sql_query(
            "WITH has AS (SELECT EXISTS (SELECT 1 FROM account_alias
                                          WHERE user_id = $1 AND alias_id = $2) AS has,
                                 (SELECT count(*) FROM account_alias WHERE user_id = $1) AS n),
                  ins AS (INSERT INTO account_alias (user_id, alias_id)
                          SELECT $1, $2 FROM has WHERE NOT has.has AND has.n < $3
                          ON CONFLICT DO NOTHING
                          RETURNING 1)
             SELECT CASE WHEN (SELECT has FROM has) THEN FALSE
                         WHEN EXISTS (SELECT 1 FROM ins) THEN TRUE END AS added",
        )
        .bind::<BigInt, _>(user.get())
        .bind::<BigInt, _>(alias.get())
        .bind::<BigInt, _>(max)
        .get_result(conn)
        .await?;
        Ok(row.added)
    })
    .await
}

/// Removes `alias` from `user`'s aliases; whether it was one.
pub(crate) async fn remove_alias(
    conn: &mut PgConn,
    user: UserId,
    alias: UserId,
) -> diesel::QueryResult<bool> {
    let n = diesel::sql_query("DELETE FROM account_alias WHERE user_id = $1 AND alias_id = $2")
        .bind::<BigInt, _>(user.get())
        .bind::<BigInt, _>(alias.get())
        .execute(conn)
        .await?;
    Ok(n > 0)
}

/// `user`'s aliases, oldest first.
pub(crate) async fn aliases(conn: &mut PgConn, user: UserId) -> diesel::QueryResult<Vec<UserId>> {
    #[derive(QueryableByName)]
    struct Alias {
        #[diesel(sql_type = BigInt)]
        alias_id: i64,
    }
    let rows: Vec<Alias> = diesel::sql_query(
        "SELECT alias_id FROM account_alias WHERE user_id = $1 ORDER BY created_at, alias_id",
    )
    .bind::<BigInt, _>(user.get())
    .load(conn)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| UserId::new(r.alias_id))
        .collect())
}
