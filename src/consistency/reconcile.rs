//! `kith reconcile`: repairs the `follower` projection and `user_stats` from
//! the truth, safe while the service and the projector run.
//!
//! - Projection rows behind the truth are brought forward the way the
//!   projector would (versioned upserts that cannot overwrite a newer state,
//!   with their follower deltas), so a repair and an in-flight event never
//!   both count one transition. Rows that hold another state under the
//!   truth's own version are overwritten; rows with no truth edge are deleted.
//!   The `followers` of every user whose rows changed are then counted anew
//!   in the same transaction (not adjusted by deltas: a count that drifted
//!   low must be set right, not driven below zero).
//! - Counters are then set from the tables that maintain them — `followings`
//!   from the truth, `followers` from the projection — with the rows locked
//!   before they are counted ([`stats::repair_counts`]), so no concurrent
//!   increment is lost or added twice.
//! - Redis is re-synced for everything changed.
//!
//! Incremental runs look at edges changed since a watermark (stored in
//! `reconcile_watermark`, a little before the start of the previous run) and
//! the users at their ends; a full run looks at everything.

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::OptionalExtension as _;
use diesel_async::AsyncConnection as _;
use diesel_async::RunQueryDsl as _;

use super::progress::Progress;
use crate::app::App;
use crate::error::PipelineError;
use crate::model::UserId;
use crate::pipeline::projector::resync;
use crate::store::checks::{EdgePair, EdgeScope};
use crate::store::follower::{self, Applied, EdgeEvent};
use crate::store::{PgConn, failure, stats};

/// Which part of the graph to reconcile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Everything.
    Full,
    /// Edges changed at or after this time, and their users.
    Since(DateTime<Utc>),
    /// From the stored watermark (everything the first time); moves it on.
    Incremental,
    /// One user's edges (both directions) and counters.
    User(UserId),
}

impl Scope {
    /// The one user this scope covers, if it covers one.
    fn user(self) -> Option<UserId> {
        match self {
            Self::User(u) => Some(u),
            Self::Full | Self::Since(_) | Self::Incremental => None,
        }
    }
}

/// What a run repaired.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Truth edges looked at.
    pub edges_checked: u64,
    /// Projection rows brought forward to the truth (missing or older).
    pub projection_updated: u64,
    /// Projection rows overwritten (another state under the same version).
    pub projection_overwritten: u64,
    /// Projection rows with no truth edge, deleted.
    pub orphans_deleted: u64,
    /// Users whose counters were looked at.
    pub users_checked: u64,
    /// Users whose counters were set right.
    pub counters_fixed: u64,
    /// Follows across a block, ended as unfollows (a fault of the truth:
    /// a block ends them in its own transaction).
    pub follows_across_ended: u64,
    /// Pending requests beside a follow or across a block, cancelled.
    pub stray_requests_cancelled: u64,
    /// Close-friend listings across a block, removed.
    pub close_friends_removed: u64,
    /// Followers a finished move left following the moved account, brought
    /// along.
    pub stranded_followers_moved: u64,
    /// Such followers that cannot be brought along now, left behind again
    /// with the code the move would give them (blocked, at their follow
    /// cap…): not a repair, they still follow the moved account.
    pub stranded_followers_left: u64,
    /// A few of the fixes, for the log.
    pub examples: Vec<String>,
}

impl Summary {
    /// Repairs of any kind.
    pub fn repairs(&self) -> u64 {
        self.projection_updated
            + self.projection_overwritten
            + self.orphans_deleted
            + self.counters_fixed
            + self.follows_across_ended
            + self.stray_requests_cancelled
            + self.close_friends_removed
            + self.stranded_followers_moved
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "checked {} edges and {} users; projection rows brought forward {}, overwritten {}, orphans deleted {}; counters fixed {}; follows across a block ended {}; stray requests cancelled {}; close friends across a block removed {}; followers stranded by a move brought along {}, left behind again {}",
            self.edges_checked,
            self.users_checked,
            self.projection_updated,
            self.projection_overwritten,
            self.orphans_deleted,
            self.counters_fixed,
            self.follows_across_ended,
            self.stray_requests_cancelled,
            self.close_friends_removed,
            self.stranded_followers_moved,
            self.stranded_followers_left
        )?;
        for example in &self.examples {
            writeln!(f, "  {example}")?;
        }
        Ok(())
    }
}

