//! Account lifecycle: suspend, delete, restore.
//!
//! A suspended or deleted account's edges, in both directions, are made
//! inactive in bounded batches — each batch one transaction with its outbox
//! events and the followers' `followings`, exactly like unfollows — so every
//! count and list involving the account is corrected by the pipeline. The
//! edges are remembered (`hidden_edge`) with their follow times: restoring
//! the account makes them active again in their old place, unless the
//! follower unfollowed meanwhile or the other end is itself not active (the
//! edge then waits for that account's restore).
//!
//! The status changes at once, recorded as pending (`account_transition`);
//! the batches follow, each checking the status is still the one it carries
//! out. A sweeper (in `kith run` and `kith project`) finishes pending changes
//! whose process died, and catches an edge a follow committed while the
//! status changed (the follow reads the target's status without locking
//! it). It also accepts the requests left pending at unlocked accounts.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use diesel_async::AsyncConnection as _;

use crate::app::App;
use crate::cache::lists::EdgeState;
use crate::error::PipelineError;
use crate::events::follow::{FollowEvent, FollowEventType};
use crate::model::{UserId, UserStatus};
use crate::paging::ListKey;
use crate::shutdown::Shutdown;
use crate::store::following::Changed;
use crate::store::{PgConn, failure, following, hidden_edges, outbox, stats, users};

/// Edges changed per transaction.
const BATCH: i64 = 500;

/// What a status change did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// The status before, `None` if there is no such user.
    pub previous: Option<UserStatus>,
    /// Edges made inactive.
    pub hidden: u64,
    /// Edges made active again.
    pub restored: u64,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.previous {
            None => write!(f, "no such user"),
            Some(previous) => write!(
                f,
                "was {}; edges hidden {}, restored {}",
                previous.as_str(),
                self.hidden,
                self.restored
            ),
        }
    }
}

/// Sets `user`'s status and carries its edges along, batch by batch.
pub async fn set_status(
    app: &App,
    user: UserId,
    status: UserStatus,
) -> Result<Summary, PipelineError> {
    let previous = {
        let mut conn = app.pg.get().await?;
        failure::rerun!(users::set_status(&mut conn, user, status).await)?
    };
    // Shown at once here; other processes drop it as PostgreSQL's notice arrives.
    app.read.forget_users(&[user]);
    let mut summary = Summary {
        previous,
        ..Summary::default()
    };
    if previous.is_none() {
        return Ok(summary);
    }
    settle_account(app, user, status, &mut summary).await?;
    Ok(summary)
}

/// Brings one account's edges in line with its status.
async fn settle_account(
    app: &App,
    user: UserId,
    status: UserStatus,
    summary: &mut Summary,
) -> Result<(), PipelineError> {
    loop {
        let n = match status {
            UserStatus::Active => {
                let (changed, dealt) = restore_batch(app, user).await?;
                summary.restored += changed.len() as u64;
                write_through(app, &changed, true).await;
                dealt
            }
            UserStatus::Suspended | UserStatus::Deleted => {
                let changed = hide_batch(app, user).await?;
                summary.hidden += changed.len() as u64;
                write_through(app, &changed, false).await;
                changed.len() as u64
            }
        };
        if n == 0 {
            let mut conn = app.pg.get().await?;
            failure::rerun!(users::transition_done(&mut conn, user, status).await)?;
            return Ok(());
        }
    }
}

/// After a batch committed: the followers' cached following lists show it at
/// once (relations are read from them; the projector would only get there a
/// pipeline lag later), and the relays are woken for its outbox events.
async fn write_through(app: &App, changed: &[Changed], active: bool) {
    if changed.is_empty() {
        return;
    }
    let edges: Vec<EdgeState> = changed
        .iter()
        .filter_map(|c| {
            Some(EdgeState {
                list: ListKey::Following(UserId::new(c.from_user_id)?),
                other: UserId::new(c.to_user_id)?,
                active,
                followed_at_ms: c.transition.followed_at.timestamp_millis(),
                version: c.transition.version,
            })
        })
        .collect();
    super::after_commit(app, &[], &edges).await;
}

fn events(kind: FollowEventType, changed: &[Changed]) -> Vec<FollowEvent> {
    changed
        .iter()
        .filter_map(|c| {
            Some(FollowEvent::new(
                uuid::Uuid::new_v4(),
                kind,
                UserId::new(c.from_user_id)?,
                UserId::new(c.to_user_id)?,
                c.transition.version,
                c.transition.followed_at,
                c.transition.occurred_at,
            ))
        })
        .collect()
}

/// `followings` of each follower, moved by `delta` per changed edge.
fn followings_deltas(changed: &[Changed], delta: i64) -> Vec<(UserId, i64)> {
    let mut by_user: BTreeMap<UserId, i64> = BTreeMap::new();
    for c in changed {
        if let Some(from) = UserId::new(c.from_user_id) {
            *by_user.entry(from).or_default() += delta;
        }
    }
    by_user.into_iter().collect()
}

