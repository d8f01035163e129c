//! Process metrics, rendered in the Prometheus text format at `GET /metrics`.
//! A handful of atomics is all Kith needs, so no metrics crate.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Upper bounds (seconds) of the pipeline-lag histogram buckets.
const LAG_BUCKETS: [f64; 16] = [
    0.001, 0.0025, 0.005, 0.01, 0.02, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// A fixed-bucket histogram.
pub struct Histogram {
    buckets: [AtomicU64; LAG_BUCKETS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            count: AtomicU64::new(0),
            sum_micros: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    /// Records one observation in seconds (negative clock skew counts as 0).
    pub fn observe(&self, seconds: f64) {
        let seconds = seconds.max(0.0);
        for (bound, bucket) in LAG_BUCKETS.iter().zip(&self.buckets) {
            if seconds <= *bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_micros
            .fetch_add((seconds * 1e6) as u64, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    fn render(&self, name: &str, help: &str, out: &mut String) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (bound, bucket) in LAG_BUCKETS.iter().zip(&self.buckets) {
            let _ = writeln!(
                out,
                "{name}_bucket{{le=\"{bound}\"}} {}",
                bucket.load(Ordering::Relaxed)
            );
        }
        let count = self.count();
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {count}");
    }
}

/// Every metric of one process.
#[derive(Default)]
pub struct Metrics {
    /// Outbox events the broker acknowledged.
    pub events_relayed: AtomicU64,
    /// Events the projector applied (duplicates and stale events included: they were processed).
    pub events_applied: AtomicU64,
    /// Messages recorded as dead letters.
    pub events_dead_lettered: AtomicU64,
    /// Derived rows and counters repaired by reconciliation or the sampled check.
    pub consistency_repairs: AtomicU64,
    /// GraphQL requests stopped at `KITH_REQUEST_TIMEOUT_MS`.
    pub requests_timed_out: AtomicU64,
    /// Commit of the change to its effects being visible in every derived view.
    pub pipeline_lag: Histogram,
}

impl Metrics {
    /// Adds `n` to a counter.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// The Prometheus text exposition; `backlog` is the outbox size when
    /// known, `round_trips` the `(PostgreSQL statements, read-path Redis
    /// round trips)` of this process so far.
    pub fn render(&self, backlog: Option<i64>, round_trips: (u64, u64)) -> String {
        let mut out = String::new();
        let counters = [
            (
                "kith_events_relayed_total",
                "Outbox events acknowledged by the broker.",
                &self.events_relayed,
            ),
            (
                "kith_events_applied_total",
                "Events processed by the projector.",
                &self.events_applied,
            ),
            (
                "kith_events_dead_lettered_total",
                "Messages recorded as dead letters.",
                &self.events_dead_lettered,
            ),
            (
                "kith_consistency_repairs_total",
                "Derived rows and counters repaired by reconciliation or the sampled counter check.",
                &self.consistency_repairs,
            ),
            (
                "kith_requests_timed_out_total",
                "GraphQL requests stopped at their deadline (KITH_REQUEST_TIMEOUT_MS).",
                &self.requests_timed_out,
            ),
        ];
        for (name, help, value) in counters {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                value.load(Ordering::Relaxed)
            );
        }
        let (statements, redis) = round_trips;
        let _ = writeln!(
            out,
            "# HELP kith_postgres_statements_total Statements run on the PostgreSQL pool.\n\
             # TYPE kith_postgres_statements_total counter\nkith_postgres_statements_total {statements}\n\
             # HELP kith_read_redis_round_trips_total Redis round trips made by reads.\n\
             # TYPE kith_read_redis_round_trips_total counter\nkith_read_redis_round_trips_total {redis}"
        );
        if let Some(backlog) = backlog {
            let _ = writeln!(
                out,
                "# HELP kith_relay_backlog Outbox rows not yet published.\n# TYPE kith_relay_backlog gauge\nkith_relay_backlog {backlog}"
            );
        }
        self.pipeline_lag.render(
            "kith_pipeline_lag_seconds",
            "From the commit of a change to its projection into every derived view.",
            &mut out,
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let metrics = Metrics::default();
        Metrics::add(&metrics.events_relayed, 3);
        metrics.pipeline_lag.observe(0.004);
        metrics.pipeline_lag.observe(2.0);
        let text = metrics.render(Some(7), (3, 4));
        assert!(text.contains("kith_events_relayed_total 3\n"));
        assert!(text.contains("kith_relay_backlog 7\n"));
        assert!(text.contains("kith_postgres_statements_total 3\n"));
        assert!(text.contains("kith_read_redis_round_trips_total 4\n"));
        assert!(text.contains("kith_pipeline_lag_seconds_bucket{le=\"0.005\"} 1\n"));
        assert!(text.contains("kith_pipeline_lag_seconds_bucket{le=\"+Inf\"} 2\n"));
        assert!(text.contains("kith_pipeline_lag_seconds_count 2\n"));
    }
}
