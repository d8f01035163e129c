//! The heads of lists read here lately, and the rows (and counter records)
//! to load before a change reaches them.
//!
//! A list's first page shows its newest members: each one a user row this
//! process must hold, or read from PostgreSQL on the read's path. Most
//! heads change slowly and their members stay held. A move changes two
//! heads by the hundred members a second: the new account's list takes
//! followers never read here, and the old account's loses members, so
//! followers deeper in it rise into its first page.
//!
//! So this process notes the lists whose first page it served in the last
//! minute, and how deep. A move's runner tells every process of each
//! batch as it commits, before the pipeline brings the batch to the caches
//! ([`crate::live::announce`]); a process that noted one of the lists then
//! loads, in the background, the rows it lacks of the members that list's
//! first page is about to show ([`Coming`]): the arrivals (the pipeline
//! brings a batch to the caches in several trips, so any of them may head
//! the list for a while), and for a list that more members leave than
//! join, its cached head as deep as its page plus as many more as leave
//! (and of those rising, the counter records Redis lacks: the pipeline
//! writes none for members whose edges did not change). A read that comes
//! after finds them held.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::model::{IdHasher, UserId};
use crate::paging::{ListKey, PageRequest};

/// How long a list counts as read here after its first page was served
/// (its note is renewed every [`RENEW_AFTER`] at most, so a list read all
/// the time stays noted).
const READ_LATELY: Duration = Duration::from_secs(60);

/// How old a note may grow before a read of the list renews it: a list
/// read all the time is written to the notes once in this long, not at
/// every read.
const RENEW_AFTER: Duration = Duration::from_secs(15);

/// Lists whose heads are noted at most (the least read leave first).
const CAPACITY: u64 = 10_000;

/// Arrivals to one list whose rows are loaded at most, the newest first.
/// Not just a page of them: the pipeline brings a batch to the caches in
/// several trips, and a read between two shows the newest of those applied
/// so far. A move's batch (200 followers at most) fits.
const ARRIVALS: usize = 1_000;

/// One change a batch makes to a list, as [`RecentHeads::coming`] takes it:
/// the list, the member whose edge changed, its follow time (ms), and
/// whether the member is in the list after it.
pub(crate) type Change = (ListKey, UserId, i64, bool);

/// The lists whose first page this process served lately: each with the
/// largest such page, and when it was noted.
pub(crate) struct RecentHeads {
    notes: moka::sync::Cache<ListKey, (usize, Instant), IdHasher>,
    /// One load at a time: one that PostgreSQL holds up is not joined by
    /// the next batch's, ahead of the reads, on the shared pool.
    loading: Arc<tokio::sync::Semaphore>,
}

impl Default for RecentHeads {
    fn default() -> Self {
        Self {
            notes: moka::sync::Cache::builder()
                .max_capacity(CAPACITY)
                .time_to_live(READ_LATELY)
                .build_with_hasher(IdHasher::default()),
            loading: Arc::new(tokio::sync::Semaphore::new(1)),
        }
    }
}

/// What a batch is about to change of the heads read here lately.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Coming {
    /// Members about to arrive at a head read here lately: the newest
    /// [`ARRIVALS`] of each list.
    pub arriving: Vec<UserId>,
    /// Lists that more members are about to leave than join, each with how
    /// deep to read its head for the members rising into its first page.
    pub thinning: Vec<(ListKey, usize)>,
}

impl RecentHeads {
    /// Notes that `request` of `list` was served, if it is a first page.
    pub(crate) fn served(&self, list: ListKey, request: PageRequest) {
        let size = match request {
            PageRequest::After(None, n) | PageRequest::Offset(0, n) => n,
            _ => return,
        };
        let noted = self.notes.get(&list);
        let stale = noted.is_none_or(|(held, at)| held < size || at.elapsed() > RENEW_AFTER);
        if size > 0 && stale {
            let size = noted.map_or(size, |(held, _)| held.max(size));
            self.notes.insert(list, (size, Instant::now()));
        }
    }

    /// Leave to load coming rows, unless a load runs already.
    pub(crate) fn loading(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.loading.clone().try_acquire_owned().ok()
    }

