//! PostgreSQL's primary fails over while follows arrive at a steady rate
//! through HTTP and warm profiles are read: a real `kith run` on a
//! pg_auto_failover formation (`scripts/stack ha up`: a monitor, a primary
//! and its synchronous standby), given the formation's multi-host URL and
//! nothing else. Each round fails the primary over, alternately by the
//! monitor (`pg_autoctl perform failover`) and by a crash (SIGKILL to the
//! primary's keeper and PostgreSQL at once).
//!
//! In every round: writes answer `UNAVAILABLE`, never anything else, while
//! no primary takes them, and are acknowledged again within 5 s of the
//! formation taking writes (measured by a fresh session of the test's own);
//! profile reads, warm in the caches, keep answering throughout. After the
//! rounds, with the same `kith` process: every follow acknowledged before,
//! during and after is in the truth, the pipeline drains, and `verify`
//! finds nothing.
//!
//! `KITH_PG_FAILOVERS` rounds (2 by default, the short form the suite runs:
//! one of each kind); `scripts/failovers` runs the long form. The figures
//! go to `target/fault-reports/pg-failover.md`.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Integer};
use diesel_async::{AsyncConnection as _, AsyncPgConnection};
use kith::model::UserId;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::formation::{blocking, events, exclusive};
use crate::helpers::{KithProcess, assert_consistent, settled, spawn_app_on};
use crate::http_client::{free_port, get, graphql};

const USERS: usize = 200;
const WRITERS: usize = 3;
const READERS: usize = 2;
/// Each writer and reader sends one request per tick.
const PACE: Duration = Duration::from_millis(25);
/// How long after the formation takes writes Kith may still refuse them.
const BOUND_AFTER_FORMATION: Duration = Duration::from_secs(5);
/// Load before and after each failover.
const STEADY: Duration = Duration::from_secs(2);

const FOLLOW: &str = "mutation($id: ID!) { follow(input: {userId: $id}) { changed } }";
const PROFILE: &str = "query($id: ID!) { user(id: $id) { handle
    counters { followers followings }
    followers(first: 10) { edges { node { handle viewerRelation { following } } } }
    viewerRelation { following followedBy } } }";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// `pg_autoctl perform failover`.
    Planned,
    /// SIGKILL to the primary's keeper and PostgreSQL.
    Crash,
}

/// One request and what it answered (`None`: done).
struct Answer {
    started: Instant,
    ended: Instant,
    error: Option<String>,
    /// For a follow: (actor, target) as indexes of the test's users.
    pair: Option<(usize, usize)>,
}

#[derive(QueryableByName)]
struct Port {
    #[diesel(sql_type = Integer)]
    port: i32,
}

/// The port of the server behind `url` that takes a write, if one does.
async fn writable(url: &str) -> Option<u16> {
    let mut conn = tokio::time::timeout(Duration::from_secs(2), AsyncPgConnection::establish(url))
        .await
        .ok()?
        .ok()?;
    let port: Port = diesel_async::RunQueryDsl::get_result(
        diesel::sql_query(
            "SELECT inet_server_port() AS port FROM (SELECT txid_current()) AS written",
        ),
        &mut conn,
    )
    .await
    .ok()?;
    u16::try_from(port.port).ok()
}

