//! One page of a follow list: from the hot in-process cache for celebrity
//! lists, else from the Redis list cache when it covers the page, else from
//! PostgreSQL keyset queries (any depth). A list that is not cached, or
//! whose cached head unfollows wore down below a first page, is filled in
//! the background, once: one filler per process (an in-flight set) and one
//! across processes (the Redis claim of `lua/list_fill_begin.lua`).

use std::collections::HashMap;
use std::sync::Arc;

use crate::app::App;
use crate::cache::lists::{self, Claim, EdgeState, Fill, FillClaim, ListEntry, PageMiss};
use crate::error::ApiError;
use crate::model::{UserId, UserStatus};
use crate::paging::ListKey;
use crate::paging::{Page, PageRequest};
use crate::store::lists as store_lists;

/// Where a page came from (for tests and metrics).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// The in-process hot-list cache.
    Hot,
    /// The Redis list cache.
    Cache,
    /// PostgreSQL.
    Postgres,
}

/// How many of a hot list's newest edges are held in process.
pub(crate) const HOT_EDGES: usize = 100;

/// Reads one page of `list`. `total` is the list's size when known: lists at
/// or above the hot threshold serve their first pages from process memory.
pub async fn page(
    app: &Arc<App>,
    list: ListKey,
    request: PageRequest,
    total: Option<u64>,
) -> Result<(Page, Source), ApiError> {
    if let Some(page) = hot_cached(app, list, request).await {
        return Ok((page, Source::Hot));
    }
    let cached = from_cache(app, list, request).await.map(Arc::new);
    complete(app, list, request, total, cached).await
}

/// The page from the in-process hot-list cache, if it holds `list` (only
/// hot lists are held) and the page lies within its newest edges.
pub(crate) async fn hot_cached(app: &App, list: ListKey, request: PageRequest) -> Option<Page> {
    if !in_hot_window(request) {
        return None;
    }
    let hot = app.read.hot_lists.get(&list).await?;
    crate::paging::page_of_head(&hot, request)
}

/// Completes a page whose list-cache read gave `cached`: from process
/// memory when the list is hot, else the cached page, else PostgreSQL
/// (starting the fill the miss calls for: [`fill_after`]).
pub(crate) async fn complete(
    app: &Arc<App>,
    list: ListKey,
    request: PageRequest,
    total: Option<u64>,
    cached: Result<Arc<Page>, Option<PageMiss>>,
) -> Result<(Page, Source), ApiError> {
    let hot = total.is_some_and(|n| n >= app.config.caches.hot_threshold);
    if hot && let Some(page) = from_hot(app, list, request).await? {
        return Ok((page, Source::Hot));
    }
    match cached {
        Ok(page) => return Ok((Arc::unwrap_or_clone(page), Source::Cache)),
        Err(Some(miss)) => fill_after(app, list, request, miss),
        Err(None) => {}
    }
    // Not kept anywhere: a replica caught up to the viewer's writes may answer.
    let page = super::replica::read(app.read.replica.as_ref(), &app.pg, async |conn| {
        Ok(store_lists::page(conn, list, request).await?)
    })
    .await?;
    Ok((page, Source::Postgres))
}

/// Whether the hot cache serves `request`: a first page, or one by
/// offset, within the [`HOT_EDGES`] newest edges.
fn in_hot_window(request: PageRequest) -> bool {
    match request {
        PageRequest::After(None, n) => n <= HOT_EDGES,
        PageRequest::Offset(offset, n) => offset + n <= HOT_EDGES,
        _ => false,
    }
}

/// Serves first pages (at most [`HOT_EDGES`] deep) of a hot list from memory.
async fn from_hot(
    app: &Arc<App>,
    list: ListKey,
    request: PageRequest,
) -> Result<Option<Page>, ApiError> {
    if !in_hot_window(request) {
        return Ok(None);
    }
    let loader = async {
        let request = PageRequest::After(None, HOT_EDGES);
        let page = match from_cache(app, list, request).await {
            Ok(page) => page,
            Err(miss) => {
                // Filled as any list is: a hot list is loaded again every
                // `KITH_HOT_PAGE_TTL_MS` and whenever it changes, which is
                // from Redis once it is cached there, not from PostgreSQL.
                if let Some(miss) = miss {
                    fill_after(app, list, request, miss);
                }
                let mut conn = app.pg.get().await?;
                store_lists::page(&mut conn, list, request).await?
            }
        };
        Ok::<_, ApiError>(Arc::new(page))
    };
    let hot = app
        .read
        .hot_lists
        .try_get_with(list, loader)
        .await
        .map_err(|e| ApiError::shared(&e))?;
    Ok(crate::paging::page_of_head(&hot, request))
}

