//! Tests that kill or cut off real processes: `kith` binaries killed with
//! SIGKILL, a broker, Redis servers and PostgreSQL connections that go
//! away. Kept apart from the API suite (`tests/api`) because they are slow
//! and start servers of their own; they need the same local stack
//! (`scripts/stack up`).

#[path = "../common/helpers/mod.rs"]
mod helpers;
#[allow(dead_code)]
#[path = "../common/http.rs"]
mod http_client;
#[allow(dead_code)]
#[path = "../common/rng.rs"]
mod rng;

mod formation;
mod group_commit;
mod outage;
mod pg_failover;
mod pg_replica;
mod postgres_outage;
mod recovery;
mod redis_failover;
mod redis_outage;
mod redis_policy;
mod replicas;
mod restore;
