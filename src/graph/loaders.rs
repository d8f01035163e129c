//! DataLoaders: every user, counter, relationship and cached page a request
//! needs is fetched in one batch, whatever the shape of the query. Users come
//! from the in-process user cache where it holds them; counters, relations
//! and pages of one level of the query share one Redis round trip.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use async_graphql::dataloader::{CacheFactory, DataLoader, HashMapCache, Loader};

use super::count::{BoundedCount, Count};
use crate::app::App;
use crate::cache::counters::CounterRecord;
use crate::cache::lists::PageMiss;
use crate::error::ApiError;
use crate::model::{Boundaries, IdHasher, User, UserId, UserStatus};
use crate::paging::ListKey;
use crate::paging::{Page, PageRequest};
use crate::read::batch::{self, Answer, Read};
use crate::read::intersect;
use crate::store::following::PairState;

/// A loader's failure, shared by every key of its batch.
pub(crate) type LoadError = Arc<ApiError>;

/// Users by id, whatever their status ([`Loaders`] leaves deleted ones out).
pub(crate) struct UserLoader(Arc<App>);

impl Loader<UserId> for UserLoader {
    type Value = User;
    type Error = LoadError;

    async fn load(&self, keys: &[UserId]) -> Result<HashMap<UserId, User>, Self::Error> {
        let found = self
            .0
            .read
            .users()
            .by_ids(&self.0.pg, keys)
            .await
            .map_err(Arc::new)?;
        Ok(found.into_iter().map(|u| (u.id, u)).collect())
    }
}

/// Users by handle, whatever their status: every `userByHandle` of a request
/// in one statement ([`Loaders`] leaves deleted ones out).
pub(crate) struct HandleLoader(Arc<App>);

impl Loader<String> for HandleLoader {
    type Value = User;
    type Error = LoadError;

    async fn load(&self, keys: &[String]) -> Result<HashMap<String, User>, Self::Error> {
        let found = self
            .0
            .read
            .users()
            .by_handles(&self.0.pg, keys)
            .await
            .map_err(Arc::new)?;
        Ok(found.into_iter().map(|u| (u.handle.clone(), u)).collect())
    }
}

/// Counters, relations and cached pages: one Redis round trip per batch.
pub(crate) struct CacheLoader(Arc<App>);

impl Loader<Read> for CacheLoader {
    type Value = Answer;
    type Error = LoadError;

    async fn load(&self, keys: &[Read]) -> Result<HashMap<Read, Answer>, Self::Error> {
        batch::load(&self.0, keys).await.map_err(Arc::new)
    }
}

/// Boundaries ([`crate::read::boundaries`]): held in process, the rest
/// read in one go per batch.
pub(crate) struct BoundaryLoader(Arc<App>);

impl Loader<UserId> for BoundaryLoader {
    type Value = Arc<Boundaries>;
    type Error = LoadError;

    async fn load(&self, keys: &[UserId]) -> Result<HashMap<UserId, Arc<Boundaries>>, Self::Error> {
        crate::read::boundaries::sets(&self.0, keys)
            .await
            .map_err(Arc::new)
    }
}

/// Most edges `knownFollowersCount` walks (see `Relationship`).
pub(crate) const KNOWN_FOLLOWERS_COUNT_WALK: usize = 1000;

/// `knownFollowersCount` of (subject, other) pairs: how many followers of
/// the other the subject follows, all pairs of a batch computed together
/// (one counter read, then [`intersect::cached_many`]: kept in process
/// under both owners' counter versions).
pub(crate) struct KnownCountLoader(Arc<App>);

impl Loader<(UserId, UserId)> for KnownCountLoader {
    type Value = BoundedCount;
    type Error = LoadError;

    async fn load(
        &self,
        keys: &[(UserId, UserId)],
    ) -> Result<HashMap<(UserId, UserId), BoundedCount>, Self::Error> {
        let mut users: Vec<UserId> = keys.iter().flat_map(|(a, b)| [*a, *b]).collect();
        users.sort_unstable();
        users.dedup();
        let reads: Vec<Read> = users.iter().copied().map(Read::Counters).collect();
        let answers = batch::load(&self.0, &reads).await.map_err(Arc::new)?;
        let counters = |user: UserId| match answers.get(&Read::Counters(user)) {
            Some(Answer::Counters(record)) => *record,
            _ => CounterRecord::default(),
        };
        // Kept in process under both owners' counter versions, read above.
        let tasks: Vec<(intersect::Task, (u64, u64))> = keys
            .iter()
            .map(|(subject, other)| {
                let task = intersect::Task::sized(
                    ListKey::Following(*subject),
                    ListKey::Followers(*other),
                    intersect::Order::Second,
                    counters,
                );
                (task, (counters(*subject).version, counters(*other).version))
            })
            .collect();
        let results = intersect::cached_many(&self.0, &tasks, KNOWN_FOLLOWERS_COUNT_WALK)
            .await
            .map_err(Arc::new)?;
        Ok(keys
            .iter()
            .zip(results)
            .map(|(key, result)| {
                let count = BoundedCount {
                    count: Count(result.items.len() as u64),
                    exact: result.complete,
                };
                (*key, count)
            })
            .collect())
    }
}