/// The Redis list cache; `Err(None)` when Redis itself failed (logged).
async fn from_cache(
    app: &App,
    list: ListKey,
    request: PageRequest,
) -> Result<Page, Option<PageMiss>> {
    let read = async {
        let mut redis = app.redis.get().await.map_err(|e| e.to_string())?;
        app.round_trips.redis();
        lists::read_page(&mut *redis, &app.keys, list, request)
            .await
            .map_err(|e| e.to_string())
    };
    match read.await {
        Ok(Ok(page)) => Ok(page),
        Ok(Err(miss)) => Err(Some(miss)),
        Err(error) => {
            tracing::warn!(%error, "list cache unreadable; reading PostgreSQL");
            Err(None)
        }
    }
}

/// Starts, in the background, the fill a cache miss of `request` calls
/// for — none for a page of nothing (`first: 0`, asked for `totalCount`,
/// is no sign that anyone will page the list): of a list not cached, or of
/// one whose cached head no longer covers a page from its newest edge
/// ([`start_worn`]).
pub(crate) fn fill_after(app: &Arc<App>, list: ListKey, request: PageRequest, miss: PageMiss) {
    if request.size() == 0 {
        return;
    }
    let reach = match request {
        PageRequest::After(None, n) => Some(n),
        PageRequest::Offset(offset, n) => Some(offset + n),
        PageRequest::After(Some(_), _) | PageRequest::Before(..) => None,
    };
    match (miss, reach) {
        (PageMiss::NotCached, _) => start(app, vec![list], Claim::Missing),
        (PageMiss::NotCovered, Some(reach)) => start_worn(app, vec![(list, reach)]),
        (PageMiss::NotCovered, None) => {}
    }
}

/// Fills again, together, the lists whose cached heads no longer cover
/// the newest edges each was read to (`(list, reach)`). Unfollows wear a
/// partly cached head down (a celebrity losing followers, an account
/// moving away); without a fill every such read would go to PostgreSQL
/// until the list expired. Only reads within the newest half of what a
/// fill reads count: deeper ones stay PostgreSQL's, so a refill (which
/// reads the list's newest edges again) comes after at least half of
/// them left.
pub(crate) fn start_worn(app: &Arc<App>, reads: Vec<(ListKey, usize)>) {
    let limits = fill_limits(&app.config);
    let worn: Vec<(ListKey, usize)> = reads
        .into_iter()
        .filter(|(list, reach)| *reach < limits.of(*list) / 2)
        .collect();
    // Each list missed at its own reach: at the deepest, each still does.
    let Some(deepest) = worn.iter().map(|(_, reach)| reach + 1).max() else {
        return;
    };
    start(
        app,
        worn.into_iter().map(|(list, _)| list).collect(),
        Claim::Worn(deepest),
    );
}

/// Most lists one background fill takes on.
const FILLS_PER_TASK: usize = 64;

/// Starts filling `lists` in the background, together (two statements and
/// two Redis round trips for all of them), leaving out the ones this process
/// is filling already — unless as many fills as `KITH_MAX_CONCURRENT_FILLS`
/// allows run already, or this process has filled its
/// `KITH_MAX_FILLS_PER_SEC` lists this second (the reads are served from
/// PostgreSQL either way; a later read fills the lists). Reads name lists
/// of any id a client makes up: only lists of active users are filled
/// ([`fill_many`]), and the budget bounds how fast the keys of real ones
/// can be created, whoever asks.
pub(crate) fn start_fills(app: &Arc<App>, lists: Vec<ListKey>) {
    start(app, lists, Claim::Missing);
}

