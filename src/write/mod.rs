//! The write path: rate limit, then one PostgreSQL statement
//! (`kith_change_edge`) that changes the edge, the actor's counters and
//! appends the outbox event together.

pub mod follow;
pub mod lifecycle;
pub mod rate_limit;

pub use follow::{EdgeChange, FollowOutcome, change_edge};
pub use rate_limit::{RateDecision, RateLimiter};
