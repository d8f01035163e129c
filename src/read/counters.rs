//! Counters of many users at once: one Redis `MGET` for all counter records;
//! the missing or malformed ones are rebuilt from `user_stats` in one query,
//! written back (only if newer) and served. A cache failure never fails the read.

use std::collections::HashMap;

use crate::app::App;
use crate::cache;
use crate::cache::counters::{self, CounterRecord};
use crate::error::ApiError;
use crate::model::UserId;
use crate::store::stats;

/// The counters of `users` (zero for users without a `user_stats` row).
pub async fn load(app: &App, users: &[UserId]) -> Result<HashMap<UserId, CounterRecord>, ApiError> {
    let mut found = HashMap::with_capacity(users.len());
    let mut missing = Vec::new();
    match cached(app, users).await {
        Ok(records) => {
            for (user, record) in users.iter().zip(records) {
                match record {
                    Some(record) => {
                        found.insert(*user, record);
                    }
                    None => missing.push(*user),
                }
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "counter records unreadable; reading user_stats");
            missing.extend_from_slice(users);
        }
    }
    if missing.is_empty() {
        return Ok(found);
    }
    let mut conn = app.pg.get().await?;
    let rebuilt: Vec<(UserId, CounterRecord)> = stats::find_many(&mut conn, &missing)
        .await?
        .iter()
        .map(|(user, s)| (*user, CounterRecord::from(s)))
        .collect();
    drop(conn);
    if !rebuilt.is_empty()
        && let Err(error) = write_back(app, &rebuilt).await
    {
        tracing::warn!(%error, "counter records not written back");
    }
    for user in missing {
        found.insert(user, CounterRecord::default());
    }
    found.extend(rebuilt);
    Ok(found)
}

async fn cached(app: &App, users: &[UserId]) -> Result<Vec<Option<CounterRecord>>, String> {
    let mut redis = app.redis.get().await.map_err(|e| e.to_string())?;
    app.round_trips.redis();
    counters::load_many(&mut *redis, &app.keys, users)
        .await
        .map_err(|e| e.to_string())
}

async fn write_back(app: &App, records: &[(UserId, CounterRecord)]) -> Result<(), String> {
    let mut redis = app.redis.get().await.map_err(|e| e.to_string())?;
    app.round_trips.redis();
    cache::write_through(&mut *redis, &app.keys, records, &[])
        .await
        .map_err(|e| e.to_string())
}
