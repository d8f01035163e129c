//! What blocks and locked accounts cost a reader, through the whole HTTP stack
//! with warm caches:
//!
//! - the profile query (a user, its counters, 20 followers with counters and
//!   the viewer's relation) for a viewer with no blocks and for one with
//!   10,000 blocks elsewhere — target: within 20%;
//! - a page of 20 followers for a viewer who blocks none of them and for
//!   one who blocks every other follower, so the page is filled from twice
//!   as many edges — target: within 2×;
//! - the profile query (with `locked` and `viewerRelation.requested`) of a
//!   locked account and of an unlocked one with the same followers —
//!   target: within 10%.
//!
//! Each pair is measured alternately, three rounds of each, in one session.
//! Needs the local stack (`scripts/stack up`; `scripts/stack clean` first
//! for a clean measure). Run:
//!
//! ```sh
//! cargo bench --bench blocked_viewer         # 16 clients, 5 s per run
//! KITH_BENCH_CLIENTS=32 KITH_BENCH_SECONDS=10 cargo bench --bench blocked_viewer
//! ```
//!
//! Writes `target/bench-reports/blocked_viewer.md` and prints it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, header};
use diesel::sql_types::BigInt;
use diesel_async::RunQueryDsl;
use http_body_util::BodyExt;
use kith::app::App;
use kith::model::UserId;
use kith::testing::paging::ListKey;
use tower::ServiceExt;

#[path = "common.rs"]
mod common;
#[path = "cpu.rs"]
mod cpu;

const FOLLOWERS: i64 = 5_000;
const BLOCKS: i64 = 10_000;
const PROFILE: &str = "query($id: ID!) { user(id: $id) { handle displayName
  counters { followings followers posts likesReceived favsReceived }
  followers(first: 20) { totalCount pageInfo { hasNextPage endCursor }
    edges { cursor followedAt node { id handle displayName
      counters { followings followers posts likesReceived favsReceived }
      viewerRelation { following followedBy mutual blocking blockedBy } } } } } }";
const LOCKED_PROFILE: &str = "query($id: ID!) { user(id: $id) { handle displayName locked
  counters { followings followers posts likesReceived favsReceived }
  followers(first: 20) { totalCount pageInfo { hasNextPage endCursor }
    edges { cursor followedAt node { id handle displayName locked
      counters { followings followers posts likesReceived favsReceived }
      viewerRelation { following followedBy mutual blocking blockedBy requested } } } } } }";
const PAGE: &str = "query($id: ID!, $after: String) { user(id: $id) {
  followers(first: 20, after: $after) { pageInfo { hasNextPage endCursor }
    edges { cursor node { id handle } } } } }";

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map_or(default, |v| v.parse().expect(name))
}

async fn create(app: &App, handle: &str) -> UserId {
    let mut conn = app.pg.get().await.unwrap();
    kith::testing::store::users::create(&mut conn, handle, handle, kith::model::UserStatus::Active)
        .await
        .unwrap()
}

async fn sql(app: &App, statement: &str, a: i64, b: i64) {
    let mut conn = app.pg.get().await.unwrap();
    diesel::sql_query(statement)
        .bind::<BigInt, _>(a)
        .bind::<BigInt, _>(b)
        .execute(&mut conn)
        .await
        .unwrap();
}

/// One measured run: requests, their rate, and CPU µs (process + Redis) per request.
struct Run {
    requests: usize,
    per_sec: f64,
    p50_ms: f64,
    cpu_us: f64,
}

