//! The follow mutation through the HTTP stack (axum router, bearer token,
//! GraphQL, rate limit, the group commit, write-through), with the relay and
//! the projector running as in `kith run` — against `pgbench` single-row
//! inserts on the same PostgreSQL, measured in the same run.
//!
//! Needs the local stack (`scripts/stack up`) and `pgbench`. Run:
//!
//! ```sh
//! cargo bench --bench follow_http            # 16 clients, 10 s per phase
//! ```
//!
//! Phases: pgbench at full speed; follows at full speed from 16 clients;
//! follows paced at an eighth of the pgbench rate (half of the 25% target).
//! Writes `target/bench-reports/follow_http.md` and prints it.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, header};
use diesel_async::RunQueryDsl;
use http_body_util::BodyExt;
use kith::testing::pipeline::projector::ProjectorHooks;
use kith::testing::shutdown::Shutdown;
use tower::ServiceExt;

#[path = "common.rs"]
mod common;

const USERS: i64 = 4000;
const CLIENTS: usize = 16;
const PHASE: Duration = Duration::from_secs(10);
const FOLLOW: &str = "mutation($id: ID!) { follow(input: {userId: $id}) { changed } }";

/// Distinct pairs, every one a real transition.
fn pair(i: u64) -> (i64, i64) {
    let span = USERS - 1;
    let from = 1 + (i as i64 % span);
    let to = 1 + ((i as i64 / span) + 1 + from) % span;
    (from, to)
}

struct Client {
    router: axum::Router,
    tokens: Vec<String>,
}

impl Client {
    /// One follow; its latency, or `None` when it failed.
    async fn follow(&self, i: u64) -> Option<Duration> {
        let (from, to) = pair(i);
        if from == to {
            return None;
        }
        let body = serde_json::json!({
            "query": FOLLOW,
            "variables": { "id": kith::testing::graph::ids::user_id(kith::model::UserId::new(to)?).to_string() },
        });
        let request = Request::post("/graphql")
            .header(header::CONTENT_TYPE, "application/json")
            .header(
                header::AUTHORIZATION,
                format!("Bearer {}", self.tokens[from as usize]),
            )
            .body(Body::from(body.to_string()))
            .unwrap();
        let started = Instant::now();
        let response = self.router.clone().oneshot(request).await.ok()?;
        let bytes = response.into_body().collect().await.ok()?.to_bytes();
        let took = started.elapsed();
        let json: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
        (json["data"]["follow"]["changed"] == true).then_some(took)
    }
}

fn summary(samples: &mut [Duration], failed: u64, elapsed: Duration) -> String {
    samples.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "{:.0} | {:.1} | {:.1} | {:.1} | {failed}",
        samples.len() as f64 / elapsed.as_secs_f64(),
        ms(common::percentile(samples, 50.0)),
        ms(common::percentile(samples, 99.0)),
        ms(samples.last().copied().unwrap_or_default()),
    )
}

/// pgbench's single-row inserts into `bench_insert`, on PostgreSQL itself
/// (`url`: the app's session URL, which names its schema or database).
fn pgbench(url: &str, name: &str) -> f64 {
    let script = std::env::temp_dir().join(format!("{name}.sql"));
    std::fs::write(&script, "INSERT INTO bench_insert (v) VALUES (1);\n").unwrap();
    let bin = std::fs::read_dir("/usr/lib/postgresql")
        .ok()
        .and_then(|dirs| {
            dirs.filter_map(Result::ok)
                .map(|d| d.path().join("bin/pgbench"))
                .find(|p| p.exists())
        })
        .unwrap_or_else(|| "pgbench".into());
    let output = std::process::Command::new(bin)
        .args(["-n", "-c", &CLIENTS.to_string(), "-j", "2", "-T"])
        .arg(PHASE.as_secs().to_string())
        .arg("-f")
        .arg(&script)
        .arg(url)
        .output()
        .expect("pgbench runs");
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("tps = "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "no tps in pgbench output: {text}{}",
                String::from_utf8_lossy(&output.stderr)
            )
        })
}

