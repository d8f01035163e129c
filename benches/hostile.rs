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
    if phase.as_deref().is_none_or(|p| p == "crawl") {
        crawl_every_list().await;
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
        t.app.config.live.max_operations_per_connection,
        summary(&mut quiet),
        summary(&mut flooded),
        codes.join(", "),
        took.as_secs_f64(),
    );
    append_report(&report);
}

/// An anonymous client reads the first page of both lists of every user of
/// a 200,000-user graph, eight at a time, on a Redis of its own with
/// `maxmemory` 64 MB and `noeviction`, with fills unthrottled (as many
/// processes would allow them) while other accounts follow. Redis's
/// `used_memory` is sampled throughout; every write must go on without
/// `OOM`. Appends to `target/bench-reports/hostile.md`.
async fn crawl_every_list() {
    use crate::helpers::Redis;
    use kith::model::UserId;

    const USERS: i64 = 200_000;
    const EDGES: i64 = 1_000_000;
    const MAXMEMORY: u64 = 64 * 1024 * 1024;
    const CRAWLERS: i64 = 8;
    let redis = Redis::start(&[
        "--maxmemory",
        &MAXMEMORY.to_string(),
        "--maxmemory-policy",
        "noeviction",
    ]);
    let t = Arc::new(
        spawn_app_with(|c| {
            c.redis.url = redis.url.clone();
            c.caches.max_fills_per_sec = 1_000_000;
            // Seeding a million follows takes longer than a request may.
            c.database.statement_timeout_ms = 0;
        })
        .await,
    );
    let plan = kith::testing::store::seed::Plan {
        users: USERS,
        edges: EDGES,
        celebrities: 0,
        celebrity_followers: 0,
        prefix: "crawl".into(),
        seed: 0.7,
        communities: 0,
    };
    let seeded = kith::testing::store::seed::generate(&mut *t.conn().await, &plan, |_| {})
        .await
        .unwrap();
    t.sql("ANALYZE").await;
    let client = redis::Client::open(redis.url.as_str()).unwrap();
    let info = client.get_multiplexed_async_connection().await.unwrap();
    let used = move || {
        let mut info = info.clone();
        async move {
            let text: String = redis::cmd("INFO")
                .arg("memory")
                .query_async(&mut info)
                .await
                .unwrap();
            text.lines()
                .find_map(|l| l.strip_prefix("used_memory:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap()
        }
    };
    let before = used().await;
    let done = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn({
        let (done, used) = (done.clone(), used.clone());
        async move {
            let mut peak = 0;
            while !done.load(Ordering::Relaxed) {
                peak = peak.max(used().await);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            peak
        }
    });
    // Writers: a follow by a different account every 20 ms.
    let writer = tokio::spawn({
        let (t, done) = (t.clone(), done.clone());
        let first = seeded.first_id;
        async move {
            let mut codes: std::collections::BTreeMap<String, usize> = Default::default();
            let mut i = 0;
            while !done.load(Ordering::Relaxed) {
                let actor = UserId::new(first + i % USERS).unwrap();
                let target = UserId::new(first + (i * 7919 + 1) % USERS).unwrap();
                let r = t.follow(actor, target).await;
                let code = r["errors"][0]["extensions"]["code"]
                    .as_str()
                    .unwrap_or("ok")
                    .to_owned();
                *codes.entry(code).or_default() += 1;
                i += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            codes
        }
    });
    let query = "query($id: ID!) { user(id: $id) {
        followers(first: 20) { edges { node { id } } }
        following(first: 20) { edges { node { id } } } } }";
    let started = Instant::now();
    let crawlers: Vec<_> = (0..CRAWLERS)
        .map(|k| {
            let t = t.clone();
            let first = seeded.first_id;
            tokio::spawn(async move {
                let mut failed = 0usize;
                for n in (k..USERS).step_by(CRAWLERS as usize) {
                    let id = kith::testing::graph::ids::user_id(UserId::new(first + n).unwrap());
                    let r = t
                        .execute(Viewer::Anonymous, query, json!({ "id": id.to_string() }))
                        .await;
                    failed += usize::from(!r["errors"].is_null());
                }
                failed
            })
        })
        .collect();
    let mut failed = 0;
    for crawler in crawlers {
        failed += crawler.await.unwrap();
    }
    let took = started.elapsed();
    // The fills the crawl started end soon after it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    done.store(true, Ordering::Relaxed);
    let peak = sampler.await.unwrap();
    let codes = writer.await.unwrap();
    let after = used().await;
    let metrics = &t.app.metrics;
    let skipped = metrics
        .list_fills_skipped
        .get_or_create(&kith::testing::metrics::SkipLabels { reason: "memory" })
        .get();
    let oom: u64 = [
        "rate_limit",
        "write_through",
        "fill",
        "counter_record",
        "projector",
    ]
    .iter()
    .map(|path| {
        metrics
            .redis_out_of_memory
            .get_or_create(&kith::testing::metrics::PathLabels { path })
            .get()
    })
    .sum();
    let limit = MAXMEMORY / 4 * 3;
    let mb = |b: u64| b as f64 / (1024.0 * 1024.0);
    let codes: Vec<String> = codes.iter().map(|(c, n)| format!("{n} {c}")).collect();
    let report = format!(
        "\n## An anonymous crawl of every list\n\n\
         {USERS} users, {EDGES} follows (`kith seed-data`'s generator); an anonymous client \
         reads the first 20 of both lists of every user, {CRAWLERS} at a time, in process \
         (debug build), on a Redis of its own: `maxmemory` {:.0} MB, `noeviction`, \
         `KITH_FILL_MEMORY_LIMIT` at its default (three quarters: {:.2} MB), fills \
         unthrottled. Meanwhile one account after another follows another, every 20 ms.\n\n\
         | crawl | queries failed | used_memory before | peak (sampled every 100 ms) | after | \
         fills skipped for memory | writes refused `OOM` |\n\
         |---|---|---|---|---|---|---|\n\
         | {:.0} s | {failed} | {:.2} MB | {:.2} MB | {:.2} MB | {skipped} | {oom} |\n\n\
         The follows made meanwhile: {}.\n",
        mb(MAXMEMORY),
        mb(limit),
        took.as_secs_f64(),
        mb(before),
        mb(peak),
        mb(after),
        codes.join(", "),
    );
    append_report(&report);
    drop(redis);
}

/// Appends `report` to `target/bench-reports/hostile.md`, and prints it.
fn append_report(report: &str) {
    let path = reports().join("hostile.md");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut text = std::fs::read_to_string(&path).unwrap_or_default();
    text.push_str(report);
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
