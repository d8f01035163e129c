//! `kith verify`: compares every derived view with what it derives from, and
//! counts each kind of disagreement. Read-only.
//!
//! - the `follower` projection with the truth (`following`), both ways,
//!   state, follow time and version;
//! - `user_stats` with counts of the truth (never with the lagging projection);
//! - counter records in Redis with `user_stats`;
//! - every cached list (ZSet, member versions, coverage) with its source —
//!   `following` for whom a user follows, `follower` for who follows them —
//!   inside the window its coverage marker claims.
//!
//! - and the truth with itself: no active follow between two accounts one
//!   of which blocks the other, no pending follow request beside a follow
//!   or across a block.
//!
//! Edges and users are read in keyset pages of `batch`; a cached list is read
//! whole. Derived views lag by design, so on a live system what disagrees is
//! looked at again after `settle`: only what still disagrees is reported.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

mod views;

pub(crate) use views::{check_counters, check_edges, check_users};

use super::progress::Progress;
use crate::app::App;
use crate::error::PipelineError;
use crate::model::UserId;
use crate::store::checks::{self, EdgeScope};

/// What to verify, and how.
#[derive(Clone, Debug)]
pub struct Options {
    /// Only this user's edges, counters and lists; everyone when `None`.
    pub user: Option<UserId>,
    /// Rows per page.
    pub batch: i64,
    /// How long to wait before looking again at what disagreed (0: report at once).
    pub settle: Duration,
    /// Examples kept per kind.
    pub examples: usize,
    /// Draw a progress line on stderr.
    pub progress: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            user: None,
            batch: 1000,
            settle: Duration::from_secs(3),
            examples: 5,
            progress: false,
        }
    }
}

/// A kind of disagreement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A truth edge with no projection row.
    ProjectionMissing,
    /// A projection row whose state, time or version differs from the truth.
    ProjectionDiffers,
    /// A projection row with no truth edge.
    ProjectionOrphan,
    /// A user with edges but no `user_stats` row.
    StatsMissing,
    /// `user_stats.followings` differs from the truth.
    FollowingsDiffer,
    /// `user_stats.followers` differs from the truth.
    FollowersDiffer,
    /// A counter record in Redis differs from `user_stats`.
    CounterRecordDiffers,
    /// A cached list lacks an edge inside its covered window.
    ListMemberMissing,
    /// A cached list holds a member its source does not have (active) there.
    ListMemberExtra,
    /// A cached member's score or version differs from its source.
    ListEntryDiffers,
    /// A coverage marker (or member) Kith cannot read.
    ListMalformed,
    /// An active follow between two accounts one of which blocks the other.
    FollowAcrossBlock,
    /// A pending follow request beside an active follow of the same pair,
    /// or across a block.
    StrayRequest,
    /// A close-friend listing between two accounts one of which blocks the
    /// other.
    CloseFriendAcrossBlock,
    /// A follow of a moved account whose finished move neither brought
    /// the follower along nor left it behind.
    StrandedByMove,
}

impl Kind {
    /// The name printed in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::ProjectionMissing => "projection_missing",
            Self::ProjectionDiffers => "projection_differs",
            Self::ProjectionOrphan => "projection_orphan",
            Self::StatsMissing => "stats_missing",
            Self::FollowingsDiffer => "followings_differ",
            Self::FollowersDiffer => "followers_differ",
            Self::CounterRecordDiffers => "counter_record_differs",
            Self::ListMemberMissing => "list_member_missing",
            Self::ListMemberExtra => "list_member_extra",
            Self::ListEntryDiffers => "list_entry_differs",
            Self::ListMalformed => "list_malformed",
            Self::FollowAcrossBlock => "follow_across_block",
            Self::StrayRequest => "stray_request",
            Self::CloseFriendAcrossBlock => "close_friend_across_block",
            Self::StrandedByMove => "stranded_by_move",
        }
    }

    /// The command that repairs this kind (for `user`'s scope, if given).
    /// Projection rows with no truth row are found by an incremental
    /// reconcile only inside its window, so the whole walk is named.
    pub fn repair(self, user: Option<UserId>) -> String {
        let tool = match self {
            Self::ProjectionMissing
            | Self::ProjectionDiffers
            | Self::ProjectionOrphan
            | Self::StatsMissing
            | Self::FollowingsDiffer
            | Self::FollowersDiffer
            | Self::FollowAcrossBlock
            | Self::StrayRequest
            | Self::CloseFriendAcrossBlock
            | Self::StrandedByMove => "reconcile",
            Self::CounterRecordDiffers
            | Self::ListMemberMissing
            | Self::ListMemberExtra
            | Self::ListEntryDiffers
            | Self::ListMalformed => "rebuild-cache",
        };
        match (user, tool) {
            (Some(user), _) => format!("kith {tool} --user {user}"),
            (None, "reconcile") => "kith reconcile --full".to_owned(),
            (None, _) => "kith rebuild-cache".to_owned(),
        }
    }
}

