//! Pipeline lag: from the commit of a follow to its effects in every derived
//! view (projection, `user_stats`, counter records, list caches), at a steady
//! follow rate, with the relay and the projector running as in `kith run`.
//!
//! Needs the local stack (`scripts/stack up`). Run:
//!
//! ```sh
//! cargo bench --bench pipeline_lag                 # 200, 500 and 1000 follows/s, 15 s each
//! KITH_BENCH_RATES=500 KITH_BENCH_SECONDS=30 cargo bench --bench pipeline_lag
//! ```
//!
//! Writes `target/bench-reports/pipeline_lag.md` and prints it. Each run uses
//! its own PostgreSQL schema, Redis prefix, topics and consumer group.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kith::app::App;
use kith::model::UserId;
use kith::testing::pipeline::projector::ProjectorHooks;
use kith::testing::shutdown::Shutdown;
use kith::testing::write::{EdgeChange, change_edge};

#[path = "common.rs"]
mod common;

const USERS: i64 = 2000;

#[tokio::main]
async fn main() {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .init();
    }
    let rates: Vec<u64> = std::env::var("KITH_BENCH_RATES")
        .unwrap_or_else(|_| "200,500,1000".into())
        .split(',')
        .map(|r| {
            r.trim()
                .parse()
                .expect("KITH_BENCH_RATES: follows per second, comma separated")
        })
        .collect();
    let seconds: u64 = std::env::var("KITH_BENCH_SECONDS")
        .ok()
        .map(|s| s.parse().expect("KITH_BENCH_SECONDS"))
        .unwrap_or(15);

    let mut report = String::from("# Pipeline lag (commit → applied in every derived view)\n\n");
    let _ = writeln!(
        report,
        "Machine: {} cores. Relay and projector in the bench process, as in `kith run`; \
         follows issued through the write path (rate limit + transaction + outbox) at a fixed rate.\n",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    report
        .push_str("| follows/s target | achieved | events | p50 ms | p90 ms | p99 ms | max ms |\n");
    report.push_str("|---|---|---|---|---|---|---|\n");
    for rate in rates {
        let line = run(rate, seconds).await;
        report.push_str(&line);
        println!("{line}");
    }
    common::write_report("pipeline_lag.md", &report);
}

async fn run(rate: u64, seconds: u64) -> String {
    let name = format!("bench_{}_{rate}", chrono::Utc::now().timestamp());
    let app = common::writer_app(&name, USERS).await;

    let hooks = Arc::new(ProjectorHooks {
        lag_samples: Some(std::sync::Mutex::new(Vec::new())),
        ..ProjectorHooks::default()
    });
    let (trigger, shutdown) = Shutdown::new();
    let relay = tokio::spawn(kith::testing::pipeline::relay::run(
        app.clone(),
        shutdown.clone(),
    ));
    let projector = tokio::spawn(kith::testing::pipeline::projector::run(
        app.clone(),
        shutdown,
        hooks.clone(),
    ));

    // Warm up: the consumer group must own its partitions before timing starts.
    follow_once(&app, 1, 2).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while app.metrics.events_applied.get() < 1 {
        assert!(Instant::now() < deadline, "projector never caught up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    hooks.lag_samples.as_ref().unwrap().lock().unwrap().clear();

    let total = rate * seconds;
    let interval = Duration::from_secs_f64(1.0 / rate as f64);
    let start = Instant::now();
    let mut writers = tokio::task::JoinSet::new();
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    // At most as many follows in flight as there are connections: past what
    // the write path sustains, the achieved rate says so instead of timeouts.
    let in_flight = Arc::new(tokio::sync::Semaphore::new(32));
    for i in 0..total {
        ticker.tick().await;
        let permit = in_flight.clone().acquire_owned().await.unwrap();
        let app = app.clone();
        // Distinct pairs, every one a real transition.
        let from = 3 + (i as i64 % (USERS - 3));
        let to = 3 + ((i as i64 / (USERS - 3)) + 1 + from) % (USERS - 3);
        writers.spawn(async move {
            follow_once(&app, from, to).await;
            drop(permit);
        });
    }
    while writers.join_next().await.is_some() {}
    let elapsed = start.elapsed();

    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let seen = hooks.lag_samples.as_ref().unwrap().lock().unwrap().len() as u64;
        if seen >= total || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    trigger.trigger();
    let _ = relay.await;
    let _ = projector.await;

    let mut samples = hooks.lag_samples.as_ref().unwrap().lock().unwrap().clone();
    samples.sort_unstable();
    let achieved = total as f64 / elapsed.as_secs_f64();
    format!(
        "| {rate} | {achieved:.0} | {} | {} | {} | {} | {} |\n",
        samples.len(),
        common::percentile(&samples, 50.0),
        common::percentile(&samples, 90.0),
        common::percentile(&samples, 99.0),
        samples.last().copied().unwrap_or(0),
    )
}

async fn follow_once(app: &App, from: i64, to: i64) {
    let (Some(from), Some(to)) = (UserId::new(from), UserId::new(to)) else {
        return;
    };
    if from == to {
        return;
    }
    if let Err(e) = change_edge(app, from, to, EdgeChange::Follow).await {
        eprintln!("follow failed: {e:?}");
    }
}