/// How far back of the previous run's start an incremental run begins:
/// transactions that were open then commit rows with an earlier `updated_at`.
const WATERMARK_SLACK: Duration = Duration::from_secs(60);
const EXAMPLES: usize = 10;

/// Runs one reconciliation.
pub async fn reconcile(
    app: &App,
    scope: Scope,
    batch: i64,
    progress: bool,
) -> Result<Summary, PipelineError> {
    // The watermark is compared with `updated_at`, which PostgreSQL's clock
    // wrote: it is taken from that clock too (a host clock ahead of it
    // would skip every edge changed in between, for good).
    let started = {
        let mut conn = app.pg.get().await?;
        crate::store::database_now(&mut conn).await?
    };
    let edge_scope = match scope {
        Scope::Full => EdgeScope::All,
        Scope::Since(t) => EdgeScope::ChangedSince(t),
        Scope::User(u) => EdgeScope::User(u),
        Scope::Incremental => match read_watermark(app).await? {
            Some(t) => EdgeScope::ChangedSince(t),
            None => EdgeScope::All,
        },
    };
    let mut summary = Summary::default();
    let mut users: BTreeSet<UserId> = BTreeSet::new();
    let mut bar = Progress::new("edges", 0, progress);

    // First the truth itself: a follow across a block is ended as an
    // unfollow, and its counters and caches follow as for any unfollow.
    // Only a full run or one user's looks (one join of every block): it is
    // a fault, never a lag, and the scheduled runs look for lag.
    if let Scope::Full | Scope::User(_) = scope {
        use super::truth::Repair;
        for repair in super::truth::repair(app, scope.user()).await? {
            *match repair {
                Repair::FollowAcross(..) => &mut summary.follows_across_ended,
                Repair::StrayRequest(..) => &mut summary.stray_requests_cancelled,
                Repair::ListingAcross(..) => &mut summary.close_friends_removed,
                Repair::Stranded(_, _, "brought along") => &mut summary.stranded_followers_moved,
                Repair::Stranded(..) => &mut summary.stranded_followers_left,
            } += 1;
            users.extend(repair.users().into_iter().flatten());
            keep_examples(&mut summary, vec![repair.to_string()]);
        }
    }
    app.wakes.relay.notify_one();

    let mut walk = super::EdgeWalk::new(edge_scope, batch);
    while let Some((page, orphans)) = walk.next(app).await? {
        summary.edges_checked += page.len() as u64;
        bar.advance(page.len() as u64);
        if edge_scope != EdgeScope::All || orphans {
            users.extend(page.iter().flat_map(ends));
        }
        repair_edges(app, &page, &mut summary).await?;
    }
    bar.finish();

    let mut bar = Progress::new("users", users.len() as u64, progress);
    match edge_scope {
        EdgeScope::All => {
            let mut after = 0;
            loop {
                let page = super::user_page(app, None, after, batch).await?;
                let Some(last) = page.last() else { break };
                after = last.get();
                bar.advance(page.len() as u64);
                repair_counters(app, &page, &mut summary).await?;
            }
        }
        EdgeScope::User(u) => {
            users.insert(u);
            let users: Vec<UserId> = users.into_iter().collect();
            for chunk in users.chunks(usize::try_from(batch).unwrap_or(1000)) {
                bar.advance(chunk.len() as u64);
                repair_counters(app, chunk, &mut summary).await?;
            }
        }
        EdgeScope::ChangedSince(_) => {
            let users: Vec<UserId> = users.into_iter().collect();
            for chunk in users.chunks(usize::try_from(batch).unwrap_or(1000)) {
                bar.advance(chunk.len() as u64);
                repair_counters(app, chunk, &mut summary).await?;
            }
        }
    }
    bar.finish();
    if matches!(scope, Scope::Incremental | Scope::Full) {
        let slack = chrono::Duration::from_std(WATERMARK_SLACK).unwrap_or_default();
        write_watermark(app, started - slack).await?;
    }
    if summary.repairs() > 0 {
        tracing::warn!(%summary, "reconcile: repaired derived views");
    }
    Ok(summary)
}

fn ends(pair: &EdgePair) -> [UserId; 2] {
    let user = |raw| UserId::new(raw).expect("ids in PostgreSQL are positive");
    [user(pair.from_user_id), user(pair.to_user_id)]
}

