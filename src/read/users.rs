//! User rows held in process, so that a warm read never asks PostgreSQL who a
//! user is.
//!
//! Each user's boundaries (blocks both ways, mutes) are held beside the
//! row, dropped by the same notices (see [`super::boundaries`]).
//!
//! Invalidation: a trigger on `users` sends `NOTIFY kith_users_<schema>` with
//! the changed ids when an update or delete commits, and triggers on `block`
//! and `mute` send both ids of every change (whatever made it: Kith, the
//! `kith user` commands in another process, an operator's `psql`). Each
//! process holds one listening session and drops those ids as the notice
//! arrives, so a change shows in every process within the notice's delivery
//! time (milliseconds). A change made through this process
//! ([`crate::write::lifecycle`]) is dropped locally at once as well.
//!
//! The cache serves only while its session listens: until `LISTEN` has
//! succeeded, and from the moment the session breaks until it is back, every
//! read goes to PostgreSQL (a notice sent meanwhile would be lost), and the
//! cache starts empty when the session is back. What it held when the
//! session broke is kept meanwhile for one use only: when PostgreSQL cannot
//! lend a connection within [`HELD_WAIT`], or fails the read as unavailable
//! (a failover, an outage), the read is answered with the held rows instead
//! of `UNAVAILABLE` — rows as they were when the session broke, at a time
//! PostgreSQL cannot be asked. `KITH_USER_CACHE_TTL_SECS` caps the life of any
//! entry regardless.
//!
//! A loader that read a row just before a change committed must not cache
//! it after the change's notice was handled: every invalidation bumps a
//! generation, and a loader's rows are kept only if no invalidation happened
//! between its read and its insert (checked again after inserting).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::error::ApiError;
use crate::model::{Boundaries, IdHasher, User, UserId};
use crate::store::{PgConn, PgPool};

/// The notification channel of the `users` trigger, before the schema name.
pub(crate) const CHANNEL_PREFIX: &str = "kith_users_";

/// How long a read that held rows could answer waits for a PostgreSQL
/// connection while the cache has lost its session.
pub(crate) const HELD_WAIT: Duration = Duration::from_millis(200);

/// In-process user rows, by id and by handle.
pub struct UserCache {
    by_id: moka::sync::Cache<UserId, User, IdHasher>,
    by_handle: moka::sync::Cache<String, UserId>,
    boundaries: moka::sync::Cache<UserId, Arc<Boundaries>, IdHasher>,
    generation: AtomicU64,
    listening: AtomicBool,
    held_answers: AtomicU64,
    /// When a row was last dropped ([`super::replica::now_ms`]): rows read
    /// from the replica must be at least that recent.
    dropped_ms: AtomicU64,
    replica: Option<Arc<super::replica::Replica>>,
    enabled: bool,
    session: super::listener::Session,
}

