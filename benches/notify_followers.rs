//! A notification service paging through the notify followers of an
//! account with `KITH_BENCH_NOTIFY_FOLLOWERS` (100,000) followers, nine in
//! ten of whom asked to be told of its posts, as it would at every post:
//! over TCP, 100 a page, from this process, against two release `kith run`
//! processes over the same database — one holding the lists (the
//! default), one told to hold none (`KITH_NOTIFY_CACHE_MEMBERS=0`, every
//! page read from PostgreSQL by keyset).
//!
//! Each pass is timed, and the PostgreSQL statements each process made
//! for it are read from its `/metrics`. The first pass of the holding
//! process reads the list (and the followers' user rows); the next ones
//! must read no row. Then a thousand followers turn the option off (one
//! statement, as many notices) and a last pass must show them gone, still
//! without a statement.
//!
//! Needs the local stack (`scripts/stack up`; `scripts/stack clean` first
//! for a clean measure). Run `cargo bench --bench notify_followers`;
//! writes `target/bench-reports/notify-followers.md` and prints it.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kith::model::UserId;
use serde_json::{Value, json};

#[path = "common.rs"]
mod common;
#[allow(
    dead_code,
    reason = "the suite's load generator, of which this bench uses a part"
)]
#[path = "suite/load.rs"]
mod load;

use load::Conn;

const PAGE: &str = "query($id: ID!, $after: String) {
  notifyFollowers(userId: $id, first: 100, after: $after) {
    edges { node { id } } pageInfo { hasNextPage endCursor } } }";

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map_or(default, |v| v.parse().unwrap_or_else(|_| panic!("{name}")))
}

#[derive(diesel::QueryableByName)]
struct Number {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

async fn number(app: &kith::app::App, sql: &str) -> i64 {
    use diesel_async::RunQueryDsl as _;
    let mut conn = app.pg.get().await.unwrap();
    let row: Number = diesel::sql_query(sql).get_result(&mut conn).await.unwrap();
    row.n
}

/// The statements process `metrics` has made so far.
async fn statements(metrics: SocketAddr) -> u64 {
    let mut conn = Conn::open(metrics).await.expect("metrics");
    let (_, body) = conn
        .send("GET", "/metrics", None, "")
        .await
        .expect("metrics");
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix("kith_postgres_statements_total "))
        .and_then(|n| n.trim().parse().ok())
        .expect("kith_postgres_statements_total")
}

/// One pass through the list: members, pages, time, statements.
async fn pass(
    addr: SocketAddr,
    metrics: SocketAddr,
    token: &str,
    star: &str,
) -> (usize, usize, Duration, u64) {
    let before = statements(metrics).await;
    let started = Instant::now();
    let mut conn = Conn::open(addr).await.expect("connect");
    let (mut members, mut pages, mut after) = (0, 0, Value::Null);
    loop {
        let body = json!({ "query": PAGE, "variables": { "id": star, "after": after } });
        let (status, body) = conn
            .send("POST", "/graphql", Some(token), &body.to_string())
            .await
            .expect("answer");
        let answer: Value = serde_json::from_slice(&body).expect("JSON");
        assert!(status == 200 && answer["errors"].is_null(), "{answer}");
        let page = &answer["data"]["notifyFollowers"];
        members += page["edges"].as_array().map_or(0, Vec::len);
        pages += 1;
        if page["pageInfo"]["hasNextPage"] != true {
            break;
        }
        after = page["pageInfo"]["endCursor"].clone();
    }
    let took = started.elapsed();
    (members, pages, took, statements(metrics).await - before)
}

/// A release `kith run` on `app`'s database with `extra` settings; its
/// GraphQL and metrics addresses.
fn start(
    app: &kith::app::App,
    log: &str,
    extra: &[(&str, &str)],
) -> (std::process::Child, SocketAddr, SocketAddr) {
    let (addr, metrics) = {
        let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        (a.local_addr().unwrap(), b.local_addr().unwrap())
    };
    std::fs::create_dir_all("target/bench-reports").unwrap();
    let log = std::fs::File::create(format!("target/bench-reports/{log}")).unwrap();
    let c = &app.config;
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_kith"))
        .arg("serve")
        .env("DATABASE_URL", &c.database.url)
        .env("DATABASE_SESSION_URL", c.session_url())
        .env("REDIS_URL", &c.redis.url)
        .env("KITH_REDIS_PREFIX", &c.redis.prefix)
        .env("KITH_HTTP_ADDR", addr.to_string())
        .env("KITH_METRICS_ADDR", metrics.to_string())
        .env("KITH_AUTO_MIGRATE", "false")
        .env("KITH_SERVICE_CLIENTS", "notifier")
        .env("KITH_RATE_LIMIT_PER_SEC", "100000")
        .envs(extra.iter().copied())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("kith starts");
    (child, addr, metrics)
}

