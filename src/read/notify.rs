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
//! changes nothing). A list longer than the cache's room
//! (`KITH_NOTIFY_CACHE_MEMBERS`) is paged from PostgreSQL as well.

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once, RwLock};
use std::time::Duration;

use diesel::QueryableByName;
use diesel::sql_types::BigInt;

use crate::error::ApiError;
use crate::model::{IdHasher, UserId};
use crate::paging::{Page, PageRequest, Position, PrivateList};
use crate::store::{PgPool, lists};

/// The notification channel of `following`'s notify trigger, before the
/// schema name.
const CHANNEL_PREFIX: &str = "kith_notify_";

/// How long a list found longer than the cache's room is paged from
/// PostgreSQL before it is read whole again.
const TOO_LONG_TTL: Duration = Duration::from_secs(600);

/// One account's notify followers, by follow time and by follower.
#[derive(Default)]
struct Members {
    /// Oldest first: `(followed_at_ms, follower)`.
    order: BTreeSet<(i64, UserId)>,
    at: HashMap<UserId, i64, IdHasher>,
}

impl Members {
    /// The pair is now `member` (or not), followed at `at_ms`.
    fn apply(&mut self, follower: UserId, member: bool, at_ms: i64) {
        if let Some(old) = self.at.remove(&follower) {
            self.order.remove(&(old, follower));
        }
        if member {
            self.at.insert(follower, at_ms);
            self.order.insert((at_ms, follower));
        }
    }

    /// The page `request` asks, newest first, as [`crate::paging::page_of`]
    /// would cut it from the whole list.
    fn page(&self, request: PageRequest) -> Page {
        let key = |p: &Position| (p.followed_at_ms, p.user);
        let position = |&(followed_at_ms, user): &(i64, UserId)| Position {
            followed_at_ms,
            user,
        };
        let cut = |mut items: Vec<Position>, n: usize| {
            let more = items.len() > n;
            items.truncate(n);
            (items, more)
        };
        match request {
            PageRequest::After(cursor, n) => {
                let older: Vec<Position> = match cursor {
                    Some(c) => self
                        .order
                        .range(..key(&c))
                        .rev()
                        .take(n + 1)
                        .map(position)
                        .collect(),
                    None => self.order.iter().rev().take(n + 1).map(position).collect(),
                };
                let (items, more) = cut(older, n);
                let other = cursor.is_some_and(|c| self.order.range(key(&c)..).next().is_some());
                Page { items, more, other }
            }
            PageRequest::Before(cursor, n) => {
                let newer: Vec<Position> = match cursor {
                    Some(c) => self
                        .order
                        .range((Bound::Excluded(key(&c)), Bound::Unbounded))
                        .take(n + 1)
                        .map(position)
                        .collect(),
                    None => self.order.iter().take(n + 1).map(position).collect(),
                };
                let (mut items, more) = cut(newer, n);
                items.reverse();
                let other = cursor.is_some_and(|c| self.order.range(..=key(&c)).next().is_some());
                Page { items, more, other }
            }
            PageRequest::Offset(offset, n) => {
                let from: Vec<Position> = self
                    .order
                    .iter()
                    .rev()
                    .skip(offset)
                    .take(n + 1)
                    .map(position)
                    .collect();
                let (items, more) = cut(from, n);
                Page {
                    items,
                    more,
                    other: offset > 0 && !self.order.is_empty(),
                }
            }
        }
    }
}

/// One change a notice carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Change {
    account: UserId,
    follower: UserId,
    member: bool,
    at_ms: i64,
}

impl Change {
    /// `account,follower,member,followed_at_ms`.
    fn parse(payload: &str) -> Option<Self> {
        let mut parts = payload.split(',');
        let mut id = || parts.next()?.trim().parse::<i64>().ok();
        let (account, follower, member, at_ms) = (id()?, id()?, id()?, id()?);
        Some(Self {
            account: UserId::new(account)?,
            follower: UserId::new(follower)?,
            member: member == 1,
            at_ms,
        })
    }
}