impl UserCache {
    /// A cache of up to `capacity` users, each kept at most `ttl`; a zero
    /// `ttl` or `capacity` turns it off (every read goes to PostgreSQL).
    /// Misses are read from `replica` when it may answer them.
    pub fn new(
        database_url: &str,
        capacity: u64,
        ttl: Duration,
        replica: Option<Arc<super::replica::Replica>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            by_id: moka::sync::Cache::builder()
                .max_capacity(capacity.max(1))
                .time_to_live(ttl.max(Duration::from_millis(1)))
                .build_with_hasher(IdHasher::default()),
            by_handle: moka::sync::Cache::builder()
                .max_capacity(capacity.max(1))
                .time_to_live(ttl.max(Duration::from_millis(1)))
                .build(),
            boundaries: moka::sync::Cache::builder()
                .max_capacity(capacity.max(1))
                .time_to_live(ttl.max(Duration::from_millis(1)))
                .build_with_hasher(IdHasher::default()),
            generation: AtomicU64::new(0),
            listening: AtomicBool::new(false),
            held_answers: AtomicU64::new(0),
            dropped_ms: AtomicU64::new(0),
            replica,
            enabled: capacity > 0 && !ttl.is_zero(),
            session: super::listener::Session::new(database_url, "kith-users"),
        })
    }

    /// The `application_name` of the listening session (for operators and tests).
    pub fn session_name(&self) -> &str {
        self.session.name()
    }

    /// True while the cache serves (its listening session is up).
    pub fn is_serving(self: &Arc<Self>) -> bool {
        if !self.enabled {
            return false;
        }
        self.start();
        self.listening.load(Ordering::SeqCst)
    }

    /// The cached user `id`, if any.
    pub fn get(self: &Arc<Self>, id: UserId) -> Option<User> {
        if !self.is_serving() {
            return None;
        }
        self.by_id.get(&id)
    }

    /// The cached user whose handle is `handle`, if any.
    pub fn get_by_handle(self: &Arc<Self>, handle: &str) -> Option<User> {
        if !self.is_serving() {
            return None;
        }
        self.held_by_handle(handle)
    }

    /// The cached boundaries of `id`, if any.
    pub(crate) fn get_boundaries(self: &Arc<Self>, id: UserId) -> Option<Arc<Boundaries>> {
        if !self.is_serving() {
            return None;
        }
        self.boundaries.get(&id)
    }

    /// The row of `id` the cache holds, serving or not: for answering
    /// while PostgreSQL cannot (see the module's documentation).
    pub(super) fn held(&self, id: UserId) -> Option<User> {
        self.enabled.then(|| self.by_id.get(&id)).flatten()
    }

    pub(super) fn held_by_handle(&self, handle: &str) -> Option<User> {
        let id = self.by_handle.get(handle)?;
        // A renamed user no longer answers to its old handle.
        self.held(id).filter(|u| u.handle == handle)
    }

    /// The boundaries of `id` the cache holds, serving or not, as [`Self::held`].
    pub(crate) fn held_boundaries(&self, id: UserId) -> Option<Arc<Boundaries>> {
        self.enabled.then(|| self.boundaries.get(&id)).flatten()
    }

    /// How many reads held rows answered while PostgreSQL could not.
    pub fn held_answers(&self) -> u64 {
        self.held_answers.load(Ordering::Relaxed)
    }

    /// Runs `read` with a connection of `pg` — or of the read replica, when
    /// it has replayed past the last row this cache dropped and may answer
    /// ([`super::replica`]); when PostgreSQL is unavailable and `held` has
    /// the answer, answers `held` instead (counted), waiting at most
    /// [`HELD_WAIT`] for a connection. True with an answer that was read.
    pub(crate) async fn or_held<T, F>(
        &self,
        pg: &PgPool,
        held: Option<T>,
        read: F,
    ) -> Result<(T, bool), ApiError>
    where
        F: AsyncFnOnce(&mut PgConn) -> Result<T, ApiError> + Clone,
    {
        let Some(held) = held else {
            let since = self.dropped_ms.load(Ordering::SeqCst);
            return super::replica::read_since(self.replica.as_ref(), pg, since, read)
                .await
                .map(|answer| (answer, true));
        };
        let answer = match tokio::time::timeout(HELD_WAIT, pg.get()).await {
            Ok(Ok(mut conn)) => read(&mut conn).await,
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err(ApiError::Unavailable(anyhow::anyhow!(
                "postgres pool: no connection within {HELD_WAIT:?}"
            ))),
        };
        match answer {
            Err(ApiError::Unavailable(cause)) => {
                tracing::debug!(error = %cause, "PostgreSQL unavailable: answering with held rows");
                self.held_answers.fetch_add(1, Ordering::Relaxed);
                Ok((held, false))
            }
            answer => answer.map(|answer| (answer, true)),
        }
    }

    /// Caches boundaries read from PostgreSQL after [`Self::generation`]
    /// returned `seen`, as [`Self::insert`] caches rows.
    pub(crate) fn insert_boundaries(
        self: &Arc<Self>,
        seen: u64,
        sets: &[(UserId, Arc<Boundaries>)],
    ) {
        if sets.is_empty() || !self.is_serving() || self.generation() != seen {
            return;
        }
        for (user, set) in sets {
            self.boundaries.insert(*user, set.clone());
        }
        if self.generation() != seen {
            for (user, _) in sets {
                self.boundaries.invalidate(user);
            }
        }
    }

    /// The generation to pass to [`Self::insert`] for rows read from now on.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Caches `users`, read from PostgreSQL after [`Self::generation`]
    /// returned `seen` — unless an invalidation happened since.
    pub fn insert(self: &Arc<Self>, seen: u64, users: &[User]) {
        if users.is_empty() || !self.is_serving() || self.generation() != seen {
            return;
        }
        for user in users {
            self.by_handle.insert(user.handle.clone(), user.id);
            self.by_id.insert(user.id, user.clone());
        }
        if self.generation() != seen {
            for user in users {
                self.by_id.invalidate(&user.id);
            }
        }
    }

    /// Drops the rows of `ids`.
    pub fn invalidate(&self, ids: &[UserId]) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.dropped_ms
            .fetch_max(super::replica::now_ms(), Ordering::SeqCst);
        for id in ids {
            self.by_id.invalidate(id);
            self.boundaries.invalidate(id);
        }
    }

    /// Drops every row.
    pub fn clear(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.dropped_ms
            .fetch_max(super::replica::now_ms(), Ordering::SeqCst);
        self.by_id.invalidate_all();
        self.by_handle.invalidate_all();
        self.boundaries.invalidate_all();
    }

    fn start(self: &Arc<Self>) {
        self.session.start(self);
    }
}

