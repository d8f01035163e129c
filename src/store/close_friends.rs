//! `close_friend`: whom each owner lists among its close friends.
//! `kith_close_friend` writes a listing and its outbox event in one
//! statement; `kith_block` ends the listings between a pair it blocks.

use diesel::sql_types::{BigInt, Bool};
use diesel_async::RunQueryDsl;

use super::PgConn;
use super::blocks::BlockRow;
use super::following::EdgeChangeRow;
use crate::model::UserId;

/// Adds (`add`) or removes `target` in `actor`'s close friends, in one
/// statement (`kith_close_friend`); the event, if any, gets `event_id`. An
/// addition past `max` listings (0: no limit) answers `close_friends_limit`,
/// one across a block `blocked`.
pub(crate) async fn change(
    conn: &mut PgConn,
    actor: UserId,
    target: UserId,
    add: bool,
    event_id: uuid::Uuid,
    max: u32,
) -> diesel::QueryResult<EdgeChangeRow> {
    let rows: Vec<EdgeChangeRow> =
        diesel::sql_query("SELECT * FROM kith_close_friend($1, $2, $3, $4, $5)")
            .bind::<BigInt, _>(actor.get())
            .bind::<BigInt, _>(target.get())
            .bind::<Bool, _>(add)
            .bind::<diesel::sql_types::Uuid, _>(event_id)
            .bind::<BigInt, _>(i64::from(max))
            .load(conn)
            .await?;
    super::committed(rows).ok_or(diesel::result::Error::NotFound)
}

/// Every active listing made by or naming any of `users`, in one statement
/// (`from_user_id` lists `to_user_id`).
pub(crate) async fn involving(
    conn: &mut PgConn,
    users: &[UserId],
) -> diesel::QueryResult<Vec<BlockRow>> {
    super::blocks::pairs_involving(conn, "close_friend", users).await
}

/// Active listings between two accounts one of which blocks the other, at
/// most `limit`: a fault of the truth (a block ends them in its own
/// transaction), which `kith verify` reports and `kith reconcile` repairs.
pub(crate) async fn across_blocks(
    conn: &mut PgConn,
    limit: i64,
) -> diesel::QueryResult<Vec<BlockRow>> {
    diesel::sql_query(
        "SELECT c.from_user_id, c.to_user_id
           FROM close_friend c
          WHERE c.active AND EXISTS (
                SELECT 1 FROM block b
                 WHERE b.active
                   AND ((b.from_user_id, b.to_user_id) = (c.from_user_id, c.to_user_id)
                     OR (b.from_user_id, b.to_user_id) = (c.to_user_id, c.from_user_id)))
          ORDER BY 1, 2 LIMIT $1",
    )
    .bind::<BigInt, _>(limit)
    .load(conn)
    .await
}

/// Ends `owner`'s listing of `friend` (with its event) if a block still
/// stands between them, under the pair's lock; returns whether it ended.
pub(crate) async fn end_across_block(
    conn: &mut PgConn,
    owner: UserId,
    friend: UserId,
) -> diesel::QueryResult<bool> {
    use diesel_async::AsyncConnection as _;

    #[derive(diesel::QueryableByName)]
    struct Step {
        #[diesel(sql_type = diesel::sql_types::Nullable<BigInt>)]
        version: Option<i64>,
    }
    conn.transaction::<_, diesel::result::Error, _>(async |conn| {
        diesel::sql_query("SELECT kith_lock_pair($1, $2)")
            .bind::<BigInt, _>(owner.get())
            .bind::<BigInt, _>(friend.get())
            .execute(conn)
            .await?;
        let step: Step = diesel::sql_query(
            "SELECT CASE WHEN EXISTS (
                        SELECT 1 FROM block b
                         WHERE b.active
                           AND ((b.from_user_id, b.to_user_id) = ($1, $2)
                             OR (b.from_user_id, b.to_user_id) = ($2, $1)))
                    THEN (kith_close_friend_step($1, $2, FALSE, gen_random_uuid())).edge_version
                    END AS version",
        )
        .bind::<BigInt, _>(owner.get())
        .bind::<BigInt, _>(friend.get())
        .get_result(conn)
        .await?;
        Ok(step.version.is_some())
    })
    .await
}
