//! Process metrics, exposed at `GET /metrics` in the OpenMetrics text format
//! (which Prometheus scrapes) through `prometheus-client`.
//!
//! Counters and histograms live for the process ([`Metrics`]); what is read
//! at scrape time — pool states, the outbox backlog, statement and round-trip
//! counts, fills in flight — comes in a [`Scrape`].

use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;

mod operations;
mod render;

pub(crate) use operations::NameSource;
use operations::{OperationNames, valid_name};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

/// Upper bounds (seconds) of the pipeline-lag histogram buckets.
const LAG_BUCKETS: [f64; 16] = [
    0.001, 0.0025, 0.005, 0.01, 0.02, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Upper bounds (seconds) of the request-latency histogram buckets.
const REQUEST_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A GraphQL request's labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The operation's name (`anonymous`, `refused` before execution, `other` past the cap).
    pub operation: String,
    /// `ok`, or the first error's `extensions.code`.
    pub outcome: String,
}

/// A cache lookup's labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CacheLabels {
    /// `hot_list` (in process), `list` (Redis list cache), `counter_record`, `relation`.
    pub cache: &'static str,
    /// `hit` or `miss`.
    pub result: &'static str,
}

/// Labels of `kith_projector_wakeups_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WakeLabels {
    /// `local`, `redis`, `idle`, `leases` or `shutdown`.
    pub cause: &'static str,
}

/// A consumed partition.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PartitionLabels {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
}

/// Labels of `kith_list_fills_skipped_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SkipLabels {
    /// `not_active` (no such user, or not active), `budget`
    /// (`KITH_MAX_FILLS_PER_SEC`) or `memory` (`KITH_FILL_MEMORY_LIMIT`).
    pub reason: &'static str,
}

/// Labels of `kith_replica_reads_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReplicaLabels {
    /// `replica` or `primary`.
    pub answered_by: &'static str,
    /// Why: `caught_up` (the replica answered); for the primary, `down` (no
    /// recent check of the replica succeeded), `lagging` (behind by more
    /// than `KITH_REPLICA_MAX_LAG_MS`), `own_write` (not yet past the
    /// viewer's own last write, a mutation's own read, or for user rows the
    /// last row the user cache dropped), `failed` (the replica failed the
    /// read).
    pub reason: &'static str,
}

/// Labels of `kith_redis_out_of_memory_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PathLabels {
    /// `rate_limit`, `write_through`, `fill`, `counter_record`, `projector`.
    pub path: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct PoolLabels {
    pool: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct PoolGetLabels {
    pool: &'static str,
    result: &'static str,
}

/// Every metric that lives for the process.
pub struct Metrics {
    /// Outbox events the broker acknowledged.
    pub events_relayed: Counter,
    /// Events the projector applied (duplicates and stale events included: they were processed).
    pub events_applied: Counter,
    /// Messages recorded as dead letters.
    pub events_dead_lettered: Counter,
    /// Follow-topic messages refused because another database (or this
    /// one's retired origin) wrote them; each is also a dead letter.
    pub events_foreign: Counter,
    /// Times an idle projector stopped fetching (until woken or its idle interval passed).
    pub projector_parks: Counter,
    /// What ended each park: `local` / `redis` (a relay's wake-up), `idle`
    /// (the idle interval), `leases`, `shutdown`.
    pub projector_wakeups: Family<WakeLabels, Counter>,
    /// Derived rows and counters repaired by reconciliation or the sampled check.
    pub consistency_repairs: Counter,
    /// GraphQL requests stopped at `KITH_REQUEST_TIMEOUT_MS`.
    pub requests_timed_out: Counter,
    /// Edge writes refused by the token bucket.
    pub rate_limited: Counter,
    /// Group-commit transactions run (each retry and each lone rerun of a
    /// failed batch's change included).
    pub write_batches: Counter,
    /// Changes those transactions carried.
    pub write_batch_changes: Counter,
    /// Commit of the change to its effects being visible in every derived view.
    pipeline_lag: Histogram,
    lag_observations: std::sync::atomic::AtomicU64,
    /// GraphQL requests that reached the executor (over HTTP, or a query or
    /// mutation over WebSocket) by operation and outcome; subscriptions and
    /// requests the HTTP layer refuses (400, 405, 413, 415) are not counted.
    pub requests: Family<RequestLabels, Counter>,
    /// GraphQL request latency by operation and outcome.
    pub request_duration: Family<RequestLabels, Histogram>,
    /// Cache hits and misses.
    pub cache: Family<CacheLabels, Counter>,
    /// Messages between the projector's position and the partition's end.
    pub consumer_lag: Family<PartitionLabels, Gauge>,
    /// List fills reads asked for and were not made.
    pub list_fills_skipped: Family<SkipLabels, Counter>,
    /// Reads that could go to a read replica, by who answered.
    pub replica_reads: Family<ReplicaLabels, Counter>,
    /// Redis writes refused for lack of memory (`OOM`), by path.
    pub redis_out_of_memory: Family<PathLabels, Counter>,
    /// Writes and projector batches whose cached lists were dropped rather
    /// than grown: Redis was past `KITH_FILL_MEMORY_LIMIT`.
    pub caches_shed: Counter,
    /// Outbox rows not yet published, as last sampled (-1: not known yet).
    pub outbox_backlog: Gauge,
    operations: Mutex<OperationNames>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            events_relayed: Counter::default(),
            events_applied: Counter::default(),
            events_dead_lettered: Counter::default(),
            events_foreign: Counter::default(),
            projector_parks: Counter::default(),
            projector_wakeups: Family::default(),
            consistency_repairs: Counter::default(),
            requests_timed_out: Counter::default(),
            rate_limited: Counter::default(),
            write_batches: Counter::default(),
            write_batch_changes: Counter::default(),
            pipeline_lag: Histogram::new(LAG_BUCKETS),
            lag_observations: std::sync::atomic::AtomicU64::new(0),
            requests: Family::default(),
            request_duration: Family::new_with_constructor(|| Histogram::new(REQUEST_BUCKETS)),
            cache: Family::default(),
            consumer_lag: Family::default(),
            list_fills_skipped: Family::default(),
            replica_reads: Family::default(),
            redis_out_of_memory: Family::default(),
            caches_shed: Counter::default(),
            outbox_backlog: {
                let gauge = Gauge::default();
                gauge.set(-1);
                gauge
            },
            operations: Mutex::default(),
        }
    }
}

