//! What every phase shares: the queries, the running `kith run` and its
//! scrapes ([`Bench`]), one phase's figures ([`Phase`]), the run's settings
//! ([`Run`]) and the seeded graph ([`Graph`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use diesel::QueryableByName;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use kith::app::App;
use serde_json::{Value, json};

use kith::model::UserId;

use crate::load::{Call, Conn, MakeCall, Outcome};
use crate::procs;

/// The run's settings, from the environment, and where it works.
pub struct Run {
    pub app: Arc<App>,
    /// The bench's own PostgreSQL schema.
    pub schema: String,
    /// The configured `DATABASE_URL`, without the bench schema (through a
    /// pooler: PostgreSQL itself, on the bench's own database).
    pub base_url: String,
    /// `target/bench-reports/`.
    pub reports: std::path::PathBuf,
    pub users: i64,
    pub edges: i64,
    pub celebrity_followers: i64,
    pub seconds: u64,
    pub clients: usize,
}

impl Run {
    /// `KITH_BENCH_*` settings, and an isolated application of its own.
    pub async fn from_env() -> Self {
        let schema = format!("bench_suite_{}", chrono::Utc::now().timestamp());
        let app = crate::common::isolated_app(&schema, |c| c.database.pool_size = 4).await;
        let reports = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-reports");
        std::fs::create_dir_all(&reports).unwrap();
        // Through a pooler the bench has a database of its own: the limits
        // and the reference use its `public` schema on PostgreSQL itself.
        let (schema, base_url) = match &app.config.database.session_url {
            Some(session) => ("public".to_owned(), session.clone()),
            None => (schema, base_url()),
        };
        Self {
            app,
            schema,
            base_url,
            reports,
            users: env_number("KITH_BENCH_USERS", 1_100_000) as i64,
            edges: env_number("KITH_BENCH_EDGES", 3_000_000) as i64,
            celebrity_followers: env_number("KITH_BENCH_CELEBRITY_FOLLOWERS", 1_000_000) as i64,
            seconds: env_number("KITH_BENCH_SECONDS", 10),
            clients: env_number("KITH_BENCH_CLIENTS", 16) as usize,
        }
    }

    /// A new session on the bench schema (on PostgreSQL itself).
    pub async fn conn(&self) -> AsyncPgConnection {
        use diesel_async::AsyncConnection as _;
        AsyncPgConnection::establish(self.app.config.session_url())
            .await
            .expect("PostgreSQL")
    }
}

/// The seeded graph, and the users the phases pick.
pub struct Graph {
    pub summary: kith::testing::store::seed::Summary,
    pub seed_secs: f64,
    /// The one account with `celebrity_followers` followers.
    pub celebrity: i64,
    /// Users with 20 to 200 followers: whose profiles are read.
    pub ordinary: Vec<i64>,
    /// Users following 5 to 200: who reads them.
    pub viewers: Vec<i64>,
    /// A new account the fan rush follows.
    pub rush_target: i64,
    /// A viewer following 5,000 (more than a followers list's window).
    pub heavy_viewer: i64,
    /// A viewer following 2,000, for "followers you know" of the celebrity.
    pub known_viewer: i64,
}

pub const PROFILE: &str = "query($id: ID!) { user(id: $id) { handle displayName
  counters { followings followers posts likesReceived favsReceived }
  followers(first: 20) { totalCount pageInfo { hasNextPage endCursor }
    edges { cursor followedAt node { id handle displayName
      counters { followings followers posts likesReceived favsReceived }
      viewerRelation { following followedBy mutual } } } } } }";
pub const KNOWN: &str = "query($id: ID!) { user(id: $id) { handle displayName
  counters { followings followers }
  viewerRelation { following knownFollowersCount { count exact } }
  knownFollowers(first: 3) { edges { node { id handle displayName } } } } }";
pub const DEEP: &str = "query($id: ID!, $after: String) { user(id: $id) {
  followers(first: 20, after: $after) { pageInfo { hasNextPage endCursor }
    edges { cursor followedAt node { id handle } } } } }";
pub const CURSOR_AT: &str = "query($id: ID!, $offset: Int!) { user(id: $id) {
  followers(first: 1, offset: $offset) { pageInfo { endCursor } } } }";
pub const RELATIONSHIPS: &str =
    "query($ids: [ID!]!) { relationships(ids: $ids) { following followedBy mutual } }";
pub const FOLLOW: &str = "mutation($id: ID!) { follow(input: {userId: $id}) { changed } }";
pub const UNFOLLOW: &str = "mutation($id: ID!) { unfollow(input: {userId: $id}) { changed } }";
pub const FIRST_PAGE: &str = "query($id: ID!) { user(id: $id) { counters { followers }
  followers(first: 20) { edges { node { id } } } } }";