/// Brings the projection rows of `page` to the truth in one transaction,
/// then sets `followers` of the users whose rows changed from the projection
/// as it now stands, with their rows locked ([`stats::repair_counts`]): a
/// count that had drifted low is set right, never driven below zero.
async fn repair_edges(
    app: &App,
    page: &[EdgePair],
    summary: &mut Summary,
) -> Result<(), PipelineError> {
    let mut behind: Vec<EdgeEvent> = page
        .iter()
        .filter_map(|pair| {
            let truth = pair.truth()?;
            let newer = pair.projected().is_none_or(|p| p.version < truth.version);
            if !newer {
                return None;
            }
            Some(EdgeEvent {
                from: UserId::new(truth.from_user_id)?,
                to: UserId::new(truth.to_user_id)?,
                active: truth.active,
                followed_at: truth.followed_at,
                version: truth.version,
            })
        })
        .collect();
    let same_version: Vec<_> = page
        .iter()
        .filter_map(|pair| {
            let (truth, projected) = (pair.truth()?, pair.projected()?);
            (projected.version == truth.version && projected != truth).then_some(truth)
        })
        .collect();
    let orphans: Vec<(UserId, UserId)> = page
        .iter()
        .filter(|pair| pair.truth().is_none() && pair.projected().is_some())
        .filter_map(|pair| {
            Some((
                UserId::new(pair.from_user_id)?,
                UserId::new(pair.to_user_id)?,
            ))
        })
        .collect();
    if behind.is_empty() && same_version.is_empty() && orphans.is_empty() {
        return Ok(());
    }
    // The projector's lock order: projection rows by their key.
    behind.sort_by_key(|e| (e.to, e.from));
    // The projector's batch locks the same rows and counters: a repair
    // PostgreSQL ends to break a deadlock runs again.
    let fixed = failure::rerun!({
        let mut conn = app.pg.get().await?;
        conn.transaction::<_, PipelineError, _>(async |conn| {
            let mut touched: BTreeSet<UserId> = BTreeSet::new();
            let mut fixed = (0u64, 0u64, 0u64, Vec::new(), 0u64);
            for (event, applied) in behind
                .iter()
                .zip(follower::apply_many(conn, &behind).await?)
            {
                if let Applied::Changed { .. } = applied {
                    touched.insert(event.to);
                    fixed.0 += 1;
                    fixed.3.push(format!(
                        "projection {} -> {} brought to version {}",
                        event.from, event.to, event.version
                    ));
                }
            }
            for truth in &same_version {
                if follower::overwrite(conn, truth).await?.is_some() {
                    touched.extend(UserId::new(truth.to_user_id));
                    fixed.1 += 1;
                    fixed.3.push(format!(
                        "projection {} -> {} overwritten at version {}",
                        truth.from_user_id, truth.to_user_id, truth.version
                    ));
                }
            }
            for (from, to) in &orphans {
                if follower::delete_orphan(conn, *from, *to).await?.is_some() {
                    touched.insert(*to);
                    fixed.2 += 1;
                    fixed
                        .3
                        .push(format!("projection {from} -> {to} deleted (no truth edge)"));
                }
            }
            let touched: Vec<UserId> = touched.into_iter().collect();
            let counters = stats::repair_counts(conn, &touched).await?;
            fixed.4 = counters.len() as u64;
            fixed.3.extend(counters.iter().map(describe_fix));
            Ok(fixed)
        })
        .await
    })?;
    summary.projection_updated += fixed.0;
    summary.projection_overwritten += fixed.1;
    summary.orphans_deleted += fixed.2;
    summary.counters_fixed += fixed.4;
    keep_examples(summary, fixed.3);
    let pairs: BTreeSet<(UserId, UserId)> = behind
        .iter()
        .map(|e| (e.from, e.to))
        .chain(
            same_version
                .iter()
                .filter_map(|t| Some((UserId::new(t.from_user_id)?, UserId::new(t.to_user_id)?))),
        )
        .chain(orphans.iter().copied())
        .collect();
    let users: BTreeSet<UserId> = pairs.iter().flat_map(|(a, b)| [*a, *b]).collect();
    resync::resync_state(app, users, pairs).await
}