/// A connection pool's state at scrape time.
#[derive(Clone, Copy, Debug, Default)]
pub struct PoolState {
    /// Connections open.
    pub connections: u32,
    /// Of them, idle.
    pub idle: u32,
    /// Checkouts served at once, in all.
    pub gets_direct: u64,
    /// Checkouts that waited for a connection, in all.
    pub gets_waited: u64,
    /// Checkouts that gave up waiting, in all.
    pub gets_timed_out: u64,
    /// Time spent waiting for connections, in all.
    pub wait_time: Duration,
}

impl From<bb8::State> for PoolState {
    fn from(state: bb8::State) -> Self {
        let s = state.statistics;
        Self {
            connections: state.connections,
            idle: state.idle_connections,
            gets_direct: s.get_direct,
            gets_waited: s.get_waited,
            gets_timed_out: s.get_timed_out,
            wait_time: s.get_wait_time,
        }
    }
}

/// What is read at scrape time (all of it held in process: a scrape runs no
/// statement and no Redis command).
#[derive(Clone, Copy, Debug, Default)]
pub struct Scrape {
    /// Statements run on the PostgreSQL pool.
    pub postgres_statements: u64,
    /// Redis round trips made by reads.
    pub read_redis_round_trips: u64,
    /// The PostgreSQL pool.
    pub postgres_pool: PoolState,
    /// The Redis pool.
    pub redis_pool: PoolState,
    /// List-cache fills running in this process.
    pub fills_in_flight: usize,
    /// Reads the user cache answered from held rows while PostgreSQL could not.
    pub user_cache_held_answers: u64,
}

