//! Who asked to be told when an account posts (`notifyFollowers`): the
//! account's active followers whose follow has `notify` on, newest first,
//! for a service that sends notifications. A post of an account with a
//! million such followers pages through all of them, once a post: each
//! process holds the lists it was asked for, whole, so that those pages
//! read no PostgreSQL row.
//!
//! A list is read once, in one statement (the partial index
//! `following_notify_idx`), when first asked for; from then on, a trigger
//! on `following` sends each change of its members as it commits
//! (`kith_notify_<schema>`: account, follower, member or not, follow
//! time), and the process applies it: the list stays whole without being
//! read again. As the user cache, it serves only while its session
//! listens (started by the first read): from the moment the session
//! breaks until it is back, every page is read from PostgreSQL by keyset
//! and the lists start empty again. A change that commits while a list is
//! being read is applied on top of what the read saw (changes are applied
//! in commit order, and each says what the pair is now, so one seen twice
//! changes nothing). One read of an account's list runs at a time, and at
//! most [`FILLS`] in all: the first pages that find one under way wait for
//! it, those that find none free are read from PostgreSQL by keyset. A
//! list longer than the cache's room (`KITH_NOTIFY_CACHE_MEMBERS`), whose
//! read failed, or that the cache would not keep is paged from PostgreSQL
//! as well, for a while; a list held is read whole again after
//! [`HELD_TTL`] (a notice lost without the session breaking cannot stay
//! wrong for longer).

mod members;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use diesel::QueryableByName;
use diesel::sql_types::BigInt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

use crate::error::ApiError;
use crate::model::{IdHasher, UserId};
use crate::paging::{Page, PageRequest, PrivateList};
use crate::store::{PgPool, lists};

use members::{Change, Members};

/// The notification channel of `following`'s notify trigger, before the
/// schema name.
const CHANNEL_PREFIX: &str = "kith_notify_";

/// How long a list that is not held (longer than the room, its read
/// failed, or the cache would not keep it) is paged from PostgreSQL
/// before it is read whole again.
const PAGED_TTL: Duration = Duration::from_secs(600);

/// How long a list is held before it is read whole again.
pub(crate) const HELD_TTL: Duration = Duration::from_secs(3600);

/// Most lists read whole at once, all accounts together.
pub(crate) const FILLS: usize = 2;

/// A read of one account's list under way: the changes seen meanwhile.
/// Those that wait for it hold a receiver of `done`, which goes with the
/// entry when the read ends, however it ends.
struct Filling {
    changes: Vec<(UserId, bool, i64)>,
    done: watch::Sender<()>,
}

type Fillings = HashMap<UserId, Filling, IdHasher>;

/// The notify followers lists this process holds.
pub struct NotifyCache {
    lists: moka::sync::Cache<UserId, Arc<RwLock<Members>>, IdHasher>,
    /// Accounts whose list is paged from PostgreSQL for now.
    paged: moka::sync::Cache<UserId, (), IdHasher>,
    filling: Mutex<Fillings>,
    /// Permits for reads of whole lists.
    fills: Arc<Semaphore>,
    /// Bumped whenever the lists are dropped: a read begun before must not
    /// keep what it read.
    generation: AtomicU64,
    listening: AtomicBool,
    /// Lists read whole, since the process started.
    reads: AtomicU64,
    room: u64,
    session: super::listener::Session,
}

/// What a first page found of its account's list.
enum Fill {
    /// Nobody reads it: this page does, with the permit.
    Read(OwnedSemaphorePermit),
    /// Another page reads it: this one waits until that read ends.
    Wait(watch::Receiver<()>),
    /// Reads of other lists hold every permit.
    Busy,
}

/// Ends one read of a list however it ends (also cancelled, with its
/// request): its entry goes, and those waiting for it are woken.
struct FillGuard<'a> {
    cache: &'a NotifyCache,
    account: UserId,
    /// Whether the entry is still the read's to remove.
    entry: bool,
    _permit: OwnedSemaphorePermit,
}

impl FillGuard<'_> {
    /// The read's entry, taken out of `filling` (held locked).
    fn take(&mut self, filling: &mut Fillings) -> Option<Filling> {
        std::mem::replace(&mut self.entry, false)
            .then(|| filling.remove(&self.account))
            .flatten()
    }
}

impl Drop for FillGuard<'_> {
    fn drop(&mut self) {
        if self.entry {
            self.cache.lock_filling().remove(&self.account);
        }
    }
}

