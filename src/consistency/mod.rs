//! The consistency tools: derived views may lag, but they are checked and
//! can always be rebuilt from the truth.
//!
//! - [`verify`]: compares every derived view with its source (read-only).
//! - [`reconcile`]: repairs the `follower` projection and `user_stats` from
//!   the truth, without racing the projector; also scheduled in `kith run`.
//! - [`rebuild`]: rebuilds the Redis caches from PostgreSQL.
//! - [`sampled`]: the online check of counters as they are read.

pub mod progress;
pub mod rebuild;
pub mod reconcile;
pub mod sampled;
pub mod verify;
