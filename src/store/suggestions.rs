//! What suggestions read from PostgreSQL: an account's dismissals, which
//! candidates it follows already, and the most followed accounts.

use diesel::sql_types::{Array, BigInt};
use diesel_async::RunQueryDsl;

use super::PgConn;
use crate::model::UserId;

#[derive(diesel::QueryableByName)]
struct Id {
    #[diesel(sql_type = BigInt)]
    id: i64,
}

fn ids(rows: Vec<Id>) -> Vec<UserId> {
    rows.into_iter().filter_map(|r| UserId::new(r.id)).collect()
}

/// Leaves `target` out of `user`'s suggestions for `secs`.
pub(crate) async fn dismiss(
    conn: &mut PgConn,
    user: UserId,
    target: UserId,
    secs: u64,
) -> diesel::QueryResult<()> {
    diesel::sql_query(
        "INSERT INTO suggestion_dismissal (user_id, target_id, until)
         VALUES ($1, $2, now() + $3 * interval '1 second')
         ON CONFLICT (user_id, target_id) DO UPDATE SET until = EXCLUDED.until",
    )
    .bind::<BigInt, _>(user.get())
    .bind::<BigInt, _>(target.get())
    .bind::<BigInt, _>(i64::try_from(secs).unwrap_or(i64::MAX))
    .execute(conn)
    .await?;
    Ok(())
}

/// The accounts `user` dismissed that are still left out.
pub(crate) async fn dismissed(conn: &mut PgConn, user: UserId) -> diesel::QueryResult<Vec<UserId>> {
    let rows: Vec<Id> = diesel::sql_query(
        "SELECT target_id AS id FROM suggestion_dismissal WHERE user_id = $1 AND until > now()",
    )
    .bind::<BigInt, _>(user.get())
    .load(conn)
    .await?;
    Ok(ids(rows))
}

/// Which of `candidates` `user` follows (the truth).
pub(crate) async fn followed_of(
    conn: &mut PgConn,
    user: UserId,
    candidates: &[UserId],
) -> diesel::QueryResult<Vec<UserId>> {
    let raw: Vec<i64> = candidates.iter().map(|c| c.get()).collect();
    let rows: Vec<Id> = diesel::sql_query(
        "SELECT to_user_id AS id FROM following
          WHERE from_user_id = $1 AND to_user_id = ANY($2) AND active",
    )
    .bind::<BigInt, _>(user.get())
    .bind::<Array<BigInt>, _>(&raw)
    .load(conn)
    .await?;
    Ok(ids(rows))
}

/// The `limit` active accounts with the most followers (a scan of
/// `user_stats`: run seldom, its answer kept).
pub(crate) async fn most_followed(
    conn: &mut PgConn,
    limit: i64,
) -> diesel::QueryResult<Vec<UserId>> {
    let rows: Vec<Id> = diesel::sql_query(
        "SELECT s.user_id AS id FROM user_stats s JOIN users u ON u.id = s.user_id
          WHERE u.status = 'active' AND s.followers > 0
          ORDER BY s.followers DESC, s.user_id LIMIT $1",
    )
    .bind::<BigInt, _>(limit)
    .load(conn)
    .await?;
    Ok(ids(rows))
}
