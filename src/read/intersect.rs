//! Intersections of two follow lists: the users two people both follow
//! (`commonFollowing`), and the followers of a user whom the viewer follows
//! (`knownFollowers`, `knownFollowersCount`).
//!
//! Each is computed by walking the smaller list (by its counter) and probing
//! the larger one for the members walked — never by reading two large lists
//! whole. A walk reads the list cache when it covers the walk, else
//! PostgreSQL (one statement for every list of a kind); a probe asks the
//! cached list first (one Redis round trip for every probe of a batch) and
//! the truth (`following`, by primary key, one statement) for what the
//! cache cannot tell. A walk stops at a bound: past it, the result covers
//! the newest edges of the smaller list only and says so (`complete`).

use std::collections::HashMap;
use std::sync::Arc;

use super::state::Intersection;
use crate::app::App;
use crate::cache::counters::CounterRecord;
use crate::cache::lists::{self, Member, MembersCalls, Membership};
use crate::error::ApiError;
use crate::model::UserId;
use crate::paging::ListKey;
use crate::paging::Position;
use crate::store::following;
use crate::store::lists as store_lists;

impl Task {
    /// The task of `first` ∩ `second`, sized by their owners' `counters`.
    pub(crate) fn sized(
        first: ListKey,
        second: ListKey,
        order: Order,
        counters: impl Fn(UserId) -> CounterRecord,
    ) -> Self {
        let size = |list: ListKey| {
            let record = counters(list.owner());
            u64::from(match list {
                ListKey::Following(_) => record.followings,
                ListKey::Followers(_) => record.followers,
            })
        };
        Self {
            first,
            second,
            sizes: (size(first), size(second)),
            order,
        }
    }
}

/// How an item of an intersection is ordered (newest first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Order {
    /// By the more recent of its two follow times.
    Latest,
    /// By its follow time in the second list.
    Second,
}

/// One intersection to compute: the members `first` and `second` share.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Task {
    /// One list.
    pub first: ListKey,
    /// The other list.
    pub second: ListKey,
    /// Their sizes (from the counters): the smaller is walked.
    pub sizes: (u64, u64),
    /// How the result is ordered.
    pub order: Order,
}

/// Largest Redis or PostgreSQL probe of one list sent at once.
const PROBE_CHUNK: usize = 1000;

/// The intersection `task` asks for, from the process cache when it was
/// computed at the owners' current counter `versions`, else computed (and
/// kept for `KITH_INTERSECTION_CACHE_TTL_SECS`). The versions are read
/// before computing, so a change made meanwhile is never hidden behind them.
pub(crate) async fn cached(
    app: &Arc<App>,
    task: Task,
    versions: (u64, u64),
) -> Result<Arc<Intersection>, ApiError> {
    let walk = app.config.caches.intersection_walk_max;
    let key = (task.first, task.second, versions.0, versions.1, walk);
    // Concurrent reads of one key compute it once.
    app.read
        .intersections
        .try_get_with(key, async {
            let result = compute(app, &[task], walk).await?;
            Ok::<_, ApiError>(Arc::new(result.into_iter().next().unwrap_or_default()))
        })
        .await
        .map_err(|e| ApiError::shared(&e))
}

/// The intersections `tasks` ask for, each at its owners' counter versions
/// and with walks of at most `walk` edges: those the process cache holds
/// (as [`cached`]), the rest computed together ([`compute`]) and kept.
pub(crate) async fn cached_many(
    app: &Arc<App>,
    tasks: &[(Task, (u64, u64))],
    walk: usize,
) -> Result<Vec<Arc<Intersection>>, ApiError> {
    let key = |(task, versions): &(Task, (u64, u64))| {
        (task.first, task.second, versions.0, versions.1, walk)
    };
    let mut out = Vec::with_capacity(tasks.len());
    let mut missing = Vec::new();
    for (i, task) in tasks.iter().enumerate() {
        let held = app.read.intersections.get(&key(task)).await;
        if held.is_none() {
            missing.push(i);
        }
        out.push(held);
    }
    if !missing.is_empty() {
        let todo: Vec<Task> = missing.iter().map(|i| tasks[*i].0).collect();
        let computed = compute(app, &todo, walk).await?;
        for (i, result) in missing.into_iter().zip(computed) {
            let result = Arc::new(result);
            app.read
                .intersections
                .insert(key(&tasks[i]), result.clone())
                .await;
            out[i] = Some(result);
        }
    }
    Ok(out.into_iter().map(Option::unwrap_or_default).collect())
}