/// `clients` clients sending `body` as `viewer` for `seconds`.
async fn measure(app: &Arc<App>, viewer: UserId, body: &str, clients: u64, seconds: u64) -> Run {
    let token = app
        .auth
        .tokens
        .issue(viewer, chrono::Utc::now().timestamp(), 3600);
    let router = kith::testing::http::router(app.clone());
    let body = body.to_owned();
    let request = move || {
        Request::post("/graphql")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .body(Body::from(body.clone()))
            .unwrap()
    };
    // Warm until a request runs no PostgreSQL statement.
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
    let cpu0 = cpu::process_cpu_seconds() + cpu::redis_cpu_seconds(app).await;
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
    let cpu1 = cpu::process_cpu_seconds() + cpu::redis_cpu_seconds(app).await;
    latencies.sort_unstable();
    let n = latencies.len() as f64;
    Run {
        requests: latencies.len(),
        per_sec: n / elapsed,
        p50_ms: common::percentile(&latencies, 50.0) as f64 / 1000.0,
        cpu_us: (cpu1 - cpu0) * 1e6 / n,
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

#[tokio::main]
async fn main() {
    let clients = env_number("KITH_BENCH_CLIENTS", 16);
    let seconds = env_number("KITH_BENCH_SECONDS", 5);
    let name = format!("bench_blocks_{}", chrono::Utc::now().timestamp());
    let app = common::isolated_app(&name, |c| c.database.pool_size = 32).await;

    // A star with FOLLOWERS followers (`fan…`), a locked one with the same
    // followers; BLOCKS more accounts (`other…`).
    let star = create(&app, "star").await;
    let locked = create(&app, "locked").await;
    let plain = create(&app, "plain").await;
    let blocker = create(&app, "blocker").await;
    let halver = create(&app, "halver").await;
    {
        let mut conn = app.pg.get().await.unwrap();
        kith::testing::store::users::seed(&mut conn, "fan", FOLLOWERS)
            .await
            .unwrap();
        kith::testing::store::users::seed(&mut conn, "other", BLOCKS)
            .await
            .unwrap();
    }
    for account in [star, locked] {
        for table in ["following", "follower"] {
            sql(
                &app,
                &format!(
                    "INSERT INTO {table} (from_user_id, to_user_id, active, followed_at, version)
                     SELECT id, $1, TRUE, 'epoch'::timestamptz + (1700000000000 + id) * interval '1 millisecond', 1
                       FROM users WHERE handle LIKE 'fan%' AND $2 = $2"
                ),
                account.get(),
                0,
            )
            .await;
        }
        sql(
            &app,
            "UPDATE user_stats SET followers = $2, version = version + 1 WHERE user_id = $1",
            account.get(),
            FOLLOWERS,
        )
        .await;
    }
    sql(
        &app,
        "UPDATE users SET locked = TRUE WHERE id = $1 AND $2 = $2",
        locked.get(),
        0,
    )
    .await;
    // The blocker blocks BLOCKS accounts, none on the star's list; the
    // halver blocks every other follower of the star.
    let block = "INSERT INTO block (from_user_id, to_user_id, active, blocked_at, version)
                 SELECT $1, id, TRUE, date_trunc('milliseconds', now()), 1 FROM users WHERE ";
    sql(
        &app,
        &format!("{block} handle LIKE 'other%' AND $2 = $2"),
        blocker.get(),
        0,
    )
    .await;
    sql(
        &app,
        &format!("{block} handle LIKE 'fan%' AND id % 2 = $2"),
        halver.get(),
        0,
    )
    .await;
    for account in [star, locked] {
        kith::testing::read::pages::fill(&app, ListKey::Followers(account), false)
            .await
            .unwrap();
    }
    let body = |query: &str, account: UserId| {
        serde_json::json!({
            "query": query,
            "variables": { "id": kith::testing::graph::ids::user_id(account).to_string() },
        })
        .to_string()
    };
    let profile = body(PROFILE, star);
    let page = body(PAGE, star);
    let unlocked_profile = body(LOCKED_PROFILE, star);
    let locked_profile = body(LOCKED_PROFILE, locked);

    let mut rows = String::new();
    let mut ratios = Vec::new();
    // Each comparison: what, the base (body, viewer), the other, the target.
    for (what, base, other, target) in [
        (
            "profile query: 10,000 blocks vs none",
            (&profile, plain),
            (&profile, blocker),
            1.2,
        ),
        (
            "a page of 20 followers: half blocked vs none",
            (&page, plain),
            (&page, halver),
            2.0,
        ),
        (
            "profile query: a locked account vs an unlocked one",
            (&unlocked_profile, plain),
            (&locked_profile, plain),
            1.1,
        ),
    ] {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for round in 0..3 {
            for (side, (body, viewer), runs) in [("base", base, &mut a), ("other", other, &mut b)] {
                let run = measure(&app, viewer, body, clients, seconds).await;
                rows.push_str(&format!(
                    "| {what} | {round} | {side} | {} | {:.0} | {:.2} | {:.0} |\n",
                    run.requests, run.per_sec, run.p50_ms, run.cpu_us
                ));
                runs.push(run.cpu_us);
            }
        }
        let ratio = median(b) / median(a);
        ratios.push((what, ratio, target));
    }
    let mut summary = String::new();
    for (what, ratio, target) in &ratios {
        summary.push_str(&format!(
            "| {what} | {ratio:.2}× | ≤ {target:.1}× | {} |\n",
            if ratio <= target { "met" } else { "MISSED" }
        ));
    }
    let report = format!(
        "# Blocked viewers and locked accounts\n\n\
         Machine: {} cores; PostgreSQL, Redis and the bench on it; release build; warm caches;\n\
         {clients} concurrent clients, {seconds} s per run, runs alternating.\n\
         Cost: CPU µs per request (this process and Redis), steadier than throughput.\n\n\
         | comparison | median CPU/req, other ÷ base | target | |\n|---|---|---|---|\n{summary}\n\
         | comparison | round | side | requests | req/s | p50 ms | CPU µs/req |\n\
         |---|---|---|---|---|---|---|\n{rows}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );
    common::write_report("blocked_viewer.md", &report);
}
