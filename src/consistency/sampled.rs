//! The sampled online check: when a user's counters are read, at most once
//! per user per `KITH_COUNTER_CHECK_INTERVAL_SECS` (the mark lives in Redis,
//! so the bound holds across processes), compare `user_stats` and the
//! counter record with counts of the truth, in the background.
//!
//! A difference may be the pipeline's normal lag, so it is looked at again
//! after a short pause; only one that stays is repaired — through the same
//! reconciliation as `kith reconcile --user`, which cannot race the projector
//! — then counted in `kith_consistency_repairs_total` and logged.

use std::sync::Arc;
use std::time::Duration;

use super::rebuild;
use super::reconcile::{self, Scope};
use super::verify::{self, Subject};
use crate::app::App;
use crate::error::PipelineError;
use crate::model::UserId;

/// How long a difference may last before it counts as drift.
const SETTLE: Duration = Duration::from_secs(3);

/// Called with the users whose counters a request read. Costs a cache
/// lookup per user on the request path; the rest runs in the background.
pub(crate) fn counters_read(app: &Arc<App>, users: &[UserId]) {
    let Some((due, permit)) = app.consistency.due(users) else {
        return;
    };
    let app = app.clone();
    tokio::spawn(async move {
        let _permit = permit;
        if let Err(e) = check(&app, &due).await {
            tracing::warn!(error = %e, "sampled counter check failed");
        }
    });
}

/// Marks `users` in Redis (once per interval across processes), then checks
/// the ones this call marked.
async fn check(app: &App, users: &[UserId]) -> Result<(), PipelineError> {
    let interval = app.consistency.interval();
    let marked: Vec<UserId> = {
        let mut pipe = redis::pipe();
        for user in users {
            pipe.cmd("SET")
                .arg(app.keys.counter_check_mark(*user))
                .arg(1)
                .arg("NX")
                .arg("PX")
                .arg(interval.as_millis() as u64);
        }
        let mut redis = app.redis.get().await?;
        let answers: Vec<Option<String>> = pipe.query_async(&mut *redis).await?;
        users
            .iter()
            .zip(answers)
            .filter(|(_, ok)| ok.is_some())
            .map(|(u, _)| *u)
            .collect()
    };
    let drifted = differing(app, &marked).await?;
    if drifted.is_empty() {
        return Ok(());
    }
    tokio::time::sleep(SETTLE).await;
    for user in differing(app, &drifted).await? {
        let summary = reconcile::reconcile(app, Scope::User(user), 1000, false).await?;
        // A counter record corrupted under its own version is replaced too.
        let record_fixed = !differing(app, &[user]).await?.is_empty();
        if record_fixed {
            rebuild::rebuild_records(app, &[user]).await?;
        }
        let repairs = summary.repairs() + u64::from(record_fixed);
        app.metrics.consistency_repairs.inc_by(repairs);
        tracing::warn!(%user, repairs, %summary, "sampled counter check: drift repaired");
    }
    Ok(())
}

/// The users among `users` whose `user_stats` or counter record differ from
/// the truth (the same comparison as `kith verify`).
async fn differing(app: &App, users: &[UserId]) -> Result<Vec<UserId>, PipelineError> {
    if users.is_empty() {
        return Ok(Vec::new());
    }
    let mut out: Vec<UserId> = verify::check_counters(app, users)
        .await?
        .iter()
        .filter_map(|d| match d.subject {
            Subject::User(u) => Some(u),
            Subject::Edge(..) => None,
        })
        .collect();
    out.dedup();
    Ok(out)
}