/// Computes `tasks` together: every walk of a kind in one statement (or
/// from the caches), every probe in one Redis round trip and one statement.
/// A walk reads at most `walk_limit` edges.
pub(crate) async fn compute(
    app: &Arc<App>,
    tasks: &[Task],
    walk_limit: usize,
) -> Result<Vec<Intersection>, ApiError> {
    // (walked, probed, the walked list is `first`)
    let plans: Vec<(ListKey, ListKey, bool)> = tasks
        .iter()
        .map(|t| {
            if t.sizes.0 <= t.sizes.1 {
                (t.first, t.second, true)
            } else {
                (t.second, t.first, false)
            }
        })
        .collect();
    let mut to_walk: Vec<ListKey> = plans.iter().map(|p| p.0).collect();
    to_walk.sort_unstable_by_key(|list| (matches!(list, ListKey::Followers(_)), list.owner()));
    to_walk.dedup();
    let walked = walk_many(app, &to_walk, walk_limit).await?;

    let mut asks: HashMap<ListKey, Vec<UserId>> = HashMap::new();
    for (walk, probe, _) in &plans {
        let members = asks.entry(*probe).or_default();
        members.extend(walked[walk].0.iter().map(|p| p.user));
    }
    for members in asks.values_mut() {
        members.sort_unstable();
        members.dedup();
    }
    let found = probe_many(app, asks).await?;

    Ok(tasks
        .iter()
        .zip(&plans)
        .map(|(task, (walk, probe, walked_first))| {
            let (members, complete) = &walked[walk];
            let mut items: Vec<Position> = members
                .iter()
                .filter_map(|p| {
                    let probed = *found.get(&(*probe, p.user))?;
                    let (first_ms, second_ms) = if *walked_first {
                        (p.followed_at_ms, probed)
                    } else {
                        (probed, p.followed_at_ms)
                    };
                    let followed_at_ms = match task.order {
                        Order::Latest => first_ms.max(second_ms),
                        Order::Second => second_ms,
                    };
                    Some(Position {
                        followed_at_ms,
                        user: p.user,
                    })
                })
                .collect();
            items.sort_unstable_by(|a, b| {
                (b.followed_at_ms, b.user).cmp(&(a.followed_at_ms, a.user))
            });
            Intersection {
                items,
                complete: *complete,
            }
        })
        .collect())
}

/// The newest `limit` members of each list, and whether that is all of it:
/// from the list cache where it covers them (one Redis round trip of plain
/// reads, see `cache::lists::queue_newest`), else from PostgreSQL (one
/// statement per kind of list). Lists found uncached are filled in the
/// background, as a page read would.
pub(crate) async fn walk_many(
    app: &Arc<App>,
    lists_to_walk: &[ListKey],
    limit: usize,
) -> Result<HashMap<ListKey, (Vec<Position>, bool)>, ApiError> {
    let walks: Vec<(ListKey, usize)> = lists_to_walk.iter().map(|l| (*l, limit)).collect();
    walk_each(app, &walks).await
}

/// [`walk_many`] with a limit of each list's own.
pub(crate) async fn walk_each(
    app: &Arc<App>,
    walks: &[(ListKey, usize)],
) -> Result<HashMap<ListKey, (Vec<Position>, bool)>, ApiError> {
    let limits: HashMap<ListKey, usize> = walks.iter().copied().collect();
    // A list this process failed to update is read from PostgreSQL.
    let (cached, mut misses): (Vec<ListKey>, Vec<ListKey>) = walks
        .iter()
        .map(|(list, _)| *list)
        .partition(|list| !unsynced(app, *list));
    let mut pipe = redis::pipe();
    for list in &cached {
        lists::queue_newest(&mut pipe, &app.keys, *list, limits[list]);
    }
    let replies = super::batch::query(app, &pipe).await;
    let mut out = HashMap::with_capacity(walks.len());
    let (mut uncached, mut worn) = (Vec::new(), Vec::new());
    for (i, list) in cached.iter().enumerate() {
        let page = replies.as_ref().and_then(|r| {
            r.get(i * lists::NEWEST_REPLIES..(i + 1) * lists::NEWEST_REPLIES)
                .map(|replies| lists::parse_newest(replies, limits[list]))
        });
        match page {
            Some(Ok(page)) => {
                out.insert(*list, (page.items, !page.more));
            }
            Some(Err(lists::PageMiss::NotCached)) => {
                uncached.push(*list);
                misses.push(*list);
            }
            Some(Err(lists::PageMiss::NotCovered)) => {
                worn.push((*list, limits[list]));
                misses.push(*list);
            }
            None => misses.push(*list),
        }
    }
    super::pages::start_fills(app, uncached);
    super::pages::start_worn(app, worn);
    if misses.is_empty() {
        return Ok(out);
    }
    let rows = {
        let mut conn = app.pg.get().await?;
        let most = misses.iter().map(|l| limits[l]).max().unwrap_or(0);
        store_lists::newest_of(&mut conn, &misses, store_lists::Limits::both(most + 1)).await?
    };
    for (list, rows) in rows {
        let limit = limits[&list];
        let mut members: Vec<Position> = rows
            .iter()
            .filter_map(|row| {
                Some(Position {
                    followed_at_ms: row.followed_at.timestamp_millis(),
                    user: UserId::new(row.member)?,
                })
            })
            .collect();
        let complete = members.len() <= limit;
        members.truncate(limit);
        out.insert(list, (members, complete));
    }
    Ok(out)
}