impl NotifyCache {
    /// A cache holding up to `room` members of all lists together (0: off,
    /// every page read from PostgreSQL); its session goes to `database_url`.
    pub fn new(database_url: &str, room: u64) -> Arc<Self> {
        Arc::new(Self {
            lists: moka::sync::Cache::builder()
                .max_capacity(room.max(1))
                // A list of `room` members fits: it weighs `room`.
                .weigher(|_, members: &Arc<RwLock<Members>>| {
                    let n = members.read().map_or(0, |m| m.order.len());
                    u32::try_from(n.max(1)).unwrap_or(u32::MAX)
                })
                .time_to_live(HELD_TTL)
                .build_with_hasher(IdHasher::default()),
            paged: moka::sync::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(PAGED_TTL)
                .build_with_hasher(IdHasher::default()),
            filling: Mutex::new(HashMap::default()),
            fills: Arc::new(Semaphore::new(FILLS)),
            generation: AtomicU64::new(0),
            listening: AtomicBool::new(false),
            reads: AtomicU64::new(0),
            room,
            session: super::listener::Session::new(database_url, "kith-notify"),
        })
    }

    /// The `application_name` of the listening session (for operators and tests).
    pub fn session_name(&self) -> &str {
        self.session.name()
    }

    /// Starts the listening session, once.
    fn start(self: &Arc<Self>) {
        self.session.start(self);
    }

    fn lock_filling(&self) -> MutexGuard<'_, Fillings> {
        self.filling.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn clear(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.lists.invalidate_all();
        for f in self.lock_filling().values_mut() {
            f.changes.clear();
        }
    }

    /// True while the cache serves (its listening session is up); starts
    /// the session.
    pub fn is_serving(self: &Arc<Self>) -> bool {
        if self.room > 0 {
            self.start();
        }
        self.serving()
    }

    /// How many lists this process has read whole (for operators and tests).
    pub fn lists_read(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    fn serving(&self) -> bool {
        self.room > 0 && self.listening.load(Ordering::SeqCst)
    }

    /// One page of `account`'s notify followers, and how many there are
    /// (when `want_total`; else 0 when it would cost a count).
    pub(crate) async fn page(
        self: &Arc<Self>,
        pg: &PgPool,
        account: UserId,
        request: PageRequest,
        want_total: bool,
    ) -> Result<(Page, u64), ApiError> {
        if self.room > 0 {
            self.start();
        }
        let held = match self.lists.get(&account) {
            Some(members) => Some(members),
            None if self.serving() && !self.paged.contains_key(&account) => {
                self.fill_or_wait(pg, account).await
            }
            None => None,
        };
        if let Some(members) = held {
            let members = members.read().unwrap_or_else(|e| e.into_inner());
            return Ok((members.page(request), members.order.len() as u64));
        }
        let list = PrivateList::NotifyFollowers(account);
        let mut conn = pg.get().await?;
        let page = lists::private_page(&mut conn, list, request).await?;
        let total = if want_total {
            lists::private_count(&mut conn, list).await?
        } else {
            0
        };
        Ok((page, total))
    }

    /// `account`'s list, read whole by this page or by the one it waited
    /// for; `None`: this page is read from PostgreSQL.
    async fn fill_or_wait(&self, pg: &PgPool, account: UserId) -> Option<Arc<RwLock<Members>>> {
        let fill = {
            let mut filling = self.lock_filling();
            match filling.get(&account) {
                Some(f) => Fill::Wait(f.done.subscribe()),
                None => match self.fills.clone().try_acquire_owned() {
                    Ok(permit) => {
                        let done = watch::channel(()).0;
                        let changes = Vec::new();
                        filling.insert(account, Filling { changes, done });
                        Fill::Read(permit)
                    }
                    Err(_) => Fill::Busy,
                },
            }
        };
        match fill {
            Fill::Read(permit) => {
                let guard = FillGuard {
                    cache: self,
                    account,
                    entry: true,
                    _permit: permit,
                };
                self.fill(pg, guard).await
            }
            Fill::Wait(mut done) => {
                // The sender goes with the read's entry: `changed` errs then.
                let _ = done.changed().await;
                self.lists.get(&account)
            }
            Fill::Busy => None,
        }
    }

    /// Reads the list of `guard`'s account whole and keeps it, with the
    /// changes that came meanwhile on top; `None` when it is longer than
    /// the room or could not be read.
    async fn fill(&self, pg: &PgPool, mut guard: FillGuard<'_>) -> Option<Arc<RwLock<Members>>> {
        let account = guard.account;
        let seen = self.generation.load(Ordering::SeqCst);
        // The session may have stopped listening since the page looked,
        // and the lists been dropped before `seen` was read.
        if !self.serving() {
            return None;
        }
        self.reads.fetch_add(1, Ordering::Relaxed);
        let rows = match read_members(pg, account, self.room).await {
            Ok(Some(rows)) => rows,
            Ok(None) => {
                self.paged.insert(account, ());
                return None;
            }
            Err(error) => {
                tracing::warn!(%error, %account, "notify followers cache: a list could not be read whole; paging it from PostgreSQL");
                self.paged.insert(account, ());
                return None;
            }
        };
        // Under the lock notices take to find a list being read: each
        // change is either among those applied here or applied to the
        // list kept (or both: a change says what the pair is now).
        let mut filling = self.lock_filling();
        // Its `done` goes once the list is in: those waiting look then.
        let mut entry = guard.take(&mut filling);
        let changes = entry
            .as_mut()
            .map(|f| std::mem::take(&mut f.changes))
            .unwrap_or_default();
        let mut members = Members::default();
        for (follower, at_ms) in rows {
            members.apply(follower, true, at_ms);
        }
        for (follower, member, at_ms) in changes {
            members.apply(follower, member, at_ms);
        }
        let members = Arc::new(RwLock::new(members));
        // Kept only if nothing was dropped meanwhile (a lost session may
        // have lost a change this read did not see).
        let keep = self.generation.load(Ordering::SeqCst) == seen;
        if keep {
            self.lists.insert(account, members.clone());
        }
        drop(entry);
        drop(filling);
        drop(guard);
        if keep {
            // A list the cache turned away (its admission policy) is paged
            // for a while rather than read whole again on every page.
            self.lists.run_pending_tasks();
            if self.generation.load(Ordering::SeqCst) != seen {
                self.lists.invalidate(&account);
            } else if !self.lists.contains_key(&account) {
                self.paged.insert(account, ());
            }
        }
        Some(members)
    }
}

impl super::listener::Listening for NotifyCache {
    const CHANNEL_PREFIX: &'static str = CHANNEL_PREFIX;
    const NAME: &'static str = "notify followers cache";