impl Metrics {
    /// Counts one GraphQL request: `operation` as named (None: anonymous),
    /// `executed` false when it was refused before execution.
    /// Names are labels while bounded per source ([`NameSource`]): the
    /// manifest's names always; up to 128 names of signed-in clients, each
    /// user introducing at most 4; up to 32 names of anonymous clients;
    /// `other` past that.
    pub fn observe_request(
        &self,
        operation: Option<&str>,
        source: NameSource,
        executed: bool,
        outcome: &str,
        took: Duration,
    ) {
        let operation = if !executed {
            "refused".to_owned()
        } else {
            match operation {
                None => "anonymous".to_owned(),
                Some(name) => self.bounded_operation(name, source),
            }
        };
        let labels = RequestLabels {
            operation,
            outcome: outcome.to_owned(),
        };
        self.requests.get_or_create(&labels).inc();
        self.request_duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// Records one pipeline lag, in seconds (negative clock skew counts as 0).
    pub fn observe_lag(&self, seconds: f64) {
        self.pipeline_lag.observe(seconds.max(0.0));
        self.lag_observations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Pipeline lags recorded so far.
    pub fn lag_observations(&self) -> u64 {
        self.lag_observations
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Counts a cache lookup.
    pub fn cache_lookup(&self, cache: &'static str, hit: bool, n: u64) {
        if n == 0 {
            return;
        }
        let result = if hit { "hit" } else { "miss" };
        self.cache
            .get_or_create(&CacheLabels { cache, result })
            .inc_by(n);
    }

    /// Counts what ended an idle projector's park.
    pub fn projector_woken(&self, cause: &'static str) {
        self.projector_wakeups
            .get_or_create(&WakeLabels { cause })
            .inc();
    }

    /// How many parks `cause` ended (for tests).
    pub fn projector_wakeups_by(&self, cause: &'static str) -> u64 {
        self.projector_wakeups
            .get_or_create(&WakeLabels { cause })
            .get()
    }

    /// Keeps `names` (the persisted-query manifest's operations) as labels.
    pub fn name_operations(&self, names: impl IntoIterator<Item = String>) {
        let mut operations = self.operations.lock().expect("operations lock");
        operations
            .manifest
            .extend(names.into_iter().filter(|name| valid_name(name)));
    }

    fn bounded_operation(&self, name: &str, source: NameSource) -> String {
        if !valid_name(name) {
            return "other".to_owned();
        }
        let mut operations = self.operations.lock().expect("operations lock");
        if operations.label(name, source) {
            name.to_owned()
        } else {
            "other".to_owned()
        }
    }

    /// Counts list fills that were asked for and not made.
    pub fn list_fills_skipped(&self, reason: &'static str, n: usize) {
        if n > 0 {
            self.list_fills_skipped
                .get_or_create(&SkipLabels { reason })
                .inc_by(n as u64);
        }
    }

    /// Counts a Redis write refused for lack of memory on `path`.
    pub fn redis_oom(&self, path: &'static str) {
        self.redis_out_of_memory
            .get_or_create(&PathLabels { path })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_openmetrics_text() {
        let metrics = Metrics::default();
        metrics.events_relayed.inc_by(3);
        metrics.observe_lag(0.004);
        metrics.observe_lag(2.0);
        let anonymous = NameSource::Anonymous;
        let took = Duration::from_millis(3);
        metrics.observe_request(Some("Profile"), anonymous, true, "ok", took);
        metrics.observe_request(Some("bad name!"), anonymous, true, "ok", took);
        metrics.cache_lookup("list", true, 2);
        metrics.outbox_backlog.set(7);
        let text = metrics.render(&Scrape {
            postgres_statements: 3,
            read_redis_round_trips: 4,
            ..Scrape::default()
        });
        for line in [
            "kith_events_relayed_total 3\n",
            "kith_relay_backlog 7\n",
            "kith_postgres_statements_total 3\n",
            "kith_read_redis_round_trips_total 4\n",
            "kith_pipeline_lag_seconds_bucket{le=\"0.005\"} 1\n",
            "kith_pipeline_lag_seconds_bucket{le=\"+Inf\"} 2\n",
            "kith_pipeline_lag_seconds_count 2\n",
            "kith_graphql_requests_total{operation=\"Profile\",outcome=\"ok\"} 1\n",
            "kith_graphql_requests_total{operation=\"other\",outcome=\"ok\"} 1\n",
            "kith_cache_lookups_total{cache=\"list\",result=\"hit\"} 2\n",
            "kith_pool_connections{pool=\"postgres\"} 0\n",
            "# EOF\n",
        ] {
            assert!(text.contains(line), "{line:?} missing from\n{text}");
        }
    }

    #[test]
    fn one_client_cannot_take_every_operation_label() {
        let metrics = Metrics::default();
        metrics.name_operations(["Listed".to_owned()]);
        let user = |n| NameSource::User(crate::model::UserId::new(n).unwrap());
        let label = |name: &str, source| {
            metrics.observe_request(Some(name), source, true, "ok", Duration::ZERO);
            metrics
                .requests
                .get_or_create(&RequestLabels {
                    operation: name.to_owned(),
                    outcome: "ok".to_owned(),
                })
                .get()
                > 0
        };
        for i in 0..1000 {
            label(&format!("Flood{i}"), user(1));
            label(&format!("Anon{i}"), NameSource::Anonymous);
        }
        assert!(label("Flood3", user(1)), "a user's first names are kept");
        assert!(!label("Flood4", user(1)), "past its quota, `other`");
        assert!(!label("Anon32", NameSource::Anonymous));
        assert!(
            label("Profile", user(2)),
            "another user's names still count"
        );
        assert!(
            label("Listed", user(1)),
            "the manifest's names always count"
        );
        assert!(label("Listed", NameSource::Anonymous));
    }
}
