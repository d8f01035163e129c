//! How long an ordinary profile query takes while an anonymous client sends
//! hostile requests back to back, against an account with 200,000
//! followers; and while one WebSocket floods the server with
//! PostgreSQL-bound queries. Run with `scripts/bench-hostile` (`cargo bench
//! --bench hostile [-- requests|websocket]`); writes
//! `target/bench-reports/hostile.md`.
//!
//! It uses only what every version of Kith has (the test application, the
//! follower seeding, in-process GraphQL), so the same file measures an older
//! checkout for comparison.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kith::testing::auth::Viewer;
use serde_json::json;

#[path = "../tests/common/helpers/mod.rs"]
mod helpers;
#[allow(dead_code)]
#[path = "../tests/common/http.rs"]
mod http_client;

use crate::helpers::{TestApp, seed_followers, spawn_app_with};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // `cargo bench` passes `--bench`; a phase may be named after `--`.
    let phase = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    if phase.as_deref().is_none_or(|p| p == "requests") {
        probe_latency_under_hostile_requests().await;
    }
    if phase.as_deref().is_none_or(|p| p == "websocket") {
        probe_latency_under_a_websocket_flood().await;
    }
}

const FOLLOWERS: i64 = 200_000;
const PROBES_IDLE: usize = 200;
const ATTACK: Duration = Duration::from_secs(20);
const PROBE: &str = "query($id: ID!) { user(id: $id) { handle
    counters { followings followers posts }
    followers(first: 20) { totalCount edges { node { handle } } } } }";

fn hostile(fields: usize, offset: u32) -> String {
    let fields: String = (0..fields)
        .map(|i| format!("f{i}: followers(first: 1, offset: {offset}) {{ edges {{ cursor }} }} "))
        .collect();
    format!("query($id: ID!) {{ user(id: $id) {{ {fields} }} }}")
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn summary(samples: &mut [Duration]) -> String {
    samples.sort();
    let at = |p: f64| millis(samples[((samples.len() - 1) as f64 * p).round() as usize]);
    format!(
        "{} | {:.1} | {:.1} | {:.1} | {:.1}",
        samples.len(),
        at(0.5),
        at(0.9),
        at(0.99),
        millis(*samples.last().unwrap())
    )
}

/// How long one profile query took; failed ones are counted in `failed`.
async fn probe(t: &TestApp, id: &str, failed: &mut usize) -> Duration {
    let started = Instant::now();
    let r = t
        .execute(Viewer::Anonymous, PROBE, json!({ "id": id }))
        .await;
    if !r["errors"].is_null() {
        *failed += 1;
    }
    started.elapsed()
}

async fn probe_latency_under_hostile_requests() {
    let t = Arc::new(spawn_app_with(|_| {}).await);
    let star = t.user("star").await;
    seed_followers(&t, star, "fan", FOLLOWERS, 1).await;
    let friend = t.user("friend").await;
    seed_followers(&t, friend, "pal", 20, 1).await;
    // As autovacuum would soon after a bulk load: plans from real statistics.
    t.sql("ANALYZE").await;
    let star_id = kith::testing::graph::ids::user_id(star).to_string();
    let friend_id = kith::testing::graph::ids::user_id(friend).to_string();

    // Warm caches and pools.
    let mut failed = 0;
    for _ in 0..20 {
        probe(&t, &friend_id, &mut failed).await;
    }
    let mut idle: Vec<Duration> = Vec::new();
    for _ in 0..PROBES_IDLE {
        idle.push(probe(&t, &friend_id, &mut failed).await);
    }
    let mut rows = vec![format!("| idle | – | {} | {failed} |", summary(&mut idle))];

    let shapes = [
        (
            "2,000 × followers(first: 1, offset: 150000)",
            hostile(2000, 150_000),
        ),
        (
            "19 × followers(first: 1, offset: 10000)",
            hostile(19, 10_000),
        ),
    ];
    for (name, query) in shapes {
        let stop = Arc::new(AtomicBool::new(false));
        let attacker = {
            let (t, stop, id, query) = (t.clone(), stop.clone(), star_id.clone(), query.clone());
            tokio::spawn(async move {
                let mut answers: Vec<(Duration, String)> = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    let r = t
                        .execute(Viewer::Anonymous, &query, json!({ "id": id }))
                        .await;
                    let code = r["errors"][0]["extensions"]["code"]
                        .as_str()
                        .unwrap_or("ok")
                        .to_owned();
                    answers.push((started.elapsed(), code));
                }
                answers
            })
        };
        let mut under: Vec<Duration> = Vec::new();
        let mut failed = 0;
        let deadline = Instant::now() + ATTACK;
        while Instant::now() < deadline {
            under.push(probe(&t, &friend_id, &mut failed).await);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        stop.store(true, Ordering::Relaxed);
        let answers = attacker.await.unwrap();
        let mut codes: Vec<&str> = answers.iter().map(|(_, c)| c.as_str()).collect();
        codes.sort();
        codes.dedup();
        let mut hostile_times: Vec<Duration> = answers.iter().map(|(d, _)| *d).collect();
        hostile_times.sort();
        let hostile_p50 = millis(hostile_times[hostile_times.len() / 2]);
        rows.push(format!(
            "| under {name} | {} requests, p50 {hostile_p50:.1} ms, answered {} | {} | {failed} |",
            answers.len(),
            codes.join("/"),
            summary(&mut under)
        ));
    }
    let report = format!(
        "# Probe latency under hostile requests\n\n\
         An account with {FOLLOWERS} followers; one anonymous client sends the hostile request \
         back to back for {} s while another sends an ordinary profile query (a user with 20 \
         followers: counters and the first 20) every 20 ms. In-process GraphQL, debug build, \
         PostgreSQL pool of 8, everything on this machine.\n\n\
         | phase | hostile requests | probes | p50 ms | p90 ms | p99 ms | max ms | probes failed |\n\
         |---|---|---|---|---|---|---|---|\n{}\n",
        ATTACK.as_secs(),
        rows.join("\n")
    );
    let dir = reports();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("hostile.md"), &report).unwrap();
    eprintln!("{report}");
}

