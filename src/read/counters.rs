//! Counters of many users at once: their counter records are read in the
//! request's batched Redis round trip ([`super::batch`]); the missing or
//! malformed ones, and those this process failed to update after a change
//! it made, are rebuilt from `user_stats` in one query, written back
//! (only if newer) and served. A cache failure never fails the read.

use std::collections::HashMap;

use crate::app::App;
use crate::cache;
use crate::cache::counters::CounterRecord;
use crate::error::ApiError;
use crate::model::UserId;
use crate::store::stats;

/// Whether a Redis round trip counts as a read's
/// (`kith_read_redis_round_trips_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RoundTrips {
    /// A read's own: counted.
    Counted,
    /// Background work ahead of the reads: not counted.
    Uncounted,
}

/// The counters of `users` read from `user_stats` (zero for users without a
/// row), written back to their counter records (where newer). A record
/// written back is current again for this process if it had failed to
/// update it before the read ([`crate::read::state::ReadModel::counters_rewritten`]).
pub(crate) async fn rebuild(
    app: &App,
    users: &[UserId],
    counted: RoundTrips,
) -> Result<HashMap<UserId, CounterRecord>, ApiError> {
    if users.is_empty() {
        return Ok(HashMap::new());
    }
    let mut conn = app.pg.get().await?;
    let read_at = std::time::Instant::now();
    let rebuilt: Vec<(UserId, CounterRecord)> = stats::find_many(&mut conn, users)
        .await?
        .iter()
        .map(|(user, s)| (*user, CounterRecord::from(s)))
        .collect();
    drop(conn);
    if !rebuilt.is_empty() {
        match write_back(app, &rebuilt, counted).await {
            Ok(written) => {
                let users: Vec<UserId> = rebuilt[..written].iter().map(|(user, _)| *user).collect();
                app.read.counters_rewritten(&users, read_at);
            }
            Err(error) => tracing::warn!(%error, "counter records not written back"),
        }
    }
    let mut found: HashMap<UserId, CounterRecord> = users
        .iter()
        .map(|user| (*user, CounterRecord::default()))
        .collect();
    found.extend(rebuilt);
    Ok(found)
}

/// Writes as many of `records`, from the first, as the room reads may take
/// in Redis admits (`KITH_FILL_MEMORY_LIMIT`); returns how many.
async fn write_back(
    app: &App,
    records: &[(UserId, CounterRecord)],
    counted: RoundTrips,
) -> Result<usize, String> {
    let sizes = vec![crate::read::state::RECORD_BYTES; records.len()];
    let room = super::pages::fits_in_memory(app, &sizes)
        .await
        .map_err(|e| e.detail())?;
    let records = &records[..room];
    if records.is_empty() {
        return Ok(0);
    }
    let mut redis = app.redis.get().await.map_err(|e| e.to_string())?;
    if counted == RoundTrips::Counted {
        app.round_trips.redis();
    }
    cache::write_through(
        &mut *redis,
        &app.keys,
        records,
        &[],
        !app.redis.is_cluster(),
    )
    .await
    .map_err(|e| {
        if cache::out_of_memory(&e) {
            app.metrics.redis_oom("counter_record");
        }
        e.to_string()
    })?;
    Ok(room)
}