async fn ready(addr: SocketAddr) {
    let since = Instant::now();
    loop {
        if let Ok(mut conn) = Conn::open(addr).await
            && let Ok((200, _)) = conn.send("GET", "/readyz", None, "").await
        {
            return;
        }
        assert!(
            since.elapsed() < Duration::from_secs(60),
            "kith never got ready"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::main]
async fn main() {
    let followers = env_or("KITH_BENCH_NOTIFY_FOLLOWERS", 100_000) as i64;
    let name = format!("bench_notify_{}", std::process::id());
    let app = common::isolated_app(&name, |c| c.database.statement_timeout_ms = 0).await;

    // 1. The graph: a celebrity with the followers, nine in ten asking.
    let seeded = Instant::now();
    let summary = {
        let mut conn = app.pg.get().await.unwrap();
        kith::testing::store::seed::generate(
            &mut conn,
            &kith::testing::store::seed::Plan {
                users: followers + 1_000,
                edges: followers + 10_000,
                celebrities: 1,
                celebrity_followers: followers,
                prefix: "u".to_owned(),
                seed: 0.42,
                communities: 0,
            },
            |step| eprintln!("[{:>6.1} s] {step}", seeded.elapsed().as_secs_f64()),
        )
        .await
        .expect("seed")
    };
    let star = summary.first_id;
    let asking = number(
        &app,
        &format!(
            "WITH s AS (UPDATE following SET notify = TRUE, options_at = followed_at
                         WHERE to_user_id = {star} AND active AND from_user_id % 10 <> 0
                        RETURNING 1)
             SELECT count(*) AS n FROM s"
        ),
    )
    .await;
    eprintln!(
        "seeded in {:.1} s: {followers} followers, {asking} asking",
        seeded.elapsed().as_secs_f64()
    );
    let token = app.auth.tokens.issue_service(
        "notifier",
        kith::testing::auth::Scopes::NOTIFY,
        chrono::Utc::now().timestamp(),
        3600,
    );
    let star_id = kith::testing::graph::ids::user_id(UserId::new(star).unwrap()).to_string();

    // 2. The two processes; a first page starts each one's listening.
    let (mut held, held_addr, held_metrics) = start(&app, "notify-held-kith.log", &[]);
    let (mut keyset, keyset_addr, keyset_metrics) = start(
        &app,
        "notify-keyset-kith.log",
        &[("KITH_NOTIFY_CACHE_MEMBERS", "0")],
    );
    ready(held_addr).await;
    ready(keyset_addr).await;
    let mut rows = Vec::new();
    for (label, addr, metrics) in [
        ("holding the lists", held_addr, held_metrics),
        ("holding none (keyset)", keyset_addr, keyset_metrics),
    ] {
        let mut conn = Conn::open(addr).await.unwrap();
        let body = json!({ "query": PAGE, "variables": { "id": star_id, "after": null } });
        conn.send("POST", "/graphql", Some(&token), &body.to_string())
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        for n in 1..=3 {
            let (members, pages, took, made) = pass(addr, metrics, &token, &star_id).await;
            assert_eq!(members as i64, asking, "{label}, pass {n}");
            rows.push(format!(
                "| {label} | {n} | {members} | {pages} | {:.2} s | {:.2} ms | {made} |",
                took.as_secs_f64(),
                took.as_secs_f64() * 1000.0 / pages as f64,
            ));
        }
    }

    // 3. A thousand turn it off: the held list follows the notices.
    let off = number(
        &app,
        &format!(
            "WITH s AS (UPDATE following SET notify = FALSE
                         WHERE (from_user_id, to_user_id) IN (
                               SELECT from_user_id, to_user_id FROM following
                                WHERE to_user_id = {star} AND active AND notify
                                ORDER BY from_user_id LIMIT 1000)
                        RETURNING 1)
             SELECT count(*) AS n FROM s"
        ),
    )
    .await;
    let since = Instant::now();
    let after_change = loop {
        let (members, pages, took, made) = pass(held_addr, held_metrics, &token, &star_id).await;
        if members as i64 == asking - off || since.elapsed() > Duration::from_secs(30) {
            break (members, pages, took, made);
        }
    };
    let (members, pages, took, made) = after_change;
    rows.push(format!(
        "| holding the lists, after {off} turned it off | 4 | {members} | {pages} | {:.2} s | {:.2} ms | {made} |",
        took.as_secs_f64(),
        took.as_secs_f64() * 1000.0 / pages as f64,
    ));
    held.kill().ok();
    keyset.kill().ok();
    held.wait().ok();
    keyset.wait().ok();

    let report = format!(
        "# Notify followers\n\n\
         `cargo bench --bench notify_followers`: an account with {followers} followers, {asking} \
         of whom asked to be told of its posts; a service pages through `notifyFollowers` 100 at \
         a time over TCP (no `totalCount`), against a release `kith serve` holding the lists and \
         one holding none (`KITH_NOTIFY_CACHE_MEMBERS=0`: keyset pages from PostgreSQL). The \
         statements are each process's own (`kith_postgres_statements_total`); a first pass also \
         reads the followers' user rows into the process.\n\n\
         | process | pass | members | pages | took | a page | PostgreSQL statements |\n\
         |---|---|---|---|---|---|---|\n{}\n",
        rows.join("\n")
    );
    common::write_report("notify-followers.md", &report);
    println!("{report}");
    assert_eq!(
        members as i64,
        asking - off,
        "the held list after the change"
    );
    assert_eq!(made, 0, "a held pass makes no statement");
}
