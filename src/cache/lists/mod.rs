//! List caches: `uf:flws:{uid}` (whom the user follows) and `uf:fans:{uid}`
//! (who follows the user), ZSets scored by follow time in ms.
//!
//! Members are user ids zero-padded to 19 digits, so members of equal score
//! sort in Redis exactly as the ids sort in PostgreSQL. Beside each ZSet, a
//! hash holds the edge version last applied per member (removals too: the
//! tombstones, which outlive the list by [`TOMBSTONE_GRACE`], as does the
//! previous generation of them after a refill) and a coverage marker says
//! the list is cached and how much of it. Every update
//! is version-guarded and applies only to a list that is cached, so a stale or
//! duplicate event changes nothing and no partial list is ever created; a
//! removal from a list that is not cached leaves only its tombstone, for
//! [`UNCACHED_TOMBSTONE`].

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::Duration;

use redis::aio::ConnectionLike;

use super::RedisKeys;
use crate::paging::ListKey;

mod fill;
mod inspect;
mod newest;

use crate::model::UserId;
use crate::paging::{Page, PageRequest, Position};
pub(crate) use fill::{Claim, begin_fills};
pub use fill::{Fill, FillClaim, ListEntry, begin_fill, commit_fill, commit_fills};
pub use inspect::{Coverage, cached_members, coverages};
pub(crate) use inspect::{ListSnapshot, snapshot};
pub(crate) use newest::{NEWEST_REPLIES, parse_newest, queue_newest};

static APPLY_EDGES: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../../../lua/list_apply_edges.lua")));
static PAGE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../../../lua/list_page.lua")));
static MEMBERS: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../../../lua/list_members.lua")));

/// The scripts a batched read ([`queue_page`], [`MembersCalls`]) invokes by hash.
pub(crate) fn read_scripts() -> [&'static redis::Script; 2] {
    [&PAGE, &MEMBERS]
}

/// How long a filler may take before its claim lapses.
pub(crate) const FILL_LEASE: Duration = Duration::from_secs(10);

/// How long a list's member versions outlive the list itself, and the
/// previous generation of them outlives a refill: a removed member's
/// version is its tombstone, and an update delayed past the removal must
/// meet it even if the list expired and was filled again meanwhile (a
/// write path's update is sent right after its commit, and dropped with its
/// request past `KITH_REQUEST_TIMEOUT_MS`). At most two generations exist.
pub(crate) const TOMBSTONE_GRACE: Duration = Duration::from_secs(600);

/// How long a removal from a list that is not cached keeps its tombstone
/// (alone, in the list's version hash): longer than any update sent before
/// it can be late — a write path's update is dropped with its request, and
/// `KITH_REQUEST_TIMEOUT_MS` is at most
/// [`crate::config::MAX_REQUEST_TIMEOUT_MS`].
pub(crate) const UNCACHED_TOMBSTONE: Duration =
    Duration::from_millis(2 * crate::config::MAX_REQUEST_TIMEOUT_MS);

/// The ZSet member of a user: 19 digits, so lexicographic order is numeric order.
pub(crate) fn member(user: UserId) -> String {
    format!("{:019}", user.get())
}

/// The user of a ZSet member, if it is one.
pub(crate) fn parse_member(member: &str) -> Option<UserId> {
    if member.len() != 19 {
        return None;
    }
    member.parse::<i64>().ok().and_then(UserId::new)
}

/// The user of a ZSet member in a reply, if it is one (no copy made).
pub(crate) fn member_bytes(value: &redis::Value) -> Option<UserId> {
    match value {
        redis::Value::BulkString(bytes) => parse_member(std::str::from_utf8(bytes).ok()?),
        _ => None,
    }
}

/// The latest state of one edge, as one list sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EdgeState {
    /// The list it belongs to.
    pub list: ListKey,
    /// The other end of the edge (the member).
    pub other: UserId,
    /// Whether the edge is active.
    pub active: bool,
    /// Follow time in ms: the score.
    pub followed_at_ms: i64,
    /// The edge version of this state.
    pub version: i64,
}

impl EdgeState {
    /// The state of an edge row as its follower's following list sees it
    /// (`None` for ids that are not users).
    pub fn in_following(row: &crate::store::follower::EdgeRow) -> Option<Self> {
        let (from, to) = (UserId::new(row.from_user_id)?, UserId::new(row.to_user_id)?);
        Some(Self::of(row, ListKey::Following(from), to))
    }

