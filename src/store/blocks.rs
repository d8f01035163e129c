//! `block`: who blocks whom, the truth. A block is a directed, versioned
//! row like an edge of `following`; `kith_block` writes it, ends the
//! follows between the pair and appends the outbox event in one statement.

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Bool};
use diesel_async::RunQueryDsl;

use super::PgConn;
use super::following::EdgeChangeRow;
use crate::model::UserId;

/// Blocks (`block`) or unblocks `target` as `actor` in one statement
/// (`kith_block`). The block's event gets `event_id`; the follows a block
/// ends get `unfollow_events` (actor → target, then target → actor). The
/// first row is the block's; one row follows per follow ended. A new block
/// past `max_blocks` (0: no limit) answers `block_limit`.
pub(crate) async fn change(
    conn: &mut PgConn,
    actor: UserId,
    target: UserId,
    block: bool,
    event_id: uuid::Uuid,
    unfollow_events: [uuid::Uuid; 2],
    max_blocks: u32,
) -> QueryResult<Vec<EdgeChangeRow>> {
    let rows: Vec<EdgeChangeRow> =
        diesel::sql_query("SELECT * FROM kith_block($1, $2, $3, $4, $5, $6)")
            .bind::<BigInt, _>(actor.get())
            .bind::<BigInt, _>(target.get())
            .bind::<Bool, _>(block)
            .bind::<diesel::sql_types::Uuid, _>(event_id)
            .bind::<Array<diesel::sql_types::Uuid>, _>(unfollow_events.to_vec())
            .bind::<BigInt, _>(i64::from(max_blocks))
            .load(conn)
            .await?;
    // Every row is read, so the statement committed (see `committed`).
    if rows.is_empty() {
        return Err(diesel::result::Error::NotFound);
    }
    Ok(rows)
}

/// One directed pair: an active block, a pending request, a follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, QueryableByName)]
pub(crate) struct BlockRow {
    /// Who blocks (requests, follows).
    #[diesel(sql_type = BigInt)]
    pub from_user_id: i64,
    /// Who is blocked (asked, followed).
    #[diesel(sql_type = BigInt)]
    pub to_user_id: i64,
}

/// Every active block made by or against any of `users`, in one statement.
pub(crate) async fn involving(conn: &mut PgConn, users: &[UserId]) -> QueryResult<Vec<BlockRow>> {
    pairs_involving(conn, "block", users).await
}

/// The active rows of `table` (a directed pair's table: `block`,
/// `follow_request`) from or to any of `users`, in one statement.
pub(crate) async fn pairs_involving(
    conn: &mut PgConn,
    table: &'static str,
    users: &[UserId],
) -> QueryResult<Vec<BlockRow>> {
    if users.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<i64> = users.iter().map(|u| u.get()).collect();
    diesel::sql_query(format!(
        "SELECT from_user_id, to_user_id FROM {table} WHERE active AND from_user_id = ANY($1)
         UNION
         SELECT from_user_id, to_user_id FROM {table} WHERE active AND to_user_id = ANY($1)"
    ))
    .bind::<Array<BigInt>, _>(ids)
    .load(conn)
    .await
}

/// Active follows between a pair with an active block, either way — none
/// while the truth holds (verify reports them). At most `limit`.
pub(crate) async fn follows_across(conn: &mut PgConn, limit: i64) -> QueryResult<Vec<BlockRow>> {
    diesel::sql_query(
        "SELECT f.from_user_id, f.to_user_id FROM block b
           JOIN following f ON f.from_user_id = b.from_user_id AND f.to_user_id = b.to_user_id
          WHERE b.active AND f.active
         UNION
         SELECT f.from_user_id, f.to_user_id FROM block b
           JOIN following f ON f.from_user_id = b.to_user_id AND f.to_user_id = b.from_user_id
          WHERE b.active AND f.active
         ORDER BY 1, 2 LIMIT $1",
    )
    .bind::<BigInt, _>(limit)
    .load(conn)
    .await
}

/// Ends the follow `from → to` as an unfollow (its event gets `event_id`)
/// if a block stands between the two: in one transaction, under the pair's
/// lock, each step a statement of its own (so each sees what committed
/// before the lock was granted). Returns whether it ended one.
pub(crate) async fn end_follow_across(
    conn: &mut PgConn,
    from: UserId,
    to: UserId,
    event_id: uuid::Uuid,
) -> QueryResult<bool> {
    use diesel_async::AsyncConnection as _;

    #[derive(QueryableByName)]
    struct Blocked {
        #[diesel(sql_type = Bool)]
        blocked: bool,
    }
    #[derive(QueryableByName)]
    struct Ended {
        #[diesel(sql_type = diesel::sql_types::Nullable<BigInt>)]
        edge_version: Option<i64>,
    }
    conn.transaction::<_, diesel::result::Error, _>(async |conn| {
        diesel::sql_query("SELECT kith_lock_pair($1, $2)")
            .bind::<BigInt, _>(from.get())
            .bind::<BigInt, _>(to.get())
            .execute(conn)
            .await?;
        let blocked: Blocked = diesel::sql_query("SELECT kith_blocked($1, $2) AS blocked")
            .bind::<BigInt, _>(from.get())
            .bind::<BigInt, _>(to.get())
            .get_result(conn)
            .await?;
        if !blocked.blocked {
            return Ok(false);
        }
        let ended: Ended =
            diesel::sql_query("SELECT edge_version FROM kith_transition_edge($1, $2, FALSE, $3)")
                .bind::<BigInt, _>(from.get())
                .bind::<BigInt, _>(to.get())
                .bind::<diesel::sql_types::Uuid, _>(event_id)
                .get_result(conn)
                .await?;
        Ok(ended.edge_version.is_some())
    })
    .await
}