/// The loaders of one request; each caches what it loaded for that request only.
pub struct Loaders {
    app: Arc<App>,
    /// False for a subscription's loaders: they remember nothing, not even
    /// which users they saw (a subscription may live for days).
    remember: bool,
    seen_ids: Mutex<HashSet<UserId>>,
    seen_handles: Mutex<HashSet<String>>,
    seen_boundaries: Mutex<HashSet<UserId>>,
    users: DataLoader<UserLoader, IdCache>,
    handles: DataLoader<HandleLoader, HashMapCache>,
    reads: DataLoader<CacheLoader, IdCache>,
    known_counts: DataLoader<KnownCountLoader, IdCache>,
    boundaries: DataLoader<BoundaryLoader, IdCache>,
    /// Per `_entities` field of the request (by its position): set once
    /// its representations are primed.
    entities_primed: Mutex<HashMap<async_graphql::Pos, Arc<tokio::sync::OnceCell<()>>>>,
}

impl Loaders {
    /// Fresh loaders (their caches live for one request).
    pub fn new(app: &Arc<App>) -> Self {
        let delay = std::time::Duration::from_millis(app.config.caches.loader_delay_ms);
        Self {
            app: app.clone(),
            remember: true,
            seen_ids: Mutex::default(),
            seen_handles: Mutex::default(),
            seen_boundaries: Mutex::default(),
            users: batched(UserLoader(app.clone()), delay, IdCache::new()),
            handles: batched(HandleLoader(app.clone()), delay, HashMapCache::default()),
            reads: batched(CacheLoader(app.clone()), delay, IdCache::new()),
            known_counts: batched(KnownCountLoader(app.clone()), delay, IdCache::new()),
            boundaries: batched(BoundaryLoader(app.clone()), delay, IdCache::new()),
            entities_primed: Mutex::default(),
        }
    }

    /// Runs `prime` once for the `_entities` field at `field`, however
    /// many of its entities ask: the first does, the others wait for it.
    pub(crate) async fn prime_entities_once(
        &self,
        field: async_graphql::Pos,
        prime: impl Future<Output = ()>,
    ) {
        let cell = self
            .entities_primed
            .lock()
            .expect("entities lock")
            .entry(field)
            .or_default()
            .clone();
        cell.get_or_init(|| prime).await;
    }

    /// Loaders that batch but remember nothing: for a subscription, whose
    /// events must each read what is current.
    pub fn uncached(app: &Arc<App>) -> Self {
        let mut loaders = Self::new(app);
        loaders.remember = false;
        loaders.users.enable_all_cache(false);
        loaders.handles.enable_all_cache(false);
        loaders.reads.enable_all_cache(false);
        loaders.known_counts.enable_all_cache(false);
        loaders.boundaries.enable_all_cache(false);
        loaders
    }

    /// How many users and handles these loaders remember having seen (for
    /// tests: a subscription's loaders remember none).
    pub fn remembered(&self) -> usize {
        self.seen_ids.lock().expect("seen lock").len()
            + self.seen_handles.lock().expect("seen lock").len()
    }

    /// The user `id`, unless unknown or deleted.
    pub async fn user(&self, id: UserId) -> Result<Option<User>, LoadError> {
        Ok(self.users(&[id]).await?.remove(&id))
    }

    /// The users of `ids` that are neither unknown nor deleted.
    ///
    /// Rows held in process are fed to the request's loader the first time
    /// the request asks for them, so they cost no batch; after that the
    /// request keeps seeing the row it saw first, even if the process cache
    /// drops or replaces it meanwhile (a page that showed a user never loses
    /// it to a deletion committed while the page resolves).
    pub async fn users(&self, ids: &[UserId]) -> Result<HashMap<UserId, User>, LoadError> {
        // Without a cache, the loader reads the process cache itself.
        let fresh: Vec<(UserId, User)> = if !self.remember {
            Vec::new()
        } else {
            let mut seen = self.seen_ids.lock().expect("seen lock");
            ids.iter()
                .filter(|id| seen.insert(**id))
                .filter_map(|id| Some((*id, self.app.read.users().get(*id)?)))
                .collect()
        };
        if !fresh.is_empty() {
            self.users.feed_many(fresh).await;
        }
        let mut found = self.users.load_many(ids.iter().copied()).await?;
        found.retain(|_, user| user.status != UserStatus::Deleted);
        Ok(found)
    }