    /// The state of an edge row as the followed user's followers list sees it.
    pub fn in_followers(row: &crate::store::follower::EdgeRow) -> Option<Self> {
        let (from, to) = (UserId::new(row.from_user_id)?, UserId::new(row.to_user_id)?);
        Some(Self::of(row, ListKey::Followers(to), from))
    }

    fn of(row: &crate::store::follower::EdgeRow, list: ListKey, other: UserId) -> Self {
        Self {
            list,
            other,
            active: row.active,
            followed_at_ms: row.followed_at.timestamp_millis(),
            version: row.version,
        }
    }
}

/// The script the queued edge states invoke by hash (see [`super::run_writes`]).
pub(crate) fn apply_script() -> &'static redis::Script {
    &APPLY_EDGES
}

/// Most edge states one script call applies: a call holds Redis for its
/// whole run, and other clients' commands wait for it (the slowest calls
/// of 64 states of a long list took 0.25–0.5 ms). See
/// [`crate::cache::TRIP_BYTES`].
pub(crate) const EDGES_PER_CALL: usize = 16;

/// Queues "apply each edge state to its list, if cached and newer" on
/// `pipe`, each list's states in their order in `edges`: in calls of at
/// most [`EDGES_PER_CALL`] states, of many lists when `together` (one
/// Redis server), else of one list each (Redis Cluster, where the keys of
/// one call must share a slot).
pub(crate) fn queue_apply(
    pipe: &mut redis::Pipeline,
    keys: &RedisKeys,
    edges: &[EdgeState],
    together: bool,
) {
    let mut lists: Vec<(ListKey, Vec<&EdgeState>)> = Vec::new();
    let mut index: HashMap<ListKey, usize> = HashMap::new();
    for edge in edges {
        let at = *index.entry(edge.list).or_insert_with(|| {
            lists.push((edge.list, Vec::new()));
            lists.len() - 1
        });
        lists[at].1.push(edge);
    }
    let mut call: Option<(redis::ScriptInvocation<'static>, usize)> = None;
    for (list, states) in &lists {
        for part in states.chunks(EDGES_PER_CALL) {
            if call
                .as_ref()
                .is_some_and(|(_, n)| !together || n + part.len() > EDGES_PER_CALL)
                && let Some((full, _)) = call.take()
            {
                pipe.invoke_script(&full).ignore();
            }
            let (invocation, n) = call.get_or_insert_with(|| {
                let mut invocation = APPLY_EDGES.prepare_invoke();
                invocation
                    .arg(TOMBSTONE_GRACE.as_millis() as u64)
                    .arg(UNCACHED_TOMBSTONE.as_millis() as u64);
                (invocation, 0)
            });
            invocation
                .key(&keys.list(*list)[..])
                .key(keys.list_tombstones(*list))
                .arg(part.len());
            for edge in part {
                invocation
                    .arg(member(edge.other))
                    .arg(edge.version)
                    .arg(if edge.active { "1" } else { "0" })
                    .arg(edge.followed_at_ms);
            }
            *n += part.len();
        }
    }
    if let Some((last, _)) = call {
        pipe.invoke_script(&last).ignore();
    }
}

/// Why a list cache could not serve a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageMiss {
    /// The list is not cached (or a fill is running).
    NotCached,
    /// The page reaches past what the cache covers.
    NotCovered,
}

/// Serves `request` from the cache when it covers the whole page.
pub async fn read_page(
    conn: &mut impl ConnectionLike,
    keys: &RedisKeys,
    list: ListKey,
    request: PageRequest,
) -> redis::RedisResult<Result<Page, PageMiss>> {
    let mut pipe = redis::pipe();
    queue_page(&mut pipe, keys, list, request);
    let reply: Vec<redis::Value> = super::query_with_scripts(conn, &pipe, &[&PAGE]).await?;
    Ok(reply
        .first()
        .map_or(Err(PageMiss::NotCached), |r| parse_page(r, request.size())))
}

/// Queues the page script for `request` on `pipe` (one reply: [`parse_page`]).
pub(crate) fn queue_page(
    pipe: &mut redis::Pipeline,
    keys: &RedisKeys,
    list: ListKey,
    request: PageRequest,
) {
    let [zset, _, coverage] = keys.list(list);
    let (mode, cursor, limit, offset) = match request {
        PageRequest::After(cursor, n) => ("after", cursor, n, 0),
        PageRequest::Before(cursor, n) => ("before", cursor, n, 0),
        PageRequest::Offset(offset, n) => ("offset", None, n, offset),
    };
    let (score, cursor_member) = cursor.map_or((String::new(), String::new()), |c| {
        (c.followed_at_ms.to_string(), member(c.user))
    });
    pipe.invoke_script(
        PAGE.key(zset)
            .key(coverage)
            .arg(mode)
            .arg(score)
            .arg(cursor_member)
            .arg(limit)
            .arg(offset),
    );
}

