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
//! `KITH_BENCH_ONLY=broker` measures the broker alone and prints it.
//!
//! Environment: `KITH_BENCH_USERS` (1,100,000), `KITH_BENCH_EDGES`
//! (3,000,000), `KITH_BENCH_CELEBRITY_FOLLOWERS` (1,000,000),
//! `KITH_BENCH_SECONDS` per phase (10), `KITH_BENCH_CLIENTS` (16);
//! `KITH_BENCH_POOLER_URL` runs Kith through a transaction pooler
//! (`scripts/stack pooler up`), on a database of the bench's own, and
//! writes `bench-pooler.md` and `bench-pooler.json`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use diesel_async::RunQueryDsl;
use kith::model::UserId;

mod bench;
#[path = "../common.rs"]
mod common;
mod limits;
mod load;
mod procs;
mod reads;
mod redis_off;
mod reference;
mod report;
mod writes;

use bench::{Bench, Child, Graph, Run, ids};
use load::Conn;

#[tokio::main]
async fn main() {
    let run = Run::from_env().await;
    // `KITH_BENCH_ONLY=broker`: the broker alone (the limit row), to
    // compare brokers or fetch settings (`KAFKA_BROKERS`,
    // `KITH_FETCH_WAIT_MS`) in alternating runs of one session.
    if std::env::var("KITH_BENCH_ONLY").as_deref() == Ok("broker") {
        let broker = limits::broker(&run.app.config, &run.schema, 1000, run.seconds).await;
        println!(
            "broker at {}: fetch wait {} ms; {:.2} ms CPU per event at {:.0}/s; sent → consumed \
             p50 {:.1} ms, p99 {:.1} ms; {} of {} consumed; fetching alone {:.0}% of a core",
            run.app.config.pipeline.kafka_brokers,
            run.app.config.pipeline.fetch_wait_ms,
            broker.cpu_ms,
            broker.rate,
            broker.end_p50,
            broker.end_p99,
            broker.received,
            broker.sent,
            broker.fetch_cores * 100.0
        );
        return;
    }
    let graph = seed(&run).await;
    let (mut bench, child) = start(&run, &graph).await;
    let limits = limits::measure(&run, &graph, &mut bench).await;
    let reads = reads::run(&run, &graph, &mut bench).await;
    let writes = writes::run(&run, &graph, &mut bench, &limits).await;
    let memory = memory(&graph, &bench).await;
    drop(child);
    report::write(&run, &graph, &bench, &limits, &reads, &writes, &memory);

    let mut admin = <diesel_async::AsyncPgConnection as diesel_async::AsyncConnection>::establish(
        &run.base_url,
    )
    .await
    .unwrap();
    // Through a pooler, `scripts/stack pooler clean` drops its database.
    if run.app.config.database.session_url.is_none() {
        let _ = diesel::sql_query(format!("DROP SCHEMA {} CASCADE", run.schema))
            .execute(&mut admin)
            .await;
    }
}

