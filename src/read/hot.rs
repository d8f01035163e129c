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
//! the first-page reads of each list, a second at a time, and a list stays
//! hot while either the second running or the one before it reached the
//! rate.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::model::IdHasher;
use crate::paging::ListKey;

/// The window reads are counted in.
const WINDOW: Duration = Duration::from_secs(1);

/// Lists whose reads are counted at most (the least read leave first).
const CAPACITY: u64 = 10_000;

/// A list not read for this long is forgotten.
const IDLE: Duration = Duration::from_secs(10);

/// First-page reads of each list, in the running second and the one before.
pub(crate) struct ReadRates {
    /// Reads a second from which a list is hot (0: never by reads).
    per_sec: u32,
    counts: moka::sync::Cache<ListKey, Arc<Mutex<Count>>, IdHasher>,
}

/// One list's reads: the running window's start and count, and the count
/// of the window just before it.
#[derive(Clone, Copy, Debug)]
struct Count {
    since: Instant,
    now: u32,
    before: u32,
}

impl Count {
    /// Moves the windows on to the one `at` falls in (windows follow each
    /// other from the first read); a window that passed unread counts 0.
    fn advance(&mut self, at: Instant) {
        let passed = at.saturating_duration_since(self.since);
        let windows = passed.as_nanos() / WINDOW.as_nanos();
        if windows == 0 {
            return;
        }
        self.before = if windows == 1 { self.now } else { 0 };
        self.now = 0;
        self.since += WINDOW * u32::try_from(windows).unwrap_or(u32::MAX);
    }
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

    /// Counts a read of `list`'s first page; whether the list is read
    /// often, this read included.
    pub(crate) fn read(&self, list: ListKey) -> bool {
        self.read_at(list, Instant::now())
    }

    fn read_at(&self, list: ListKey, at: Instant) -> bool {
        if self.per_sec == 0 {
            return false;
        }
        let count = self.counts.get_with(list, || {
            Arc::new(Mutex::new(Count {
                since: at,
                now: 0,
                before: 0,
            }))
        });
        let mut count = count.lock().expect("read count lock");
        count.advance(at);
        count.now = count.now.saturating_add(1);
        count.now.max(count.before) >= self.per_sec
    }

    /// Whether `list`'s first pages are read often here: `KITH_HOT_READS_PER_SEC`
    /// times in the running second or in the one before it.
    pub(crate) fn often(&self, list: &ListKey) -> bool {
        self.often_at(list, Instant::now())
    }

    fn often_at(&self, list: &ListKey, at: Instant) -> bool {
        if self.per_sec == 0 {
            return false;
        }
        self.counts.get(list).is_some_and(|count| {
            let mut count = count.lock().expect("read count lock");
            count.advance(at);
            count.now.max(count.before) >= self.per_sec
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
    fn a_list_is_hot_from_its_nth_read_in_a_second_and_for_the_second_after() {
        let rates = ReadRates::new(3);
        let list = list(7);
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        assert!(!rates.read_at(list, t0));
        assert!(!rates.read_at(list, ms(100)));
        assert!(!rates.often_at(&list, ms(150)));
        assert!(rates.read_at(list, ms(200)), "the third read in a second");
        assert!(rates.often_at(&list, ms(900)));
        // The next second: hot on the strength of the last, unread or not.
        assert!(rates.often_at(&list, ms(1_500)));
        assert!(rates.read_at(list, ms(1_600)));
        // A second with one read after a second with one: cold.
        assert!(!rates.often_at(&list, ms(2_100)));
        assert!(!rates.read_at(list, ms(2_200)));
        // A whole second unread, then a read: the counts start again.
        assert!(!rates.read_at(list, ms(5_000)));
        assert!(
            !rates.often(&ListKey::Following(list.owner())),
            "another list"
        );
    }

    #[test]
    fn no_list_is_hot_by_reads_when_the_rate_is_zero() {
        let rates = ReadRates::new(0);
        let list = list(7);
        let t0 = Instant::now();
        for i in 0..100 {
            assert!(!rates.read_at(list, t0 + Duration::from_millis(i)));
        }
        assert!(!rates.often(&list));
    }
}