/// The page in one reply of the page script.
pub(crate) fn parse_page(reply: &redis::Value, limit: usize) -> Result<Page, PageMiss> {
    let reply: Vec<redis::Value> =
        redis::from_redis_value_ref(reply).map_err(|_| PageMiss::NotCached)?;
    let int = |v: &redis::Value| redis::from_redis_value_ref::<i64>(v).unwrap_or(0);
    match reply.first().map(int) {
        Some(1) => {}
        Some(0) | None => return Err(PageMiss::NotCached),
        Some(_) => return Err(PageMiss::NotCovered),
    }
    let mut items = Vec::with_capacity(limit);
    for pair in reply.get(3..).unwrap_or_default().chunks_exact(2) {
        let Ok(name) = redis::from_redis_value_ref::<String>(&pair[0]) else {
            return Err(PageMiss::NotCached);
        };
        let Some(user) = parse_member(&name) else {
            return Err(PageMiss::NotCached);
        };
        items.push(Position {
            followed_at_ms: int(&pair[1]),
            user,
        });
    }
    Ok(Page {
        items,
        more: reply.get(1).map(int) == Some(1),
        other: reply.get(2).map(int) == Some(1),
    })
}

/// What a cached list says about some users' membership.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Membership {
    /// The list is not cached: it says nothing.
    NotCached,
    /// Per user asked, in order.
    Known(Vec<Member>),
}

/// What a cached list says about one user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Member {
    /// In the list, followed at this time (ms).
    In(i64),
    /// Not in the list (the whole list is cached).
    Absent,
    /// Not in the cached part of a list cached only in part: unknown.
    Unknown,
}

/// Script calls asking cached lists which of some users they hold: one call
/// for every ask of a pipeline, or one per ask (on a Redis Cluster, where
/// the keys of one call must share a slot — one list's keys do — or to bound
/// the work of each call).
pub(crate) struct MembersCalls {
    /// Per call, the indices of the asks it carries.
    calls: Vec<Vec<usize>>,
    /// Per ask, how many users it asks about.
    sizes: Vec<usize>,
}

impl MembersCalls {
    /// Queues the calls for `asks` — (list, users) pairs, each with at least
    /// one user — on `pipe`, all in one call when `together`; their replies
    /// are read by [`Self::parse`].
    pub(crate) fn queue(
        pipe: &mut redis::Pipeline,
        keys: &RedisKeys,
        asks: &[(ListKey, &[UserId])],
        together: bool,
    ) -> Self {
        let calls: Vec<Vec<usize>> = if together && !asks.is_empty() {
            vec![(0..asks.len()).collect()]
        } else {
            (0..asks.len()).map(|i| vec![i]).collect()
        };
        for call in &calls {
            let mut invocation = MEMBERS.prepare_invoke();
            for &i in call {
                let (list, users) = asks[i];
                let [zset, _, coverage] = keys.list(list);
                invocation.key(zset).key(coverage).arg(users.len());
                for user in users {
                    invocation.arg(member(*user));
                }
            }
            pipe.invoke_script(&invocation);
        }
        Self {
            calls,
            sizes: asks.iter().map(|(_, users)| users.len()).collect(),
        }
    }

    /// The membership per ask, in the order asked, from the calls' replies
    /// (`next` gives each call's reply in turn; `None`: Redis did not
    /// answer, and the lists say nothing).
    pub(crate) fn parse<'a>(
        &self,
        mut next: impl FnMut() -> Option<&'a redis::Value>,
    ) -> Vec<Membership> {
        let mut out = vec![Membership::NotCached; self.sizes.len()];
        for call in &self.calls {
            let reply =
                next().and_then(|r| redis::from_redis_value_ref::<Vec<redis::Value>>(r).ok());
            let Some(reply) = reply else { continue };
            let mut values = reply.iter();
            for &i in call {
                match parse_one(&mut values, self.sizes[i]) {
                    Some(membership) => out[i] = membership,
                    // A reply of the wrong shape: nothing after it is trusted.
                    None => break,
                }
            }
        }
        out
    }
}

