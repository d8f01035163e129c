//! `content_event_ledger`: content events already counted, so a redelivered
//! event counts once.

use diesel::prelude::*;
use std::collections::HashSet;

use diesel::sql_types::{Array, BigInt, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use uuid::Uuid;

use super::PgConn;
use crate::model::UserId;

/// Records every `(event id, author)` as counted in one round trip; returns
/// the ids that were not counted before (each once, even if repeated here).
pub async fn claim_many(
    conn: &mut PgConn,
    events: &[(Uuid, UserId)],
) -> QueryResult<HashSet<Uuid>> {
    #[derive(QueryableByName)]
    struct Claimed {
        #[diesel(sql_type = SqlUuid)]
        event_id: Uuid,
    }
    if events.is_empty() {
        return Ok(HashSet::new());
    }
    let claimed: Vec<Claimed> = diesel::sql_query(
        "INSERT INTO content_event_ledger (event_id, author_id)
         SELECT * FROM unnest($1::uuid[], $2::bigint[])
         ON CONFLICT (event_id) DO NOTHING
         RETURNING event_id",
    )
    .bind::<Array<SqlUuid>, _>(events.iter().map(|(id, _)| *id).collect::<Vec<_>>())
    .bind::<Array<BigInt>, _>(
        events
            .iter()
            .map(|(_, author)| author.get())
            .collect::<Vec<_>>(),
    )
    .load(conn)
    .await?;
    Ok(claimed.into_iter().map(|c| c.event_id).collect())
}

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
