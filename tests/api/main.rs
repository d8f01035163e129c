//! Integration tests against the real PostgreSQL and Redis of the local stack
//! (`scripts/stack up`). Each test gets its own PostgreSQL schema and Redis key
//! prefix, so the suite runs in parallel and in any order.

#[path = "../common/helpers/mod.rs"]
mod helpers;
#[path = "../common/http.rs"]
mod http_client;
#[path = "../common/rng.rs"]
mod rng;

mod blocks;
mod bulk_edits;
mod clients;
mod close_friends;
mod consistency;
mod db_schema;
mod errors;
mod federation;
mod follow_cap;
mod follow_options;
mod follow_requests;
mod graph_queries;
mod group_commit;
mod hardening;
mod hidden_lists;
mod http;
mod identity;
mod lifecycle;
mod moves;
mod mutes;
mod notify_followers;
mod paging_property;
mod persisted;
mod pipeline;
mod portability;
mod private_lists;
mod projection;
mod queries;
mod rate_limit;
mod read_model;
mod schema_policy;
mod schema_snapshot;
mod seed;
mod subscriptions;
mod suggestions;
mod unknown_ids;
mod user_cache;
mod write_path;