/// The changes seen while an account's list is being read.
#[derive(Default)]
struct Filling {
    readers: usize,
    changes: Vec<(UserId, bool, i64)>,
}

/// The notify followers lists this process holds.
pub struct NotifyCache {
    lists: moka::sync::Cache<UserId, Arc<RwLock<Members>>, IdHasher>,
    /// Accounts whose list was longer than the room: paged from PostgreSQL.
    too_long: moka::sync::Cache<UserId, (), IdHasher>,
    filling: Mutex<HashMap<UserId, Filling, IdHasher>>,
    /// Bumped whenever the lists are dropped: a read begun before must not
    /// keep what it read.
    generation: AtomicU64,
    listening: AtomicBool,
    room: u64,
    started: Once,
    database_url: String,
    session_name: String,
}

impl NotifyCache {
    /// A cache holding up to `room` members of all lists together (0: off,
    /// every page read from PostgreSQL); its session goes to `database_url`.
    pub fn new(database_url: &str, room: u64) -> Arc<Self> {
        Arc::new(Self {
            lists: moka::sync::Cache::builder()
                .max_capacity(room.max(1))
                .weigher(|_, members: &Arc<RwLock<Members>>| {
                    let n = members.read().map_or(0, |m| m.order.len());
                    u32::try_from(n + 1).unwrap_or(u32::MAX)
                })
                .build_with_hasher(IdHasher::default()),
            too_long: moka::sync::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(TOO_LONG_TTL)
                .build_with_hasher(IdHasher::default()),
            filling: Mutex::new(HashMap::default()),
            generation: AtomicU64::new(0),
            listening: AtomicBool::new(false),
            room,
            started: Once::new(),
            database_url: database_url.to_owned(),
            session_name: format!("kith-notify-{}", uuid::Uuid::new_v4().simple()),
        })
    }

    /// The `application_name` of the listening session (for operators and tests).
    pub fn session_name(&self) -> &str {
        &self.session_name
    }