/// Sets the counters of `users` right where they drifted.
pub(crate) async fn repair_counters(
    app: &App,
    users: &[UserId],
    summary: &mut Summary,
) -> Result<(), PipelineError> {
    summary.users_checked += users.len() as u64;
    let fixes = failure::rerun!({
        let mut conn = app.pg.get().await?;
        conn.transaction::<_, PipelineError, _>(async |conn| {
            Ok(stats::repair_counts(conn, users).await?)
        })
        .await
    })?;
    if fixes.is_empty() {
        return Ok(());
    }
    summary.counters_fixed += fixes.len() as u64;
    keep_examples(summary, fixes.iter().map(describe_fix).collect());
    let fixed: BTreeSet<UserId> = fixes
        .iter()
        .filter_map(|f| UserId::new(f.user_id))
        .collect();
    resync::resync_state(app, fixed, BTreeSet::new()).await
}

fn describe_fix(f: &stats::CounterFix) -> String {
    format!(
        "user {}: followings {} -> {}, followers {} -> {}",
        f.user_id, f.old_followings, f.followings, f.old_followers, f.followers
    )
}

fn keep_examples(summary: &mut Summary, examples: Vec<String>) {
    for example in examples {
        if summary.examples.len() < EXAMPLES {
            summary.examples.push(example);
        }
    }
}

const WATERMARK: &str = "reconcile";

async fn read_watermark(app: &App) -> Result<Option<DateTime<Utc>>, PipelineError> {
    #[derive(diesel::QueryableByName)]
    struct Row {
        #[diesel(sql_type = diesel::sql_types::Timestamptz)]
        watermark: DateTime<Utc>,
    }
    let mut conn = app.pg.get().await?;
    let row: Option<Row> =
        // Never ahead of PostgreSQL's clock (one written by a host whose
        // clock ran ahead would skip every edge changed until it passed).
        diesel::sql_query(
            "SELECT least(watermark, now()) AS watermark FROM reconcile_watermark WHERE name = $1",
        )
            .bind::<diesel::sql_types::Text, _>(WATERMARK)
            .get_result(&mut conn)
            .await
            .optional()?;
    Ok(row.map(|r| r.watermark))
}

async fn write_watermark(app: &App, at: DateTime<Utc>) -> Result<(), PipelineError> {
    let mut conn = app.pg.get().await?;
    diesel::sql_query(
        "INSERT INTO reconcile_watermark (name, watermark) VALUES ($1, $2)
         ON CONFLICT (name) DO UPDATE SET watermark = greatest(reconcile_watermark.watermark, $2), updated_at = now()",
    )
    .bind::<diesel::sql_types::Text, _>(WATERMARK)
    .bind::<diesel::sql_types::Timestamptz, _>(at)
    .execute(&mut conn)
    .await?;
    Ok(())
}

/// Reconciles incrementally every `interval` until `shutdown`; one process
/// at a time (an advisory lock on its own session), the others skip the round.
pub async fn schedule(
    app: std::sync::Arc<App>,
    interval: Duration,
    mut shutdown: crate::shutdown::Shutdown,
) {
    while shutdown.sleep(interval).await {
        let round = async {
            let mut conn: PgConn = diesel_async::AsyncPgConnection::establish(
                &crate::store::pool::with_keepalives(app.config.session_url()),
            )
            .await?;
            #[derive(diesel::QueryableByName)]
            struct Locked {
                #[diesel(sql_type = diesel::sql_types::Bool)]
                locked: bool,
            }
            let Locked { locked } = diesel::sql_query(
                "SELECT pg_try_advisory_lock(hashtext('kith.reconcile.' || current_schema())) AS locked",
            )
            .get_result(&mut conn)
            .await?;
            if !locked {
                return Ok::<_, PipelineError>(None);
            }
            // The lock lives as long as `conn`.
            let summary = reconcile(&app, Scope::Incremental, 1000, false).await?;
            drop(conn);
            Ok(Some(summary))
        };
        match round.await {
            Ok(Some(summary)) => {
                app.metrics.consistency_repairs.inc_by(summary.repairs());
                tracing::info!(%summary, "scheduled reconcile done");
            }
            Ok(None) => tracing::debug!("scheduled reconcile: another process is running it"),
            Err(e) => tracing::warn!(error = %e, "scheduled reconcile failed"),
        }
    }
}
