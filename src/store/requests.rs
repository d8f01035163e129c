//! `follow_request`: pending requests to follow locked accounts. Made and
//! cancelled by the edge writes (`kith_change_edges`), answered by
//! `kith_answer_request`, accepted in batches by `kith_accept_requests`.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Integer, Text};
use diesel_async::RunQueryDsl;

use super::PgConn;
use super::blocks::BlockRow;
use super::following::{EdgeChangeRow, FollowCap};
use crate::model::UserId;

/// `owner` accepts (`accept`) or rejects the pending request of
/// `requester`, in one statement; the request's event gets `event_id`, an
/// accepted request's follow `follow_event_id`. An accept past the
/// requester's follow `cap` answers `follow_limit`.
pub(crate) async fn answer(
    conn: &mut PgConn,
    owner: UserId,
    requester: UserId,
    accept: bool,
    event_id: uuid::Uuid,
    follow_event_id: uuid::Uuid,
    cap: FollowCap,
) -> QueryResult<EdgeChangeRow> {
    let rows: Vec<EdgeChangeRow> =
        diesel::sql_query("SELECT * FROM kith_answer_request($1, $2, $3, $4, $5, $6, $7)")
            .bind::<BigInt, _>(owner.get())
            .bind::<BigInt, _>(requester.get())
            .bind::<Bool, _>(accept)
            .bind::<diesel::sql_types::Uuid, _>(event_id)
            .bind::<diesel::sql_types::Uuid, _>(follow_event_id)
            .bind::<BigInt, _>(i64::from(cap.max))
            .bind::<diesel::sql_types::Double, _>(cap.ratio)
            .load(conn)
            .await?;
    super::committed(rows).ok_or(diesel::result::Error::NotFound)
}

/// One request an unlock's batch looked at.
#[derive(Clone, Debug, PartialEq, Eq, QueryableByName)]
pub(crate) struct Accepted {
    /// The requester.
    #[diesel(sql_type = BigInt)]
    pub requester: i64,
    /// `answered` (accepted) or `dropped`.
    #[diesel(sql_type = Text)]
    pub outcome: String,
}

/// Accepts up to `limit` pending requests `owner` received, oldest first,
/// if its account is not locked: one transaction. A request past its
/// requester's follow `cap` is rejected (`dropped`).
pub(crate) async fn accept_batch(
    conn: &mut PgConn,
    owner: UserId,
    limit: i32,
    cap: FollowCap,
) -> QueryResult<Vec<Accepted>> {
    diesel::sql_query("SELECT * FROM kith_accept_requests($1, $2, $3, $4)")
        .bind::<BigInt, _>(owner.get())
        .bind::<Integer, _>(limit)
        .bind::<BigInt, _>(i64::from(cap.max))
        .bind::<diesel::sql_types::Double, _>(cap.ratio)
        .load(conn)
        .await
}

/// Unlocked active accounts with requests still pending (an unlock whose
/// batches did not finish), at most `limit`.
pub(crate) async fn unlocked_with_pending(
    conn: &mut PgConn,
    limit: i64,
) -> QueryResult<Vec<UserId>> {
    #[derive(QueryableByName)]
    struct Owner {
        #[diesel(sql_type = BigInt)]
        id: i64,
    }
    let rows: Vec<Owner> = diesel::sql_query(
        "SELECT DISTINCT q.to_user_id AS id FROM follow_request q
           JOIN users u ON u.id = q.to_user_id AND NOT u.locked AND u.status = 'active'
                        AND u.moved_to IS NULL
          WHERE q.active
          LIMIT $1",
    )
    .bind::<BigInt, _>(limit)
    .load(conn)
    .await?;
    Ok(rows.into_iter().filter_map(|r| UserId::new(r.id)).collect())
}

/// Every pending request made by or to any of `users`, in one statement.
pub(crate) async fn involving(conn: &mut PgConn, users: &[UserId]) -> QueryResult<Vec<BlockRow>> {
    super::blocks::pairs_involving(conn, "follow_request", users).await
}

/// A pending request that should not be: beside an active follow of the
/// same pair, or across a block.
#[derive(Clone, Debug, PartialEq, Eq, QueryableByName)]
pub(crate) struct Stray {
    /// The requester.
    #[diesel(sql_type = BigInt)]
    pub from_user_id: i64,
    /// The account asked.
    #[diesel(sql_type = BigInt)]
    pub to_user_id: i64,
    /// `beside_follow` or `across_block`.
    #[diesel(sql_type = Text)]
    pub why: String,
}

/// Pending requests beside a follow or across a block — none while the
/// truth holds — at most `limit`.
pub(crate) async fn strays(conn: &mut PgConn, limit: i64) -> QueryResult<Vec<Stray>> {
    diesel::sql_query(
        "(SELECT q.from_user_id, q.to_user_id, 'beside_follow' AS why
            FROM follow_request q
            JOIN following f ON f.from_user_id = q.from_user_id
                            AND f.to_user_id = q.to_user_id AND f.active
           WHERE q.active)
         UNION ALL
         (SELECT q.from_user_id, q.to_user_id, 'across_block'
            FROM follow_request q
            JOIN block b ON b.active
                 AND ((b.from_user_id, b.to_user_id) = (q.from_user_id, q.to_user_id)
                   OR (b.from_user_id, b.to_user_id) = (q.to_user_id, q.from_user_id))
           WHERE q.active)
         ORDER BY 1, 2 LIMIT $1",
    )
    .bind::<BigInt, _>(limit)
    .load(conn)
    .await
}

/// Cancels the pending request `from` → `to` (its event: a cancel), under
/// the pair's lock; returns whether one was pending.
pub(crate) async fn cancel(conn: &mut PgConn, from: UserId, to: UserId) -> QueryResult<bool> {
    use diesel_async::AsyncConnection as _;

    #[derive(QueryableByName)]
    struct Step {
        #[diesel(sql_type = diesel::sql_types::Nullable<BigInt>)]
        version: Option<i64>,
    }
    conn.transaction::<_, diesel::result::Error, _>(async |conn| {
        diesel::sql_query("SELECT kith_lock_pair($1, $2)")
            .bind::<BigInt, _>(from.get())
            .bind::<BigInt, _>(to.get())
            .execute(conn)
            .await?;
        let step: Step = diesel::sql_query(
            "SELECT version FROM kith_request_step($1, $2, FALSE, gen_random_uuid(), 'FollowRequestCanceled')",
        )
        .bind::<BigInt, _>(from.get())
        .bind::<BigInt, _>(to.get())
        .get_result(conn)
        .await?;
        Ok(step.version.is_some())
    })
    .await
}
