//! `scripts/bench`: Kith's whole performance picture in one run, against
//! the machine's own limits measured in the same run.
//!
//! Seeds a graph with `kith seed-data`'s generator (its own schema, Redis
//! prefix and topics), starts the release `kith run` (API, relay and
//! projector in one process, as deployed on one machine) and drives it over
//! real TCP from this process:
//!
//! - `pgbench` single-row inserts and `redis-benchmark` for the commands a
//!   page needs — the limits — and, without Kith, the follow statement
//!   under `pgbench` and the broker carrying 1,000 events/s from the
//!   relay's producer to the projector's consumer (`limits.rs`);
//! - the profile query of ordinary users, the same of a celebrity with a
//!   million followers under many clients, deep pages, `relationships` for
//!   100 ids;
//! - follows and unfollows at full speed, follows paced at half of the 25 %
//!   target and at 1,000/s (pipeline lag from Kith's own histogram), and a
//!   fan rush of 10,000 distinct users onto one account.
//!
//! Every phase records throughput, p50/p99/p99.9, errors by code, and the
//! CPU time per request of Kith, PostgreSQL, Redis, the broker and the load
//! generator (from `/proc`); at the end Kith's RSS and Redis bytes per cached
//! edge. Writes `target/bench-reports/bench.md` and `bench.json`.
//!
//! Environment: `KITH_BENCH_USERS` (1,100,000), `KITH_BENCH_EDGES`
//! (3,000,000), `KITH_BENCH_CELEBRITY_FOLLOWERS` (1,000,000),
//! `KITH_BENCH_SECONDS` per phase (10), `KITH_BENCH_CLIENTS` (16).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use diesel::QueryableByName;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use kith::app::App;
use kith::model::UserId;
use serde_json::{Value, json};

#[path = "../common.rs"]
mod common;
mod limits;
mod load;
mod procs;
mod reference;

use load::{Call, Conn, MakeCall, Outcome};

const PROFILE: &str = "query($id: ID!) { user(id: $id) { handle displayName
  counters { followings followers posts likesReceived favsReceived }
  followers(first: 20) { totalCount pageInfo { hasNextPage endCursor }
    edges { cursor followedAt node { id handle displayName
      counters { followings followers posts likesReceived favsReceived }
      viewerRelation { following followedBy mutual } } } } } }";
const DEEP: &str = "query($id: ID!, $after: String) { user(id: $id) {
  followers(first: 20, after: $after) { pageInfo { hasNextPage endCursor }
    edges { cursor followedAt node { id handle } } } } }";
const CURSOR_AT: &str = "query($id: ID!, $offset: Int!) { user(id: $id) {
  followers(first: 1, offset: $offset) { pageInfo { endCursor } } } }";
const RELATIONSHIPS: &str =
    "query($ids: [ID!]!) { relationships(ids: $ids) { following followedBy mutual } }";
const FOLLOW: &str = "mutation($id: ID!) { follow(input: {userId: $id}) { changed } }";
const UNFOLLOW: &str = "mutation($id: ID!) { unfollow(input: {userId: $id}) { changed } }";
const FIRST_PAGE: &str = "query($id: ID!) { user(id: $id) { counters { followers }
  followers(first: 20) { edges { node { id } } } } }";

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map_or(default, |v| v.parse().expect(name))
}

/// A well-mixed 64-bit hash (splitmix64): reproducible "random" choices.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn gid(user: i64) -> String {
    kith::graph::ids::user_id(UserId::new(user).expect("positive id")).to_string()
}

#[derive(QueryableByName)]
struct Id {
    #[diesel(sql_type = BigInt)]
    id: i64,
}

async fn ids(conn: &mut AsyncPgConnection, sql: &str) -> Vec<i64> {
    let rows: Vec<Id> = diesel::sql_query(sql).load(conn).await.expect(sql);
    rows.into_iter().map(|r| r.id).collect()
}

/// The running `kith run` and what the phases share.
struct Bench {
    app: Arc<App>,
    addr: SocketAddr,
    /// Where the `kith run` under test serves `/metrics`.
    metrics: SocketAddr,
    kith_pid: u32,
    phase: Duration,
    first_id: i64,
    users: i64,
    report: Vec<Phase>,
}

impl Bench {
    /// A request maker over this bench's tokens.
    fn calls(
        &self,
        make: impl Fn(u64, &dyn Fn(i64) -> String) -> Call + Send + Sync + 'static,
    ) -> MakeCall {
        let tokens = self.app.auth.tokens.clone();
        Arc::new(move |i| {
            let token = |user: i64| {
                let now = chrono::Utc::now().timestamp();
                tokens.issue(UserId::new(user).expect("positive id"), now, 3600)
            };
            make(i, &token)
        })
    }

    /// `GET /metrics` of the `kith run` under test.
    async fn metrics_text(&self) -> String {
        let mut conn = Conn::open(self.metrics).await.expect("connect");
        let (_, body) = conn.send("GET", "/metrics", None, "").await.expect("GET");
        String::from_utf8_lossy(&body).into_owned()
    }