/// When a server other than `old` behind `url` first takes a write, and
/// its port.
async fn formation_back(url: String, old: u16) -> (Instant, u16) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(port) = writable(&url).await.filter(|port| *port != old) {
            return (Instant::now(), port);
        }
        assert!(Instant::now() < deadline, "no new primary within 120 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The error an answer carries: its code, or what went wrong on the way.
fn error_of(answer: &Result<Value, String>, done: impl Fn(&Value) -> bool) -> Option<String> {
    match answer {
        Ok(v) if v["errors"].is_null() && done(v) => None,
        Ok(v) => Some(
            v["errors"][0]["extensions"]["code"]
                .as_str()
                .map_or_else(|| format!("no code: {v}"), str::to_owned),
        ),
        Err(e) => Some(format!("transport: {e}")),
    }
}

/// The profile of `id` as `token`'s user: the error it answered, if any.
async fn profile(port: u16, token: &str, id: &str) -> Option<String> {
    let answer = graphql(port, token, PROFILE, json!({ "id": id })).await;
    error_of(&answer, |v| v["data"]["user"]["handle"].is_string())
}

/// What one round measured.
struct Round {
    kind: Kind,
    /// From the failover's start until a new primary took a write.
    formation: Duration,
    /// The longest time without a write acknowledged.
    window: Duration,
    /// From the formation taking writes to Kith acknowledging them.
    after_formation: Duration,
    writes: usize,
    refused: usize,
    reads: usize,
    reads_failed: usize,
    read_errors: Vec<String>,
    read_p99: Duration,
    slowest_read: Duration,
}

fn measure(kind: Kind, t0: Instant, ready: Instant, writes: &[Answer], reads: &[Answer]) -> Round {
    // The longest time without an acknowledgment, and when it ended.
    let mut ends: Vec<Instant> = writes
        .iter()
        .filter(|a| a.error.is_none())
        .map(|a| a.ended)
        .collect();
    ends.sort();
    let (window, back) = ends
        .windows(2)
        .map(|w| (w[1] - w[0], w[1]))
        .max()
        .expect("writes were acknowledged");
    let mut latencies: Vec<Duration> = reads.iter().map(|a| a.ended - a.started).collect();
    latencies.sort();
    Round {
        kind,
        formation: ready - t0,
        window,
        after_formation: back.saturating_duration_since(ready),
        writes: writes.len(),
        refused: writes.iter().filter(|a| a.error.is_some()).count(),
        reads: reads.len(),
        reads_failed: reads.iter().filter(|a| a.error.is_some()).count(),
        // Each failed read with when it was sent and how long it took, so a
        // failure tells which part of the failover it waited through.
        read_errors: reads
            .iter()
            .filter_map(|a| {
                let error = a.error.as_ref()?;
                let sent = if a.started >= t0 {
                    format!("+{:.2} s", (a.started - t0).as_secs_f64())
                } else {
                    format!("-{:.2} s", (t0 - a.started).as_secs_f64())
                };
                Some(format!(
                    "{error} (sent {sent} from the crash, answered in {} ms; the formation took writes at +{:.2} s)",
                    (a.ended - a.started).as_millis(),
                    (ready - t0).as_secs_f64()
                ))
            })
            .collect(),
        read_p99: latencies
            .get(latencies.len() * 99 / 100)
            .copied()
            .unwrap_or_default(),
        slowest_read: latencies.last().copied().unwrap_or_default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_primary_fails_over_without_losing_an_acknowledged_follow() {
    let rounds: usize = std::env::var("KITH_PG_FAILOVERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let _formation = exclusive().await;
    let url = crate::formation::up().await;
    let t = Arc::new(spawn_app_on(&url, |_| {}).await);
    let mut users = Vec::with_capacity(USERS);
    for i in 0..USERS {
        users.push(t.user(&format!("fo{i}")).await);
    }
    let ids: Arc<Vec<String>> = Arc::new(
        users
            .iter()
            .map(|u| kith::testing::graph::ids::user_id(*u).to_string())
            .collect(),
    );
    let tokens: Arc<Vec<String>> = Arc::new(users.iter().map(|u| t.token(*u)).collect());

    let port = free_port();
    let kith = KithProcess::start(
        &t,
        "run",
        &[
            ("KITH_HTTP_ADDR", format!("127.0.0.1:{port}")),
            ("DATABASE_POOL_SIZE", "8".into()),
            ("KITH_RATE_LIMIT_CAPACITY", "1000000".into()),
            ("KITH_RATE_LIMIT_PER_SEC", "100000".into()),
            ("KITH_RELAY_POLL_MS", "200".into()),
        ],
    );
    let up = Instant::now();
    while get(port, "/healthz").await.is_err() {
        assert!(
            up.elapsed() < Duration::from_secs(60),
            "kith did not start: {}",
            kith.log.display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(Mutex::new(Vec::<Answer>::new()));
    let reads = Arc::new(Mutex::new(Vec::<Answer>::new()));
    let mut load = Vec::new();
    for w in 0..WRITERS {
        let (ids, tokens, stop, log) = (ids.clone(), tokens.clone(), stop.clone(), writes.clone());
        load.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(PACE);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            for n in 0.. {
                tick.tick().await;
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                // Every pair once: actor p mod USERS, its (p / USERS + 1)-th next user.
                let p = n * WRITERS + w;
                let actor = p % USERS;
                let target = (actor + 1 + p / USERS) % USERS;
                let started = Instant::now();
                let answer =
                    graphql(port, &tokens[actor], FOLLOW, json!({ "id": ids[target] })).await;
                let error = error_of(&answer, |v| v["data"]["follow"]["changed"].is_boolean());
                log.lock().await.push(Answer {
                    started,
                    ended: Instant::now(),
                    error,
                    pair: Some((actor, target)),
                });
            }
        }));
    }
    // Every user row in the process (any of them may show among the
    // readers' followers), and the readers' profiles, before anything fails.
    for (i, id) in ids.iter().enumerate() {
        let answer = graphql(
            port,
            &tokens[i],
            "query($id: ID!) { user(id: $id) { handle } }",
            json!({ "id": id }),
        )
        .await;
        assert_eq!(
            error_of(&answer, |v| v["data"]["user"]["handle"].is_string()),
            None
        );
    }
    // Warm the readers' profiles before anything fails.
    for r in 0..READERS {
        assert_eq!(profile(port, &tokens[USERS - 1 - r], &ids[r]).await, None);
    }
    for r in 0..READERS {
        let (ids, tokens, stop, log) = (ids.clone(), tokens.clone(), stop.clone(), reads.clone());
        load.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(PACE);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                let started = Instant::now();
                let error = profile(port, &tokens[USERS - 1 - r], &ids[r]).await;
                log.lock().await.push(Answer {
                    started,
                    ended: Instant::now(),
                    error,
                    pair: None,
                });
            }
        }));
    }

    // The primary the load starts on: only the rounds may change it (a
    // failover of the formation's own would not be what the round measures,
    // and its acknowledged writes may be lost with it: see `scripts/stack`).
    let mut primary = writable(&url)
        .await
        .expect("the formation takes writes before the load");
    let mut measured = Vec::new();
    for round in 0..rounds {
        let kind = if round % 2 == 0 {
            Kind::Planned
        } else {
            Kind::Crash
        };
        tokio::time::sleep(STEADY).await;
        let old = writable(&url)
            .await
            .expect("the formation takes writes before the round");
        assert_eq!(
            old,
            primary,
            "round {round}: the formation failed over by itself before the round; its events:\n{}",
            events().await
        );
        let (from_writes, from_reads) = (writes.lock().await.len(), reads.lock().await.len());
        let t0 = Instant::now();
        let back = tokio::spawn(formation_back(url.clone(), old));
        match kind {
            Kind::Planned => blocking(&["failover"]).await,
            Kind::Crash => blocking(&["kill"]).await,
        };
        let ready;
        (ready, primary) = back.await.unwrap();
        // Until Kith acknowledges a write begun after the formation took
        // one, then the steady load again.
        let deadline = ready + Duration::from_secs(60);
        while !writes.lock().await[from_writes..]
            .iter()
            .any(|a| a.error.is_none() && a.started >= ready)
        {
            assert!(
                Instant::now() < deadline,
                "round {round}: no write acknowledged within 60 s of the new primary"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(STEADY).await;
        let r = measure(
            kind,
            t0,
            ready,
            &writes.lock().await[from_writes..],
            &reads.lock().await[from_reads..],
        );
        eprintln!(
            "round {round} ({kind:?}): formation {:?}, no write acknowledged for {:?} ({} of {} refused), \
             acknowledged {:?} after the formation; reads {} failed of {}, p99 {:?}, slowest {:?}",
            r.formation,
            r.window,
            r.refused,
            r.writes,
            r.after_formation,
            r.reads_failed,
            r.reads,
            r.read_p99,
            r.slowest_read
        );
        measured.push(r);
        // The crashed node rejoins as the standby for the next round.
        if kind == Kind::Crash {
            blocking(&["up"]).await;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for task in load {
        task.await.unwrap();
    }
    report(&measured);

    let writes = writes.lock().await;
    let refused: Vec<&String> = writes.iter().filter_map(|a| a.error.as_ref()).collect();
    assert!(
        refused.iter().all(|e| *e == "UNAVAILABLE"),
        "writes refused otherwise than UNAVAILABLE: {refused:?}"
    );
    for (i, r) in measured.iter().enumerate() {
        assert!(
            r.after_formation <= BOUND_AFTER_FORMATION,
            "round {i}: writes came back {:?} after the formation took them (bound {BOUND_AFTER_FORMATION:?})",
            r.after_formation
        );
        assert_eq!(
            r.reads_failed, 0,
            "round {i}: reads failed during the failover: {:?}",
            r.read_errors
        );
    }

    // The test's own pool held sessions with the old primary: each is
    // dropped as it fails, until the pool holds live ones only.
    let mut live = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while live < 20 {
        let ping =
            diesel_async::RunQueryDsl::execute(diesel::sql_query("SELECT 1"), &mut *t.conn().await)
                .await;
        live = if ping.is_ok() { live + 1 } else { 0 };
        assert!(Instant::now() < deadline, "the test's pool did not heal");
    }

    // Every acknowledged follow is in the truth.
    #[derive(QueryableByName)]
    struct Edge {
        #[diesel(sql_type = BigInt)]
        from_user_id: i64,
        #[diesel(sql_type = BigInt)]
        to_user_id: i64,
    }
    let edges: Vec<Edge> = diesel_async::RunQueryDsl::load(
        diesel::sql_query("SELECT from_user_id, to_user_id FROM following WHERE active"),
        &mut *t.conn().await,
    )
    .await
    .unwrap();
    let truth: HashSet<(i64, i64)> = edges
        .iter()
        .map(|e| (e.from_user_id, e.to_user_id))
        .collect();
    let acknowledged: Vec<(usize, usize)> = writes
        .iter()
        .filter(|a| a.error.is_none())
        .filter_map(|a| a.pair)
        .collect();
    let lost: Vec<&(usize, usize)> = acknowledged
        .iter()
        .filter(|(a, b)| !truth.contains(&(users[*a].get(), users[*b].get())))
        .collect();
    eprintln!(
        "{} follows acknowledged, {} refused, {} lost",
        acknowledged.len(),
        refused.len(),
        lost.len()
    );
    assert!(
        lost.is_empty(),
        "acknowledged follows lost: {lost:?}; the formation's events:\n{}",
        events().await
    );

    // The same process drains the pipeline; the views agree with the truth.
    let sample: Vec<UserId> = users.iter().step_by(10).copied().collect();
    settled(&t, &sample, 120).await;
    assert_consistent(&t.verify(500).await);
    assert!(get(port, "/healthz").await.is_ok(), "kith is still serving");
    drop(kith);
}

/// Writes the rounds' figures to `target/fault-reports/pg-failover.md`.
fn report(rounds: &[Round]) {
    let mut out = String::from(
        "# PostgreSQL failover under load\n\n\
         | round | kind | formation took writes after | no write acknowledged for | Kith acknowledged after the formation | writes (refused) | reads (failed) | read p99 | slowest read |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for (i, r) in rounds.iter().enumerate() {
        let _ = writeln!(
            out,
            "| {i} | {:?} | {:.2} s | {:.2} s | {:.2} s | {} ({}) | {} ({}) | {:.0} ms | {:.0} ms |",
            r.kind,
            r.formation.as_secs_f64(),
            r.window.as_secs_f64(),
            r.after_formation.as_secs_f64(),
            r.writes,
            r.refused,
            r.reads,
            r.reads_failed,
            r.read_p99.as_secs_f64() * 1e3,
            r.slowest_read.as_secs_f64() * 1e3,
        );
    }
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target dir")
        .join("fault-reports");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("pg-failover.md"), out).unwrap();
}