    /// Starts the listening session, once.
    fn start(self: &Arc<Self>) {
        self.started.call_once(|| {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let url = crate::store::pool::with_setting(
                    &self.database_url,
                    "application_name",
                    &self.session_name,
                );
                runtime.spawn(super::listener::listen(Arc::downgrade(self), url));
            }
        });
    }

    fn clear(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.lists.invalidate_all();
        let mut filling = self.filling.lock().unwrap_or_else(|e| e.into_inner());
        for f in filling.values_mut() {
            f.changes.clear();
        }
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
        if let Some(members) = self.lists.get(&account) {
            let members = members.read().unwrap_or_else(|e| e.into_inner());
            return Ok((members.page(request), members.order.len() as u64));
        }
        let serving = self.room > 0 && self.listening.load(Ordering::SeqCst);
        if serving
            && !self.too_long.contains_key(&account)
            && let Some(members) = self.fill(pg, account).await?
        {
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

    /// Reads `account`'s list whole and keeps it, with the changes that
    /// came meanwhile on top; `None` when it is longer than the room.
    async fn fill(
        &self,
        pg: &PgPool,
        account: UserId,
    ) -> Result<Option<Arc<RwLock<Members>>>, ApiError> {
        let seen = self.generation.load(Ordering::SeqCst);
        self.filling
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(account)
            .or_default()
            .readers += 1;
        let read = read_members(pg, account, self.room).await;
        // Under the lock notices take to find a list being read: each
        // change is either among those applied here or applied to the
        // list kept (or both: a change says what the pair is now).
        let mut filling = self.filling.lock().unwrap_or_else(|e| e.into_inner());
        let entry = filling.entry(account).or_default();
        entry.readers -= 1;
        let changes = if entry.readers == 0 {
            filling
                .remove(&account)
                .map(|f| f.changes)
                .unwrap_or_default()
        } else {
            entry.changes.clone()
        };
        let Some(rows) = read? else {
            self.too_long.insert(account, ());
            return Ok(None);
        };
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
        if self.generation.load(Ordering::SeqCst) == seen {
            self.lists.insert(account, members.clone());
            if self.generation.load(Ordering::SeqCst) != seen {
                self.lists.invalidate(&account);
            }
        }
        drop(filling);
        Ok(Some(members))
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
        if let Some(f) = self
            .filling
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&change.account)
        {
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
                self.too_long.insert(change.account, ());
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
    use crate::paging::page_of;

    fn id(n: i64) -> UserId {
        UserId::new(n).unwrap()
    }

    #[test]
    fn pages_are_cut_as_from_the_whole_list() {
        let mut members = Members::default();
        for n in 1..=9 {
            members.apply(id(n), true, 1000 + (n / 2));
        }
        members.apply(id(4), false, 0);
        members.apply(id(7), true, 5000);
        let whole: Vec<Position> = members
            .order
            .iter()
            .rev()
            .map(|&(followed_at_ms, user)| Position {
                followed_at_ms,
                user,
            })
            .collect();
        assert_eq!(whole.len(), 8);
        assert_eq!(whole[0].user, id(7));
        let mut requests = vec![];
        for n in [1, 3, 8, 20] {
            requests.push(PageRequest::After(None, n));
            requests.push(PageRequest::Before(None, n));
            for offset in [0, 2, 7, 9] {
                requests.push(PageRequest::Offset(offset, n));
            }
            for c in &whole {
                requests.push(PageRequest::After(Some(*c), n));
                requests.push(PageRequest::Before(Some(*c), n));
            }
            // A cursor whose member has left the list since.
            let gone = Position {
                followed_at_ms: 1002,
                user: id(4),
            };
            requests.push(PageRequest::After(Some(gone), n));
            requests.push(PageRequest::Before(Some(gone), n));
        }
        for request in requests {
            assert_eq!(
                members.page(request),
                page_of(&whole, request),
                "{request:?}"
            );
        }
    }

    #[test]
    fn a_list_that_grows_is_weighed_again_and_let_go_past_the_room() {
        use super::super::listener::Listening as _;
        let cache = NotifyCache::new("postgres://unused", 3);
        let mut members = Members::default();
        members.apply(id(2), true, 10);
        cache.lists.insert(id(1), Arc::new(RwLock::new(members)));
        cache.lists.run_pending_tasks();
        assert_eq!(cache.lists.weighted_size(), 2);
        cache.apply_notice("1,3,1,11");
        cache.lists.run_pending_tasks();
        assert_eq!(cache.lists.weighted_size(), 3, "weighed again");
        cache.apply_notice("1,4,1,12");
        cache.apply_notice("1,5,1,13");
        cache.lists.run_pending_tasks();
        assert!(cache.lists.get(&id(1)).is_none(), "past the room");
        assert!(cache.too_long.contains_key(&id(1)));
    }

    #[test]
    fn a_notice_says_what_the_pair_is_now() {
        assert_eq!(
            Change::parse("12,34,1,1700000000123"),
            Some(Change {
                account: id(12),
                follower: id(34),
                member: true,
                at_ms: 1_700_000_000_123,
            })
        );
        assert_eq!(Change::parse("12,34,0,5").map(|c| c.member), Some(false));
        assert_eq!(Change::parse("12,34"), None);
        assert_eq!(Change::parse("*"), None);
        let mut members = Members::default();
        members.apply(id(1), true, 10);
        members.apply(id(1), true, 10);
        members.apply(id(1), true, 20);
        assert_eq!(members.order.len(), 1);
        members.apply(id(1), false, 20);
        members.apply(id(1), false, 20);
        assert!(members.order.is_empty() && members.at.is_empty());
    }
}
