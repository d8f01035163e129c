//! The read model behind the GraphQL types: user rows (held in process),
//! list pages, counters and relationships (caches first, then PostgreSQL),
//! batched per request.

pub(crate) mod batch;
pub(crate) mod boundaries;
pub(crate) mod counters;
pub(crate) mod filtered;
pub(crate) mod heads;
pub(crate) mod intersect;
pub(crate) mod listener;
pub(crate) mod notify;
pub(crate) mod pages;
pub(crate) mod private;
pub(crate) mod relations;
pub(crate) mod replica;
pub(crate) mod state;
pub(crate) mod suggest;
pub(crate) mod user_lookup;
pub(crate) mod users;

use std::sync::atomic::{AtomicU64, Ordering};

/// Round trips made by reads, for tests and diagnostics.
#[derive(Default)]
pub struct RoundTrips {
    /// PostgreSQL statements (counted by connection instrumentation).
    pub postgres: std::sync::Arc<AtomicU64>,
    /// Redis commands or pipelines sent by the read path.
    pub redis: AtomicU64,
}

impl RoundTrips {
    /// Counts one Redis round trip.
    pub fn redis(&self) {
        self.redis.fetch_add(1, Ordering::Relaxed);
    }

    /// `(postgres, redis)` so far.
    pub fn snapshot(&self) -> (u64, u64) {
        (
            self.postgres.load(Ordering::Relaxed),
            self.redis.load(Ordering::Relaxed),
        )
    }
}