    async fn post(&self, token: Option<&str>, query: &str, variables: Value) -> Value {
        let mut conn = Conn::open(self.addr).await.expect("connect");
        let body = json!({ "query": query, "variables": variables }).to_string();
        let (_, body) = conn
            .send("POST", "/graphql", token, &body)
            .await
            .expect("POST");
        serde_json::from_slice(&body).expect("JSON answer")
    }

    /// Kith's own counters: `(statements, read round trips, lag histogram)`.
    async fn scrape(&self) -> Scrape {
        let text = self.metrics_text().await;
        let value = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        let mut lag = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("kith_pipeline_lag_seconds_bucket{le=\"") {
                let (le, count) = rest.split_once("\"} ").expect("bucket line");
                let le = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().expect("bucket bound")
                };
                lag.push((le, count.trim().parse::<f64>().expect("bucket count")));
            }
        }
        Scrape {
            statements: value("kith_postgres_statements_total "),
            redis: value("kith_read_redis_round_trips_total "),
            lag,
        }
    }

    /// Waits until the pipeline has applied everything committed so far (at
    /// most two minutes), so that one write phase's backlog is not measured
    /// as the next one's lag.
    async fn drain(&self) {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(120) {
            let text = self.metrics_text().await;
            let value = |name: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .and_then(|v| v.trim().parse::<f64>().ok())
            };
            // The metric is sampled every 10 s: the outbox itself says now.
            let backlog = match self.app.pg.get().await {
                Ok(mut conn) => kith::store::outbox::backlog(&mut conn).await.unwrap_or(1) as f64,
                Err(_) => 1.0,
            };
            let relayed = value("kith_events_relayed_total ").unwrap_or(0.0);
            let applied = value("kith_events_applied_total ").unwrap_or(0.0);
            if backlog == 0.0 && applied >= relayed {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        eprintln!("the pipeline did not drain within 120 s");
    }

    /// Runs `load` as a measured phase named `name`.
    async fn phase<F>(&mut self, name: &str, shape: &str, load: F) -> Phase
    where
        F: std::future::Future<Output = Outcome>,
    {
        let (cpu0, scrape0) = (procs::cpu(self.kith_pid), self.scrape().await);
        let mut outcome = load.await;
        let (cpu1, scrape1) = (procs::cpu(self.kith_pid), self.scrape().await);
        let cpu = cpu1.since(&cpu0);
        let n = outcome.requests().max(1) as f64;
        let ok = outcome.latencies.len() as f64;
        let rss = procs::memory_mib(self.kith_pid);
        let lag = lag_quantiles(&scrape0.lag, &scrape1.lag);
        let phase = Phase {
            name: name.to_owned(),
            shape: shape.to_owned(),
            requests: outcome.requests(),
            failed: outcome.failed(),
            errors: outcome.errors.clone(),
            throughput: ok / outcome.elapsed.as_secs_f64(),
            p50: outcome.percentile_ms(50.0),
            p99: outcome.percentile_ms(99.0),
            p999: outcome.percentile_ms(99.9),
            cpu_ms: procs::GROUPS
                .iter()
                .map(|g| (g.to_string(), cpu.of(g) * 1000.0 / n))
                .collect(),
            statements: (scrape1.statements - scrape0.statements) / n,
            redis: (scrape1.redis - scrape0.redis) / n,
            lag,
            rss_mib: rss.0,
        };
        eprintln!(
            "{name}: {:.0}/s p50 {:.1} p99 {:.1} ms, {} failed",
            phase.throughput, phase.p50, phase.p99, phase.failed
        );
        self.report.push(phase.clone());
        phase
    }
}

struct Scrape {
    statements: f64,
    redis: f64,
    lag: Vec<(f64, f64)>,
}

/// `(count, p50, p99)` of the lag observed between two scrapes, ms, each
/// quantile interpolated within its histogram bucket.
fn lag_quantiles(before: &[(f64, f64)], after: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    let delta: Vec<(f64, f64)> = after
        .iter()
        .zip(before)
        .map(|((le, a), (_, b))| (*le, a - b))
        .collect();
    let total = delta.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let quantile = |q: f64| {
        let want = q * total;
        let mut lower = (0.0, 0.0);
        for (le, count) in &delta {
            if *count >= want {
                if le.is_infinite() {
                    return lower.0 * 1000.0;
                }
                let span = count - lower.1;
                let within = if span > 0.0 {
                    (want - lower.1) / span
                } else {
                    1.0
                };
                return (lower.0 + (le - lower.0) * within) * 1000.0;
            }
            lower = (*le, *count);
        }
        lower.0 * 1000.0
    };
    Some((total, quantile(0.5), quantile(0.99)))
}

#[derive(Clone)]
struct Phase {
    name: String,
    shape: String,
    requests: u64,
    failed: u64,
    errors: BTreeMap<String, u64>,
    throughput: f64,
    p50: f64,
    p99: f64,
    p999: f64,
    cpu_ms: BTreeMap<String, f64>,
    statements: f64,
    redis: f64,
    lag: Option<(f64, f64, f64)>,
    rss_mib: f64,
}

