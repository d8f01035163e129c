//! What the read model holds in process, built from the configuration:
//! user rows, the newest edges of hot lists, computed intersections, and
//! the bookkeeping of list fills.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::users::UserCache;
use crate::cache::lists::EdgeState;
use crate::config::Config;
use crate::metrics::ReplicaLabels;
use crate::model::{IdHasher, UserId};
use crate::paging::{ListKey, Page, Position};

/// How long this process reads a user's relations from PostgreSQL after it
/// failed to write that user's cached following list, and at most how long
/// it reads the user's counters from there (until a read rewrote them).
const UNSYNCED_TTL: Duration = Duration::from_secs(30);
/// How long the most followed accounts are kept in process.
const POPULAR_TTL: Duration = Duration::from_secs(600);
/// Members of computed intersections held in process, all together.
const INTERSECTION_CACHE_WEIGHT: u64 = 2_000_000;

/// The read model's state in one process. Its fields are the read model's
/// own: other parts ask for its users and replica, and tell it what they
/// changed ([`Self::forget_users`], [`Self::after_write`]).
pub struct ReadModel {
    /// User rows held in process, dropped when PostgreSQL notifies a change.
    pub(super) users: Arc<UserCache>,
    /// Notify followers lists held in process, kept by PostgreSQL's notices.
    pub(super) notify: Arc<super::notify::NotifyCache>,
    /// The lists whose first page was served here lately.
    pub(super) heads: super::heads::RecentHeads,
    /// The newest edges of hot lists, held for `KITH_HOT_PAGE_TTL_MS`.
    pub(super) hot_lists: moka::future::Cache<ListKey, Arc<Page>, IdHasher>,
    /// Computed intersections of two lists (`commonFollowing`,
    /// `knownFollowers`, `knownFollowersCount`) under the two owners'
    /// counter versions they were computed at.
    pub(super) intersections: moka::future::Cache<IntersectionKey, Arc<Intersection>, IdHasher>,
    /// Users whose cached following list this process failed to update
    /// after a change it made: their relations are read from PostgreSQL
    /// until the entry expires (by then the projector has written the list).
    pub(super) unsynced_following: moka::sync::Cache<UserId, (), IdHasher>,
    /// Users whose counter record this process failed to update after a
    /// change it made, with the moment each was marked: their counters are
    /// rebuilt from PostgreSQL until a rebuild that read them after that
    /// moment has written their record back, or for at most [`UNSYNCED_TTL`].
    unsynced_counters: moka::sync::Cache<UserId, std::time::Instant, IdHasher>,
    /// Lists this process is filling now (in-process single flight).
    pub(super) fills_in_flight: Mutex<HashSet<ListKey>>,
    /// Permits for list-cache fills started by reads (`KITH_MAX_CONCURRENT_FILLS`).
    pub(super) fill_permits: Arc<tokio::sync::Semaphore>,
    /// Lists reads may still fill this second (`KITH_MAX_FILLS_PER_SEC`).
    pub(super) fill_budget: FillBudget,
    /// Room for more list caches in Redis (`KITH_FILL_MEMORY_LIMIT`).
    pub(super) fill_memory: FillMemory,
    /// The most followed accounts (suggestions' cold start), read once per
    /// process and kept a while.
    pub(super) popular: moka::future::Cache<(), Arc<Vec<UserId>>>,
    /// The read replica, when `DATABASE_REPLICA_URL` names one.
    pub(super) replica: Option<Arc<super::replica::Replica>>,
}

