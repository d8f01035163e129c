//! `content_event_ledger`: content events already counted, so a redelivered
//! event counts once.

use diesel::prelude::*;
use diesel::sql_types::BigInt;
use diesel_async::RunQueryDsl;

use super::PgConn;

/// Forgets up to `limit` ledger entries counted longer than `retention` ago; returns how
/// many. A redelivery of such an old event would count again, so the
/// retention must outlast the content topic's.
pub async fn prune(
    conn: &mut PgConn,
    retention: chrono::Duration,
    limit: i64,
) -> QueryResult<usize> {
    // Older than `retention` by PostgreSQL's clock, which wrote `applied_at`.
    diesel::sql_query(
        "DELETE FROM content_event_ledger WHERE event_id IN (
             SELECT event_id FROM content_event_ledger
              WHERE applied_at < now() - make_interval(secs => $1) LIMIT $2)",
    )
    .bind::<diesel::sql_types::Double, _>(retention.num_milliseconds() as f64 / 1000.0)
    .bind::<BigInt, _>(limit)
    .execute(conn)
    .await
}
