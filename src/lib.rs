//! Kith: a follow-graph service — GraphQL over PostgreSQL, Redis and Kafka.
//!
//! How the folders map to the request and event flow:
//!
//! - [`graph`]: the GraphQL schema (no transport); [`http`] serves it with axum.
//! - [`mod@write`]: the write path — rate limit ([`write::rate_limit`], `lua/`),
//!   then one transaction changing the edge and appending the outbox event.
//! - [`store`]: PostgreSQL — the truth (`following`), the outbox, the
//!   projections (`follower`, `user_stats`), migrations.
//! - [`pipeline`]: the outbox relay to Kafka and the projector that keeps the
//!   derived views (`follower`, `user_stats`, list caches, counter records) right.
//! - [`cache`]: Redis — list caches (ZSets with coverage), counter records,
//!   the key layout.
//! - [`read`]: the read model — list pages (hot memory → Redis → PostgreSQL),
//!   counters and relationships, batched per request.
//! - [`live`]: live updates — the projector's batches, published through
//!   Redis to the GraphQL subscriptions of every replica.
//! - [`portability`]: the viewer's lists out as CSV files and in again as
//!   background import jobs.
//! - [`consistency`]: verify, reconcile and rebuild the derived views from
//!   the truth; the sampled online counter check.
//! - [`metrics`]: what `GET /metrics` reports.
//! - [`jobs`]: what each long-running `kith` command runs, for the binary
//!   and tests alike.
//! - [`app`], [`config`], [`auth`], [`error`], [`model`]: shared state,
//!   environment, bearer tokens, client-visible errors, domain types.
//! - [`paging`], [`events`], [`shutdown`]: lists and pages as every layer
//!   sees them, the events' wire formats, stopping and backing off.
//!
//! - [`cli`]: the `kith` command line (the binary only sets the allocator).
//!
//! Layers: each file names only what lies below it (`docs/architecture.md`,
//! checked by `tests/layers`). `App` holds the handles and one state struct
//! per part (`read::state`, `auth::Authenticator`, …); the parts' functions
//! take `&App`, and their state types name nothing that does.
//!
//! Private by default: the public modules are [`app`], [`cli`], [`config`],
//! [`jobs`] and [`model`]; what the integration tests and benches drive
//! besides is re-exported, item by item, in [`testing`]. Everything else is
//! crate-private (`unreachable_pub` keeps it so), and the compiler reports
//! what nothing uses.

#![warn(unreachable_pub)]

pub mod app;
mod auth;
mod cache;
pub mod cli;
pub mod config;
mod consistency;
mod cost;
#[cfg(test)]
mod doc_claims;
mod error;
mod events;
mod graph;
mod http;
pub mod jobs;
mod live;
mod metrics;
pub mod model;
mod paging;
mod pipeline;
mod portability;
mod read;
mod shutdown;
mod store;
pub mod testing;
mod write;