pub fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map_or(default, |v| v.parse().expect(name))
}

/// A well-mixed 64-bit hash (splitmix64): reproducible "random" choices.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

pub fn gid(user: i64) -> String {
    kith::testing::graph::ids::user_id(UserId::new(user).expect("positive id")).to_string()
}

#[derive(QueryableByName)]
pub struct Id {
    #[diesel(sql_type = BigInt)]
    pub id: i64,
}

pub async fn ids(conn: &mut AsyncPgConnection, sql: &str) -> Vec<i64> {
    let rows: Vec<Id> = diesel::sql_query(sql).load(conn).await.expect(sql);
    rows.into_iter().map(|r| r.id).collect()
}

/// The running `kith run` and what the phases share.
pub struct Bench {
    pub app: Arc<App>,
    pub addr: SocketAddr,
    /// Where the `kith run` under test serves `/metrics`.
    pub metrics: SocketAddr,
    pub kith_pid: u32,
    pub phase: Duration,
    pub first_id: i64,
    pub users: i64,
    pub report: Vec<Phase>,
}

impl Bench {
    /// A request maker over this bench's tokens.
    pub fn calls(
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
    pub async fn metrics_text(&self) -> String {
        let mut conn = Conn::open(self.metrics).await.expect("connect");
        let (_, body) = conn.send("GET", "/metrics", None, "").await.expect("GET");
        String::from_utf8_lossy(&body).into_owned()
    }

    pub async fn post(&self, token: Option<&str>, query: &str, variables: Value) -> Value {
        let mut conn = Conn::open(self.addr).await.expect("connect");
        let body = json!({ "query": query, "variables": variables }).to_string();
        let (_, body) = conn
            .send("POST", "/graphql", token, &body)
            .await
            .expect("POST");
        serde_json::from_slice(&body).expect("JSON answer")
    }

    /// Kith's own counters: `(statements, read round trips, lag histogram)`.
    pub async fn scrape(&self) -> Scrape {
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
    pub async fn drain(&self) {
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
                Ok(mut conn) => kith::testing::store::outbox::backlog(&mut conn)
                    .await
                    .unwrap_or(1) as f64,
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
    pub async fn phase<F>(&mut self, name: &str, shape: &str, load: F) -> Phase
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

pub struct Scrape {
    pub statements: f64,
    pub redis: f64,
    pub lag: Vec<(f64, f64)>,
}

/// `(count, p50, p99)` of the lag observed between two scrapes, ms, each
/// quantile interpolated within its histogram bucket.
pub fn lag_quantiles(before: &[(f64, f64)], after: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
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
pub struct Phase {
    pub name: String,
    pub shape: String,
    pub requests: u64,
    pub failed: u64,
    pub errors: BTreeMap<String, u64>,
    pub throughput: f64,
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub cpu_ms: BTreeMap<String, f64>,
    pub statements: f64,
    pub redis: f64,
    pub lag: Option<(f64, f64, f64)>,
    pub rss_mib: f64,
}

impl Phase {
    pub fn json(&self) -> Value {
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

    pub fn kith_pg_redis_cpu(&self) -> f64 {
        ["kith", "postgres", "redis"]
            .iter()
            .map(|g| self.cpu_ms.get(*g).copied().unwrap_or(0.0))
            .sum()
    }

    pub fn row(&self) -> String {
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

/// The `kith run` under test: stopped (SIGTERM, then waited for) when the
/// bench ends, by a panic too.
pub struct Child(pub std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .arg(self.0.id().to_string())
            .status();
        let _ = self.0.wait();
    }
}

/// The configured `DATABASE_URL`, without the bench schema.
pub fn base_url() -> String {
    kith::config::Config::from_env()
        .expect("configuration")
        .database
        .url
}

impl Bench {
    /// Runs `calls` on `addr` until the process is warm: at least `least`,
    /// then until a second costs at most 0.01 statements per request — the
    /// background work a first read starts (fills, the sampled counter check
    /// of each user, once per interval) is done — or 60 s have passed.
    pub async fn warm_up(
        &self,
        addr: SocketAddr,
        clients: usize,
        least: Duration,
        calls: MakeCall,
    ) {
        crate::load::closed_loop(addr, clients, least, None, calls.clone()).await;
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(60) {
            let before = self.scrape().await.statements;
            let outcome = crate::load::closed_loop(
                addr,
                clients,
                Duration::from_secs(1),
                None,
                calls.clone(),
            )
            .await;
            let statements = self.scrape().await.statements - before;
            if statements <= 0.01 * outcome.latencies.len().max(1) as f64 {
                return;
            }
        }
        eprintln!("warm-up: still running statements after 60 s");
    }
}