impl ReadModel {
    /// Empty caches sized by `config`; the replica's statements count in
    /// `statements` with the primary's, its answers in `replica_answers`.
    pub fn new(
        config: &Config,
        statements: Arc<std::sync::atomic::AtomicU64>,
        replica_answers: Family<ReplicaLabels, Counter>,
    ) -> Self {
        let replica = super::replica::Replica::from_config(config, statements, replica_answers);
        Self {
            users: UserCache::new(
                config.session_url(),
                config.caches.user_cache_capacity,
                Duration::from_secs(config.caches.user_cache_ttl_secs),
                replica.clone(),
            ),
            notify: super::notify::NotifyCache::new(
                config.session_url(),
                config.caches.notify_cache_members,
            ),
            replica,
            heads: super::heads::RecentHeads::default(),
            hot_lists: moka::future::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(Duration::from_millis(config.caches.hot_page_ttl_ms))
                .build_with_hasher(IdHasher::default()),
            intersections: moka::future::Cache::builder()
                .max_capacity(INTERSECTION_CACHE_WEIGHT)
                .weigher(|_, result: &Arc<Intersection>| {
                    u32::try_from(result.items.len() + 1).unwrap_or(u32::MAX)
                })
                .time_to_live(Duration::from_secs(
                    config.caches.intersection_cache_ttl_secs,
                ))
                .build_with_hasher(IdHasher::default()),
            unsynced_following: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(UNSYNCED_TTL)
                .build_with_hasher(IdHasher::default()),
            unsynced_counters: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(UNSYNCED_TTL)
                .build_with_hasher(IdHasher::default()),
            fills_in_flight: Mutex::new(HashSet::new()),
            fill_permits: Arc::new(tokio::sync::Semaphore::new(
                config.caches.max_concurrent_fills,
            )),
            fill_budget: FillBudget::new(config.caches.max_fills_per_sec),
            fill_memory: FillMemory::new(config),
            popular: moka::future::Cache::builder()
                .max_capacity(1)
                .time_to_live(POPULAR_TTL)
                .build(),
        }
    }
}

impl ReadModel {
    /// User rows held in process: lookups by id and handle, and the
    /// accounts behind tokens.
    pub fn users(&self) -> &Arc<UserCache> {
        &self.users
    }

    /// The lists whose first page was served here lately, whose coming
    /// members' rows are loaded before a read shows them.
    pub(crate) fn heads(&self) -> &super::heads::RecentHeads {
        &self.heads
    }

    /// Notify followers lists held in process.
    pub fn notify(&self) -> &Arc<super::notify::NotifyCache> {
        &self.notify
    }

    /// The read replica, when `DATABASE_REPLICA_URL` names one.
    pub fn replica(&self) -> Option<&Arc<super::replica::Replica>> {
        self.replica.as_ref()
    }

    /// Forgets what this process holds of `users` after their rows
    /// changed (other processes forget them as PostgreSQL's notice
    /// arrives).
    pub fn forget_users(&self, users: &[UserId]) {
        self.users.invalidate(users);
    }

    /// After a write committed changes to `edges`: the newest edges held of
    /// their lists are dropped; and when the write could not update the
    /// Redis caches (`cached` false), the following lists it changed are
    /// read from PostgreSQL until the projector has rewritten them, and
    /// their owners' counters until a read has rewritten their records.
    pub(crate) async fn after_write(&self, edges: &[EdgeState], cached: bool) {
        for edge in edges {
            if !cached && let ListKey::Following(owner) = edge.list {
                self.unsynced_following.insert(owner, ());
                let now = std::time::Instant::now();
                self.unsynced_counters
                    .entry(owner)
                    .and_compute_with(|_| moka::ops::compute::Op::Put(now));
            }
            self.hot_lists.invalidate(&edge.list).await;
        }
    }

    /// Whether `user`'s counter record may be older than a change this
    /// process made ([`Self::after_write`]).
    pub fn counters_unsynced(&self, user: UserId) -> bool {
        self.unsynced_counters.contains_key(&user)
    }

    /// The counter records of `users`, read from PostgreSQL after
    /// `read_at`, were written back: those that were behind a change this
    /// process made before then are not any more.
    pub(crate) fn counters_rewritten(&self, users: &[UserId], read_at: std::time::Instant) {
        // Most rebuilds are of records that were only missing: no mark.
        for user in users
            .iter()
            .filter(|u| self.unsynced_counters.contains_key(*u))
        {
            self.unsynced_counters
                .entry(*user)
                .and_compute_with(|entry| match entry {
                    Some(marked) if *marked.value() <= read_at => moka::ops::compute::Op::Remove,
                    _ => moka::ops::compute::Op::Nop,
                });
        }
    }

    /// Forgets the newest edges held of `list` (its cache in Redis was
    /// rewritten).
    pub(crate) async fn forget_list(&self, list: &ListKey) {
        if self.hot_lists.contains_key(list) {
            self.hot_lists.invalidate(list).await;
        }
    }

