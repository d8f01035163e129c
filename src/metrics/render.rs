//! The OpenMetrics text exposition of [`super::Metrics`].

use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::registry::Registry;

use super::{Metrics, PoolGetLabels, PoolLabels, Scrape};

impl Metrics {
    /// The OpenMetrics text exposition.
    pub fn render(&self, scrape: &Scrape) -> String {
        let mut registry = Registry::default();
        let kith = registry.sub_registry_with_prefix("kith");
        kith.register(
            "events_relayed",
            "Outbox events acknowledged by the broker",
            self.events_relayed.clone(),
        );
        kith.register(
            "events_applied",
            "Events processed by the projector",
            self.events_applied.clone(),
        );
        kith.register(
            "events_dead_lettered",
            "Messages recorded as dead letters",
            self.events_dead_lettered.clone(),
        );
        kith.register(
            "events_foreign",
            "Follow-topic messages refused as another database's (or this one's retired origin's); each is a dead letter too",
            self.events_foreign.clone(),
        );
        kith.register(
            "projector_wakeups",
            "What ended an idle projector's park: a relay's wake-up (local or redis), the idle interval, a lease change",
            self.projector_wakeups.clone(),
        );
        kith.register(
            "projector_parks",
            "Times an idle projector stopped fetching (until a relay announced events or the idle interval passed)",
            self.projector_parks.clone(),
        );
        kith.register(
            "consistency_repairs",
            "Derived rows and counters repaired by reconciliation or the sampled counter check",
            self.consistency_repairs.clone(),
        );
        kith.register(
            "requests_timed_out",
            "GraphQL requests stopped at their deadline (KITH_REQUEST_TIMEOUT_MS)",
            self.requests_timed_out.clone(),
        );
        kith.register(
            "write_batches",
            "Group-commit transactions of follows and unfollows (retries included)",
            self.write_batches.clone(),
        );
        kith.register(
            "write_batch_changes",
            "Follows and unfollows those transactions carried (÷ kith_write_batches_total: changes per commit)",
            self.write_batch_changes.clone(),
        );
        kith.register(
            "rate_limited",
            "Edge writes refused by the actor's token bucket",
            self.rate_limited.clone(),
        );
        kith.register(
            "pipeline_lag_seconds",
            "From the commit of a change to its projection into every derived view",
            self.pipeline_lag.clone(),
        );
        kith.register(
            "graphql_requests",
            "GraphQL requests by operation name and outcome code",
            self.requests.clone(),
        );
        kith.register(
            "graphql_request_duration_seconds",
            "GraphQL request latency by operation name and outcome code",
            self.request_duration.clone(),
        );
        kith.register(
            "cache_lookups",
            "Cache lookups by cache and result",
            self.cache.clone(),
        );
        kith.register(
            "consumer_lag_messages",
            "Messages between the projector's position and the end of each partition it holds",
            self.consumer_lag.clone(),
        );
        kith.register(
            "postgres_statements",
            "Statements run on the PostgreSQL pool",
            ConstCounter::new(scrape.postgres_statements),
        );
        kith.register(
            "read_redis_round_trips",
            "Redis round trips made by reads",
            ConstCounter::new(scrape.read_redis_round_trips),
        );
        kith.register(
            "user_cache_held_answers",
            "User reads answered from the rows held when the user cache lost its PostgreSQL session, because PostgreSQL could not answer (a failover, an outage)",
            ConstCounter::new(scrape.user_cache_held_answers),
        );
        kith.register(
            "list_fills_in_flight",
            "Lists being filled into the list cache by this process",
            ConstGauge::new(i64::try_from(scrape.fills_in_flight).unwrap_or(i64::MAX)),
        );
        kith.register(
            "list_fills_skipped",
            "List fills asked for by reads and not made: the owner is not an active user, the process's fill budget is spent, or Redis is past its fill memory limit",
            self.list_fills_skipped.clone(),
        );
        kith.register(
            "replica_reads",
            "Reads that could go to the read replica, by who answered (replica, primary) and why",
            self.replica_reads.clone(),
        );
        kith.register(
            "redis_out_of_memory",
            "Redis writes refused for lack of memory (OOM), by path",
            self.redis_out_of_memory.clone(),
        );
        kith.register(
            "caches_shed",
            "Writes and projector batches whose cached lists were dropped rather than grown, Redis being past its fill memory limit",
            self.caches_shed.clone(),
        );
        if self.outbox_backlog.get() >= 0 {
            kith.register(
                "relay_backlog",
                "Outbox rows not yet published, as last sampled (exact up to 10,000, estimated past it)",
                self.outbox_backlog.clone(),
            );
        }
        let connections = Family::<PoolLabels, Gauge>::default();
        let idle = Family::<PoolLabels, Gauge>::default();
        let gets = Family::<PoolGetLabels, Counter>::default();
        let wait = Family::<PoolLabels, Counter<f64>>::default();
        for (pool, state) in [
            ("postgres", scrape.postgres_pool),
            ("redis", scrape.redis_pool),
        ] {
            let labels = PoolLabels { pool };
            connections
                .get_or_create(&labels)
                .set(i64::from(state.connections));
            idle.get_or_create(&labels).set(i64::from(state.idle));
            for (result, n) in [
                ("direct", state.gets_direct),
                ("waited", state.gets_waited),
                ("timed_out", state.gets_timed_out),
            ] {
                gets.get_or_create(&PoolGetLabels { pool, result })
                    .inc_by(n);
            }
            wait.get_or_create(&labels)
                .inc_by(state.wait_time.as_secs_f64());
        }
        kith.register("pool_connections", "Connections open per pool", connections);
        kith.register("pool_idle_connections", "Idle connections per pool", idle);
        kith.register(
            "pool_checkouts",
            "Connection checkouts per pool: served at once, after waiting, or timed out",
            gets,
        );
        kith.register(
            "pool_wait_seconds",
            "Time spent waiting for a connection per pool",
            wait,
        );
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = encode_registry(&mut out, &registry);
        let _ = encode_eof(&mut out);
        out
    }
}