impl Phase {
    fn json(&self) -> Value {
        json!({
            "name": self.name, "shape": self.shape, "requests": self.requests,
            "failed": self.failed, "errors": self.errors, "throughput": self.throughput,
            "p50_ms": self.p50, "p99_ms": self.p99, "p999_ms": self.p999,
            "cpu_ms_per_request": self.cpu_ms,
            "postgres_statements_per_request": self.statements,
            "redis_read_round_trips_per_request": self.redis,
            "pipeline_lag_ms": self.lag.map(|(n, p50, p99)| json!({"events": n, "p50": p50, "p99": p99})),
            "kith_rss_mib": self.rss_mib,
        })
    }

    fn kith_pg_redis_cpu(&self) -> f64 {
        ["kith", "postgres", "redis"]
            .iter()
            .map(|g| self.cpu_ms.get(*g).copied().unwrap_or(0.0))
            .sum()
    }

    fn row(&self) -> String {
        let cpu = |g: &str| self.cpu_ms.get(g).copied().unwrap_or(0.0);
        let errors = if self.errors.is_empty() {
            "0".to_owned()
        } else {
            self.errors
                .iter()
                .map(|(k, v)| format!("{v} {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "| {} | {} | {} | {:.0} | {:.1} | {:.1} | {:.1} | {errors} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |\n",
            self.name,
            self.shape,
            self.requests,
            self.throughput,
            self.p50,
            self.p99,
            self.p999,
            cpu("kith"),
            cpu("postgres"),
            cpu("redis"),
            cpu("broker"),
            cpu("bench"),
            self.statements,
            self.redis,
        )
    }
}

fn pgbench(url: &str, schema: &str, clients: usize, seconds: u64) -> f64 {
    let script = std::env::temp_dir().join(format!("{schema}.sql"));
    std::fs::write(
        &script,
        format!("INSERT INTO {schema}.bench_insert (v) VALUES (1);\n"),
    )
    .unwrap();
    let output = pgbench_start(url, &script, clients, seconds)
        .wait_with_output()
        .expect("pgbench ends");
    pgbench_tps(&output)
}

/// `pgbench` running `script` with `clients` for `seconds`, its output piped.
fn pgbench_start(
    url: &str,
    script: &std::path::Path,
    clients: usize,
    seconds: u64,
) -> std::process::Child {
    std::process::Command::new("pgbench")
        .args(["-n", "-c", &clients.to_string(), "-j", "2", "-T"])
        .arg(seconds.to_string())
        .arg("-f")
        .arg(script)
        .arg(url)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("pgbench runs (Debian's postgresql-client)")
}

/// The `tps = ` of a finished `pgbench`.
fn pgbench_tps(output: &std::process::Output) -> f64 {
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("tps = "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no tps in pgbench output: {text}"))
}

/// `redis-benchmark` requests per second for one command line.
fn redis_benchmark(clients: usize, command: &[&str]) -> f64 {
    let output = std::process::Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", "6379", "-q", "-n", "200000", "-c"])
        .arg(clients.to_string())
        .args(command)
        .output()
        .expect("redis-benchmark runs (Debian's redis-tools)");
    let text = String::from_utf8_lossy(&output.stdout).replace('\r', "\n");
    text.lines()
        .filter_map(|l| l.split_once(": ").map(|(_, rest)| rest))
        .filter_map(|rest| rest.split_whitespace().next())
        .filter_map(|n| n.parse::<f64>().ok())
        .next_back()
        .unwrap_or_else(|| panic!("no rate in redis-benchmark output: {text}"))
}

#[tokio::main]
async fn main() {
    let users = env_number("KITH_BENCH_USERS", 1_100_000) as i64;
    let edges = env_number("KITH_BENCH_EDGES", 3_000_000) as i64;
    let celebrity_followers = env_number("KITH_BENCH_CELEBRITY_FOLLOWERS", 1_000_000) as i64;
    let seconds = env_number("KITH_BENCH_SECONDS", 10);
    let clients = env_number("KITH_BENCH_CLIENTS", 16) as usize;
    let schema = format!("bench_suite_{}", chrono::Utc::now().timestamp());
    let app = common::isolated_app(&schema, |c| c.database_pool_size = 4).await;
    let base_url = base_url();

    // ---------------------------------------------------------------- seed
    let seeded = Instant::now();
    let mut conn = AsyncPgConnection::establish(&app.config.database_url)
        .await
        .expect("PostgreSQL");
    let summary = kith::store::seed::generate(
        &mut conn,
        &kith::store::seed::Plan {
            users,
            edges,
            celebrities: 1,
            celebrity_followers,
            prefix: "u".to_owned(),
            seed: 0.42,
        },
        |step| eprintln!("[{:>6.1} s] {step}", seeded.elapsed().as_secs_f64()),
    )
    .await
    .expect("seed");
    let seed_secs = seeded.elapsed().as_secs_f64();
    diesel::sql_query("CREATE TABLE bench_insert (id BIGSERIAL PRIMARY KEY, v INT)")
        .execute(&mut conn)
        .await
        .unwrap();
    let celebrity = summary.first_id;
    let ordinary = ids(
        &mut conn,
        "SELECT user_id AS id FROM user_stats WHERE followers BETWEEN 20 AND 200 ORDER BY user_id LIMIT 200",
    )
    .await;
    let viewers = ids(
        &mut conn,
        "SELECT user_id AS id FROM user_stats WHERE followings BETWEEN 5 AND 200 ORDER BY user_id LIMIT 50",
    )
    .await;
    let rush_target = kith::store::users::create(
        &mut conn,
        "rush_target",
        "Rush",
        kith::model::UserStatus::Active,
    )
    .await
    .unwrap()
    .get();
    assert!(
        ordinary.len() >= 20 && viewers.len() >= 10,
        "graph too small"
    );

    // ----------------------------------------------------------- kith run
    // Two free ports, held together so that they differ.
    let (addr, metrics): (SocketAddr, SocketAddr) = {
        let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        (a.local_addr().unwrap(), b.local_addr().unwrap())
    };
    let reports = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-reports");
    std::fs::create_dir_all(&reports).unwrap();
    let log = std::fs::File::create(reports.join("bench-kith.log")).unwrap();
    let c = &app.config;
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_kith"))
        .arg("run")
        .env("DATABASE_URL", &c.database_url)
        .env("KITH_REDIS_PREFIX", &c.redis_prefix)
        .env("KITH_FOLLOW_TOPIC", &c.follow_topic)
        .env("KITH_CONTENT_TOPIC", &c.content_topic)
        .env("KITH_DEAD_LETTER_TOPIC", &c.dead_letter_topic)
        .env("KITH_CONSUMER_GROUP", &c.consumer_group)
        .env("KITH_TOPIC_REPLICATION_FACTOR", "1")
        .env("KITH_TOPIC_MIN_INSYNC_REPLICAS", "1")
        .env("KITH_HTTP_ADDR", addr.to_string())
        .env("KITH_METRICS_ADDR", metrics.to_string())
        .env("KITH_AUTO_MIGRATE", "false")
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("kith run starts");
    let child = Child(child);
    let mut bench = Bench {
        app: app.clone(),
        addr,
        metrics,
        kith_pid: child.0.id(),
        phase: Duration::from_secs(seconds),
        first_id: summary.first_id,
        users: summary.users,
        report: Vec::new(),
    };
    let ready = Instant::now();
    loop {
        if let Ok(mut conn) = Conn::open(addr).await
            && let Ok((200, _)) = conn.send("GET", "/readyz", None, "").await
        {
            break;
        }
        assert!(
            ready.elapsed() < Duration::from_secs(60),
            "kith run never got ready"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // ------------------------------------------------------------ limits
    let pg_tps = pgbench(&base_url, &schema, clients, seconds);
    eprintln!("pgbench: {pg_tps:.0} tps");
    let counter_key = app.keys.counter_record(UserId::new(celebrity).unwrap());
    let [list_key, _, _] = app.keys.list(kith::paging::ListKey::Followers(
        UserId::new(celebrity).unwrap(),
    ));
    let _ = bench
        .post(None, PROFILE, json!({ "id": gid(celebrity) }))
        .await;
    kith::read::pages::fill(
        &app,
        kith::paging::ListKey::Followers(UserId::new(celebrity).unwrap()),
        false,
    )
    .await
    .unwrap();
    let redis_get = redis_benchmark(clients, &["GET", &counter_key]);
    let redis_zrange = redis_benchmark(
        clients,
        &[
            "ZRANGE",
            &list_key,
            "+inf",
            "-inf",
            "BYSCORE",
            "REV",
            "LIMIT",
            "0",
            "21",
            "WITHSCORES",
        ],
    );
    eprintln!("redis-benchmark: GET {redis_get:.0}/s, ZRANGE page {redis_zrange:.0}/s");
    let (statement_tps, statement_pg_ms) =
        limits::follow_statement(&base_url, &schema, clients, seconds).await;
    eprintln!(
        "kith_change_edge alone: {statement_tps:.0}/s, PostgreSQL {statement_pg_ms:.2} ms each"
    );
    let broker = limits::broker(&app.config, &schema, 1000, seconds).await;
    eprintln!("broker alone: {broker:?}");

    // ------------------------------------------------------------- reads
    let profile = {
        let (ordinary, viewers) = (Arc::new(ordinary.clone()), Arc::new(viewers.clone()));
        bench.calls(move |i, token| {
            let target = ordinary[(mix(i) % ordinary.len() as u64) as usize];
            let viewer = viewers[(mix(i ^ 0xABCD) % viewers.len() as u64) as usize];
            Call {
                token: Some(token(viewer)),
                body: json!({ "query": PROFILE, "variables": { "id": gid(target) } }).to_string(),
            }
        })
    };
    // Warm-up: user rows, counter records, the lists relations read.
    load::closed_loop(addr, clients, Duration::from_secs(5), None, profile.clone()).await;
    let perf = std::env::var("KITH_BENCH_PERF")
        .is_ok_and(|v| v == "1")
        .then(|| procs::perf_start(bench.kith_pid, &reports.join("bench-perf.data")))
        .flatten();
    let ordinary_phase = bench
        .phase(
            "profile, ordinary users",
            &format!("{clients} clients"),
            load::closed_loop(addr, clients, bench.phase, None, profile),
        )
        .await;
    let cpu_profile = perf.map(procs::PerfRecord::finish).unwrap_or_default();

    // The reference: PostGraphile over the same tables, the same profile
    // query for the same users and viewers (its process in the Kith column).
    let functions: Vec<String> = {
        #[derive(QueryableByName)]
        struct Name {
            #[diesel(sql_type = diesel::sql_types::Text)]
            proname: String,
        }
        let rows: Vec<Name> = diesel::sql_query(
            "SELECT DISTINCT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
             WHERE n.nspname = $1",
        )
        .bind::<diesel::sql_types::Text, _>(&schema)
        .load(&mut conn)
        .await
        .expect("functions of the bench schema");
        rows.into_iter().map(|r| r.proname).collect()
    };
    let reference_phase = match reference::start(
        &base_url,
        &schema,
        &functions,
        reports.join("bench-reference.log"),
    )
    .await
    {
        None => None,
        Some(reference) => {
            let calls: MakeCall = {
                let (ordinary, viewers) = (Arc::new(ordinary.clone()), Arc::new(viewers.clone()));
                Arc::new(move |i| {
                    let target = ordinary[(mix(i) % ordinary.len() as u64) as usize];
                    let viewer = viewers[(mix(i ^ 0xABCD) % viewers.len() as u64) as usize];
                    Call {
                        token: None,
                        body: json!({ "query": reference::PROFILE, "variables": {
                            "id": target.to_string(), "viewer": viewer.to_string() } })
                        .to_string(),
                    }
                })
            };
            let probe = calls(0);
            let mut conn = Conn::open(reference.addr).await.expect("reference");
            let (_, body) = conn
                .send("POST", "/graphql", None, &probe.body)
                .await
                .expect("reference answers");
            let answer: Value = serde_json::from_slice(&body).expect("JSON answer");
            assert!(
                answer["errors"].is_null()
                    && answer["data"]["userById"]["followingsByToUserId"]["edges"]
                        .as_array()
                        .is_some_and(|e| !e.is_empty()),
                "the reference query failed: {answer}"
            );
            load::closed_loop(
                reference.addr,
                clients,
                Duration::from_secs(5),
                None,
                calls.clone(),
            )
            .await;
            let kith_pid = std::mem::replace(&mut bench.kith_pid, reference.pid);
            let phase = bench
                .phase(
                    "reference: PostGraphile 4.14, the same profile query, ordinary users",
                    &format!("{clients} clients"),
                    load::closed_loop(reference.addr, clients, bench.phase, None, calls),
                )
                .await;
            bench.kith_pid = kith_pid;
            Some(phase)
        }
    };

    let celebrity_profile = {
        let viewers = Arc::new(viewers.clone());
        bench.calls(move |i, token| Call {
            token: Some(token(viewers[(mix(i) % viewers.len() as u64) as usize])),
            body: json!({ "query": PROFILE, "variables": { "id": gid(celebrity) } }).to_string(),
        })
    };
    load::closed_loop(
        addr,
        clients,
        Duration::from_secs(3),
        None,
        celebrity_profile.clone(),
    )
    .await;
    let celebrity_phase = bench
        .phase(
            "profile, celebrity",
            &format!("{clients} clients"),
            load::closed_loop(addr, clients, bench.phase, None, celebrity_profile.clone()),
        )
        .await;
    bench
        .phase(
            "profile, celebrity, many clients",
            "64 clients",
            load::closed_loop(addr, 64, bench.phase, None, celebrity_profile),
        )
        .await;

    let mut cursors = Vec::new();
    for offset in (1000..=10_000).step_by(250) {
        let r = bench
            .post(
                None,
                CURSOR_AT,
                json!({ "id": gid(celebrity), "offset": offset }),
            )
            .await;
        if let Some(c) = r["data"]["user"]["followers"]["pageInfo"]["endCursor"].as_str() {
            cursors.push(c.to_owned());
        }
    }
    let deep = {
        let cursors = Arc::new(cursors);
        bench.calls(move |i, _| Call {
            token: None,
            body: json!({ "query": DEEP, "variables": {
                "id": gid(celebrity), "after": cursors[(mix(i) % cursors.len() as u64) as usize] } })
            .to_string(),
        })
    };
    bench
        .phase(
            "deep pages (celebrity, 1,000-10,000 deep, by cursor)",
            &format!("{clients} clients"),
            load::closed_loop(addr, clients, bench.phase, None, deep),
        )
        .await;

    let relationships = {
        let (first, viewers) = (bench.first_id, Arc::new(viewers.clone()));
        bench.calls(move |i, token| {
            let ids: Vec<String> = (0..100)
                .map(|k| gid(first + 1 + (mix(i * 100 + k) % 2000) as i64))
                .collect();
            Call {
                token: Some(token(viewers[(mix(i) % viewers.len() as u64) as usize])),
                body: json!({ "query": RELATIONSHIPS, "variables": { "ids": ids } }).to_string(),
            }
        })
    };
    load::closed_loop(
        addr,
        clients,
        Duration::from_secs(5),
        None,
        relationships.clone(),
    )
    .await;
    bench
        .phase(
            "relationships, 100 ids",
            &format!("{clients} clients"),
            load::closed_loop(addr, clients, bench.phase, None, relationships),
        )
        .await;

    // ------------------------------------------------------------ writes
    // Distinct pairs among every seeded user but the celebrity; an unfollow
    // undoes a follow made 1,000 requests earlier.
    let pair = {
        let (first, n) = (bench.first_id + 1, bench.users - 1);
        move |k: u64| {
            let from = first + (mix(k) % n as u64) as i64;
            let to = first + (mix(k ^ 0x5555_5555) % n as u64) as i64;
            (
                from,
                if to == from {
                    first + ((to - first + 1) % n)
                } else {
                    to
                },
            )
        }
    };
    let mix_calls = bench.calls(move |i, token| {
        let (query, (from, to)) = if i % 4 == 3 && i >= 1000 {
            (UNFOLLOW, pair(i - 1000))
        } else {
            (FOLLOW, pair(i))
        };
        Call {
            token: Some(token(from)),
            body: json!({ "query": query, "variables": { "id": gid(to) } }).to_string(),
        }
    });
    // The mix's CPU is counted until the pipeline has applied it (below).
    let write_cpu0 = procs::cpu(bench.kith_pid);
    let follow_phase = bench
        .phase(
            "follow/unfollow mix, full speed",
            &format!("{clients} clients"),
            load::closed_loop(addr, clients, bench.phase, None, mix_calls),
        )
        .await;
    let half_target = (pg_tps * 0.25 / 2.0).max(1.0);
    let paced = |offset: u64| {
        bench.calls(move |i, token| {
            let (from, to) = pair(offset + i);
            Call {
                token: Some(token(from)),
                body: json!({ "query": FOLLOW, "variables": { "id": gid(to) } }).to_string(),
            }
        })
    };
    let (half_calls, lag_calls) = (paced(10_000_000), paced(20_000_000));
    bench.drain().await;
    let write_cpu = procs::cpu(bench.kith_pid).since(&write_cpu0);
    let lag_phase = bench
        .phase(
            "follows paced at 1,000/s",
            "1000/s open loop",
            load::open_loop(addr, 1000.0, bench.phase, 64, lag_calls),
        )
        .await;
    bench.drain().await;
    let half_phase = bench
        .phase(
            "follows paced at half the 25% target",
            &format!("{half_target:.0}/s open loop"),
            load::open_loop(addr, half_target, bench.phase, 64, half_calls),
        )
        .await;
    bench.drain().await;

    // Fan rush: 10,000 distinct users follow one new account.
    let rush = {
        let first = bench.first_id + 1;
        bench.calls(move |i, token| Call {
            token: Some(token(first + i as i64)),
            body: json!({ "query": FOLLOW, "variables": { "id": gid(rush_target) } }).to_string(),
        })
    };
    let rush_phase = bench
        .phase(
            "fan rush: 10,000 users follow one account",
            "64 clients",
            load::closed_loop(addr, 64, Duration::from_secs(60), Some(10_000), rush),
        )
        .await;
    let drained = Instant::now();
    let (mut counted, mut page_right) = (0, false);
    while drained.elapsed() < Duration::from_secs(60) {
        let r = bench
            .post(None, FIRST_PAGE, json!({ "id": gid(rush_target) }))
            .await;
        counted = r["data"]["user"]["counters"]["followers"]
            .as_u64()
            .unwrap_or(0);
        let shown: Vec<String> = r["data"]["user"]["followers"]["edges"]
            .as_array()
            .map(|edges| {
                edges
                    .iter()
                    .filter_map(|e| e["node"]["id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let truth: Vec<String> = ids(
            &mut conn,
            &format!(
                "SELECT from_user_id AS id FROM following WHERE to_user_id = {rush_target} AND active
                 ORDER BY followed_at DESC, from_user_id DESC LIMIT 20"
            ),
        )
        .await
        .into_iter()
        .map(gid)
        .collect();
        page_right = shown == truth;
        if counted == 10_000 && page_right {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let drain_secs = drained.elapsed().as_secs_f64();

    // ------------------------------------------------------------ memory
    let (rss, hwm) = procs::memory_mib(bench.kith_pid);
    let bytes_per_edge = {
        let mut redis = app.redis.get().await.unwrap();
        let mut bytes = 0u64;
        let mut members = 0u64;
        for user in ordinary.iter().chain([&celebrity]) {
            let list = kith::paging::ListKey::Followers(UserId::new(*user).unwrap());
            for key in app.keys.list(list) {
                let used: Option<u64> = redis::cmd("MEMORY")
                    .arg("USAGE")
                    .arg(&key)
                    .query_async(&mut *redis)
                    .await
                    .unwrap_or(None);
                bytes += used.unwrap_or(0);
            }
            let [zset, _, _] = app.keys.list(list);
            let n: u64 = redis::cmd("ZCARD")
                .arg(&zset)
                .query_async(&mut *redis)
                .await
                .unwrap_or(0);
            members += n;
        }
        (bytes as f64 / members.max(1) as f64, members)
    };

    drop(child);

    // ------------------------------------------------------------ report
    let follow_ratio = follow_phase.throughput / pg_tps;
    let celebrity_cost = celebrity_phase.kith_pg_redis_cpu() / ordinary_phase.kith_pg_redis_cpu();
    let lag = lag_phase.lag.unwrap_or_default();
    let mut targets = vec![
        // The pool's count includes background work (the relay's fallback
        // poll, projector lease renewals): a few statements a second.
        (
            "profile: PostgreSQL statements per warm request (incl. background)",
            ordinary_phase.statements,
            0.01,
            "≤",
        ),
        (
            "profile: Redis round trips per warm request",
            ordinary_phase.redis,
            2.0,
            "≤",
        ),
        (
            "follow throughput ÷ pgbench single-insert tps",
            follow_ratio,
            0.25,
            "≥",
        ),
        (
            "follow p99 at half the 25% target, ms",
            half_phase.p99,
            20.0,
            "≤",
        ),
        ("pipeline lag p50 at 1,000 follows/s, ms", lag.1, 20.0, "≤"),
        ("pipeline lag p99 at 1,000 follows/s, ms", lag.2, 100.0, "≤"),
        // An open loop's rate is measured to its last answer, so a rate
        // held exactly reads a little under: 1% is allowed.
        (
            "achieved follows/s when paced at 1,000/s (within 1%)",
            lag_phase.throughput,
            990.0,
            "≥",
        ),
        (
            "celebrity profile CPU ÷ ordinary profile CPU (Kith+PG+Redis)",
            celebrity_cost,
            1.2,
            "≤",
        ),
        (
            "celebrity profile p50 ÷ ordinary p50",
            celebrity_phase.p50 / ordinary_phase.p50,
            1.2,
            "≤",
        ),
        (
            "fan rush: seconds for 10,000 follows",
            rush_phase.requests as f64 / rush_phase.throughput.max(1e-9),
            10.0,
            "≤",
        ),
        (
            "fan rush: failed follows",
            rush_phase.failed as f64,
            0.0,
            "≤",
        ),
        (
            "fan rush: counter right after drain (followers)",
            counted as f64,
            10_000.0,
            "≥",
        ),
    ];
    if let Some(reference) = &reference_phase {
        targets.insert(
            0,
            (
                "profile throughput ÷ the reference's (PostGraphile, same run)",
                ordinary_phase.throughput / reference.throughput.max(1e-9),
                5.0,
                "≥",
            ),
        );
        targets.insert(
            1,
            (
                "profile p99 ÷ the reference's p99",
                ordinary_phase.p99 / reference.p99.max(1e-9),
                0.2,
                "≤",
            ),
        );
    }
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Kith bench ({})\n\nOne run on this machine ({} cores): PostgreSQL, Redis, the broker, `kith run` \
         (release) and the load generator on the same cores. Graph: {} users, {} edges, a celebrity \
         with {} followers (seeded in {seed_secs:.0} s). Phases of {seconds} s over real TCP \
         (HTTP/1.1 keep-alive).\n",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        summary.users,
        summary.edges,
        celebrity_followers,
    );
    let _ = writeln!(
        md,
        "## Limits measured in the same run\n\n| what | rate |\n|---|---|\n\
         | pgbench single-row insert, {clients} clients | {pg_tps:.0} tps |\n\
         | redis-benchmark GET (a counter record), {clients} clients | {redis_get:.0}/s |\n\
         | redis-benchmark ZRANGE BYSCORE REV LIMIT 0 21 (a page), {clients} clients | {redis_zrange:.0}/s |\n\
         | `kith_change_edge` alone (a follow of a random pair of 100,000 users; pgbench, {clients} clients, no Kith) | {statement_tps:.0}/s ({:.0}% of single-row inserts; PostgreSQL, all its processes, {statement_pg_ms:.2} ms CPU each) |\n\
         | the broker alone: {:.0} events/s with the relay's producer settings, read with the projector's consumer settings (no Kith) | acknowledged p50 {:.1} ms, p99 {:.1} ms; sent → consumed p50 {:.1} ms, p99 {:.1} ms; broker {:.2} ms CPU per event; {} of {} consumed |\n",
        statement_tps * 100.0 / pg_tps,
        broker.rate,
        broker.ack_p50,
        broker.ack_p99,
        broker.end_p50,
        broker.end_p99,
        broker.cpu_ms,
        broker.received,
        broker.sent,
    );
    let _ = writeln!(
        md,
        "## Phases\n\nCPU columns: milliseconds of CPU per request, from `/proc` (PostgreSQL: all \
         backends; broker: tansu; bench: the load generator; in the reference phase the Kith column \
         is the PostGraphile process). Statements and Redis: per request, from Kith's own counters.\n\n\
         | phase | load | requests | ok/s | p50 ms | p99 ms | p99.9 ms | errors | Kith | PostgreSQL | Redis | broker | bench | PG statements | Redis round trips |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for phase in &bench.report {
        md.push_str(&phase.row());
    }
    let _ = writeln!(
        md,
        "\nPipeline lag (commit → applied in every derived view, Kith's histogram, interpolated \
         within buckets): at 1,000/s p50 {:.1} ms, p99 {:.1} ms over {:.0} events; in the \
         full-speed mix {}.\n",
        lag.1,
        lag.2,
        lag.0,
        follow_phase
            .lag
            .map_or("n/a".to_owned(), |(n, p50, p99)| format!(
                "p50 {p50:.1} ms, p99 {p99:.1} ms over {n:.0} events"
            )),
    );
    let _ = writeln!(
        md,
        "Fan rush: {} follows in {:.1} s, {} failed; after the pipeline drained ({drain_secs:.1} s) \
         the account showed {counted} followers and its first page {} the truth's newest 20.\n",
        rush_phase.requests,
        rush_phase.requests as f64 / rush_phase.throughput.max(1e-9),
        rush_phase.failed,
        if page_right {
            "matched"
        } else {
            "did NOT match"
        },
    );
    let _ = writeln!(
        md,
        "Memory: `kith run` RSS {rss:.0} MiB (peak {hwm:.0} MiB); Redis {:.0} bytes per cached edge \
         (ZSet + version hash + marker, over {} cached followers-list entries).\n",
        bytes_per_edge.0, bytes_per_edge.1
    );
    if !cpu_profile.is_empty() {
        let _ = writeln!(
            md,
            "## Where `kith run` spends its CPU under the ordinary profile query\n\n\
             `perf record -F 999` of the process during that phase, self time by symbol, grouped:\n\n\
             | part | share of Kith's samples |\n|---|---|"
        );
        for (part, share) in &cpu_profile {
            let _ = writeln!(md, "| {part} | {share:.1}% |");
        }
        md.push('\n');
    }
    let _ = writeln!(
        md,
        "## Targets\n\n| figure | measured | limit | ratio to limit | met |\n|---|---|---|---|---|"
    );
    let mut target_json = Vec::new();
    for (what, value, limit, sense) in &targets {
        let met = match *sense {
            "≤" => value <= limit,
            _ => value >= limit,
        };
        let ratio = if *limit == 0.0 {
            "–".to_owned()
        } else {
            format!("{:.2}", value / limit)
        };
        let _ = writeln!(
            md,
            "| {what} | {value:.2} | {sense} {limit} | {ratio} | {} |",
            if met { "yes" } else { "**no**" }
        );
        target_json.push(json!({ "figure": what, "measured": value, "limit": limit, "sense": sense, "met": met }));
    }
    // What bounds the write targets, from the figures above.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let follow_cpu: f64 = ["kith", "postgres", "redis", "broker"]
        .iter()
        .map(|g| write_cpu.of(g))
        .sum::<f64>()
        * 1000.0
        / follow_phase.requests.max(1) as f64;
    let _ = writeln!(
        md,
        "\n## What bounds the write targets\n\n\
         - A write of the full-speed mix (three follows to one unfollow) took {follow_cpu:.2} ms \
         of CPU, Kith, PostgreSQL, Redis and the broker together, counted until the pipeline had \
         applied it (every process of each, so an upper bound): {cores:.0} cores carry at most \
         {:.0} such writes a second, against the 25% target's {:.0}/s.\n\
         - The follow statement alone, with nothing else running, reached {statement_tps:.0}/s, \
         {:.0}% of single-row inserts.\n\
         - The broker alone took a p50 of {:.1} ms (p99 {:.1} ms) from send to consumer at {:.0} \
         events/s, and {:.2} ms of its CPU per event; the lag target's p50 is 20 ms.\n",
        cores * 1000.0 / follow_cpu.max(1e-9),
        pg_tps * 0.25,
        statement_tps * 100.0 / pg_tps,
        broker.end_p50,
        broker.end_p99,
        broker.rate,
        broker.cpu_ms,
    );
    let report = json!({
        "graph": { "users": summary.users, "edges": summary.edges, "celebrity_followers": celebrity_followers, "seed_seconds": seed_secs },
        "limits": {
            "pgbench_tps": pg_tps,
            "redis_get_per_s": redis_get,
            "redis_zrange_page_per_s": redis_zrange,
            "follow_statement_per_s": statement_tps,
            "follow_statement_pg_cpu_ms": statement_pg_ms,
            "broker": {
                "rate": broker.rate,
                "sent": broker.sent,
                "received": broker.received,
                "ack_p50_ms": broker.ack_p50,
                "ack_p99_ms": broker.ack_p99,
                "end_to_end_p50_ms": broker.end_p50,
                "end_to_end_p99_ms": broker.end_p99,
                "cpu_ms_per_event": broker.cpu_ms,
            },
        },
        "phases": bench.report.iter().map(Phase::json).collect::<Vec<_>>(),
        "fan_rush": { "counted_followers": counted, "first_page_right": page_right, "drain_seconds": drain_secs },
        "memory": { "kith_rss_mib": rss, "kith_peak_rss_mib": hwm, "redis_bytes_per_cached_edge": bytes_per_edge.0 },
        "targets": target_json,
        "cpu_profile_percent": cpu_profile.iter().map(|(k, v)| json!({ "part": k, "share": v })).collect::<Vec<_>>(),
    });
    std::fs::write(
        reports.join("bench.json"),
        serde_json::to_string_pretty(&report).unwrap(),
    )
    .unwrap();
    common::write_report("bench.md", &md);

    drop(conn);
    let mut admin = AsyncPgConnection::establish(&base_url).await.unwrap();
    let _ = diesel::sql_query(format!("DROP SCHEMA {schema} CASCADE"))
        .execute(&mut admin)
        .await;
}

/// The `kith run` under test: stopped (SIGTERM, then waited for) when the
/// bench ends, by a panic too.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .arg(self.0.id().to_string())
            .status();
        let _ = self.0.wait();
    }
}

/// The configured `DATABASE_URL`, without the bench schema.
fn base_url() -> String {
    kith::config::Config::from_env()
        .expect("configuration")
        .database_url
}