/// Seeds the graph with `kith seed-data`'s generator, and picks the users
/// the phases need.
async fn seed(run: &Run) -> Graph {
    let (users, edges, celebrity_followers) = (run.users, run.edges, run.celebrity_followers);
    let seeded = Instant::now();
    let mut conn = run.conn().await;
    let summary = kith::testing::store::seed::generate(
        &mut conn,
        &kith::testing::store::seed::Plan {
            users,
            edges,
            celebrities: 1,
            celebrity_followers,
            prefix: "u".to_owned(),
            seed: 0.42,
            communities: 0,
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
    let rush_target = kith::testing::store::users::create(
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
    // A heavy viewer, following 5,000: the followers of the profiles read
    // first (so that relations hold both answers), then others.
    let mut heavy_follows = ids(
        &mut conn,
        &format!(
            "SELECT DISTINCT from_user_id AS id FROM following WHERE active AND to_user_id IN ({}) LIMIT 2500",
            ordinary.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
        ),
    )
    .await;
    heavy_follows.extend(
        ids(
            &mut conn,
            "SELECT id FROM users ORDER BY id OFFSET 2 LIMIT 7500",
        )
        .await,
    );
    let heavy_viewer = viewer_following(&mut conn, "heavy_viewer", heavy_follows, 5000).await;
    // The "followers you know" viewer follows 2,000, most of whom follow the celebrity.
    let known_follows = ids(
        &mut conn,
        "SELECT id FROM users ORDER BY id OFFSET 2 LIMIT 2000",
    )
    .await;
    let known_viewer = viewer_following(&mut conn, "known_viewer", known_follows, 2000).await;

    Graph {
        summary,
        seed_secs,
        celebrity,
        ordinary,
        viewers,
        rush_target,
        heavy_viewer,
        known_viewer,
    }
}

/// A new user following the first `n` distinct users of `follows`, written
/// as the seed writes edges: the truth, the projection and the counters.
async fn viewer_following(
    conn: &mut diesel_async::AsyncPgConnection,
    handle: &str,
    mut follows: Vec<i64>,
    n: usize,
) -> i64 {
    use diesel::sql_types::{Array, BigInt};
    let viewer =
        kith::testing::store::users::create(conn, handle, handle, kith::model::UserStatus::Active)
            .await
            .unwrap()
            .get();
    let mut seen = std::collections::HashSet::new();
    follows.retain(|id| *id != viewer && seen.insert(*id));
    follows.truncate(n);
    assert_eq!(follows.len(), n, "graph too small for {handle}");
    for table in ["following", "follower"] {
        diesel::sql_query(format!(
            "INSERT INTO {table} (from_user_id, to_user_id, active, followed_at, version)
             SELECT $1, f.id, TRUE, date_trunc('milliseconds', now()) - f.k * interval '1 second', 1
               FROM unnest($2::bigint[]) WITH ORDINALITY AS f(id, k)"
        ))
        .bind::<BigInt, _>(viewer)
        .bind::<Array<BigInt>, _>(&follows)
        .execute(conn)
        .await
        .unwrap();
    }
    diesel::sql_query(
        "UPDATE user_stats SET followings = followings + $2, version = kith_next_version(version) WHERE user_id = $1",
    )
    .bind::<BigInt, _>(viewer)
    .bind::<BigInt, _>(n as i64)
    .execute(conn)
    .await
    .unwrap();
    diesel::sql_query(
        "UPDATE user_stats SET followers = followers + 1, version = kith_next_version(version)
          WHERE user_id = ANY($1)",
    )
    .bind::<Array<BigInt>, _>(&follows)
    .execute(conn)
    .await
    .unwrap();
    viewer
}

/// Starts the release `kith run` on the bench schema and waits until it is ready.
async fn start(run: &Run, graph: &Graph) -> (Bench, Child) {
    let (addr, metrics) = two_ports();
    let log = run.reports.join("bench-kith.log");
    let child = spawn_kith(run, "run", addr, metrics, &run.app.config.redis.url, &log).await;
    let bench = Bench {
        app: run.app.clone(),
        addr,
        metrics,
        kith_pid: child.0.id(),
        phase: Duration::from_secs(run.seconds),
        first_id: graph.summary.first_id,
        users: graph.summary.users,
        report: Vec::new(),
    };
    (bench, child)
}

/// Two free ports, held together so that they differ.
pub fn two_ports() -> (SocketAddr, SocketAddr) {
    let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    (a.local_addr().unwrap(), b.local_addr().unwrap())
}

/// Starts the release `kith <command>` on the bench schema with `redis_url`,
/// serving on `addr` and `metrics`, and waits until it is ready.
pub async fn spawn_kith(
    run: &Run,
    command: &str,
    addr: SocketAddr,
    metrics: SocketAddr,
    redis_url: &str,
    log: &std::path::Path,
) -> Child {
    let child = common::kith_command(&run.app.config, command, addr, metrics, log)
        .env("REDIS_URL", redis_url)
        .spawn()
        .expect("kith starts");
    let child = Child(child);
    let ready = Instant::now();
    loop {
        if let Ok(mut conn) = Conn::open(addr).await
            && let Ok((200, _)) = conn.send("GET", "/readyz", None, "").await
        {
            break;
        }
        assert!(
            ready.elapsed() < Duration::from_secs(60),
            "kith {command} never got ready"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    child
}

/// What `kith run` holds in memory, and Redis per cached edge.
pub struct Memory {
    /// RSS and its peak, MiB.
    pub rss: f64,
    pub hwm: f64,
    /// Bytes per cached edge, and the edges counted.
    pub bytes_per_edge: (f64, u64),
}

async fn memory(graph: &Graph, bench: &Bench) -> Memory {
    let (app, ordinary, celebrity) = (&bench.app, &graph.ordinary, graph.celebrity);
    let (rss, hwm) = procs::memory_mib(bench.kith_pid);
    let bytes_per_edge = {
        let mut redis = app.redis.get().await.unwrap();
        let mut bytes = 0u64;
        let mut members = 0u64;
        for user in ordinary.iter().chain([&celebrity]) {
            let list = kith::testing::paging::ListKey::Followers(UserId::new(*user).unwrap());
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

    Memory {
        rss,
        hwm,
        bytes_per_edge,
    }
}