    /// Whether Redis was past `KITH_FILL_MEMORY_LIMIT` at the last look,
    /// looking again on `conn` when that is too old; and whether it looked
    /// (a round trip). See [`FillMemory::past_limit`].
    pub(crate) async fn past_fill_limit(
        &self,
        conn: &mut impl redis::aio::ConnectionLike,
    ) -> (bool, bool) {
        self.fill_memory.past_limit(conn).await
    }

    /// How many list fills this process runs now.
    pub fn fills_in_flight(&self) -> usize {
        self.fills_in_flight.lock().expect("fills lock").len()
    }

    /// Forgets every intersection computed so far.
    pub fn forget_intersections(&self) {
        self.intersections.invalidate_all();
    }
}

/// The shared members of two lists, newest first (ties: larger id first,
/// as every list is ordered).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Intersection {
    /// The members, each with the time it is ordered by.
    pub items: Vec<Position>,
    /// False when the walk stopped at its bound: more may exist.
    pub complete: bool,
}

/// An intersection as the process holds it: the two lists, their owners'
/// counter versions when it was computed, and the bound of its walk. Any follow, unfollow or
/// follower change of either owner moves a version, so the next read asks
/// under a new key and computes it again; the old entry ages out.
pub(crate) type IntersectionKey = (ListKey, ListKey, u64, u64, usize);

/// Room for what reads cache in Redis — list caches and counter records —
/// under `KITH_FILL_MEMORY_LIMIT`: how many bytes may still be written,
/// from the last look at Redis's memory less what fills admitted since
/// took at most. Looked at again at most every [`FillMemory::EVERY`].
pub(crate) struct FillMemory {
    /// The configured limit in bytes (0: three quarters of `maxmemory`).
    pub limit: u64,
    /// The most a filled followers list takes, in bytes.
    pub followers_bytes: u64,
    /// The most a filled following list takes, in bytes.
    pub following_bytes: u64,
    /// The last look at Redis.
    last: std::sync::Mutex<Option<Look>>,
    /// Whether a failed look was logged (once per process).
    warned: std::sync::atomic::AtomicBool,
}

/// One look at Redis's memory.
#[derive(Clone, Copy, Debug)]
struct Look {
    at: std::time::Instant,
    /// Bytes fills may still take: the headroom less what was admitted since.
    left: u64,
    /// Redis was past the limit when looked at.
    past: bool,
}

/// About what a cached list takes per member: its ZSet entry and version.
pub(crate) const MEMBER_BYTES: u64 = 120;

/// About what a counter record takes, with its key.
pub(crate) const RECORD_BYTES: u64 = 100;

impl FillMemory {
    /// How long one look at Redis's memory stands.
    pub(crate) const EVERY: Duration = Duration::from_millis(10);

