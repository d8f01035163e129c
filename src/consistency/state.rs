//! What the consistency checks hold in process: the sampled check's memory
//! of whom it checked lately ([`crate::consistency::sampled`] runs it).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::model::{IdHasher, UserId};

/// Checks running at once in one process; more are skipped (and done later).
const CONCURRENT: usize = 2;

/// Per-process state of the sampled check.
pub struct SampledCheck {
    /// Users this process marked recently: no Redis round trip for them.
    recent: moka::sync::Cache<UserId, (), IdHasher>,
    running: Arc<Semaphore>,
    interval: Duration,
}

impl SampledCheck {
    /// The check `KITH_COUNTER_CHECK_INTERVAL_SECS` configures.
    pub(crate) fn from_config(config: &crate::config::Config) -> Self {
        Self::new(Duration::from_secs(
            config.consistency.counter_check_interval_secs,
        ))
    }

    /// A check of each user at most once per `interval` (zero: never).
    pub fn new(interval: Duration) -> Self {
        Self {
            recent: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(interval.max(Duration::from_secs(1)))
                .build_with_hasher(IdHasher::default()),
            running: Arc::new(Semaphore::new(CONCURRENT)),
            interval,
        }
    }

    /// The users among `users` this process has not checked within the
    /// interval, marked as checked now, with the permit to check them in
    /// the background; `None` when none is due or enough checks run.
    pub fn due(&self, users: &[UserId]) -> Option<(Vec<UserId>, OwnedSemaphorePermit)> {
        if self.interval.is_zero() {
            return None;
        }
        let due: Vec<UserId> = users
            .iter()
            .copied()
            .filter(|u| !self.recent.contains_key(u))
            .collect();
        if due.is_empty() {
            return None;
        }
        let permit = self.running.clone().try_acquire_owned().ok()?;
        for user in &due {
            self.recent.insert(*user, ());
        }
        Some((due, permit))
    }

    /// How often one user is checked at most.
    pub fn interval(&self) -> Duration {
        self.interval
    }
}