    /// The user with this handle, unless unknown or deleted (fed from the
    /// process cache the same way as [`Self::users`]).
    pub async fn user_by_handle(&self, handle: String) -> Result<Option<User>, LoadError> {
        let fresh = self.remember
            && self
                .seen_handles
                .lock()
                .expect("seen lock")
                .insert(handle.clone());
        if fresh && let Some(user) = self.app.read.users().get_by_handle(&handle) {
            self.handles.feed_one(handle.clone(), user).await;
        }
        let user = self.handles.load_one(handle).await?;
        Ok(user.filter(|u| u.status != UserStatus::Deleted))
    }

    /// The counters of `user` (zero for a user without any).
    pub async fn counters(&self, user: UserId) -> Result<CounterRecord, LoadError> {
        Ok(match self.reads.load_one(Read::Counters(user)).await? {
            Some(Answer::Counters(record)) => record,
            _ => CounterRecord::default(),
        })
    }

    /// The counters of each of `users`.
    pub async fn counters_many(
        &self,
        users: &[UserId],
    ) -> Result<HashMap<UserId, CounterRecord>, LoadError> {
        let reads: Vec<Read> = users.iter().copied().map(Read::Counters).collect();
        let answers = self.reads.load_many(reads).await?;
        Ok(answers
            .into_iter()
            .filter_map(|(read, answer)| match (read, answer) {
                (Read::Counters(user), Answer::Counters(record)) => Some((user, record)),
                _ => None,
            })
            .collect())
    }

    /// How `a` relates to `b`.
    pub async fn relation(&self, a: UserId, b: UserId) -> Result<PairState, LoadError> {
        if a == b {
            return Ok(PairState::default());
        }
        Ok(match self.reads.load_one(Read::Relation(a, b)).await? {
            Some(Answer::Relation(state)) => state,
            _ => PairState::default(),
        })
    }

    /// How each `(a, b)` of `pairs` relates (pairs of one user with itself
    /// are left out: they relate by nothing).
    pub async fn relations(
        &self,
        pairs: &[(UserId, UserId)],
    ) -> Result<HashMap<(UserId, UserId), PairState>, LoadError> {
        let reads: Vec<Read> = pairs
            .iter()
            .filter(|(a, b)| a != b)
            .map(|&(a, b)| Read::Relation(a, b))
            .collect();
        let answers = self.reads.load_many(reads).await?;
        Ok(answers
            .into_iter()
            .filter_map(|(read, answer)| match (read, answer) {
                (Read::Relation(a, b), Answer::Relation(state)) => Some(((a, b), state)),
                _ => None,
            })
            .collect())
    }

    /// How many followers of `other` `subject` follows (bounded; see
    /// [`KNOWN_FOLLOWERS_COUNT_WALK`]). For a user and itself, its mutuals.
    pub async fn known_followers_count(
        &self,
        subject: UserId,
        other: UserId,
    ) -> Result<BoundedCount, LoadError> {
        Ok(self
            .known_counts
            .load_one((subject, other))
            .await?
            .unwrap_or(BoundedCount {
                count: Count(0),
                exact: true,
            }))
    }

    /// The blocks `user` is party to, and its mutes.
    ///
    /// Fed from the process cache the first time the request asks, as
    /// [`Self::users`] is: a field that checks boundaries before reading its
    /// list costs no batch of its own, so its read joins the level's batch.
    pub async fn boundaries(&self, user: UserId) -> Result<Arc<Boundaries>, LoadError> {
        let fresh = self.remember && self.seen_boundaries.lock().expect("seen lock").insert(user);
        if fresh && let Some(set) = self.app.read.users().get_boundaries(user) {
            self.boundaries.feed_one(user, set).await;
        }
        Ok(self.boundaries.load_one(user).await?.unwrap_or_default())
    }

    /// Forgets the boundaries this request loaded: after a write that may
    /// have changed some, a later field of the same document reads them anew.
    pub(crate) fn forget_boundaries(&self) {
        self.boundaries.clear::<UserId>();
        self.seen_boundaries.lock().expect("seen lock").clear();
    }

    /// The page of `list`, if its cache covers it (batched with the level's
    /// other reads); the caller completes a miss with [`crate::read::pages::complete`].
    pub async fn cached_page(
        &self,
        list: ListKey,
        request: PageRequest,
    ) -> Result<Result<Arc<Page>, Option<PageMiss>>, LoadError> {
        Ok(
            match self.reads.load_one(Read::Page(list, request)).await? {
                Some(Answer::Page(page)) => page,
                _ => Err(None),
            },
        )
    }
}

/// A loader's per-request cache of answers by id.
type IdCache = HashMapCache<IdHasher>;

fn batched<T: Send + Sync + 'static, C: CacheFactory>(
    loader: T,
    delay: std::time::Duration,
    cache: C,
) -> DataLoader<T, C> {
    // A batch counts for the request that started it (`Server-Timing`).
    let spawn = |batch| tokio::spawn(crate::cost::carry(batch));
    DataLoader::with_cache(loader, spawn, cache).delay(delay)
}