    /// What `changes` (in the order they happen) do to the heads read here
    /// lately. Arriving: the members in a noted list after their last
    /// change, newest first (ties as a page orders them, larger id first),
    /// [`ARRIVALS`] of each list at most. Thinning: each noted list more
    /// members leave than arrive, read as deep as its page plus as many
    /// more as leave, at most twice its page.
    pub(crate) fn coming(&self, changes: impl IntoIterator<Item = Change>) -> Coming {
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
        let mut leaving: HashMap<ListKey, usize> = HashMap::new();
        for ((list, member), (at_ms, active)) in last {
            if active {
                arrived.entry(list).or_default().push((at_ms, member));
            } else {
                *leaving.entry(list).or_default() += 1;
            }
        }
        let size = |list: &ListKey| sizes.get(list).copied().flatten().unwrap_or(0);
        // Members rise into a page only when more leave it than arrive (a
        // move's follower, who follows the new account as it unfollows the
        // old, sees nobody rise into whom it follows). This holds for
        // arrivals at the head, as a move's follows are (made now); only
        // moves announce their batches.
        let mut thinning: Vec<(ListKey, usize)> = leaving
            .into_iter()
            .filter_map(|(list, n)| {
                let net = n.saturating_sub(arrived.get(&list).map_or(0, Vec::len));
                (net > 0).then(|| (list, size(&list) + net.min(size(&list))))
            })
            .collect();
        thinning.sort_unstable_by_key(|(list, _)| *list);
        let mut arriving: Vec<UserId> = arrived
            .into_values()
            .flat_map(|mut members| {
                members.sort_unstable_by(|a, b| b.cmp(a));
                members.into_iter().take(ARRIVALS).map(|(_, m)| m)
            })
            .collect();
        arriving.sort_unstable();
        arriving.dedup();
        Coming { arriving, thinning }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(n: i64) -> UserId {
        UserId::new(n).unwrap()
    }

    #[test]
    fn coming_are_the_arrivals_and_the_heads_that_thin_as_deep_as_their_page() {
        let heads = RecentHeads::default();
        let (star, quiet, paged, old) = (user(1), user(2), user(3), user(4));
        let followers = ListKey::Followers(star);
        heads.served(followers, PageRequest::After(None, 3));
        // A smaller page later does not make the noted one smaller.
        heads.served(followers, PageRequest::After(None, 1));
        heads.served(ListKey::Following(star), PageRequest::Offset(0, 5));
        heads.served(ListKey::Followers(old), PageRequest::After(None, 2));
        heads.served(ListKey::Following(old), PageRequest::After(None, 3));
        // Not first pages: nothing noted.
        heads.served(ListKey::Followers(paged), PageRequest::Offset(3, 5));
        heads.served(ListKey::Followers(paged), PageRequest::Before(None, 5));
        let changes = [
            (followers, user(10), 100, true),
            (followers, user(11), 300, true),
            (followers, user(12), 200, true),
            (followers, user(13), 200, true),
            // Came and went: not in the list, and leaving it.
            (followers, user(14), 500, true),
            (followers, user(14), 500, false),
            // Came twice: one place.
            (followers, user(15), 50, true),
            (followers, user(15), 400, true),
            (ListKey::Followers(quiet), user(20), 600, true),
            (ListKey::Followers(quiet), user(21), 600, false),
            (ListKey::Followers(paged), user(30), 600, true),
            (ListKey::Following(star), user(40), 10, true),
            // One leaves whom the star follows as one arrives: nobody rises.
            (ListKey::Following(star), user(41), 10, false),
            // Three leave and one joins a head of three: read it two deeper.
            (ListKey::Following(old), user(60), 10, false),
            (ListKey::Following(old), user(61), 10, false),
            (ListKey::Following(old), user(62), 10, false),
            (ListKey::Following(old), user(63), 10, true),
            // Three leave a head of two: read it twice as deep at most.
            (ListKey::Followers(old), user(50), 10, false),
            (ListKey::Followers(old), user(51), 10, false),
            (ListKey::Followers(old), user(52), 10, false),
        ];
        // Every newcomer to the star's followers and to whom the star
        // follows; nobody of the lists no first page was served of.
        assert_eq!(
            heads.coming(changes),
            Coming {
                arriving: vec![
                    user(10),
                    user(11),
                    user(12),
                    user(13),
                    user(15),
                    user(40),
                    user(63)
                ],
                // The star's followers lose one and gain five: none rise.
                thinning: vec![(ListKey::Following(old), 5), (ListKey::Followers(old), 4)],
            }
        );
        // Past ARRIVALS, the newest; a tie as a page orders it, larger id
        // first.
        let crowd = (1_000..1_000 + ARRIVALS as i64 + 5).map(|n| (followers, user(n), 7, true));
        let arriving = heads.coming(crowd).arriving;
        assert_eq!(arriving.len(), ARRIVALS);
        assert_eq!(arriving.first(), Some(&user(1_005)));
    }
}