/// One list's part of a members reply: its coverage, then (when cached)
/// `n` scores; `None` when the reply ends early or is malformed.
fn parse_one<'a>(
    values: &mut impl Iterator<Item = &'a redis::Value>,
    n: usize,
) -> Option<Membership> {
    let whole = match redis::from_redis_value_ref::<i64>(values.next()?).ok()? {
        0 => return Some(Membership::NotCached),
        1 => true,
        2 => false,
        _ => return None,
    };
    let mut answers = Vec::with_capacity(n);
    for _ in 0..n {
        let score = redis::from_redis_value_ref::<String>(values.next()?).unwrap_or_default();
        answers.push(match score.parse::<f64>() {
            Ok(ms) => Member::In(ms as i64),
            Err(_) if whole => Member::Absent,
            Err(_) => Member::Unknown,
        });
    }
    Some(Membership::Known(answers))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_sort_like_ids() {
        let (nine, ten) = (UserId::new(9).unwrap(), UserId::new(10).unwrap());
        assert!(member(nine) < member(ten));
        assert_eq!(parse_member(&member(ten)), Some(ten));
        assert_eq!(parse_member("10"), None);
        let max = UserId::new(i64::MAX).unwrap();
        assert_eq!(parse_member(&member(max)), Some(max));
    }

    #[test]
    fn states_go_in_calls_of_one_list_or_many_in_order() {
        let keys = RedisKeys::new("t:");
        let id = |n| UserId::new(n).unwrap();
        let (a, b) = (ListKey::Followers(id(1)), ListKey::Following(id(2)));
        let state = |list, other: i64| EdgeState {
            list,
            other: id(other),
            active: true,
            followed_at_ms: 0,
            version: 1,
        };
        let n = EDGES_PER_CALL as i64;
        let mut edges: Vec<EdgeState> = (100..=100 + n).map(|k| state(a, k)).collect();
        edges.insert(10, state(b, 7));
        edges.push(state(b, 8));
        let mut calls = Vec::new();
        for together in [false, true] {
            let mut pipe = redis::pipe();
            queue_apply(&mut pipe, &keys, &edges, together);
            let packed = pipe.get_packed_pipeline();
            let at = |n| {
                let m = member(id(n));
                packed
                    .windows(m.len())
                    .position(|w| w == m.as_bytes())
                    .unwrap()
            };
            assert!(
                (100..100 + n).all(|k| at(k) < at(k + 1)),
                "a's states in order"
            );
            assert!(at(100 + n) < at(7) && at(7) < at(8), "b's states after a's");
            calls.push(pipe.len());
        }
        // One list a call: a's states, one more than a call holds, take two
        // calls, b's two one. Many lists a call: a full call of a's, then
        // a's last with b's two.
        assert_eq!(calls, [3, 2]);
    }

    #[test]
    fn one_call_asks_every_list_or_one_call_each() {
        let keys = RedisKeys::new("t:");
        let id = |n| UserId::new(n).unwrap();
        let (a, b, c) = ([id(1)], [id(2), id(3)], [id(4)]);
        let asks: [(ListKey, &[UserId]); 3] = [
            (ListKey::Following(id(7)), &a),
            (ListKey::Following(id(8)), &b),
            (ListKey::Followers(id(7)), &c),
        ];
        let mut pipe = redis::pipe();
        let one = MembersCalls::queue(&mut pipe, &keys, &asks, true);
        assert_eq!(pipe.len(), 1);
        let mut pipe = redis::pipe();
        let each = MembersCalls::queue(&mut pipe, &keys, &asks, false);
        assert_eq!(pipe.len(), 3);

        use redis::Value::{BulkString, Int};
        let s = |t: &str| BulkString(t.as_bytes().to_vec());
        // List 1 cached whole with user 1 absent; list 2 not cached; list 3
        // cached in part with user 4 at 1700.
        let reply = redis::Value::Array(vec![Int(1), s(""), Int(0), Int(2), s("1700")]);
        let mut replies = std::iter::once(&reply);
        assert_eq!(
            one.parse(|| replies.next()),
            vec![
                Membership::Known(vec![Member::Absent]),
                Membership::NotCached,
                Membership::Known(vec![Member::In(1700)]),
            ]
        );
        // A reply cut short, and no reply at all: the lists say nothing.
        let short = redis::Value::Array(vec![Int(1)]);
        let mut replies = std::iter::once(&short);
        assert_eq!(one.parse(|| replies.next()), vec![Membership::NotCached; 3]);
        assert_eq!(each.parse(|| None), vec![Membership::NotCached; 3]);
    }
}
