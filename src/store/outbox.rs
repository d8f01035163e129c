//! `outbox`: events written in the same transaction as the change they describe.

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt};
use diesel_async::RunQueryDsl;

use super::PgConn;
use super::schema::outbox;
use crate::events::follow::FollowEvent;

/// Appends `events`, in order, in one statement. (A follow or unfollow
/// appends its event inside `kith_change_edges`; bulk transitions use this.)
pub(crate) async fn append_many(conn: &mut PgConn, events: &[FollowEvent]) -> QueryResult<()> {
    if events.is_empty() {
        return Ok(());
    }
    let rows: Vec<_> = events
        .iter()
        .map(|event| {
            (
                outbox::event_id.eq(event.event_id),
                outbox::event_type.eq(event.event_type.as_str()),
                outbox::partition_key.eq(event.partition_key()),
                outbox::payload.eq(serde_json::to_value(event).expect("events serialize")),
            )
        })
        .collect();
    diesel::insert_into(outbox::table)
        .values(rows)
        .execute(conn)
        .await
        .map(drop)
}

/// One outbox row waiting to be published.
#[derive(Clone, Debug, QueryableByName)]
pub(crate) struct PendingEvent {
    /// Outbox row id: commit order within one partition key.
    #[diesel(sql_type = BigInt)]
    pub id: i64,
    /// The Kafka message key.
    #[diesel(sql_type = diesel::sql_types::Text)]
    pub partition_key: String,
    /// The event JSON.
    #[diesel(sql_type = diesel::sql_types::Jsonb)]
    pub payload: serde_json::Value,
}

/// Deletes `published` (rows the broker acknowledged) and returns the oldest
/// `limit` other rows, in insertion order — in one statement, so a relay
/// round costs one round trip and one commit fewer than a read and a delete.
pub(crate) async fn settle_and_read(
    conn: &mut PgConn,
    published: &[i64],
    limit: i64,
) -> QueryResult<Vec<PendingEvent>> {
    // The read sees the snapshot from before the delete, hence the filter.
    diesel::sql_query(
        "WITH gone AS (DELETE FROM outbox WHERE id = ANY($1))
         SELECT id, partition_key, payload FROM outbox
          WHERE id <> ALL($1)
          ORDER BY id
          LIMIT $2",
    )
    .bind::<Array<BigInt>, _>(published)
    .bind::<BigInt, _>(limit)
    .load(conn)
    .await
}

/// Deletes published rows.
pub(crate) async fn delete(conn: &mut PgConn, ids: &[i64]) -> QueryResult<usize> {
    diesel::sql_query("DELETE FROM outbox WHERE id = ANY($1)")
        .bind::<Array<BigInt>, _>(ids)
        .execute(conn)
        .await
}

/// Rows not yet published: counted up to 10,000, estimated from the ids
/// past that (ids are handed out in order and rows leave oldest first), so
/// the statement stays cheap however large the backlog grows.
pub async fn backlog(conn: &mut PgConn) -> QueryResult<i64> {
    #[derive(QueryableByName)]
    struct Backlog {
        #[diesel(sql_type = BigInt)]
        n: i64,
    }
    let row: Backlog = diesel::sql_query(
        "SELECT CASE WHEN c.n <= 10000 THEN c.n
                     ELSE (SELECT max(id) - min(id) + 1 FROM outbox) END AS n
           FROM (SELECT count(*) AS n FROM (SELECT 1 FROM outbox LIMIT 10001) t) c",
    )
    .get_result(conn)
    .await?;
    Ok(row.n)
}
