//! The profile query — a user, its counters, the first 20 followers each with
//! counters and the viewer's relation — through the whole HTTP stack (axum
//! router, bearer token, GraphQL, DataLoaders, Redis, PostgreSQL), with warm
//! caches, from concurrent clients in the bench process.
//!
//! Needs the local stack (`scripts/stack up`). Run:
//!
//! ```sh
//! cargo bench --bench profile_query              # 16 clients, 15 s
//! KITH_BENCH_CLIENTS=32 KITH_BENCH_SECONDS=30 cargo bench --bench profile_query
//! ```
//!
//! Writes `target/bench-reports/profile_query.md` and prints it.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, header};
use diesel::sql_types::BigInt;
use http_body_util::BodyExt;
use kith::testing::paging::ListKey;
use tower::ServiceExt;

#[path = "common.rs"]
mod common;
#[path = "cpu.rs"]
mod cpu;

const FOLLOWERS: i64 = 5_000;
const PROFILE: &str = "query($id: ID!) { user(id: $id) { handle displayName
  counters { followings followers posts likesReceived favsReceived }
  followers(first: 20) { totalCount pageInfo { hasNextPage endCursor }
    edges { cursor followedAt node { id handle displayName
      counters { followings followers posts likesReceived favsReceived }
      viewerRelation { following followedBy mutual } } } } } }";

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map_or(default, |v| v.parse().expect(name))
}

#[tokio::main]
async fn main() {
    let clients = env_number("KITH_BENCH_CLIENTS", 16);
    let seconds = env_number("KITH_BENCH_SECONDS", 15);
    let name = format!("bench_profile_{}", chrono::Utc::now().timestamp());
    let app = common::isolated_app(&name, |c| c.database.pool_size = 32).await;

    // A star with FOLLOWERS followers; the viewer follows every tenth of them
    // and is followed back by every seventh, so relations vary along the page.
    let (star, viewer) = {
        use diesel_async::RunQueryDsl;
        let mut conn = app.pg.get().await.unwrap();
        let star = kith::testing::store::users::create(
            &mut conn,
            "star",
            "Star",
            kith::model::UserStatus::Active,
        )
        .await
        .unwrap();
        let viewer = kith::testing::store::users::create(
            &mut conn,
            "viewer",
            "Viewer",
            kith::model::UserStatus::Active,
        )
        .await
        .unwrap();
        kith::testing::store::users::seed(&mut conn, "fan", FOLLOWERS)
            .await
            .unwrap();
        for table in ["following", "follower"] {
            diesel::sql_query(format!(
                "INSERT INTO {table} (from_user_id, to_user_id, active, followed_at, version)
                 SELECT id, $1, TRUE, 'epoch'::timestamptz + (1700000000000 + id) * interval '1 millisecond', 1
                   FROM users WHERE handle LIKE 'fan%'"
            ))
            .bind::<BigInt, _>(star.get())
            .execute(&mut conn)
            .await
            .unwrap();
        }
        diesel::sql_query(
            "INSERT INTO following (from_user_id, to_user_id, active, followed_at, version)
             SELECT $1, id, TRUE, date_trunc('milliseconds', now()), 1 FROM users WHERE handle LIKE 'fan%' AND id % 10 = 0
             UNION ALL
             SELECT id, $1, TRUE, date_trunc('milliseconds', now()), 1 FROM users WHERE handle LIKE 'fan%' AND id % 7 = 0",
        )
        .bind::<BigInt, _>(viewer.get())
        .execute(&mut conn)
        .await
        .unwrap();
        diesel::sql_query(
            "UPDATE user_stats SET followers = $2, version = version + 1 WHERE user_id = $1",
        )
        .bind::<BigInt, _>(star.get())
        .bind::<BigInt, _>(FOLLOWERS)
        .execute(&mut conn)
        .await
        .unwrap();
        (star, viewer)
    };
    kith::testing::read::pages::fill(&app, ListKey::Followers(star), false)
        .await
        .unwrap();

    let token = app
        .auth
        .tokens
        .issue(viewer, chrono::Utc::now().timestamp(), 3600);
    let body = serde_json::json!({
        "query": PROFILE,
        "variables": { "id": kith::testing::graph::ids::user_id(star).to_string() },
    })
    .to_string();
    let router = kith::testing::http::router(app.clone());
    let request = move || {
        Request::post("/graphql")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .body(Body::from(body.clone()))
            .unwrap()
    };
    // Warm: counter records, user rows, the following lists relations read —
    // until a request runs no PostgreSQL statement (or 200 requests).
    for _ in 0..200 {
        let before = app.round_trips.snapshot().0;
        let response = router.clone().oneshot(request()).await.unwrap();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert!(json["errors"].is_null(), "{json}");
        assert_eq!(
            json["data"]["user"]["followers"]["edges"]
                .as_array()
                .unwrap()
                .len(),
            20
        );
        if app.round_trips.snapshot().0 == before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    let (pg0, redis0) = app.round_trips.snapshot();
    let cpu0 = (
        cpu::process_cpu_seconds(),
        cpu::redis_cpu_seconds(&app).await,
    );
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..clients {
        let router = router.clone();
        let request = request.clone();
        workers.spawn(async move {
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let sent = Instant::now();
                let response = router.clone().oneshot(request()).await.unwrap();
                let bytes = response.into_body().collect().await.unwrap().to_bytes();
                latencies.push(sent.elapsed().as_micros() as u64);
                assert!(
                    !bytes.windows(9).any(|w| w == b"\"errors\":"),
                    "request failed"
                );
            }
            latencies
        });
    }
    let mut latencies = Vec::new();
    while let Some(done) = workers.join_next().await {
        latencies.extend(done.unwrap());
    }
    let elapsed = started.elapsed().as_secs_f64();
    let (pg1, redis1) = app.round_trips.snapshot();
    let cpu1 = (
        cpu::process_cpu_seconds(),
        cpu::redis_cpu_seconds(&app).await,
    );
    latencies.sort_unstable();
    let n = latencies.len() as f64;
    let ms = |us: u64| us as f64 / 1000.0;
    let report = format!(
        "# Profile query (user + counters + 20 followers with counters and viewerRelation)\n\n\
         Machine: {} cores; PostgreSQL, Redis and the bench on it; release build; warm caches;\n\
         {clients} concurrent clients for {seconds} s through the axum router (no TCP).\n\n\
         CPU per request: the bench process (Kith and its in-process clients) and Redis,\n\
         from /proc and Redis's `INFO cpu` — steadier than throughput on a shared machine.\n\n\
         | requests | throughput req/s | p50 ms | p90 ms | p99 ms | max ms | PG statements/req | Redis calls/req | process CPU µs/req | Redis CPU µs/req |\n\
         |---|---|---|---|---|---|---|---|---|---|\n\
         | {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} | {:.0} |\n",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        latencies.len(),
        n / elapsed,
        ms(common::percentile(&latencies, 50.0)),
        ms(common::percentile(&latencies, 90.0)),
        ms(common::percentile(&latencies, 99.0)),
        ms(latencies.last().copied().unwrap_or(0)),
        (pg1 - pg0) as f64 / n,
        (redis1 - redis0) as f64 / n,
        (cpu1.0 - cpu0.0) * 1e6 / n,
        (cpu1.1 - cpu0.1) * 1e6 / n,
    );
    common::write_report("profile_query.md", &report);
}