/// Probe latency (p50/p90/p99/max, ms) of profile queries over HTTP every
/// 20 ms for `for_`, on `port` as `token`'s user; failures counted.
async fn http_probes(port: u16, token: &str, id: &str, for_: Duration) -> (Vec<Duration>, usize) {
    let mut samples = Vec::new();
    let mut failed = 0;
    let deadline = Instant::now() + for_;
    while Instant::now() < deadline {
        let started = Instant::now();
        match crate::http_client::graphql(port, token, PROBE, json!({ "id": id })).await {
            Ok(r) if r["errors"].is_null() => {}
            _ => failed += 1,
        }
        samples.push(started.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (samples, failed)
}

/// How a probe's latency moves while one WebSocket sends 3,000 queries
/// that each page deep into a 20,000-edge list in PostgreSQL at once.
/// Appends to `target/bench-reports/hostile.md`.
async fn probe_latency_under_a_websocket_flood() {
    use crate::helpers::{LiveClient, auth, gid, replica};
    let t = spawn_app_with(|_| {}).await;
    let (star, reader) = (t.user("star").await, t.user("reader").await);
    seed_followers(&t, star, "fan", 20_000, 1).await;
    let friend = t.user("friend").await;
    seed_followers(&t, friend, "pal", 20, 1).await;
    t.sql("ANALYZE following, follower, users, user_stats")
        .await;
    let r = replica(&t, t.app.clone(), false).await;
    let token = t.token(reader);
    let friend_id = gid(friend);
    http_probes(r.port, &token, &friend_id, Duration::from_secs(2)).await;
    let (mut quiet, quiet_failed) =
        http_probes(r.port, &token, &friend_id, Duration::from_secs(5)).await;

    let mut attacker = LiveClient::connect(r.port, auth(&t, reader)).await.unwrap();
    let deep = "query($id: ID!) { user(id: $id) {
        a: followers(first: 1, offset: 9000) { edges { cursor } }
        b: following(first: 1, offset: 9000) { edges { cursor } } } }";
    let started = Instant::now();
    for i in 0..3000 {
        attacker
            .subscribe(&format!("d{i}"), deep, json!({ "id": gid(star) }))
            .await;
    }
    let drain = tokio::spawn(async move {
        let mut codes: std::collections::BTreeMap<String, usize> = Default::default();
        let mut answered = 0;
        while answered < 3000 {
            let Ok(message) = attacker.next().await else {
                break;
            };
            if message["type"] == "next" {
                answered += 1;
                let code = message["payload"]["errors"][0]["extensions"]["code"]
                    .as_str()
                    .unwrap_or("ok")
                    .to_owned();
                *codes.entry(code).or_default() += 1;
            }
        }
        codes
    });
    let (mut flooded, flooded_failed) =
        http_probes(r.port, &token, &friend_id, Duration::from_secs(10)).await;
    let codes = drain.await.unwrap();
    let took = started.elapsed();
    let p99 = |samples: &mut Vec<Duration>| {
        samples.sort();
        millis(samples[((samples.len() - 1) as f64 * 0.99).round() as usize])
    };
    let ratio = p99(&mut flooded) / p99(&mut quiet);
    let codes: Vec<String> = codes.iter().map(|(c, n)| format!("{n} {c}")).collect();
    let report = format!(
        "\n## Probe latency under a WebSocket flood\n\n\
         One signed-in client sends 3,000 queries at once on one WebSocket, each paging \
         `offset: 9000` into two 20,000-edge lists (PostgreSQL-bound); another client sends a \
         profile query over HTTP every 20 ms. A replica in process, debug build, PostgreSQL \
         pool of 8, `KITH_MAX_OPERATIONS_PER_CONNECTION` {}.\n\n\
         | phase | probes | p50 ms | p90 ms | p99 ms | max ms | probes failed |\n\
         |---|---|---|---|---|---|---|\n\
         | quiet | {} | {quiet_failed} |\n\
         | flood | {} | {flooded_failed} |\n\n\
         p99 under the flood / quiet p99: {ratio:.2}. The flood's 3,000 queries: {} (in {:.1} s).\n",
        t.app.config.max_operations_per_connection,
        summary(&mut quiet),
        summary(&mut flooded),
        codes.join(", "),
        took.as_secs_f64(),
    );
    let path = reports().join("hostile.md");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut text = std::fs::read_to_string(&path).unwrap_or_default();
    text.push_str(&report);
    std::fs::write(&path, text).unwrap();
    eprintln!("{report}");
}

/// `target/bench-reports/`, where every bench writes its report.
fn reports() -> std::path::PathBuf {
    // CARGO_TARGET_DIR may put the target folder elsewhere.
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(
            || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target"),
            std::path::PathBuf::from,
        )
        .join("bench-reports")
}
