//! `content_event_ledger`: content events already counted, so a redelivered
//! event counts once.

use diesel::prelude::*;
use diesel::sql_types::BigInt;
use diesel_async::RunQueryDsl;

use super::PgConn;

/// Forgets up to `limit` ledger entries counted before `before`; returns how
/// many. A redelivery of such an old event would count again, so the
/// retention must outlast the content topic's.
pub async fn prune(
    conn: &mut PgConn,
    before: chrono::DateTime<chrono::Utc>,
    limit: i64,
) -> QueryResult<usize> {
    diesel::sql_query(
        "DELETE FROM content_event_ledger WHERE event_id IN (
             SELECT event_id FROM content_event_ledger WHERE applied_at < $1 LIMIT $2)",
    )
    .bind::<diesel::sql_types::Timestamptz, _>(before)
    .bind::<BigInt, _>(limit)
    .execute(conn)
    .await
}