/// One transaction: up to [`BATCH`] active edges of `user` made inactive and
/// remembered. Returns how many.
async fn hide_batch(app: &App, user: UserId) -> Result<Vec<Changed>, PipelineError> {
    let mut conn = app.pg.get().await?;
    failure::rerun!(
        conn.transaction::<_, PipelineError, _>(async |conn| {
            // A restore that overtook this change stops it.
            if users::status_of(conn, user).await? == Some(UserStatus::Active) {
                return Ok(Vec::new());
            }
            let pairs = following::lock_active_edges_of(conn, user, BATCH).await?;
            if pairs.is_empty() {
                return Ok(Vec::new());
            }
            let changed = following::deactivate_many(conn, &pairs).await?;
            // The followers' counts are set from the truth (rows locked, then
            // counted), not lowered by deltas: a count that had drifted low is
            // set right instead of failing the batch on the `>= 0` check.
            let followers: Vec<UserId> = changed
                .iter()
                .filter_map(|c| UserId::new(c.from_user_id))
                .collect();
            stats::repair_counts(conn, &followers).await?;
            outbox::append_many(conn, &events(FollowEventType::FollowCanceled, &changed)).await?;
            hidden_edges::insert(conn, user, &changed).await?;
            Ok(changed)
        })
        .await
    )
}

/// One transaction: up to [`BATCH`] hidden edges of `user` made active again
/// (or handed to the other end's account when that one is not active).
/// Returns (edges restored, hidden edges dealt with).
async fn restore_batch(app: &App, user: UserId) -> Result<(Vec<Changed>, u64), PipelineError> {
    let mut conn = app.pg.get().await?;
    failure::rerun!(
        conn.transaction::<_, PipelineError, _>(async |conn| restore_in(conn, user).await)
            .await
    )
}

async fn restore_in(conn: &mut PgConn, user: UserId) -> Result<(Vec<Changed>, u64), PipelineError> {
    // A suspension that overtook this restore stops it.
    if users::status_of(conn, user).await? != Some(UserStatus::Active) {
        return Ok((Vec::new(), 0));
    }
    let batch = hidden_edges::lock_batch(conn, user, BATCH).await?;
    if batch.is_empty() {
        return Ok((Vec::new(), 0));
    }
    let mut others: Vec<UserId> = batch
        .iter()
        .filter_map(|h| {
            let other = if h.from_user_id == user.get() {
                h.to_user_id
            } else {
                h.from_user_id
            };
            UserId::new(other)
        })
        .collect();
    others.sort_unstable();
    others.dedup();
    let statuses: BTreeMap<UserId, UserStatus> = users::find_many(conn, &others)
        .await?
        .into_iter()
        .map(|u| (u.id, u.status))
        .collect();
    let mut revive = Vec::new();
    let mut hand_over = Vec::new();
    for h in &batch {
        let (Some(from), Some(to)) = (UserId::new(h.from_user_id), UserId::new(h.to_user_id))
        else {
            continue;
        };
        let other = if from == user { to } else { from };
        match statuses.get(&other) {
            Some(UserStatus::Active) => revive.push((from, to, h.followed_at)),
            Some(UserStatus::Suspended | UserStatus::Deleted) => hand_over.push((*h, other)),
            None => {}
        }
    }
    // Edges first, then counters: the order a follow locks them in.
    let pairs: Vec<(UserId, UserId)> = revive.iter().map(|(from, to, _)| (*from, *to)).collect();
    following::lock_pairs(conn, &pairs, false).await?;
    let followers: Vec<UserId> = revive.iter().map(|(from, _, _)| *from).collect();
    stats::ensure_rows(conn, &followers).await?;
    let changed = following::reactivate_many(conn, &revive).await?;
    stats::add_followings_many(conn, &followings_deltas(&changed, 1)).await?;
    outbox::append_many(conn, &events(FollowEventType::FollowCreated, &changed)).await?;
    hidden_edges::hand_over(conn, user, &hand_over).await?;
    let done: Vec<(i64, i64)> = batch
        .iter()
        .map(|h| (h.from_user_id, h.to_user_id))
        .collect();
    hidden_edges::delete(conn, user, &done).await?;
    Ok((changed, batch.len() as u64))
}

/// Finishes what status changes left: active edges of accounts that are not
/// active, hidden edges of accounts that are; and what unlocks left:
/// pending requests at accounts that are not locked. Returns the edges
/// changed.
pub async fn sweep(app: &App) -> Result<u64, PipelineError> {
    let (pending, inactive) = {
        let mut conn = app.pg.get().await?;
        (
            users::pending_transitions(&mut conn).await?,
            users::inactive_with_edges(&mut conn).await?,
        )
    };
    let mut summary = Summary::default();
    for (user, status) in pending {
        settle_account(app, user, status, &mut summary).await?;
    }
    for user in inactive {
        settle_account(app, user, UserStatus::Suspended, &mut summary).await?;
    }
    // Unlocks whose requests are not all accepted yet.
    let accepted = super::requests::finish_unlocks(app).await?;
    Ok(summary.hidden + summary.restored + accepted)
}

/// Sweeps every `every` until `shutdown`.
pub(crate) async fn sweep_every(app: Arc<App>, every: Duration, mut shutdown: Shutdown) {
    while shutdown.sleep(every).await {
        match sweep(&app).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                edges = n,
                "account sweeper finished interrupted status changes"
            ),
            Err(e) => tracing::warn!(error = %e, "account sweeper failed"),
        }
    }
}
