//! `kith rebuild-cache`: rebuilds counter records and list caches from
//! PostgreSQL, safe while the service and the projector run — including
//! right after Redis lost everything.
//!
//! Counter records are written from `user_stats` snapshots, only where no
//! newer snapshot is cached (one of the same version is replaced: it may be
//! corrupt), so an increment that lands meanwhile is never overwritten by an
//! older value. Lists are refilled through the fill protocol: the list is
//! claimed (reads go to PostgreSQL meanwhile), events that land during the
//! fill are applied to it under per-member versions, and the rows read merge
//! under the same versions.

use std::time::Duration;

use super::progress::Progress;
use crate::app::App;
use crate::cache::counters::{self, CounterRecord};
use crate::cache::lists;
use crate::model::UserId;
use crate::paging::ListKey;
use crate::pipeline::PipelineError;
use crate::read::pages;
use crate::store::stats;

/// What to rebuild.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Only this user (its record and both its lists, cached or not).
    pub user: Option<UserId>,
    /// Fill every user's lists, not only the ones cached now.
    pub all_lists: bool,
    /// Users per page.
    pub batch: i64,
    /// Draw a progress line.
    pub progress: bool,
}

/// What a rebuild did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Counter records written.
    pub records: u64,
    /// Lists refilled.
    pub lists: u64,
    /// Lists another filler was filling (left to it).
    pub lists_busy: u64,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "counter records written {}, lists refilled {} ({} being filled by another process)",
            self.records, self.lists, self.lists_busy
        )
    }
}

/// Runs one rebuild.
pub async fn rebuild(app: &App, options: Options) -> Result<Summary, PipelineError> {
    let mut summary = Summary::default();
    let batch = options.batch.max(1);
    let mut bar = Progress::new("users", 0, options.progress);
    let mut after = 0;
    loop {
        let users = super::user_page(app, options.user, after, batch).await?;
        let Some(last) = users.last() else { break };
        after = last.get();
        bar.advance(users.len() as u64);
        summary.records += rebuild_records(app, &users).await?;
        let candidates: Vec<ListKey> = users
            .iter()
            .flat_map(|u| [ListKey::Following(*u), ListKey::Followers(*u)])
            .collect();
        let lists = if options.all_lists || options.user.is_some() {
            candidates
        } else {
            let coverages = {
                let mut redis = app.redis.get().await?;
                lists::coverages(&mut *redis, &app.keys, &candidates).await?
            };
            candidates
                .into_iter()
                .zip(coverages)
                .filter(|(_, c)| c.is_cached())
                .map(|(list, _)| list)
                .collect()
        };
        for list in lists {
            if refill(app, list).await? {
                summary.lists += 1;
            } else {
                summary.lists_busy += 1;
            }
        }
    }
    bar.finish();
    Ok(summary)
}

/// Writes the counter records of `users` from `user_stats` (replacing one of
/// the same version); returns how many.
pub(crate) async fn rebuild_records(app: &App, users: &[UserId]) -> Result<u64, PipelineError> {
    let records: Vec<(UserId, CounterRecord)> = {
        let mut conn = app.pg.get().await?;
        stats::find_many(&mut conn, users)
            .await?
            .iter()
            .map(|(user, s)| (*user, CounterRecord::from(s)))
            .collect()
    };
    if records.is_empty() {
        return Ok(0);
    }
    let mut pipe = redis::pipe();
    counters::queue_repair(&mut pipe, &app.keys, &records);
    let mut redis = app.redis.get().await?;
    crate::cache::run_writes(&mut *redis, &pipe).await?;
    Ok(records.len() as u64)
}

/// Refills one list; false when another filler holds it (it fills it then).
async fn refill(app: &App, list: ListKey) -> Result<bool, PipelineError> {
    // A fill claim lasts `FILL_LEASE`; one that is running finishes within it.
    for _ in 0..3 {
        match pages::fill(app, list, true).await {
            Ok(true) => return Ok(true),
            Ok(false) => {
                let claim = {
                    let mut redis = app.redis.get().await?;
                    lists::coverages(&mut *redis, &app.keys, &[list]).await?
                };
                if claim
                    .first()
                    .is_some_and(|c| *c != lists::Coverage::Filling)
                {
                    continue;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(PipelineError::CacheFill(format!("{list:?}: {e:?}"))),
        }
    }
    Ok(false)
}