/// What a disagreement is about, so it can be looked at again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Subject {
    /// A user's counters or lists.
    User(UserId),
    /// One edge.
    Edge(UserId, UserId),
}

/// One disagreement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Disagreement {
    /// Its kind.
    pub kind: Kind,
    /// What to look at again.
    pub subject: Subject,
    /// A line for humans.
    pub detail: String,
}

/// The outcome of a pass.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The one user checked, when only one was.
    pub user: Option<UserId>,
    /// Users checked.
    pub users: u64,
    /// Edges checked (truth rows and projection orphans).
    pub edges: u64,
    /// Cached lists checked.
    pub lists: u64,
    /// Disagreements per kind (after the settle re-check).
    pub counts: BTreeMap<Kind, u64>,
    /// A few of each kind.
    pub examples: BTreeMap<Kind, Vec<String>>,
}

impl Report {
    /// Every disagreement found.
    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }

    fn record(&mut self, d: &Disagreement, examples: usize) {
        *self.counts.entry(d.kind).or_default() += 1;
        let list = self.examples.entry(d.kind).or_default();
        if list.len() < examples {
            list.push(d.detail.clone());
        }
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "checked {} users, {} edges, {} cached lists",
            self.users, self.edges, self.lists
        )?;
        if self.counts.is_empty() {
            return writeln!(f, "disagreements: 0");
        }
        writeln!(f, "disagreements: {}", self.total())?;
        for (kind, n) in &self.counts {
            writeln!(f, "  {}: {n}", kind.name())?;
            for example in self.examples.get(kind).into_iter().flatten() {
                writeln!(f, "    e.g. {example}")?;
            }
        }
        // Reconcile first: rebuilding the caches copies counters it repairs.
        let mut repairs: Vec<String> = self.counts.keys().map(|k| k.repair(self.user)).collect();
        repairs.sort_by_key(|r| !r.contains("reconcile"));
        repairs.dedup();
        writeln!(f, "repair with: {}", repairs.join(", then "))?;
        if self.counts.contains_key(&Kind::CounterRecordDiffers)
            || self.counts.contains_key(&Kind::ListMemberExtra)
        {
            writeln!(
                f,
                "(if PostgreSQL was restored from a backup, stop Kith and run `kith after-restore` instead)"
            )?;
        }
        Ok(())
    }
}

/// Most subjects kept for the re-check; beyond it, disagreements count as found.
const RECHECK_CAP: usize = 10_000;

/// Runs a whole pass.
pub async fn verify(app: &App, options: &Options) -> Result<Report, PipelineError> {
    let mut report = Report {
        user: options.user,
        ..Report::default()
    };
    let mut suspects: Vec<Disagreement> = Vec::new();
    let mut found = |d: Disagreement, report: &mut Report| {
        if options.settle.is_zero() || suspects.len() >= RECHECK_CAP {
            report.record(&d, options.examples);
        } else {
            suspects.push(d);
        }
    };

    // Edges, both ways.
    let scope = options.user.map_or(EdgeScope::All, EdgeScope::User);
    let estimate = match options.user {
        Some(_) => 0,
        None => estimate_rows(app, "following").await?,
    };
    let mut progress = Progress::new("edges", estimate, options.progress);
    let mut walk = super::EdgeWalk::new(scope, options.batch);
    while let Some((page, _)) = walk.next(app).await? {
        report.edges += page.len() as u64;
        progress.advance(page.len() as u64);
        for d in check_edges(&page) {
            found(d, &mut report);
        }
    }
    progress.finish();
    // The truth itself: a block ends the pair's follows in its own
    // transaction, so any follow across one is a fault, not a lag.
    for d in follows_across_blocks(app, options).await? {
        report.record(&d, options.examples);
    }
    for d in stray_requests(app, options).await? {
        report.record(&d, options.examples);
    }
    for d in listings_across_blocks(app, options).await? {
        report.record(&d, options.examples);
    }
    for d in stranded_by_moves(app, options).await? {
        report.record(&d, options.examples);
    }

    // Users: counters, counter records, cached lists.
    let estimate = match options.user {
        Some(_) => 1,
        None => estimate_rows(app, "users").await?,
    };
    let mut progress = Progress::new("users", estimate, options.progress);
    let mut after = 0;
    loop {
        let users = super::user_page(app, options.user, after, options.batch).await?;
        let Some(last) = users.last() else { break };
        after = last.get();
        let (disagreements, lists) = check_users(app, &users).await?;
        report.users += users.len() as u64;
        report.lists += lists;
        progress.advance(users.len() as u64);
        for d in disagreements {
            found(d, &mut report);
        }
    }
    progress.finish();

    if !suspects.is_empty() {
        tokio::time::sleep(options.settle).await;
        for d in recheck(app, &suspects).await? {
            report.record(&d, options.examples);
        }
    }
    Ok(report)
}

