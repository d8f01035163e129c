//! Filling a list cache from PostgreSQL: a claim (`lua/list_fill_begin.lua`)
//! that keeps updates flowing into the list while the filler reads, then a
//! commit (`lua/list_fill_commit.lua`) that merges the rows read under the
//! same per-member versions and records how much of the list is covered.

use std::sync::LazyLock;
use std::time::Duration;

use redis::aio::ConnectionLike;

use super::{FILL_LEASE, TOMBSTONE_GRACE, member, parse_member};
use crate::cache::RedisKeys;
use crate::model::UserId;
use crate::paging::ListKey;

static FILL_BEGIN: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../../../lua/list_fill_begin.lua")));
static FILL_COMMIT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../../../lua/list_fill_commit.lua")));

/// One row read from PostgreSQL to fill a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListEntry {
    /// The member.
    pub user: UserId,
    /// Follow time in ms.
    pub followed_at_ms: i64,
    /// Edge version.
    pub version: i64,
}

/// The outcome of claiming a fill.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FillClaim {
    /// This caller must read PostgreSQL and commit the fill.
    Granted,
    /// The list is already cached.
    Cached,
    /// Another filler holds the claim.
    Busy,
}

/// Which lists a fill claims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// A list that is not cached.
    Missing,
    /// Also a partly cached list whose covered head holds fewer than this
    /// many edges: unfollows wore it down below a page it used to serve.
    /// It is filled afresh, keeping its versions (tombstones included).
    Worn(usize),
    /// Any list, from nothing (a repair).
    Rebuild,
}

impl Claim {
    /// [`Claim::Rebuild`] when `rebuild`, else [`Claim::Missing`].
    pub(crate) fn of(rebuild: bool) -> Self {
        if rebuild {
            Self::Rebuild
        } else {
            Self::Missing
        }
    }
}

/// Claims the fill of each of `lists` under `token` in one round trip, as
/// `claim` says.
pub(crate) async fn begin_fills(
    conn: &mut impl ConnectionLike,
    keys: &RedisKeys,
    lists: &[ListKey],
    token: &str,
    claim: Claim,
) -> redis::RedisResult<Vec<FillClaim>> {
    if lists.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for list in lists {
        pipe.invoke_script(
            FILL_BEGIN
                .key(&keys.list(*list)[..])
                .key(keys.list_tombstones(*list))
                .arg(token)
                .arg(FILL_LEASE.as_millis() as u64)
                .arg(match claim {
                    Claim::Missing => "0",
                    Claim::Worn(_) => "worn",
                    Claim::Rebuild => "1",
                })
                .arg(TOMBSTONE_GRACE.as_millis() as u64)
                .arg(match claim {
                    Claim::Worn(edges) => edges,
                    Claim::Missing | Claim::Rebuild => 0,
                }),
        );
    }
    // Run twice only if Redis knew no script: then nothing was claimed.
    let answers: Vec<i64> = crate::cache::query_with_scripts(conn, &pipe, &[&FILL_BEGIN]).await?;
    Ok(answers
        .into_iter()
        .map(|answer| match answer {
            1 => FillClaim::Granted,
            0 => FillClaim::Cached,
            _ => FillClaim::Busy,
        })
        .collect())
}

/// Claims the fill of `list` under `token` (see [`begin_fills`]).
pub async fn begin_fill(
    conn: &mut impl ConnectionLike,
    keys: &RedisKeys,
    list: ListKey,
    token: &str,
    rebuild: bool,
) -> redis::RedisResult<FillClaim> {
    let mut claims = begin_fills(conn, keys, &[list], token, Claim::of(rebuild)).await?;
    Ok(claims.pop().unwrap_or(FillClaim::Busy))
}

/// Commits the fill of one list (see [`commit_fills`]).
pub async fn commit_fill(
    conn: &mut impl ConnectionLike,
    keys: &RedisKeys,
    list: ListKey,
    token: &str,
    ttl: Duration,
    entries: &[ListEntry],
    complete: bool,
) -> redis::RedisResult<bool> {
    let fill = Fill {
        list,
        entries,
        complete,
    };
    let mut committed = commit_fills(conn, keys, token, ttl, &[fill]).await?;
    Ok(committed.pop().flatten().is_some())
}

/// One claimed list's rows, read after [`begin_fills`], newest first.
pub struct Fill<'a> {
    /// The list.
    pub list: ListKey,
    /// Its newest edges.
    pub entries: &'a [ListEntry],
    /// True when `entries` is the whole list.
    pub complete: bool,
}

/// Merges each fill's entries and marks its coverage (the whole list when
/// complete, else down to its last entry), in one round trip. Returns, per
/// fill, `None` when its claim had lapsed (nothing written), else the
/// members the list holds that its entries did not name: added by updates
/// applied during the fill, for the filler to check against the truth.
pub async fn commit_fills(
    conn: &mut impl ConnectionLike,
    keys: &RedisKeys,
    token: &str,
    ttl: Duration,
    fills: &[Fill<'_>],
) -> redis::RedisResult<Vec<Option<Vec<UserId>>>> {
    if fills.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for fill in fills {
        let coverage = match (fill.complete, fill.entries.last()) {
            (false, Some(last)) => format!("{}:{}", last.followed_at_ms, member(last.user)),
            _ => "all".to_owned(),
        };
        let mut invocation = FILL_COMMIT.key(&keys.list(fill.list)[..]);
        invocation.key(keys.list_tombstones(fill.list));
        invocation
            .arg(token)
            .arg(ttl.as_millis() as u64)
            .arg(coverage)
            .arg(TOMBSTONE_GRACE.as_millis() as u64);
        for entry in fill.entries {
            invocation
                .arg(member(entry.user))
                .arg(entry.followed_at_ms)
                .arg(entry.version);
        }
        pipe.invoke_script(&invocation);
    }
    // Run twice only if Redis knew no script: then nothing was committed.
    let committed: Vec<redis::Value> =
        crate::cache::query_with_scripts(conn, &pipe, &[&FILL_COMMIT]).await?;
    Ok(committed
        .iter()
        .map(|reply| {
            let reply: Vec<redis::Value> = redis::from_redis_value_ref(reply).ok()?;
            let members = reply.get(1..).unwrap_or_default();
            Some(
                members
                    .iter()
                    .filter_map(|m| parse_member(&redis::from_redis_value_ref::<String>(m).ok()?))
                    .collect(),
            )
        })
        .collect())
}