/// True for a following list this process failed to update after a write
/// (see `App::unsynced_following`): its cache may be behind this process's
/// own writes.
fn unsynced(app: &App, list: ListKey) -> bool {
    matches!(list, ListKey::Following(owner) if app.read.unsynced_following.contains_key(&owner))
}

/// Which of the asked members each list holds, with their follow times:
/// cached lists first (one Redis round trip), then the truth for what no
/// cache could tell (one statement; a member of `Followers(owner)` is the
/// edge `member → owner` of `following`).
async fn probe_many(
    app: &Arc<App>,
    asks: HashMap<ListKey, Vec<UserId>>,
) -> Result<HashMap<(ListKey, UserId), i64>, ApiError> {
    let mut pipe = redis::pipe();
    // Which chunks the cache is asked is decided once, so that replies and
    // chunks stay matched whatever happens meanwhile.
    let mut chunks: Vec<(ListKey, &[UserId])> = Vec::new();
    let mut unsynced_chunks: Vec<(ListKey, &[UserId])> = Vec::new();
    for (list, members) in &asks {
        let ask_cache = !unsynced(app, *list);
        for chunk in members.chunks(PROBE_CHUNK) {
            if ask_cache {
                chunks.push((*list, chunk));
            } else {
                unsynced_chunks.push((*list, chunk));
            }
        }
    }
    // Each chunk its own call, so that no script runs long.
    let calls = MembersCalls::queue(&mut pipe, &app.keys, &chunks, false);
    let replies = super::batch::query(app, &pipe).await;
    let mut replies = replies.as_deref().map(|r| r.iter());
    let memberships = calls.parse(|| replies.as_mut().and_then(Iterator::next));
    let mut found = HashMap::new();
    let mut unknown: Vec<(ListKey, UserId)> = Vec::new();
    let not_asked = unsynced_chunks.iter().map(|_| Membership::NotCached);
    for ((list, chunk), membership) in chunks
        .into_iter()
        .chain(unsynced_chunks.iter().copied())
        .zip(memberships.into_iter().chain(not_asked))
    {
        match membership {
            Membership::Known(answers) => {
                for (member, answer) in chunk.iter().zip(answers) {
                    match answer {
                        Member::In(ms) => {
                            found.insert((list, *member), ms);
                        }
                        Member::Absent => {}
                        Member::Unknown => unknown.push((list, *member)),
                    }
                }
            }
            Membership::NotCached => unknown.extend(chunk.iter().map(|m| (list, *m))),
        }
    }
    if unknown.is_empty() {
        return Ok(found);
    }
    let edge = |list: ListKey, member: UserId| match list {
        ListKey::Following(owner) => (owner, member),
        ListKey::Followers(owner) => (member, owner),
    };
    let pairs: Vec<(UserId, UserId)> = unknown.iter().map(|(l, m)| edge(*l, *m)).collect();
    let rows = {
        let mut conn = app.pg.get().await?;
        following::rows(&mut conn, &pairs).await?
    };
    let active: HashMap<(i64, i64), i64> = rows
        .into_iter()
        .filter(|r| r.active)
        .map(|r| {
            (
                (r.from_user_id, r.to_user_id),
                r.followed_at.timestamp_millis(),
            )
        })
        .collect();
    for (list, member) in unknown {
        let (from, to) = edge(list, member);
        if let Some(ms) = active.get(&(from.get(), to.get())) {
            found.insert((list, member), *ms);
        }
    }
    Ok(found)
}