impl super::listener::Listening for UserCache {
    const CHANNEL_PREFIX: &'static str = CHANNEL_PREFIX;
    const NAME: &'static str = "user cache";

    /// Applies one notice: comma-separated ids, or `*` for everything.
    fn apply_notice(&self, payload: &str) {
        if payload == "*" {
            self.clear();
            return;
        }
        let ids: Vec<UserId> = payload
            .split(',')
            .filter_map(|id| id.trim().parse().ok().and_then(UserId::new))
            .collect();
        self.invalidate(&ids);
    }

    fn set_listening(&self, on: bool) {
        if on {
            // Whatever is held may have missed a notice: start empty.
            self.clear();
            self.listening.store(true, Ordering::SeqCst);
            self.clear();
        } else {
            // Kept, but only to answer while PostgreSQL cannot.
            self.listening.store(false, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::UserStatus;
    use crate::read::listener::Listening as _;

    fn user(id: i64, handle: &str) -> User {
        User {
            id: UserId::new(id).unwrap(),
            handle: handle.to_owned(),
            display_name: handle.to_owned(),
            status: UserStatus::Active,
            locked: false,
            hides_collections: false,
            moved_to: None,
        }
    }

    fn serving_cache() -> Arc<UserCache> {
        let cache = UserCache::new("postgres://unused", 100, Duration::from_secs(60), None);
        // No runtime here: the listener is never started; pretend it listens.
        cache.session.never_start();
        cache.listening.store(true, Ordering::SeqCst);
        cache
    }

    #[test]
    fn a_row_read_before_an_invalidation_is_not_cached() {
        let cache = serving_cache();
        let seen = cache.generation();
        cache.apply_notice("1,2");
        cache.insert(seen, &[user(1, "a")]);
        assert!(cache.get(UserId::new(1).unwrap()).is_none());
        cache.insert(cache.generation(), &[user(1, "a")]);
        assert_eq!(cache.get(UserId::new(1).unwrap()).unwrap().handle, "a");
        cache.apply_notice("1");
        assert!(cache.get(UserId::new(1).unwrap()).is_none());
    }

    #[test]
    fn handles_follow_renames_and_a_silent_cache_serves_nothing() {
        let cache = serving_cache();
        cache.insert(cache.generation(), &[user(1, "old")]);
        assert!(cache.get_by_handle("old").is_some());
        cache.apply_notice("1");
        cache.insert(cache.generation(), &[user(1, "new")]);
        assert!(cache.get_by_handle("old").is_none(), "renamed away");
        assert!(cache.get_by_handle("new").is_some());
        cache.set_listening(false);
        let one = UserId::new(1).unwrap();
        assert!(cache.get(one).is_none());
        assert!(cache.get_by_handle("new").is_none());
        cache.insert(cache.generation(), &[user(1, "newer")]);
        assert!(cache.get(one).is_none());
        // Held as it was, for answering while PostgreSQL cannot; a local
        // change still drops it; the session's return empties the cache.
        assert_eq!(cache.held(one).unwrap().handle, "new");
        assert!(cache.held_by_handle("new").is_some());
        cache.invalidate(&[one]);
        assert!(cache.held(one).is_none());
        cache.set_listening(true);
        cache.insert(cache.generation(), &[user(1, "new")]);
        cache.set_listening(false);
        assert!(cache.held(one).is_some());
        cache.set_listening(true);
        assert!(cache.held(one).is_none() && cache.get(one).is_none());
    }
}