/// [`start_fills`], claiming as `claim` says.
fn start(app: &Arc<App>, mut lists: Vec<ListKey>, claim: Claim) {
    if lists.is_empty() {
        return;
    }
    let Ok(permit) = app.read.fill_permits.clone().try_acquire_owned() else {
        return;
    };
    {
        let mut in_flight = app.read.fills_in_flight.lock().expect("fills lock");
        lists.retain(|list| !in_flight.contains(list));
        // The rest is filled by a later read.
        lists.truncate(FILLS_PER_TASK);
        in_flight.extend(lists.iter().copied());
    }
    if lists.is_empty() {
        return;
    }
    let app = app.clone();
    tokio::spawn(async move {
        let _permit = permit;
        let filled = async {
            let mut active = of_active_users(&app, &lists).await?;
            let granted = app.read.fill_budget.take(active.len());
            if granted < active.len() {
                app.metrics
                    .list_fills_skipped("budget", active.len() - granted);
                active.truncate(granted);
            }
            let sizes: Vec<u64> = active
                .iter()
                .map(|list| app.read.fill_memory.list_bytes(*list))
                .collect();
            let room = fits_in_memory(&app, &sizes).await?;
            if room < active.len() {
                app.metrics
                    .list_fills_skipped("memory", active.len() - room);
                active.truncate(room);
            }
            fill_many(&app, &active, claim).await
        };
        if let Err(error) = filled.await {
            if error.is_redis_out_of_memory() {
                app.metrics.redis_oom("fill");
            }
            tracing::warn!(%error, lists = lists.len(), "list cache fill failed");
        }
        let mut in_flight = app.read.fills_in_flight.lock().expect("fills lock");
        for list in &lists {
            in_flight.remove(list);
        }
    });
}

/// How many of the writes that take at most `sizes` bytes (from the first)
/// Redis has room for under `KITH_FILL_MEMORY_LIMIT`, from a look at Redis's
/// memory at most [`FillMemory::EVERY`] old less what was admitted since.
/// Past the limit, reads go on from PostgreSQL and what is cached already
/// expires: a crawl of every list cannot fill Redis.
///
/// [`FillMemory::EVERY`]: crate::read::state::FillMemory::EVERY
pub(crate) async fn fits_in_memory(app: &App, sizes: &[u64]) -> Result<usize, ApiError> {
    let memory = &app.read.fill_memory;
    if let Some(admitted) = memory.admit(sizes) {
        return Ok(admitted);
    }
    let mut redis = app.redis.get().await?;
    let (room, looked) = memory.room(&mut *redis, sizes).await;
    if looked {
        app.round_trips.redis();
    }
    Ok(room)
}

/// Fills `list` with its newest edges, unless another filler holds the
/// claim (or, unless `rebuild`, the list is cached already).
pub async fn fill(app: &App, list: ListKey, rebuild: bool) -> Result<bool, ApiError> {
    Ok(fill_many(app, &[list], Claim::of(rebuild)).await? == 1)
}

/// Fills each of `lists` with its newest edges, unless another filler holds
/// its claim (or `claim` does not take it as it is cached); returns how many
/// were filled. One Redis round trip claims them all, one statement per
/// kind of list reads them, one round trip commits them. (Fills that reads
/// start are only of lists of active users: [`start_fills`].)
pub(crate) async fn fill_many(
    app: &App,
    lists: &[ListKey],
    claim: Claim,
) -> Result<usize, ApiError> {
    if lists.is_empty() {
        return Ok(0);
    }
    let token = uuid::Uuid::new_v4().to_string();
    // Never hold a connection of one pool while waiting for the other's.
    let claims = {
        let mut redis = app.redis.get().await?;
        lists::begin_fills(&mut *redis, &app.keys, lists, &token, claim).await?
    };
    let granted: Vec<ListKey> = lists
        .iter()
        .zip(claims)
        .filter(|(_, claim)| *claim == FillClaim::Granted)
        .map(|(list, _)| *list)
        .collect();
    if granted.is_empty() {
        return Ok(0);
    }
    let limits = fill_limits(&app.config);
    let read = {
        let mut conn = app.pg.get().await?;
        store_lists::newest_of(&mut conn, &granted, limits).await?
    };
    let rows: HashMap<ListKey, Vec<ListEntry>> = read
        .into_iter()
        .map(|(list, rows)| {
            let entries = rows
                .iter()
                .filter_map(|row| {
                    Some(ListEntry {
                        user: UserId::new(row.member)?,
                        followed_at_ms: row.followed_at.timestamp_millis(),
                        version: row.version,
                    })
                })
                .collect();
            (list, entries)
        })
        .collect();
    let fills: Vec<Fill<'_>> = granted
        .iter()
        .map(|list| {
            let entries = rows.get(list).map_or(&[][..], Vec::as_slice);
            Fill {
                list: *list,
                entries,
                complete: entries.len() < limits.of(*list),
            }
        })
        .collect();
    let ttl = std::time::Duration::from_secs(app.config.caches.list_cache_ttl_secs);
    let committed = {
        let mut redis = app.redis.get().await?;
        lists::commit_fills(&mut *redis, &app.keys, &token, ttl, &fills).await?
    };
    let unread: Vec<(ListKey, UserId)> = granted
        .iter()
        .zip(&committed)
        .flat_map(|(list, members)| members.iter().flatten().map(move |member| (*list, *member)))
        .collect();
    // The fills are committed: a failed check is the projector's to repair.
    if let Err(error) = recheck(app, &unread).await {
        tracing::warn!(%error, members = unread.len(), "filled lists not checked against the truth");
    }
    Ok(committed.iter().filter(|c| c.is_some()).count())
}

