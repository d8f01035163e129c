//! The event pipeline: the outbox relay publishes committed events to Kafka,
//! the projector consumes them and keeps every derived view right — the
//! `follower` projection and `user_stats` in PostgreSQL, the list caches and
//! counter records in Redis.

pub(crate) mod dead_letters;
pub(crate) mod kafka;
pub(crate) mod ledger;
pub(crate) mod origin;
pub(crate) mod projector;
pub(crate) mod relay;
pub(crate) mod state;
pub(crate) mod wake;
