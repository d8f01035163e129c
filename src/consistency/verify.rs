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
//! Edges and users are read in keyset pages of `batch`; a cached list is read
//! whole. Derived views lag by design, so on a live system what disagrees is
//! looked at again after `settle`: only what still disagrees is reported.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use super::progress::Progress;
use crate::app::App;
use crate::cache::ListKey;
use crate::cache::counters::{self, CounterRecord};
use crate::cache::lists::{self, Coverage, ListSnapshot};
use crate::model::UserId;
use crate::pipeline::PipelineError;
use crate::store::checks::{self, EdgePair, EdgeScope};
use crate::store::lists::{self as store_lists, Position};
use crate::store::stats;

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
        }
    }
}

/// What a disagreement is about, so it can be looked at again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Subject {
    /// A user's counters or lists.
    User(UserId),
    /// One edge.
    Edge(UserId, UserId),
}

/// One disagreement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disagreement {
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
        Ok(())
    }
}

/// Most subjects kept for the re-check; beyond it, disagreements count as found.
const RECHECK_CAP: usize = 10_000;

/// Runs a whole pass.
pub async fn verify(app: &App, options: &Options) -> Result<Report, PipelineError> {
    let mut report = Report::default();
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

/// Looks again at the subjects of `suspects`; returns what still disagrees.
pub async fn recheck(
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

fn user(raw: i64) -> UserId {
    UserId::new(raw).expect("ids in PostgreSQL are positive")
}

/// The truth against the projection, edge by edge.
pub fn check_edges(pairs: &[EdgePair]) -> Vec<Disagreement> {
    let mut out = Vec::new();
    for pair in pairs {
        let subject = Subject::Edge(user(pair.from_user_id), user(pair.to_user_id));
        let edge = format!("{} -> {}", pair.from_user_id, pair.to_user_id);
        let state = |row: &crate::store::follower::EdgeRow| {
            format!(
                "active={} version={} followed_at={}",
                row.active,
                row.version,
                row.followed_at.timestamp_millis()
            )
        };
        let (kind, detail) = match (pair.truth(), pair.projected()) {
            (Some(_), Some(p)) if Some(p) == pair.truth() => continue,
            (Some(t), Some(p)) => (
                Kind::ProjectionDiffers,
                format!("{edge}: truth {}, projection {}", state(&t), state(&p)),
            ),
            (Some(t), None) => (
                Kind::ProjectionMissing,
                format!("{edge}: truth {}, no projection row", state(&t)),
            ),
            (None, Some(p)) => (
                Kind::ProjectionOrphan,
                format!("{edge}: projection {}, no truth row", state(&p)),
            ),
            (None, None) => continue,
        };
        out.push(Disagreement {
            kind,
            subject,
            detail,
        });
    }
    out
}

/// Counters, counter records and cached lists of `users`; also returns how
/// many cached lists were compared.
pub async fn check_users(
    app: &App,
    users: &[UserId],
) -> Result<(Vec<Disagreement>, u64), PipelineError> {
    let mut out = check_counters(app, users).await?;
    let lists: Vec<ListKey> = users
        .iter()
        .flat_map(|u| [ListKey::Following(*u), ListKey::Followers(*u)])
        .collect();
    let coverages = {
        let mut redis = app.redis.get().await?;
        lists::coverages(&mut *redis, &app.keys, &lists).await?
    };
    let mut compared = 0;
    for (list, coverage) in lists.iter().zip(coverages) {
        match coverage {
            Coverage::Absent | Coverage::Filling => {}
            Coverage::Malformed(marker) => out.push(Disagreement {
                kind: Kind::ListMalformed,
                subject: Subject::User(list_owner(*list)),
                detail: format!("{list:?}: coverage marker {marker:?}"),
            }),
            Coverage::All | Coverage::Down(_) => {
                compared += 1;
                out.extend(check_list(app, *list).await?);
            }
        }
    }
    Ok((out, compared))
}

/// `user_stats` of `users` against counts of the truth, and their counter
/// records against `user_stats`.
pub async fn check_counters(
    app: &App,
    users: &[UserId],
) -> Result<Vec<Disagreement>, PipelineError> {
    let mut out = Vec::new();
    let (counts, rows) = {
        let mut conn = app.pg.get().await?;
        let counts = checks::user_counts(&mut conn, users).await?;
        let rows: HashMap<UserId, stats::UserStats> = stats::find_many(&mut conn, users)
            .await?
            .into_iter()
            .collect();
        (counts, rows)
    };
    let records = {
        let mut redis = app.redis.get().await?;
        counters::load_many(&mut *redis, &app.keys, users).await?
    };

    for (c, record) in counts.iter().zip(&records) {
        let u = user(c.user_id);
        let subject = Subject::User(u);
        let mut push = |kind, detail: String| {
            out.push(Disagreement {
                kind,
                subject,
                detail: format!("user {u}: {detail}"),
            });
        };
        match (c.followings, c.followers) {
            (Some(followings), Some(followers)) => {
                if followings != c.true_followings {
                    push(
                        Kind::FollowingsDiffer,
                        format!("user_stats {followings}, truth {}", c.true_followings),
                    );
                }
                if followers != c.true_followers {
                    push(
                        Kind::FollowersDiffer,
                        format!(
                            "user_stats {followers}, truth {} (projection {})",
                            c.true_followers, c.projected_followers
                        ),
                    );
                }
            }
            _ if c.true_followings > 0 || c.true_followers > 0 => push(
                Kind::StatsMissing,
                format!(
                    "no user_stats row; truth {} followings, {} followers",
                    c.true_followings, c.true_followers
                ),
            ),
            _ => {}
        }
        if let (Some(record), Some(row)) = (record, rows.get(&u)) {
            let expected = CounterRecord::from(row);
            let same_counts = CounterRecord {
                version: record.version,
                ..expected
            } == *record;
            if !same_counts || record.version > expected.version {
                push(
                    Kind::CounterRecordDiffers,
                    format!("record {record:?}, user_stats {expected:?}"),
                );
            }
        }
    }

    Ok(out)
}

fn list_owner(list: ListKey) -> UserId {
    match list {
        ListKey::Following(u) | ListKey::Followers(u) => u,
    }
}

/// One cached list against its source inside the covered window.
async fn check_list(app: &App, list: ListKey) -> Result<Vec<Disagreement>, PipelineError> {
    let snapshot: ListSnapshot = {
        let mut redis = app.redis.get().await?;
        lists::snapshot(&mut *redis, &app.keys, list).await?
    };
    let down_to = match &snapshot.coverage {
        Coverage::All => None,
        Coverage::Down(bound) => Some(*bound),
        // Expired or refilled between the two reads: nothing to compare.
        Coverage::Absent | Coverage::Filling | Coverage::Malformed(_) => return Ok(Vec::new()),
    };
    let subject = Subject::User(list_owner(list));
    let mut out = Vec::new();
    let mut push = |kind, detail: String| {
        out.push(Disagreement {
            kind,
            subject,
            detail: format!("{list:?}: {detail}"),
        });
    };
    let mut cached: HashMap<UserId, i64> = HashMap::with_capacity(snapshot.members.len());
    for (member, score) in &snapshot.members {
        match lists::parse_member(member) {
            Some(u) => {
                cached.insert(u, *score);
            }
            None => push(Kind::ListMalformed, format!("member {member:?}")),
        }
    }
    let mut after: Option<Position> = None;
    loop {
        let page = {
            let mut conn = app.pg.get().await?;
            store_lists::window_page(&mut conn, list, down_to, after, 1000).await?
        };
        let Some(last) = page.last() else { break };
        after = UserId::new(last.member).map(|user| Position {
            followed_at_ms: last.followed_at.timestamp_millis(),
            user,
        });
        for row in &page {
            let member = user(row.member);
            let score = row.followed_at.timestamp_millis();
            let version = snapshot.versions.get(&lists::member(member)).copied();
            match cached.remove(&member) {
                None => push(
                    Kind::ListMemberMissing,
                    format!(
                        "{member} (score {score}, version {}) not cached",
                        row.version
                    ),
                ),
                Some(s) if s != score || version != Some(row.version) => push(
                    Kind::ListEntryDiffers,
                    format!(
                        "{member}: cached score {s} version {version:?}, source score {score} version {}",
                        row.version
                    ),
                ),
                Some(_) => {}
            }
        }
        if page.len() < 1000 {
            break;
        }
    }
    for (member, score) in cached {
        // Members below the covered window are not claimed; above it they must exist.
        let inside = down_to.is_none_or(|b| (score, member) >= (b.followed_at_ms, b.user));
        if inside {
            push(
                Kind::ListMemberExtra,
                format!("{member} (score {score}) cached but not an active edge"),
            );
        }
    }
    Ok(out)
}
