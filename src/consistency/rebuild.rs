//! `kith rebuild-cache`: sets counter records and list caches to what
//! PostgreSQL holds, safe while the service and the projector run —
//! including right after Redis lost everything, and where Redis is ahead of
//! the truth (a restored database, an event another database wrote).
//!
//! A counter record is read, then its `user_stats` row, then set to that
//! row by compare-and-set against what was read (`counter_record_repair.lua`):
//! whatever its version, unless it changed in between — then it is read
//! again, since a newer write landed. A write of an older truth landing
//! afterwards is refused by the ordinary writes' versions, so an increment
//! is never overwritten by an older value. Lists are refilled through the
//! fill protocol in repair mode: the list, its member versions and its
//! tombstones start from nothing and are claimed (reads go to PostgreSQL
//! meanwhile), events that land during the fill are applied to it under
//! per-member versions, and the rows read merge under the same versions.
//! Only what really changed is counted.

use std::collections::HashMap;
use std::time::Duration;

use super::progress::Progress;
use crate::app::App;
use crate::cache::counters::{self, CounterRecord, Repaired};
use crate::cache::lists;
use crate::error::PipelineError;
use crate::model::UserId;
use crate::paging::ListKey;
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

/// What a rebuild did to counter records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Records {
    /// Users whose record was looked at.
    pub checked: u64,
    /// Records that differed from the truth and were set to it.
    pub rewritten: u64,
    /// Of those, records whose version was ahead of the truth's.
    pub ahead: u64,
    /// Records written where none was cached.
    pub created: u64,
    /// Records deleted: the truth has no counters for their user.
    pub deleted: u64,
    /// Records that changed under every attempt (left to the writes that
    /// kept changing them, which come from a newer truth).
    pub busy: u64,
}

impl Records {
    /// Records this rebuild changed.
    pub fn changed(&self) -> u64 {
        self.rewritten + self.created + self.deleted
    }

    fn add(&mut self, other: Self) {
        self.checked += other.checked;
        self.rewritten += other.rewritten;
        self.ahead += other.ahead;
        self.created += other.created;
        self.deleted += other.deleted;
        self.busy += other.busy;
    }
}

/// What a rebuild did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Counter records.
    pub records: Records,
    /// Lists refilled.
    pub lists: u64,
    /// Of those, lists whose members, scores, versions or coverage differed
    /// from what the refill wrote.
    pub lists_changed: u64,
    /// Lists another filler was filling (left to it).
    pub lists_busy: u64,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = &self.records;
        write!(
            f,
            "counter records: {} checked, {} changed ({} set to the truth, {} of them ahead of it; \
             {} created; {} deleted), {} left to concurrent writes; \
             lists refilled {}, {} of them changed ({} being filled by another process)",
            r.checked,
            r.changed(),
            r.rewritten,
            r.ahead,
            r.created,
            r.deleted,
            r.busy,
            self.lists,
            self.lists_changed,
            self.lists_busy
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
        summary.records.add(rebuild_records(app, &users).await?);
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
            let before = read_list(app, list).await?;
            if refill(app, list).await? {
                summary.lists += 1;
                let after = read_list(app, list).await?;
                summary.lists_changed += u64::from(before != after);
            } else {
                summary.lists_busy += 1;
            }
        }
    }
    bar.finish();
    Ok(summary)
}

/// How many times a record that changed under a repair is read again.
const REPAIR_ATTEMPTS: usize = 3;

/// Sets the counter records of `users` to their `user_stats` rows (see the
/// module); says what changed.
pub(crate) async fn rebuild_records(app: &App, users: &[UserId]) -> Result<Records, PipelineError> {
    let mut done = Records {
        checked: users.len() as u64,
        ..Records::default()
    };
    let mut pending: Vec<UserId> = users.to_vec();
    for _ in 0..REPAIR_ATTEMPTS {
        if pending.is_empty() {
            break;
        }
        // The record first, then the truth: a write that lands in between
        // makes the compare-and-set fail, and the record is read again.
        let seen = {
            let mut redis = app.redis.get().await?;
            counters::load_raw(&mut *redis, &app.keys, &pending).await?
        };
        let truth: HashMap<UserId, CounterRecord> = {
            let mut conn = app.pg.get().await?;
            stats::find_many(&mut conn, &pending)
                .await?
                .iter()
                .map(|(user, s)| (*user, CounterRecord::from(s)))
                .collect()
        };
        let items: Vec<counters::RepairItem> = pending
            .iter()
            .zip(seen)
            .map(|(user, seen)| (*user, seen, truth.get(user).copied()))
            .collect();
        let outcomes = {
            let mut redis = app.redis.get().await?;
            counters::repair(&mut *redis, &app.keys, &items).await?
        };
        pending.clear();
        for ((user, seen, truth), outcome) in items.into_iter().zip(outcomes) {
            match (outcome, &seen, truth) {
                (Repaired::Equal, _, _) => {}
                (Repaired::Moved, _, _) => pending.push(user),
                (Repaired::Written, _, None) => done.deleted += 1,
                (Repaired::Written, None, Some(_)) => done.created += 1,
                (Repaired::Written, Some(bytes), Some(truth)) => {
                    done.rewritten += 1;
                    let ahead =
                        CounterRecord::decode(bytes).is_some_and(|r| r.version > truth.version);
                    done.ahead += u64::from(ahead);
                }
            }
        }
    }
    done.busy = pending.len() as u64;
    Ok(done)
}

/// What reads of `list` depend on: its coverage, its members with their
/// scores, and those members' versions (tombstones of members gone are
/// left out: a repair starts them afresh).
async fn read_list(
    app: &App,
    list: ListKey,
) -> Result<(lists::Coverage, Vec<(String, i64, Option<i64>)>), PipelineError> {
    let snapshot = {
        let mut redis = app.redis.get().await?;
        lists::snapshot(&mut *redis, &app.keys, list).await?
    };
    let members = snapshot
        .members
        .into_iter()
        .map(|(member, score)| {
            let version = snapshot.versions.get(&member).copied();
            (member, score, version)
        })
        .collect();
    Ok((snapshot.coverage, members))
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
            Err(e) => {
                return Err(PipelineError::CacheFill(format!(
                    "{list:?}: {}",
                    e.detail()
                )));
            }
        }
    }
    Ok(false)
}