    fn apply_notice(&self, payload: &str) {
        let Some(change) = Change::parse(payload) else {
            tracing::warn!(
                payload,
                "notify followers cache: a notice it cannot read; dropping every list"
            );
            self.clear();
            return;
        };
        if let Some(f) = self.lock_filling().get_mut(&change.account) {
            f.changes
                .push((change.follower, change.member, change.at_ms));
        }
        if let Some(members) = self.lists.get(&change.account) {
            let len = {
                let mut held = members.write().unwrap_or_else(|e| e.into_inner());
                held.apply(change.follower, change.member, change.at_ms);
                held.order.len() as u64
            };
            // The cache weighs a list when it is put in: one that grows is
            // put in again, and one grown past the room is let go, like
            // one read too long.
            if change.member && len > self.room {
                self.lists.invalidate(&change.account);
                self.paged.insert(change.account, ());
            } else if change.member {
                self.lists.insert(change.account, members);
            }
        }
    }

    fn set_listening(&self, on: bool) {
        self.listening.store(on, Ordering::SeqCst);
        self.clear();
    }
}

/// `account`'s notify followers, `(follower, followed_at_ms)`; `None` when
/// there are more than `room`.
async fn read_members(
    pg: &PgPool,
    account: UserId,
    room: u64,
) -> Result<Option<Vec<(UserId, i64)>>, ApiError> {
    #[derive(QueryableByName)]
    struct Row {
        #[diesel(sql_type = BigInt)]
        id: i64,
        #[diesel(sql_type = BigInt)]
        at_ms: i64,
    }
    let limit = i64::try_from(room).unwrap_or(i64::MAX).saturating_add(1);
    let mut conn = pg.get().await?;
    let rows: Vec<Row> = diesel_async::RunQueryDsl::load(
        diesel::sql_query(
            "SELECT from_user_id AS id, (extract(epoch FROM followed_at) * 1000)::BIGINT AS at_ms
               FROM following
              WHERE to_user_id = $1 AND active AND notify AND options_at = followed_at
                AND EXISTS (SELECT 1 FROM users u WHERE u.id = from_user_id AND u.status = 'active')
              LIMIT $2",
        )
        .bind::<BigInt, _>(account.get())
        .bind::<BigInt, _>(limit),
        &mut conn,
    )
    .await?;
    if rows.len() as u64 > room {
        return Ok(None);
    }
    Ok(Some(
        rows.into_iter()
            .filter_map(|r| Some((UserId::new(r.id)?, r.at_ms)))
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: i64) -> UserId {
        UserId::new(n).unwrap()
    }

    #[test]
    fn a_list_that_grows_is_weighed_again_and_let_go_past_the_room() {
        use super::super::listener::Listening as _;
        let cache = NotifyCache::new("postgres://unused", 3);
        let mut members = Members::default();
        members.apply(id(2), true, 10);
        cache.lists.insert(id(1), Arc::new(RwLock::new(members)));
        cache.lists.run_pending_tasks();
        assert_eq!(cache.lists.weighted_size(), 1);
        cache.apply_notice("1,3,1,11");
        cache.lists.run_pending_tasks();
        assert_eq!(cache.lists.weighted_size(), 2, "weighed again");
        cache.apply_notice("1,4,1,12");
        cache.lists.run_pending_tasks();
        assert_eq!(cache.lists.weighted_size(), 3, "the room's size fits");
        assert!(cache.lists.get(&id(1)).is_some());
        cache.apply_notice("1,5,1,13");
        cache.lists.run_pending_tasks();
        assert!(cache.lists.get(&id(1)).is_none(), "past the room");
        assert!(cache.paged.contains_key(&id(1)));
    }
}
