//! Follow suggestions: their quality against follows hidden from a graph
//! with communities, and what a computation costs.
//!
//! **Quality.** A graph of `KITH_BENCH_USERS` (20,000) users and
//! `KITH_BENCH_EDGES` (2,000,000) follows in `KITH_BENCH_COMMUNITIES` (40)
//! communities (`kith seed-data --communities`). For a sample of 200 users
//! that follow at least 20, 10% of their follows are hidden (deleted from
//! the truth and the projection); each method then suggests 20 accounts
//! per user, and recall@20 (hidden follows found ÷ hidden follows) and
//! precision@20 (found ÷ suggestions made) are reported with the work each
//! did, for:
//! - Kith's bounded computation (`suggestedFollows`), caches warm;
//! - exact friends-of-friends: every follow of every followee counted
//!   (unbounded: the upper bound of the method);
//! - popularity alone: the most followed accounts not followed yet.
//!
//! Targets: Kith's recall ≥ 80% of exact friends-of-friends' and ≥ 2×
//! popularity's. Each row is also given for the viewers that follow more
//! accounts than Kith's sample reads (`KITH_SUGGESTIONS_SAMPLE`), where
//! the bound bites; and Kith runs in each of the walks
//! `KITH_BENCH_WALKS` names (`SAMPLExPER_FOLLOWEE`, default
//! `100x100,100x200,200x50`), on the same graph and caches.
//!
//! **Latency.** A viewer following 2,000 accounts that each follow 2,000:
//! 200 cold computations (nothing kept; lists cached) — target p99 ≤ 50 ms;
//! and `suggestedFollows(first: 20)` kept, through GraphQL, against the
//! profile query's cost — target ≤ 2 ms over it.
//!
//! Needs the local stack (`scripts/stack up`; `scripts/stack clean` first for
//! a clean measure). Run `cargo bench --bench suggestions`
//! (`KITH_BENCH_PARTS=quality` or `latency` for one part); writes
//! `target/bench-reports/suggestions.md` and prints it.

use std::collections::{HashMap, HashSet};
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

const K: usize = 20;

fn env_number(name: &str, default: i64) -> i64 {
    std::env::var(name)
        .ok()
        .map_or(default, |v| v.parse().expect(name))
}

#[derive(diesel::QueryableByName)]
struct Pair {
    #[diesel(sql_type = BigInt)]
    a: i64,
    #[diesel(sql_type = BigInt)]
    b: i64,
}

#[derive(diesel::QueryableByName)]
struct One {
    #[diesel(sql_type = BigInt)]
    a: i64,
}

async fn pairs(app: &App, sql: &str) -> Vec<(i64, i64)> {
    let mut conn = app.pg.get().await.unwrap();
    let rows: Vec<Pair> = diesel::sql_query(sql).load(&mut conn).await.unwrap();
    rows.into_iter().map(|r| (r.a, r.b)).collect()
}

async fn ones(app: &App, sql: &str) -> Vec<i64> {
    let mut conn = app.pg.get().await.unwrap();
    let rows: Vec<One> = diesel::sql_query(sql).load(&mut conn).await.unwrap();
    rows.into_iter().map(|r| r.a).collect()
}

async fn exec(app: &App, sql: &str) {
    let mut conn = app.pg.get().await.unwrap();
    diesel::sql_query(sql).execute(&mut conn).await.unwrap();
}

/// Hits, suggestions made, hidden follows, and work (entries read, Redis
/// round trips, PostgreSQL statements), summed over viewers.
#[derive(Default)]
struct Tally {
    hits: usize,
    made: usize,
    hidden: usize,
    entries: u64,
    redis: u64,
    statements: u64,
    viewers: usize,
}

impl Tally {
    fn add(&mut self, picked: &[i64], hidden: &HashSet<i64>) {
        self.hits += picked.iter().filter(|p| hidden.contains(p)).count();
        self.made += picked.len();
        self.hidden += hidden.len();
        self.viewers += 1;
    }
    fn recall(&self) -> f64 {
        self.hits as f64 / self.hidden.max(1) as f64
    }
    fn precision(&self) -> f64 {
        self.hits as f64 / self.made.max(1) as f64
    }
    fn row(&self, name: &str) -> String {
        let per = |n: u64| n as f64 / self.viewers.max(1) as f64;
        format!(
            "| {name} | {:.1}% | {:.1}% | {:.0} | {:.1} | {:.1} |\n",
            100.0 * self.recall(),
            100.0 * self.precision(),
            per(self.entries),
            per(self.redis),
            per(self.statements)
        )
    }
}