/// Active follows between a blocked pair (of `options.user`, if given).
async fn follows_across_blocks(
    app: &App,
    options: &Options,
) -> Result<Vec<Disagreement>, PipelineError> {
    let rows = {
        let mut conn = app.pg.get().await?;
        crate::store::blocks::follows_across(&mut conn, RECHECK_CAP as i64).await?
    };
    Ok(rows
        .iter()
        .filter_map(|row| Some((UserId::new(row.from_user_id)?, UserId::new(row.to_user_id)?)))
        .filter(|(from, to)| options.user.is_none_or(|u| u == *from || u == *to))
        .map(|(from, to)| Disagreement {
            kind: Kind::FollowAcrossBlock,
            subject: Subject::Edge(from, to),
            detail: format!("{from} follows {to}, and a block stands between them"),
        })
        .collect())
}

/// Pending requests beside a follow or across a block (of `options.user`).
async fn stray_requests(app: &App, options: &Options) -> Result<Vec<Disagreement>, PipelineError> {
    let rows = {
        let mut conn = app.pg.get().await?;
        crate::store::requests::strays(&mut conn, RECHECK_CAP as i64).await?
    };
    Ok(rows
        .iter()
        .filter_map(|row| {
            let pair = (UserId::new(row.from_user_id)?, UserId::new(row.to_user_id)?);
            Some((pair, row.why.as_str()))
        })
        .filter(|((from, to), _)| options.user.is_none_or(|u| u == *from || u == *to))
        .map(|((from, to), why)| Disagreement {
            kind: Kind::StrayRequest,
            subject: Subject::Edge(from, to),
            detail: format!(
                "{from} asks to follow {to}, pending {}",
                why.replace('_', " ")
            ),
        })
        .collect())
}

/// Close-friend listings across a block (of `options.user`, if given).
async fn listings_across_blocks(
    app: &App,
    options: &Options,
) -> Result<Vec<Disagreement>, PipelineError> {
    let rows = {
        let mut conn = app.pg.get().await?;
        crate::store::close_friends::across_blocks(&mut conn, RECHECK_CAP as i64).await?
    };
    Ok(rows
        .iter()
        .filter_map(|row| Some((UserId::new(row.from_user_id)?, UserId::new(row.to_user_id)?)))
        .filter(|(from, to)| options.user.is_none_or(|u| u == *from || u == *to))
        .map(|(from, to)| Disagreement {
            kind: Kind::CloseFriendAcrossBlock,
            subject: Subject::Edge(from, to),
            detail: format!("{from} lists {to} among its close friends, across a block"),
        })
        .collect())
}

/// Follows of moved accounts their finished move did not handle (of
/// `options.user`, if given).
async fn stranded_by_moves(
    app: &App,
    options: &Options,
) -> Result<Vec<Disagreement>, PipelineError> {
    let rows = {
        let mut conn = app.pg.get().await?;
        crate::store::moves::stranded(&mut conn, options.user.map(UserId::get), RECHECK_CAP as i64)
            .await?
    };
    Ok(rows
        .iter()
        .filter_map(|row| {
            let pair = (UserId::new(row.follower.id)?, UserId::new(row.from_id)?);
            Some((pair, row.to_id))
        })
        .map(|((from, to), new)| Disagreement {
            kind: Kind::StrandedByMove,
            subject: Subject::Edge(from, to),
            detail: format!(
                "{from} follows {to}, which moved to {new}; its move did not bring {from} along"
            ),
        })
        .collect())
}

/// Looks again at the subjects of `suspects`; returns what still disagrees.
pub(crate) async fn recheck(
    app: &App,
    suspects: &[Disagreement],
) -> Result<Vec<Disagreement>, PipelineError> {
    let mut edges = BTreeSet::new();
    let mut users = BTreeSet::new();
    for d in suspects {
        match d.subject {
            Subject::Edge(from, to) => {
                edges.insert((from, to));
            }
            Subject::User(user) => {
                users.insert(user);
            }
        }
    }
    let edges: Vec<_> = edges.into_iter().collect();
    let users: Vec<_> = users.into_iter().collect();
    let mut out = Vec::new();
    for chunk in edges.chunks(1000) {
        let pairs = {
            let mut conn = app.pg.get().await?;
            checks::pairs(&mut conn, chunk).await?
        };
        out.extend(check_edges(&pairs));
    }
    for chunk in users.chunks(1000) {
        out.extend(check_users(app, chunk).await?.0);
    }
    Ok(out)
}

async fn estimate_rows(app: &App, table: &str) -> Result<u64, PipelineError> {
    use diesel_async::RunQueryDsl as _;
    #[derive(diesel::QueryableByName)]
    struct Row {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let mut conn = app.pg.get().await?;
    let row: Row = diesel::sql_query(
        "SELECT greatest(coalesce((SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass($1)), 0), 0) AS n",
    )
    .bind::<diesel::sql_types::Text, _>(table)
    .get_result(&mut conn)
    .await?;
    Ok(u64::try_from(row.n).unwrap_or(0))
}