    /// A limit for `config`'s list sizes.
    pub(crate) fn new(config: &Config) -> Self {
        Self {
            limit: config.caches.fill_memory_limit,
            followers_bytes: config.caches.list_cache_size as u64 * MEMBER_BYTES,
            // A fill of a following list takes at least a followers list's
            // size (`read::pages`).
            following_bytes: config
                .caches
                .following_cache_size
                .max(config.caches.list_cache_size) as u64
                * MEMBER_BYTES,
            last: std::sync::Mutex::default(),
            warned: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The bytes fills may still take on a server using `used` of `max`
    /// (0: unlimited); `None`: no limit. [`Self::reserve`] is kept back for
    /// what Redis adds beside the caches, so `used_memory` stays under the
    /// limit.
    pub(crate) fn headroom(&self, used: u64, max: u64) -> Option<u64> {
        let limit = match (self.limit, max) {
            (0, 0) => return None,
            (0, max) => max / 4 * 3,
            (limit, _) => limit,
        };
        Some((limit - Self::reserve(limit)).saturating_sub(used))
    }

    /// What is kept back under `limit` for what Redis adds beside the
    /// caches: its hash tables doubling as keys come, a list's encoding
    /// growing past its compact form, clients' buffers, scripts. A 64th of
    /// the limit, at least 1 MiB (most of it does not grow with the limit),
    /// at most a quarter.
    pub(crate) fn reserve(limit: u64) -> u64 {
        (limit / 64).max(1 << 20).min(limit / 4)
    }

    /// The most a fill of `list` takes, in bytes.
    pub(crate) fn list_bytes(&self, list: ListKey) -> u64 {
        match list {
            ListKey::Followers(_) => self.followers_bytes,
            ListKey::Following(_) => self.following_bytes,
        }
    }

    /// Of writes that take at most `sizes` bytes, how many (from the first)
    /// fit in the room the last look left, which they then take; `None`
    /// when that look is too old (look again and [`record`](Self::record)
    /// it).
    pub(crate) fn admit(&self, sizes: &[u64]) -> Option<usize> {
        let mut last = self.last.lock().expect("fill memory lock");
        let look = last.as_mut().filter(|l| l.at.elapsed() < Self::EVERY)?;
        let mut admitted = 0;
        for size in sizes {
            if *size > look.left {
                break;
            }
            look.left -= size;
            admitted += 1;
        }
        Some(admitted)
    }

    /// Records a look: `headroom` bytes left (`None`: no limit).
    pub(crate) fn record(&self, headroom: Option<u64>) {
        *self.last.lock().expect("fill memory lock") = Some(Look {
            at: std::time::Instant::now(),
            left: headroom.unwrap_or(u64::MAX),
            past: headroom == Some(0),
        });
    }

    /// Looks at Redis's memory on `conn` if the last look is too old; true
    /// when it did (a round trip). The tightest server counts (on a
    /// cluster, every primary answers). A look that fails counts as no
    /// limit — the limit guards memory, never what is right — and is
    /// logged once.
    async fn refresh(&self, conn: &mut impl redis::aio::ConnectionLike) -> bool {
        let fresh = self
            .last
            .lock()
            .expect("fill memory lock")
            .is_some_and(|l| l.at.elapsed() < Self::EVERY);
        if fresh {
            return false;
        }
        let headroom = match crate::cache::memory_use(conn).await {
            Ok(servers) => servers
                .iter()
                .filter_map(|(used, max)| self.headroom(*used, *max))
                .min(),
            Err(error) => {
                if !self.warned.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    tracing::warn!(%error, "cannot read Redis's memory (INFO): KITH_FILL_MEMORY_LIMIT is not applied");
                }
                None
            }
        };
        self.record(headroom);
        true
    }

    /// Of writes that take at most `sizes` bytes (from the first), how many
    /// Redis has room for, looking at its memory on `conn` when the last
    /// look is too old; and whether it looked (a round trip).
    pub(crate) async fn room(
        &self,
        conn: &mut impl redis::aio::ConnectionLike,
        sizes: &[u64],
    ) -> (usize, bool) {
        if sizes.is_empty() {
            return (0, false);
        }
        let looked = self.refresh(conn).await;
        (self.admit(sizes).unwrap_or(0), looked)
    }

    /// Whether Redis was past the limit at the last look (looking again on
    /// `conn` when it is too old); and whether it looked. What writes
    /// check: they keep caches right, so they are not counted against the
    /// room fills take, only kept from growing caches past the limit.
    pub(crate) async fn past_limit(
        &self,
        conn: &mut impl redis::aio::ConnectionLike,
    ) -> (bool, bool) {
        let looked = self.refresh(conn).await;
        let past = self
            .last
            .lock()
            .expect("fill memory lock")
            .is_some_and(|l| l.past);
        (past, looked)
    }
}

/// A token bucket of list fills per second, for one process: refilled at
/// `rate` a second, holding at most a second's worth.
pub(crate) struct FillBudget {
    rate: f64,
    state: std::sync::Mutex<(f64, std::time::Instant)>,
}

impl FillBudget {
    /// A full bucket of `per_sec` fills a second.
    pub(crate) fn new(per_sec: u32) -> Self {
        let rate = f64::from(per_sec.max(1));
        Self {
            rate,
            state: std::sync::Mutex::new((rate, std::time::Instant::now())),
        }
    }

    /// Takes up to `n` fills; returns how many were granted.
    pub(crate) fn take(&self, n: usize) -> usize {
        let mut state = self.state.lock().expect("fill budget lock");
        let (tokens, at) = &mut *state;
        let now = std::time::Instant::now();
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * self.rate).min(self.rate);
        *at = now;
        let granted = (*tokens as usize).min(n);
        *tokens -= granted as f64;
        granted
    }
}
