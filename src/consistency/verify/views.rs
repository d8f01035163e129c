//! The checks `kith verify` makes, one kind of derived view each.

use std::collections::HashMap;

use super::{Disagreement, Kind, Subject};
use crate::app::App;
use crate::cache::counters::{self, CounterRecord};
use crate::cache::lists::{self, Coverage, ListSnapshot};
use crate::error::PipelineError;
use crate::model::UserId;
use crate::paging::ListKey;
use crate::paging::Position;
use crate::store::checks::{self, EdgePair};
use crate::store::lists as store_lists;
use crate::store::stats;

fn user(raw: i64) -> UserId {
    UserId::new(raw).expect("ids in PostgreSQL are positive")
}

/// The truth against the projection, edge by edge.
pub(crate) fn check_edges(pairs: &[EdgePair]) -> Vec<Disagreement> {
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
pub(crate) async fn check_users(
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
pub(crate) async fn check_counters(
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
pub(super) async fn check_list(
    app: &App,
    list: ListKey,
) -> Result<Vec<Disagreement>, PipelineError> {
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
