//! Which lists this process holds hot: their newest edges kept in process
//! ([`super::pages`]) so that the reads of their first pages ask Redis for
//! nothing but the counters.
//!
//! A list is hot when it is large (`KITH_HOT_FOLLOWERS`) or when its first
//! pages are read here often (`KITH_HOT_READS_PER_SEC`). Size alone loses
//! the lists that need it most when they change: an account moving its
//! followers away drops below any size while its profile is read as
//! often as before, and the account it moves to rises past it only at the
//! end. Reads are what a held page saves, so reads are what is counted:
//! the first-page reads of each list, a second at a time. A list stays hot
//! for [`HELD_FOR`] after the last second whose reads reached the rate, so
//! that a dip in its reads does not drop it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::model::IdHasher;
use crate::paging::ListKey;

/// The window reads are counted in.
const WINDOW: Duration = Duration::from_secs(1);

/// How long a list stays hot after a window whose reads reached the rate.
pub(crate) const HELD_FOR: Duration = Duration::from_secs(10);

/// Lists whose reads are counted at most (the least read leave first).
const CAPACITY: u64 = 10_000;

/// A list not read (nor asked about) for this long is forgotten; longer
/// than [`HELD_FOR`], so that a hot list is not forgotten while it is hot.
const IDLE: Duration = Duration::from_secs(60);

/// The first-page reads of each list, in the running second, and until
/// when each is hot.
pub(crate) struct ReadRates {
    /// Reads a second from which a list is hot (0: never by reads).
    per_sec: u32,
    counts: moka::sync::Cache<ListKey, Arc<Mutex<Count>>, IdHasher>,
}

/// One list's reads: the running window's start and count, and until when
/// the list is hot.
#[derive(Clone, Copy, Debug)]
struct Count {
    since: Instant,
    reads: u32,
    hot_until: Option<Instant>,
}

impl ReadRates {
    /// Counts reads for lists read `per_sec` times a second or more.
    pub(crate) fn new(per_sec: u32) -> Self {
        Self {
            per_sec,
            counts: moka::sync::Cache::builder()
                .max_capacity(CAPACITY)
                .time_to_idle(IDLE)
                .build_with_hasher(IdHasher::default()),
        }
    }

    /// Counts a read of `list`'s first pages.
    pub(crate) fn read(&self, list: ListKey) {
        self.read_at(list, Instant::now());
    }

    fn read_at(&self, list: ListKey, at: Instant) {
        if self.per_sec == 0 {
            return;
        }
        let count = self.counts.get_with(list, || {
            Arc::new(Mutex::new(Count {
                since: at,
                reads: 0,
                hot_until: None,
            }))
        });
        let mut count = count.lock().expect("read count lock");
        if at.saturating_duration_since(count.since) >= WINDOW {
            count.since = at;
            count.reads = 0;
        }
        count.reads = count.reads.saturating_add(1);
        if count.reads >= self.per_sec {
            count.hot_until = Some(at + HELD_FOR);
        }
    }

    /// Whether `list`'s first pages are read often here: within
    /// [`HELD_FOR`] of a second in which they were read
    /// `KITH_HOT_READS_PER_SEC` times.
    pub(crate) fn often(&self, list: &ListKey) -> bool {
        self.often_at(list, Instant::now())
    }

    fn often_at(&self, list: &ListKey, at: Instant) -> bool {
        self.counts.get(list).is_some_and(|count| {
            let count = count.lock().expect("read count lock");
            count.hot_until.is_some_and(|until| at < until)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::UserId;

    fn list(id: i64) -> ListKey {
        ListKey::Followers(UserId::new(id).expect("positive"))
    }

    #[test]
    fn a_list_is_hot_from_its_nth_read_in_a_second_and_stays_hot_a_while() {
        let rates = ReadRates::new(3);
        let list = list(7);
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        rates.read_at(list, t0);
        rates.read_at(list, ms(100));
        assert!(!rates.often_at(&list, ms(150)), "two reads");
        rates.read_at(list, ms(200));
        assert!(rates.often_at(&list, ms(200)), "the third read in a second");
        // Reads spread thinner than the rate: hot on the strength of the
        // second that reached it, until that has been held for HELD_FOR.
        for n in 1..10 {
            rates.read_at(list, ms(200 + 1_100 * n));
        }
        assert!(rates.often_at(&list, ms(200) + HELD_FOR - Duration::from_millis(1)));
        assert!(!rates.often_at(&list, ms(200) + HELD_FOR));
        // Three reads in a second again: hot again.
        let later = ms(200) + HELD_FOR;
        for n in 0..3 {
            rates.read_at(list, later + Duration::from_millis(n * 300));
        }
        assert!(rates.often_at(&list, later + Duration::from_millis(600)));
        // Three reads across two windows are not three in a second.
        let other = ListKey::Following(list.owner());
        rates.read_at(other, t0);
        rates.read_at(other, ms(900));
        rates.read_at(other, ms(1_000));
        assert!(!rates.often_at(&other, ms(1_000)), "another list");
    }

    #[test]
    fn no_list_is_hot_by_reads_when_the_rate_is_zero() {
        let rates = ReadRates::new(0);
        let list = list(7);
        let t0 = Instant::now();
        for i in 0..100 {
            rates.read_at(list, t0 + Duration::from_millis(i));
        }
        assert!(!rates.often(&list));
    }
}