/// Sets the given members of freshly filled lists to their state in
/// PostgreSQL (where newer than what the lists hold). They were added by
/// updates applied while the fill ran, after its rows were read or before:
/// such an update may be older than a removal whose tombstone the list no
/// longer had (it expired with an earlier cache), and then the truth,
/// read now, takes it out again.
pub async fn recheck(app: &App, unread: &[(ListKey, UserId)]) -> Result<(), ApiError> {
    if unread.is_empty() {
        return Ok(());
    }
    // A list and a member name an edge of `following` or of `follower`.
    let (mut following, mut followers) = (Vec::new(), Vec::new());
    for (list, member) in unread {
        match list {
            ListKey::Following(owner) => following.push((*owner, *member)),
            ListKey::Followers(owner) => followers.push((*member, *owner)),
        }
    }
    let rows = {
        let mut conn = app.pg.get().await?;
        let mut rows = Vec::new();
        if !following.is_empty() {
            rows.extend(
                crate::store::following::rows(&mut conn, &following)
                    .await?
                    .into_iter()
                    .map(|row| (true, row)),
            );
        }
        if !followers.is_empty() {
            rows.extend(
                crate::store::follower::rows(&mut conn, &followers)
                    .await?
                    .into_iter()
                    .map(|row| (false, row)),
            );
        }
        rows
    };
    let edges: Vec<EdgeState> = rows
        .iter()
        .filter_map(|(of_following, row)| {
            if *of_following {
                EdgeState::in_following(row)
            } else {
                EdgeState::in_followers(row)
            }
        })
        .collect();
    let mut redis = app.redis.get().await?;
    crate::cache::write_through(&mut *redis, &app.keys, &[], &edges, !app.redis.is_cluster())
        .await?;
    Ok(())
}

/// The lists of `lists` whose owners are active users (others are counted
/// as skipped): owners from the process's user cache, the rest from
/// PostgreSQL in one statement.
async fn of_active_users(app: &App, lists: &[ListKey]) -> Result<Vec<ListKey>, ApiError> {
    let mut owners: Vec<UserId> = lists.iter().map(|list| list.owner()).collect();
    owners.sort_unstable();
    owners.dedup();
    let active: std::collections::HashSet<UserId> = app
        .read
        .users
        .by_ids(&app.pg, &owners)
        .await?
        .iter()
        .filter(|user| user.status == UserStatus::Active)
        .map(|user| user.id)
        .collect();
    let kept: Vec<ListKey> = lists
        .iter()
        .copied()
        .filter(|list| active.contains(&list.owner()))
        .collect();
    app.metrics
        .list_fills_skipped("not_active", lists.len() - kept.len());
    Ok(kept)
}

/// How many of a list's newest edges a fill reads: whole following lists up
/// to `KITH_FOLLOWING_CACHE_SIZE`, so that relations never miss the cache.
fn fill_limits(config: &crate::config::Config) -> store_lists::Limits {
    store_lists::Limits {
        following: config
            .caches
            .following_cache_size
            .max(config.caches.list_cache_size),
        followers: config.caches.list_cache_size,
    }
}