#[tokio::main]
async fn main() {
    let name = format!("bench_follow_{}", chrono::Utc::now().timestamp());
    let app = common::writer_app(&name, USERS).await;
    {
        let mut conn = app.pg.get().await.unwrap();
        diesel::sql_query("CREATE TABLE bench_insert (id BIGSERIAL PRIMARY KEY, v INT)")
            .execute(&mut conn)
            .await
            .unwrap();
    }
    let now = chrono::Utc::now().timestamp();
    let tokens: Vec<String> = (0..=USERS)
        .map(|id| match kith::model::UserId::new(id) {
            Some(user) => app.auth.tokens.issue(user, now, 3600),
            None => String::new(),
        })
        .collect();
    let client = Arc::new(Client {
        router: kith::testing::http::router(app.clone()),
        tokens,
    });

    let (trigger, shutdown) = Shutdown::new();
    let relay = tokio::spawn(kith::testing::pipeline::relay::run(
        app.clone(),
        shutdown.clone(),
    ));
    let projector = tokio::spawn(kith::testing::pipeline::projector::run(
        app.clone(),
        shutdown,
        Arc::new(ProjectorHooks::default()),
    ));
    let next = Arc::new(AtomicU64::new(0));
    // Warm up: pools, prepared statements, the projector's partitions.
    for _ in 0..50 {
        client.follow(next.fetch_add(1, Ordering::Relaxed)).await;
    }

    let session = app.config.session_url().to_owned();
    let tps = tokio::task::spawn_blocking({
        let name = name.clone();
        move || pgbench(&session, &name)
    })
    .await
    .unwrap();

    // Follows at full speed.
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..CLIENTS {
        let (client, next) = (client.clone(), next.clone());
        tasks.spawn(async move {
            let mut samples = Vec::new();
            let mut failed = 0;
            while started.elapsed() < PHASE {
                match client.follow(next.fetch_add(1, Ordering::Relaxed)).await {
                    Some(took) => samples.push(took),
                    None => failed += 1,
                }
            }
            (samples, failed)
        });
    }
    let mut full = Vec::new();
    let mut full_failed = 0;
    while let Some(result) = tasks.join_next().await {
        let (samples, failed) = result.unwrap();
        full.extend(samples);
        full_failed += failed;
    }
    let full_elapsed = started.elapsed();
    let full_rate = full.len() as f64 / full_elapsed.as_secs_f64();

    // Follows paced at half the target (an eighth of pgbench).
    let paced_rate = (tps / 8.0).max(1.0);
    let total = (paced_rate * PHASE.as_secs_f64()) as u64;
    let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / paced_rate));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let in_flight = Arc::new(tokio::sync::Semaphore::new(64));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..total {
        ticker.tick().await;
        let permit = in_flight.clone().acquire_owned().await.unwrap();
        let (client, i) = (client.clone(), next.fetch_add(1, Ordering::Relaxed));
        tasks.spawn(async move {
            let took = client.follow(i).await;
            drop(permit);
            took
        });
    }
    let mut paced = Vec::new();
    let mut paced_failed = 0;
    while let Some(result) = tasks.join_next().await {
        match result.unwrap() {
            Some(took) => paced.push(took),
            None => paced_failed += 1,
        }
    }
    let paced_elapsed = started.elapsed();
    trigger.trigger();
    let _ = relay.await;
    let _ = projector.await;

    let mut report = String::from("# Follow through HTTP against pgbench\n\n");
    let _ = writeln!(
        report,
        "Machine: {} cores, everything on it. pgbench: {CLIENTS} clients, one `INSERT` per \
         transaction, {} s. Follows: the axum router in the bench process (no sockets), relay \
         and projector running, {CLIENTS} clients at full speed, then paced at an eighth of \
         the pgbench rate.\n",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        PHASE.as_secs()
    );
    let _ = writeln!(
        report,
        "pgbench single-row inserts: **{tps:.0} commits/s**\n"
    );
    report.push_str(
        "| phase | follows/s | p50 ms | p99 ms | max ms | failed |\n|---|---|---|---|---|---|\n",
    );
    let _ = writeln!(
        report,
        "| full speed | {} |",
        summary(&mut full, full_failed, full_elapsed)
    );
    let _ = writeln!(
        report,
        "| paced at {paced_rate:.0}/s | {} |",
        summary(&mut paced, paced_failed, paced_elapsed)
    );
    let _ = writeln!(
        report,
        "\nFull-speed follows are {:.0}% of the pgbench rate (target: at least 25%); \
         the paced p99 target is under 20 ms.",
        100.0 * full_rate / tps
    );
    common::write_report("follow_http.md", &report);
}