async fn quality(report: &mut String) {
    let users = env_number("KITH_BENCH_USERS", 20_000);
    let edges = env_number("KITH_BENCH_EDGES", 2_000_000);
    let communities = env_number("KITH_BENCH_COMMUNITIES", 40);
    let name = format!("bench_sugg_q_{}", std::process::id());
    // Seeding and the exact counts run long: no statement timeout here.
    let app = common::isolated_app(&name, |c| c.database.statement_timeout_ms = 0).await;
    let started = Instant::now();
    {
        let mut conn = app.pg.get().await.unwrap();
        let plan = kith::testing::store::seed::Plan {
            users,
            edges,
            celebrities: 0,
            celebrity_followers: 0,
            prefix: "q".to_owned(),
            seed: 0.42,
            communities,
        };
        kith::testing::store::seed::generate(&mut conn, &plan, |_| {})
            .await
            .unwrap();
    }
    eprintln!("seeded in {:.1} s", started.elapsed().as_secs_f64());
    exec(&app, "SELECT setseed(0.17)").await;
    let viewers = ones(
        &app,
        "SELECT from_user_id AS a FROM following WHERE active GROUP BY 1
          HAVING count(*) >= 20 ORDER BY random() LIMIT 200",
    )
    .await;
    // Hide 10% of each viewer's follows (at least one).
    let hidden_rows = pairs(
        &app,
        "WITH v AS (SELECT from_user_id, to_user_id,
                           row_number() OVER (PARTITION BY from_user_id ORDER BY random()) AS r,
                           count(*) OVER (PARTITION BY from_user_id) AS n
                      FROM following
                     WHERE active AND from_user_id IN (SELECT from_user_id FROM following WHERE active
                                                        GROUP BY 1 HAVING count(*) >= 20))
         SELECT from_user_id AS a, to_user_id AS b FROM v WHERE r <= greatest(n / 10, 1)",
    )
    .await;
    let chosen: HashSet<i64> = viewers.iter().copied().collect();
    let mut hidden: HashMap<i64, HashSet<i64>> = HashMap::new();
    for (a, b) in hidden_rows.into_iter().filter(|(a, _)| chosen.contains(a)) {
        hidden.entry(a).or_default().insert(b);
    }
    for (viewer, targets) in &hidden {
        let list = targets
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(",");
        for table in ["following", "follower"] {
            exec(
                &app,
                &format!(
                    "DELETE FROM {table} WHERE from_user_id = {viewer} AND to_user_id IN ({list})"
                ),
            )
            .await;
        }
    }
    exec(
        &app,
        "UPDATE user_stats s SET followings = (SELECT count(*) FROM following f WHERE f.from_user_id = s.user_id AND f.active),
                                 followers = (SELECT count(*) FROM follower f WHERE f.to_user_id = s.user_id AND f.active),
                                 version = kith_next_version(version)",
    )
    .await;

    let walks: Vec<(u32, u32)> = std::env::var("KITH_BENCH_WALKS")
        .unwrap_or_else(|_| "100x100,100x200,200x50".to_owned())
        .split(',')
        .map(|w| {
            let (a, b) = w.split_once('x').expect("SAMPLExPER_FOLLOWEE");
            (a.parse().expect("sample"), b.parse().expect("per followee"))
        })
        .collect();
    let mut kiths: Vec<(Arc<App>, [Tally; 2])> = Vec::new();
    for (sample, per) in &walks {
        let mut config = app.config.clone();
        config.suggestions.sample = *sample;
        config.suggestions.per_followee = *per;
        kiths.push((App::start(config).await.unwrap(), Default::default()));
    }
    let mut exact: [Tally; 2] = Default::default();
    let mut popular: [Tally; 2] = Default::default();
    let followings: HashMap<i64, i64> = pairs(
        &app,
        "SELECT from_user_id AS a, count(*) AS b FROM following WHERE active GROUP BY 1",
    )
    .await
    .into_iter()
    .collect();
    let sample = i64::from(app.config.suggestions.sample);
    // Warm the caches the computations read, as a running service has them.
    for viewer in &viewers {
        let user = UserId::new(*viewer).unwrap();
        for (kith_app, _) in &kiths {
            let _ = kith::testing::read::suggest::compute(kith_app, user)
                .await
                .unwrap();
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let most_followed = ones(
        &app,
        "SELECT user_id AS a FROM user_stats ORDER BY followers DESC, user_id LIMIT 400",
    )
    .await;
    for viewer in &viewers {
        let Some(hidden) = hidden.get(viewer) else {
            continue;
        };
        let user = UserId::new(*viewer).unwrap();
        // Both groups: every viewer, and those that follow more than the sample.
        let heavy = followings.get(viewer).copied().unwrap_or(0) > sample;
        let groups: &[usize] = if heavy { &[0, 1] } else { &[0] };
        for (kith_app, tallies) in &mut kiths {
            let (pg0, redis0) = kith_app.round_trips.snapshot();
            let (list, entries) = kith::testing::read::suggest::compute(kith_app, user)
                .await
                .unwrap();
            let (pg1, redis1) = kith_app.round_trips.snapshot();
            let picked: Vec<i64> = list.iter().take(K).map(|s| s.user.get()).collect();
            for g in groups {
                let kith = &mut tallies[*g];
                kith.add(&picked, hidden);
                kith.entries += entries as u64;
                kith.redis += redis1 - redis0;
                kith.statements += pg1 - pg0;
            }
        }

        let fof = pairs(
            &app,
            &format!(
                "SELECT f2.to_user_id AS a, count(*) AS b
                   FROM following f1 JOIN following f2 ON f2.from_user_id = f1.to_user_id AND f2.active
                  WHERE f1.from_user_id = {viewer} AND f1.active AND f2.to_user_id <> {viewer}
                    AND NOT EXISTS (SELECT 1 FROM following x WHERE x.from_user_id = {viewer}
                                      AND x.to_user_id = f2.to_user_id AND x.active)
                  GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT {K}"
            ),
        )
        .await;
        let picked: Vec<i64> = fof.iter().map(|(a, _)| *a).collect();
        let read = ones(
            &app,
            &format!(
                "SELECT count(*) AS a FROM following f1 JOIN following f2 ON f2.from_user_id = f1.to_user_id AND f2.active
                  WHERE f1.from_user_id = {viewer} AND f1.active"
            ),
        )
        .await;
        for g in groups {
            exact[*g].add(&picked, hidden);
            exact[*g].entries += read[0] as u64;
            exact[*g].statements += 1;
        }

        let followed: HashSet<i64> = ones(
            &app,
            &format!(
                "SELECT to_user_id AS a FROM following WHERE from_user_id = {viewer} AND active"
            ),
        )
        .await
        .into_iter()
        .collect();
        let picked: Vec<i64> = most_followed
            .iter()
            .filter(|u| **u != *viewer && !followed.contains(u))
            .take(K)
            .copied()
            .collect();
        for g in groups {
            popular[*g].add(&picked, hidden);
            popular[*g].entries += users as u64;
            popular[*g].statements += 1;
        }
    }
    report.push_str(&format!(
        "## Quality: {users} users, {edges} follows, {communities} communities\n\n"
    ));
    for (g, title) in [
        (0, "every viewer".to_owned()),
        (1, format!("viewers following more than {sample} accounts")),
    ] {
        report.push_str(&format!(
            "### {title}: {} viewers, {} hidden follows\n\n\
             | method | recall@{K} | precision@{K} | entries read per viewer | Redis round trips | PostgreSQL statements |\n\
             |---|---|---|---|---|---|\n",
            exact[g].viewers, exact[g].hidden
        ));
        for ((sample, per), (_, tallies)) in walks.iter().zip(&kiths) {
            report.push_str(&tallies[g].row(&format!(
                "Kith (bounded: {sample} followees × {per} follows)"
            )));
        }
        report.push_str(&exact[g].row("exact friends-of-friends (unbounded)"));
        report.push_str(&popular[g].row("popularity alone"));
        report.push('\n');
        for ((sample, per), (_, tallies)) in walks.iter().zip(&kiths) {
            let vs_exact = tallies[g].recall() / exact[g].recall().max(f64::EPSILON);
            let vs_popular = tallies[g].recall() / popular[g].recall().max(f64::EPSILON);
            report.push_str(&format!(
                "- {sample} × {per}: recall **{:.0}%** of exact friends-of-friends' (target ≥ 80%), **{vs_popular:.1}×** popularity's (target ≥ 2×)\n",
                100.0 * vs_exact
            ));
        }
        report.push('\n');
    }
    report.push_str(
        "Popularity's entries: the scan of `user_stats` it needs (kept once per process in Kith).\n\n",
    );
}

async fn graphql(
    app: &Arc<App>,
    token: &str,
    query: &str,
    variables: serde_json::Value,
) -> Duration {
    let body = serde_json::json!({ "query": query, "variables": variables }).to_string();
    let request = Request::post("/graphql")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .body(Body::from(body))
        .unwrap();
    let started = Instant::now();
    let response = kith::testing::http::router(app.clone())
        .oneshot(request)
        .await
        .unwrap();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let elapsed = started.elapsed();
    assert!(
        !bytes.windows(8).any(|w| w == b"\"errors\""),
        "{}",
        String::from_utf8_lossy(&bytes)
    );
    elapsed
}

async fn latency(report: &mut String) {
    let name = format!("bench_sugg_l_{}", std::process::id());
    let app = common::isolated_app(&name, |c| {
        c.caches.list_cache_size = 2_000;
        c.database.statement_timeout_ms = 0;
    })
    .await;
    let started = Instant::now();
    {
        let mut conn = app.pg.get().await.unwrap();
        kith::testing::store::users::seed(&mut conn, "h", 2_000)
            .await
            .unwrap();
        kith::testing::store::users::seed(&mut conn, "l", 40_000)
            .await
            .unwrap();
        kith::testing::store::users::seed(&mut conn, "viewer", 1)
            .await
            .unwrap();
    }
    exec(&app, "SELECT setseed(0.3)").await;
    for table in ["following", "follower"] {
        exec(
            &app,
            &format!(
                "INSERT INTO {table} (from_user_id, to_user_id, active, followed_at, version)
                 SELECT v.id, h.id, TRUE, date_trunc('milliseconds', now() - random() * interval '300 days'), 1
                   FROM users v, users h WHERE v.handle = 'viewer0' AND h.handle LIKE 'h%'"
            ),
        )
        .await;
    }
    exec(
        &app,
        "INSERT INTO following (from_user_id, to_user_id, active, followed_at, version)
         SELECT h.id, l.id, TRUE, date_trunc('milliseconds', now() - random() * interval '300 days'), 1
           FROM users h CROSS JOIN LATERAL (
                 SELECT DISTINCT (SELECT min(id) FROM users WHERE handle LIKE 'l%') + floor(random() * 40000 + h.id * 0)::BIGINT AS id
                   FROM generate_series(1, 2100) LIMIT 2000) l
          WHERE h.handle LIKE 'h%'
         ON CONFLICT DO NOTHING",
    )
    .await;
    exec(
        &app,
        "INSERT INTO follower (to_user_id, from_user_id, active, followed_at, version)
         SELECT to_user_id, from_user_id, active, followed_at, version FROM following f
          WHERE NOT EXISTS (SELECT 1 FROM follower x WHERE x.to_user_id = f.to_user_id AND x.from_user_id = f.from_user_id)",
    )
    .await;
    exec(
        &app,
        "UPDATE user_stats s SET followings = (SELECT count(*) FROM following f WHERE f.from_user_id = s.user_id),
                                 followers = (SELECT count(*) FROM follower f WHERE f.to_user_id = s.user_id),
                                 version = kith_next_version(version)",
    )
    .await;
    exec(&app, "ANALYZE").await;
    let viewer =
        UserId::new(ones(&app, "SELECT id AS a FROM users WHERE handle = 'viewer0'").await[0])
            .unwrap();
    let hub_edges = ones(&app, "SELECT count(*) AS a FROM following").await[0];
    eprintln!(
        "latency graph: {hub_edges} follows in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // Warm: the viewer's lists and every hub's list cached, as a running
    // service has the lists it reads.
    kith::testing::read::pages::fill(&app, ListKey::Following(viewer), false)
        .await
        .unwrap();
    kith::testing::read::pages::fill(&app, ListKey::Followers(viewer), false)
        .await
        .unwrap();
    for hub in ones(&app, "SELECT id AS a FROM users WHERE handle LIKE 'h%'").await {
        let hub = UserId::new(hub).unwrap();
        kith::testing::read::pages::fill(&app, ListKey::Following(hub), false)
            .await
            .unwrap();
    }
    let mut cold = Vec::new();
    let mut entries = 0;
    let (pg0, redis0) = app.round_trips.snapshot();
    for _ in 0..200 {
        let started = Instant::now();
        let (_, read) = kith::testing::read::suggest::compute(&app, viewer)
            .await
            .unwrap();
        cold.push(started.elapsed());
        entries = read;
    }
    let (pg1, redis1) = app.round_trips.snapshot();
    cold.sort();

    let token = app
        .auth
        .tokens
        .issue(viewer, chrono::Utc::now().timestamp(), 3600);
    let id = kith::testing::graph::ids::user_id(viewer).to_string();
    let suggested = "query($id: ID!) { user(id: $id) { suggestedFollows(first: 20) {
        edges { score node { handle } reason { kind followedBy { handle } followedByCount { count } } } } } }";
    let profile = "query($id: ID!) { user(id: $id) { handle displayName
        counters { followings followers posts likesReceived favsReceived } } }";
    let vars = serde_json::json!({ "id": id });
    graphql(&app, &token, suggested, vars.clone()).await;
    let (mut kept, mut plain) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        for _ in 0..200 {
            kept.push(graphql(&app, &token, suggested, vars.clone()).await);
        }
        for _ in 0..200 {
            plain.push(graphql(&app, &token, profile, vars.clone()).await);
        }
    }
    kept.sort();
    plain.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let p = |v: &[Duration], q: f64| ms(common::percentile(v, q));
    report.push_str(&format!(
        "## Latency: a viewer following 2,000 accounts that follow 2,000 each ({hub_edges} follows)\n\n\
         | | p50 | p99 | max |\n|---|---|---|---|\n\
         | cold computation (nothing kept, lists cached) | {:.1} ms | **{:.1} ms** | {:.1} ms |\n\
         | `suggestedFollows(first: 20)` kept, through GraphQL | {:.2} ms | {:.2} ms | {:.2} ms |\n\
         | profile query (user and counters), through GraphQL | {:.2} ms | {:.2} ms | {:.2} ms |\n\n\
         A cold computation read {entries} list entries, with {:.1} Redis round trips and {:.1} PostgreSQL statements (mean of 200). \
         Target: cold p99 ≤ 50 ms; kept ≤ 2 ms over the profile query (p50 difference **{:.2} ms**).\n",
        p(&cold, 50.0),
        p(&cold, 99.0),
        p(&cold, 100.0),
        p(&kept, 50.0),
        p(&kept, 99.0),
        p(&kept, 100.0),
        p(&plain, 50.0),
        p(&plain, 99.0),
        p(&plain, 100.0),
        (redis1 - redis0) as f64 / 200.0,
        (pg1 - pg0) as f64 / 200.0,
        p(&kept, 50.0) - p(&plain, 50.0),
    ));
}

#[tokio::main]
async fn main() {
    let mut report = String::from(
        "# Suggestions: quality and cost\n\n`cargo bench --bench suggestions`, on a clean stack.\n\n",
    );
    // `KITH_BENCH_PARTS=quality` or `latency` runs one part only.
    let parts = std::env::var("KITH_BENCH_PARTS").unwrap_or_default();
    if parts.is_empty() || parts.contains("quality") {
        quality(&mut report).await;
    }
    if parts.is_empty() || parts.contains("latency") {
        latency(&mut report).await;
    }
    common::write_report("suggestions.md", &report);
}
