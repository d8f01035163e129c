//! The heads of lists read here lately, and which newcomers to warm.
//!
//! A list's first page shows its newest members: each one a user row this
//! process must hold (else reads it from PostgreSQL, on the read's path).
//! Most heads change slowly, and their members stay held. A list that
//! takes hundreds of new members a second — the new account of a move, a
//! celebrity's followers — shows members never read here on every page,
//! and the first read after each change went to PostgreSQL for them.
//!
//! So this process notes the lists whose first page was asked of it
//! lately, and how deep; when a projector's batch adds members to one of
//! them (told by the live updates' listener), the listener loads the rows
//! of the batch's newest arrivals at once, in the background — at most a
//! page of them per noted list and batch — so that the next read finds
//! them held. (An arrival with an old follow time, a restored follow, may
//! be loaded and not shown.)

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::model::{IdHasher, UserId};
use crate::paging::{ListKey, PageRequest};

/// How long a note lasts: a list counts as read here lately until this
/// long after its note was made or renewed.
pub(crate) const READ_LATELY: Duration = Duration::from_secs(60);

/// How old a note may grow before a read of the list renews it (to that
/// read's page): a list read all the time is written to the notes once in
/// this long, not at every read.
pub(crate) const RENEW_AFTER: Duration = Duration::from_secs(15);

/// Lists whose heads are noted at most (the least read leave first).
pub(crate) const CAPACITY: u64 = 10_000;

/// The lists whose first page was asked of this process lately: each with
/// the largest such page since its note was made or renewed, and when
/// that was.
pub(crate) struct RecentHeads {
    notes: moka::sync::Cache<ListKey, (usize, Instant), IdHasher>,
    /// One warming at a time: one that PostgreSQL holds up is not joined by
    /// the next batch's, ahead of the reads, on the shared pool.
    warming: Arc<tokio::sync::Semaphore>,
}

impl Default for RecentHeads {
    fn default() -> Self {
        Self {
            notes: moka::sync::Cache::builder()
                .max_capacity(CAPACITY)
                .time_to_live(READ_LATELY)
                .build_with_hasher(IdHasher::default()),
            warming: Arc::new(tokio::sync::Semaphore::new(1)),
        }
    }
}

impl RecentHeads {
    /// Notes that `request` of `list` was asked for, if it is a first
    /// page. (Two reads at once may note the smaller page: a note is a
    /// hint.)
    pub(crate) fn asked(&self, list: ListKey, request: PageRequest) {
        let size = match request {
            PageRequest::After(None, n) | PageRequest::Offset(0, n) => n,
            _ => return,
        };
        if size == 0 {
            return;
        }
        match self.notes.get(&list) {
            Some((held, at)) if at.elapsed() <= RENEW_AFTER => {
                if held < size {
                    self.notes.insert(list, (size, at));
                }
            }
            // New, or old enough to be renewed: as this read's page.
            _ => self.notes.insert(list, (size, Instant::now())),
        }
    }

    /// Of `changes` — a list, a member whose edge in it changed, its
    /// follow time (ms), whether it is in the list now; in the order they
    /// happened — the newest arrivals to the lists read lately: for each
    /// such list, the members in it after their last change, newest first
    /// (ties as a page orders them, larger id first), as many as its noted
    /// page.
    pub(crate) fn newcomers(
        &self,
        changes: impl IntoIterator<Item = (ListKey, UserId, i64, bool)>,
    ) -> Vec<UserId> {
        let mut sizes: HashMap<ListKey, Option<usize>> = HashMap::new();
        let mut last: HashMap<(ListKey, UserId), (i64, bool)> = HashMap::new();
        for (list, member, at_ms, active) in changes {
            let size = *sizes
                .entry(list)
                .or_insert_with(|| self.notes.get(&list).map(|(size, _)| size));
            if size.is_some() {
                last.insert((list, member), (at_ms, active));
            }
        }
        let mut arrived: HashMap<ListKey, Vec<(i64, UserId)>> = HashMap::new();
        for ((list, member), (at_ms, active)) in last {
            if active {
                arrived.entry(list).or_default().push((at_ms, member));
            }
        }
        let mut members: Vec<UserId> = arrived
            .into_iter()
            .flat_map(|(list, mut members)| {
                members.sort_unstable_by(|a, b| b.cmp(a));
                let size = sizes.get(&list).copied().flatten().unwrap_or(0);
                members.into_iter().take(size).map(|(_, member)| member)
            })
            .collect();
        members.sort_unstable();
        members.dedup();
        members
    }

    /// Leave to warm newcomers, unless a warming runs already.
    pub(crate) fn warming(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.warming.clone().try_acquire_owned().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(n: i64) -> UserId {
        UserId::new(n).unwrap()
    }

    #[test]
    fn newcomers_are_the_newest_still_in_lists_read_lately_as_deep_as_their_page() {
        let heads = RecentHeads::default();
        let (star, quiet, paged) = (user(1), user(2), user(3));
        let followers = ListKey::Followers(star);
        heads.asked(followers, PageRequest::After(None, 3));
        // A smaller page later does not make the noted one smaller.
        heads.asked(followers, PageRequest::After(None, 1));
        heads.asked(ListKey::Following(star), PageRequest::Offset(0, 5));
        // Not first pages: nothing noted.
        heads.asked(ListKey::Followers(paged), PageRequest::Offset(3, 5));
        heads.asked(ListKey::Followers(paged), PageRequest::Before(None, 5));
        let changes = [
            (followers, user(10), 100, true),
            (followers, user(11), 300, true),
            // A tie: the larger id comes first, as on a page.
            (followers, user(12), 200, true),
            (followers, user(13), 200, true),
            // Came and went: not in the list.
            (followers, user(14), 500, true),
            (followers, user(14), 500, false),
            // Came twice: one place.
            (followers, user(15), 50, true),
            (followers, user(15), 400, true),
            (ListKey::Followers(quiet), user(20), 600, true),
            (ListKey::Followers(paged), user(30), 600, true),
            (ListKey::Following(star), user(40), 10, true),
        ];
        // The three newest of the star's followers, and whom the star now
        // follows; nobody of the lists no first page was served of.
        assert_eq!(
            heads.newcomers(changes),
            vec![user(11), user(13), user(15), user(40)]
        );
    }
}
