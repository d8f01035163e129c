//! The fault suite: a randomized workload against a real `kith run` on a
//! private stack while, at random moments, the kith process is killed with
//! SIGKILL and restarted, Redis loses everything (FLUSHALL), Redis is
//! stopped and started, the broker is stopped and started, and PostgreSQL
//! crash-restarts. No request may ever be answered `INTERNAL`: an outage is
//! `UNAVAILABLE`. When the workload
//! stops, the pipeline must drain within a stated bound, `kith verify` must
//! find nothing, and the edges and counters must equal what the workload's
//! own log of definitive answers says.
//!
//! `KITH_FAULT_SECS` sets how long the workload runs (60 s by default, the
//! short form `cargo test` runs); `scripts/faults` runs the long form. A
//! report goes to `target/fault-reports/faults.md`.

#[path = "../common/http.rs"]
mod http;
mod moves;
#[path = "../common/rng.rs"]
mod rng;
mod safety;
mod stack;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bool};
use diesel_async::{AsyncConnection, AsyncPgConnection};
use kith::model::UserId;
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::json;
use tokio::sync::Mutex;

use rng::Rng;
use stack::Stack;

/// How long the pipeline may take to drain after the last fault.
const DRAIN_BOUND: Duration = Duration::from_secs(120);
const USERS: i64 = 300;
const WRITERS: u64 = 6;
/// Pairs every writer toggles at once.
const HOT_PAIRS: [(i64, i64); 4] = [(1, 5), (2, 6), (3, 7), (4, 8)];
const STAR: i64 = USERS;

fn user(id: i64) -> UserId {
    UserId::new(id).unwrap()
}

/// What a follow or unfollow answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    /// The edge is in the requested state now.
    Done,
    /// Refused with a code that means nothing was written.
    Refused,
    /// No answer, or one that leaves the outcome open (UNAVAILABLE, INTERNAL, a dropped connection).
    Open,
}

const MUTATION: &str = "mutation($id: ID!) { %OP%(input: {userId: $id}) { changed } }";
const OPTIONS_MUTATION: &str =
    "mutation($id: ID!, $n: Boolean) { %OP%(input: {userId: $id, notify: $n}) { changed } }";

/// The response's error code, counting `INTERNAL` answers (with the response).
fn internal<'a>(response: &'a serde_json::Value, counts: &Counts) -> Option<&'a str> {
    let code = response["errors"][0]["extensions"]["code"].as_str();
    let errors = response["errors"].as_array().map_or(&[][..], Vec::as_slice);
    if errors.iter().any(|e| e["extensions"]["code"] == "INTERNAL") {
        counts.internal.fetch_add(1, Ordering::Relaxed);
        eprintln!("INTERNAL answer: {response}");
    }
    code
}

/// `op` (`follow`, `unfollow`, `block`, `unblock`) of `target` by `actor`.
async fn edge_op(
    counts: &Counts,
    port: u16,
    tokens: &HashMap<i64, String>,
    actor: i64,
    target: i64,
    op: &str,
) -> Answer {
    options_op(counts, port, tokens, (actor, target), op, None).await
}

/// `op` (`follow`, `unfollow`, `updateFollow`) of the pair, with `notify`
/// when given (`follow` then sets its options with the follow).
async fn options_op(
    counts: &Counts,
    port: u16,
    tokens: &HashMap<i64, String>,
    (actor, target): (i64, i64),
    op: &str,
    notify: Option<bool>,
) -> Answer {
    let query = match notify {
        None => MUTATION.replace("%OP%", op),
        Some(_) => OPTIONS_MUTATION.replace("%OP%", op),
    };
    let id = kith::testing::graph::ids::user_id(user(target)).to_string();
    let vars = json!({ "id": id, "n": notify });
    match http::graphql(port, &tokens[&actor], &query, vars).await {
        Ok(r) if r["data"][op]["changed"].is_boolean() => Answer::Done,
        Ok(r) => match internal(&r, counts) {
            Some(
                "INVALID_INPUT" | "NOT_FOUND" | "RATE_LIMITED" | "FORBIDDEN" | "UNAUTHENTICATED"
                | "BLOCKED" | "BLOCK_LIMIT",
            ) => Answer::Refused,
            _ => Answer::Open,
        },
        Err(_) => Answer::Open,
    }
}

/// The workload's own record: per pair, the state its last answer left
/// (`None` when that answer left it open).
type Expected = BTreeMap<(i64, i64), Option<bool>>;

/// Per followed pair: the `notify` option its last answer left (`None`:
/// left open, or by a follow that named no options).
type Notify = BTreeMap<(i64, i64), Option<bool>>;

#[derive(Default)]
struct Counts {
    ops: AtomicU64,
    safety_ops: AtomicU64,
    done: AtomicU64,
    refused: AtomicU64,
    open: AtomicU64,
    internal: AtomicU64,
    timeout: AtomicU64,
    content_sent: AtomicU64,
    content_duplicates: AtomicU64,
}

async fn writer(
    index: u64,
    seed: u64,
    port: u16,
    tokens: Arc<HashMap<i64, String>>,
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
) -> (Expected, Notify) {
    let mut rng = Rng(seed ^ (index + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut expected = Expected::new();
    let mut notify = Notify::new();
    let hot_actors: BTreeSet<i64> = HOT_PAIRS.iter().map(|p| p.0).collect();
    // Actors of this writer only, so every other pair's answers come in order.
    let mine: Vec<i64> = (9..STAR)
        .filter(|a| (*a as u64) % WRITERS == index && !hot_actors.contains(a))
        .filter(|a| !safety::CROWD.contains(a))
        .collect();
    while !stop.load(Ordering::Relaxed) {
        let roll = rng.below(100);
        let (actor, target, follow, hot) = if roll < 15 {
            let (a, b) = HOT_PAIRS[rng.below(HOT_PAIRS.len() as u64) as usize];
            (a, b, rng.below(2) == 0, true)
        } else if roll < 45 {
            // One account gaining followers fast.
            let a = mine[rng.below(mine.len() as u64) as usize];
            (a, STAR, rng.below(10) < 8, false)
        } else {
            // Repeated follows and unfollows among a small crowd.
            let a = mine[rng.below(mine.len() as u64) as usize];
            let mut b = 9 + rng.below(40) as i64;
            if b == a {
                b += 1;
            }
            (a, b, rng.below(3) != 0, false)
        };
        // Follows of the star name their options (half of them through
        // `updateFollow` on a follow that stands).
        let (op, wants) = match (follow, target == STAR, rng.below(4)) {
            (false, ..) => ("unfollow", None),
            (true, false, _) => ("follow", None),
            (true, true, 0) if expected.get(&(actor, target)) == Some(&Some(true)) => {
                ("updateFollow", Some(rng.below(2) == 0))
            }
            (true, true, _) => ("follow", Some(rng.below(2) == 0)),
        };
        let answer = options_op(&counts, port, &tokens, (actor, target), op, wants).await;
        counts.ops.fetch_add(1, Ordering::Relaxed);
        let slot = expected.entry((actor, target)).or_insert(None);
        match answer {
            Answer::Done => {
                counts.done.fetch_add(1, Ordering::Relaxed);
                *slot = if hot { None } else { Some(follow) };
                notify.insert((actor, target), wants.filter(|_| follow));
            }
            Answer::Refused => {
                counts.refused.fetch_add(1, Ordering::Relaxed);
            }
            Answer::Open => {
                counts.open.fetch_add(1, Ordering::Relaxed);
                *slot = None;
                notify.insert((actor, target), None);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    (expected, notify)
}

/// Content events from "another service", a fifth of them sent twice; an
/// event whose delivery failed is sent again (same id) until acknowledged.
/// Returns, per author, the ids of posts published and of likes received.
async fn content_producer(
    seed: u64,
    brokers: String,
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
) -> BTreeMap<i64, (BTreeSet<String>, BTreeSet<String>)> {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("enable.idempotence", "false")
        .set("acks", "all")
        .set("max.in.flight.requests.per.connection", "1")
        .set("message.timeout.ms", "5000")
        .set("log_level", "3")
        .create()
        .unwrap();
    let mut rng = Rng(seed ^ 0xC0FF_EE00);
    let mut expected: BTreeMap<i64, (BTreeSet<String>, BTreeSet<String>)> = BTreeMap::new();
    let mut pending: Vec<(i64, String, &'static str)> = Vec::new();
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        if stopping && pending.is_empty() {
            return expected;
        }
        if !stopping {
            let author = 1 + rng.below(USERS as u64) as i64;
            let kind = if rng.below(2) == 0 {
                "PostPublished"
            } else {
                "PostLiked"
            };
            pending.push((author, uuid::Uuid::new_v4().to_string(), kind));
            if rng.below(5) == 0 {
                let again = pending.last().unwrap().clone();
                pending.push(again);
                counts.content_duplicates.fetch_add(1, Ordering::Relaxed);
            }
        }
        let mut still = Vec::new();
        for (author, id, kind) in pending.drain(..) {
            let payload = json!({"eventId": id, "type": kind, "authorId": author}).to_string();
            let key = author.to_string();
            let record = FutureRecord::to("kith.content-events")
                .key(&key)
                .payload(&payload);
            match producer.send(record, Duration::from_secs(5)).await {
                Ok(_) => {
                    counts.content_sent.fetch_add(1, Ordering::Relaxed);
                    let entry = expected.entry(author).or_default();
                    if kind == "PostPublished" {
                        entry.0.insert(id);
                    } else {
                        entry.1.insert(id);
                    }
                }
                Err(_) => still.push((author, id, kind)),
            }
        }
        pending = still;
        tokio::time::sleep(Duration::from_millis(if pending.is_empty() {
            40
        } else {
            500
        }))
        .await;
    }
}

/// Profile reads of random users, so that list caches and counter records
/// exist for the faults to hit and for `kith verify` to check.
async fn reader(
    seed: u64,
    port: u16,
    token: String,
    stop: Arc<AtomicBool>,
    reads: Arc<AtomicU64>,
    counts: Arc<Counts>,
) {
    let mut rng = Rng(seed ^ 0x5EED);
    let query = "query($id: ID!) { user(id: $id) { counters { followers followings posts }
        followers(first: 20) { edges { node { handle } } }
        following(first: 20) { edges { node { handle } } } } }";
    while !stop.load(Ordering::Relaxed) {
        let target = if rng.below(4) == 0 {
            STAR
        } else {
            1 + rng.below(60) as i64
        };
        let id = kith::testing::graph::ids::user_id(user(target)).to_string();
        if let Ok(r) = http::graphql(port, &token, query, json!({ "id": id })).await {
            internal(&r, &counts);
            reads.fetch_add(1, Ordering::Relaxed);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    KillKith,
    FlushRedis,
    RestartRedis,
    RestartBroker,
    RestartPostgres,
}

const ALL_FAULTS: [Fault; 5] = [
    Fault::KillKith,
    Fault::FlushRedis,
    Fault::RestartRedis,
    Fault::RestartBroker,
    Fault::RestartPostgres,
];

async fn inject(stack: &Mutex<Stack>, fault: Fault, rng: &mut Rng) {
    let mut stack = stack.lock().await;
    match fault {
        Fault::KillKith => {
            stack.kill_kith();
            tokio::time::sleep(Duration::from_millis(rng.below(1500))).await;
            stack.start_kith();
        }
        Fault::FlushRedis => {
            let client = redis::Client::open(stack.redis_url.as_str()).unwrap();
            let mut conn = client.get_multiplexed_async_connection().await.unwrap();
            let _: () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
        }
        Fault::RestartRedis => {
            run_script(&stack, &["stop", "redis"]).await;
            tokio::time::sleep(Duration::from_millis(1000 + rng.below(3000))).await;
            run_script(&stack, &["up"]).await;
        }
        Fault::RestartBroker => {
            run_script(&stack, &["stop", "tansu"]).await;
            tokio::time::sleep(Duration::from_millis(1000 + rng.below(3000))).await;
            run_script(&stack, &["up"]).await;
        }
        // With a formation: its primary fails over, planned or by a crash
        // (then the dead node comes back as the standby).
        Fault::RestartPostgres if stack.ha_port.is_some() => {
            if rng.below(2) == 0 {
                run_script(&stack, &["ha", "failover"]).await;
            } else {
                run_script(&stack, &["ha", "kill"]).await;
                run_script(&stack, &["ha", "up"]).await;
            }
        }
        Fault::RestartPostgres => run_script(&stack, &["restart", "postgres"]).await,
    }
}

async fn run_script(stack: &Stack, args: &[&str]) {
    if let Err(e) = tokio::task::block_in_place(|| stack.script(args)) {
        panic!("{e}");
    }
}

#[derive(QueryableByName)]
struct EdgeRow {
    #[diesel(sql_type = BigInt)]
    from_user_id: i64,
    #[diesel(sql_type = BigInt)]
    to_user_id: i64,
    #[diesel(sql_type = Bool)]
    active: bool,
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// True once the outbox is empty, every partition is applied to its end,
/// and no unlocked account has requests waiting.
async fn drained(stack: &Stack, conn: &mut AsyncPgConnection) -> Result<bool, String> {
    use diesel_async::RunQueryDsl as _;
    let backlog: Count = diesel::sql_query("SELECT count(*) AS n FROM outbox")
        .get_result(conn)
        .await
        .map_err(|e| e.to_string())?;
    if backlog.n > 0 {
        return Ok(false);
    }
    // An unlock's requests are all accepted (the sweeper finishes them).
    let waiting: Count = diesel::sql_query(
        "SELECT count(*) AS n FROM follow_request q JOIN users u ON u.id = q.to_user_id
          WHERE q.active AND NOT u.locked AND u.status = 'active'",
    )
    .get_result(conn)
    .await
    .map_err(|e| e.to_string())?;
    if waiting.n > 0 {
        return Ok(false);
    }
    #[derive(QueryableByName)]
    struct Position {
        #[diesel(sql_type = diesel::sql_types::Text)]
        topic: String,
        #[diesel(sql_type = diesel::sql_types::Integer)]
        partition: i32,
        #[diesel(sql_type = diesel::sql_types::Nullable<BigInt>)]
        next_offset: Option<i64>,
    }
    let positions: Vec<Position> =
        diesel::sql_query("SELECT topic, partition, next_offset FROM projector_partition")
            .load(conn)
            .await
            .map_err(|e| e.to_string())?;
    let brokers = stack.brokers.clone();
    let ends = tokio::task::spawn_blocking(move || {
        let client: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &brokers)
            .create()
            .map_err(|e| e.to_string())?;
        positions
            .iter()
            .map(|p| {
                client
                    .fetch_watermarks(&p.topic, p.partition, Duration::from_secs(5))
                    .map(|(_, high)| (high, p.next_offset.unwrap_or(0)))
                    .map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<_>, _>>()
    })
    .await
    .map_err(|e| e.to_string())??;
    Ok(!ends.is_empty() && ends.iter().all(|(high, next)| next >= high))
}

async fn query_one<T: QueryableByName<diesel::pg::Pg> + Send + 'static>(
    conn: &mut AsyncPgConnection,
    sql: &str,
) -> T {
    use diesel_async::RunQueryDsl as _;
    diesel::sql_query(sql).get_result(conn).await.unwrap()
}

async fn query_all<T: QueryableByName<diesel::pg::Pg> + Send + 'static>(
    conn: &mut AsyncPgConnection,
    sql: &str,
) -> Vec<T> {
    use diesel_async::RunQueryDsl as _;
    diesel::sql_query(sql).load(conn).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pipeline_stays_exact_through_kills_flushes_and_restarts() {
    let secs: u64 = std::env::var("KITH_FAULT_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let seed: u64 = std::env::var("KITH_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| chrono::Utc::now().timestamp_micros() as u64);
    eprintln!("fault suite: {secs} s, seed {seed}");
    let started = Instant::now();
    let stack = Stack::up();
    let (ok, out) = stack.kith(&["migrate"]);
    assert!(ok, "migrate: {out}");
    let (ok, out) = stack.kith(&["seed-users", "--count", &USERS.to_string(), "--prefix", "u"]);
    assert!(ok, "seed: {out}");
    let mut conn = AsyncPgConnection::establish(&stack.database_url)
        .await
        .unwrap();
    let ids: Count = query_one(&mut conn, "SELECT max(id) AS n FROM users").await;
    assert_eq!(
        ids.n, USERS,
        "a fresh database numbers the users 1..{USERS}"
    );
    let keys = kith::testing::auth::TokenKeys::new(kith::config::DEV_JWT_SECRET);
    let now = chrono::Utc::now().timestamp();
    let tokens: Arc<HashMap<i64, String>> = Arc::new(
        (1..=USERS)
            .map(|id| (id, keys.issue(user(id), now, 6 * 3600)))
            .collect(),
    );
    let port = stack.http_port;
    let brokers = stack.brokers.clone();
    let pg_fault = if stack.ha_port.is_some() {
        "PostgreSQL primary failover (planned or SIGKILL)"
    } else {
        "PostgreSQL crash-restart"
    };
    let stack = Arc::new(Mutex::new(stack));
    stack.lock().await.start_kith();
    stack
        .lock()
        .await
        .wait_for_api(Duration::from_secs(60))
        .await;
    let moving = moves::start(&*stack.lock().await, USERS).await;

    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let writers: Vec<_> = (0..WRITERS)
        .map(|i| {
            tokio::spawn(writer(
                i,
                seed,
                port,
                tokens.clone(),
                stop.clone(),
                counts.clone(),
            ))
        })
        .collect();
    let blocker = tokio::spawn(safety::blocker(
        seed,
        port,
        tokens.clone(),
        stop.clone(),
        counts.clone(),
    ));
    let producer = tokio::spawn(content_producer(
        seed,
        brokers,
        stop.clone(),
        counts.clone(),
    ));
    let reads = Arc::new(AtomicU64::new(0));
    let reader = tokio::spawn(reader(
        seed,
        port,
        tokens[&1].clone(),
        stop.clone(),
        reads.clone(),
        counts.clone(),
    ));

    // Faults: each kind once in a random order, then at random.
    let mut rng = Rng(seed);
    let mut kinds = ALL_FAULTS;
    for i in (1..kinds.len()).rev() {
        kinds.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut faults: BTreeMap<Fault, u32> = BTreeMap::new();
    let mut last_fault = Instant::now();
    let mut round = 0usize;
    loop {
        tokio::time::sleep(Duration::from_millis(2000 + rng.below(5000))).await;
        if Instant::now() >= deadline {
            break;
        }
        let fault = kinds
            .get(round)
            .copied()
            .unwrap_or_else(|| ALL_FAULTS[rng.below(ALL_FAULTS.len() as u64) as usize]);
        round += 1;
        eprintln!("fault {round} at {:?}: {fault:?}", started.elapsed());
        inject(&stack, fault, &mut rng).await;
        *faults.entry(fault).or_default() += 1;
        last_fault = Instant::now();
    }
    stop.store(true, Ordering::Relaxed);
    let mut expected = Expected::new();
    let mut notify = Notify::new();
    for w in writers {
        let (edges, options) = w.await.unwrap();
        expected.extend(edges);
        notify.extend(options);
    }
    for pair in HOT_PAIRS {
        expected.insert(pair, None);
    }
    // The crowd's pairs come with their last answers pinned already.
    let mut crowd = blocker.await.unwrap();
    expected.extend(crowd.follows.clone());
    // Pairs left open (and the hot ones) get one last definitive answer.
    let mut pins = 0;
    for (pair, state) in expected.iter_mut().filter(|(_, s)| s.is_none()) {
        let follow = rng.below(2) == 0;
        loop {
            let op = if follow { "follow" } else { "unfollow" };
            match edge_op(&counts, port, &tokens, pair.0, pair.1, op).await {
                Answer::Done => break,
                Answer::Refused => panic!("{pair:?} refused"),
                Answer::Open => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
        *state = Some(follow);
        // A plain follow keeps the options of a follow that stood.
        notify.insert(*pair, None);
        pins += 1;
    }
    let content = producer.await.unwrap();
    reader.await.unwrap();
    let workload_end = Instant::now();

    // Drain: outbox empty, every partition applied to its end, verify clean.
    let stack = stack.lock().await;
    let mut conn = AsyncPgConnection::establish(&stack.database_url)
        .await
        .unwrap();
    // The move ends, and leaves its pairs as it had to.
    let moved = moves::finish(&stack, &mut conn, &moving).await;
    expected.extend(moved.expected.iter().copied());
    crowd.blocks.extend(moved.blocks.iter().copied());
    let drain_deadline = last_fault + DRAIN_BOUND;
    let mut verify_out = String::new();
    loop {
        let done = drained(&stack, &mut conn).await.unwrap_or(false);
        if done {
            let (ok, out) = stack.kith(&["verify", "--quiet", "--settle-ms", "0"]);
            verify_out = out;
            if ok {
                break;
            }
        }
        assert!(
            Instant::now() < drain_deadline,
            "not drained {DRAIN_BOUND:?} after the last fault; verify said:\n{verify_out}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let drained_after_fault = last_fault.elapsed();
    let drained_after_workload = workload_end.elapsed();

    // The truth equals the workload's own record.
    let rows: Vec<EdgeRow> = query_all(
        &mut conn,
        "SELECT from_user_id, to_user_id, active FROM following",
    )
    .await;
    let truth: BTreeMap<(i64, i64), bool> = rows
        .iter()
        .map(|r| ((r.from_user_id, r.to_user_id), r.active))
        .collect();
    let mut wrong = Vec::new();
    for (pair, state) in &expected {
        let want = state.expect("every pair has a definitive answer");
        if truth.get(pair).copied().unwrap_or(false) != want {
            wrong.push(*pair);
        }
    }
    for (pair, active) in &truth {
        if *active && !expected.contains_key(pair) {
            wrong.push(*pair);
        }
    }
    // Every follow whose options an answer named has them: a follow and its
    // options commit together or not at all.
    #[derive(QueryableByName)]
    struct NotifyRow {
        #[diesel(sql_type = BigInt)]
        from_user_id: i64,
        #[diesel(sql_type = BigInt)]
        to_user_id: i64,
        #[diesel(sql_type = diesel::sql_types::Bool)]
        notify: bool,
    }
    let rows: Vec<NotifyRow> = query_all(
        &mut conn,
        "SELECT from_user_id, to_user_id,
                coalesce(options_at = followed_at, FALSE) AND notify AS notify
           FROM following WHERE active",
    )
    .await;
    let notified: BTreeMap<(i64, i64), bool> = rows
        .iter()
        .map(|r| ((r.from_user_id, r.to_user_id), r.notify))
        .collect();
    let named: Vec<((i64, i64), bool)> = notify
        .iter()
        .filter(|(pair, _)| expected.get(pair) == Some(&Some(true)))
        .filter_map(|(pair, n)| Some((*pair, (*n)?)))
        .collect();
    let notify_wrong: Vec<(i64, i64)> = named
        .iter()
        .filter(|(pair, n)| notified.get(pair) != Some(n))
        .map(|(pair, _)| *pair)
        .collect();
    let checked = safety::check(&mut conn, &crowd).await;
    let (request_pairs, request_steps) = safety::request_activity(&mut conn).await;
    #[derive(QueryableByName)]
    struct Stats {
        #[diesel(sql_type = BigInt)]
        user_id: i64,
        #[diesel(sql_type = BigInt)]
        posts: i64,
        #[diesel(sql_type = BigInt)]
        likes_received: i64,
    }
    let stats: Vec<Stats> = query_all(
        &mut conn,
        "SELECT user_id, posts, likes_received FROM user_stats",
    )
    .await;
    let mut content_wrong = Vec::new();
    for s in &stats {
        let (posts, likes) = content
            .get(&s.user_id)
            .map(|(p, l)| (p.len() as i64, l.len() as i64))
            .unwrap_or((0, 0));
        if (s.posts, s.likes_received) != (posts, likes) {
            content_wrong.push((s.user_id, (s.posts, s.likes_received), (posts, likes)));
        }
    }

    let report = format!(
        "# Fault suite\n\n\
         seed {seed}; workload {secs} s; {WRITERS} writers over HTTP; {USERS} users\n\n\
         | what | count |\n|---|---|\n\
         | requests (follow, unfollow, block, mute, close friend, answers, locks; both signs) | {} |\n| of them in the block crowd | {} |\n\
         | follow-request pairs / their transitions | {request_pairs} / {request_steps} |\n\
         | answered (definitive) | {} |\n| refused | {} |\n\
         | profile reads answered | {} |\n\
         | left open (error or no answer) | {} |\n| final answers for open and hot pairs | {pins} |\n\
         | pairs checked against the truth | {} |\n\
         | content events acknowledged | {} (of them sent twice on purpose: {}) |\n\
         | answered INTERNAL (must be 0) | {} |\n| answered TIMEOUT | {} |\n\
         | faults: kill -9 of kith run + restart | {} |\n| faults: Redis FLUSHALL | {} |\n\
         | faults: Redis stop/start | {} |\n\
         | faults: broker stop/start | {} |\n| faults: {pg_fault} | {} |\n\n\
         drained {:.1} s after the last fault ({:.1} s after the workload; bound {} s)\n\n\
         `kith verify`: {}\n\
         edges differing from the workload's record: {}\n\
         follows with options named ({}) whose `notify` differs from the record: {}\n\
         blocks and follow requests differing from the workload's record: {}\n\
         mutes differing from the workload's record: {}\n\
         close friends differing from the workload's record: {}\n\
         follows across a block: {}\n\
         close friends across a block: {}\n\
         content counters differing: {}\n\
         account move under the faults: {}; followers not where the move had to leave them: {}\n",
        counts.ops.load(Ordering::Relaxed),
        counts.safety_ops.load(Ordering::Relaxed),
        counts.done.load(Ordering::Relaxed),
        counts.refused.load(Ordering::Relaxed),
        reads.load(Ordering::Relaxed),
        counts.open.load(Ordering::Relaxed),
        expected.len(),
        counts.content_sent.load(Ordering::Relaxed),
        counts.content_duplicates.load(Ordering::Relaxed),
        counts.internal.load(Ordering::Relaxed),
        counts.timeout.load(Ordering::Relaxed),
        faults.get(&Fault::KillKith).unwrap_or(&0),
        faults.get(&Fault::FlushRedis).unwrap_or(&0),
        faults.get(&Fault::RestartRedis).unwrap_or(&0),
        faults.get(&Fault::RestartBroker).unwrap_or(&0),
        faults.get(&Fault::RestartPostgres).unwrap_or(&0),
        drained_after_fault.as_secs_f64(),
        drained_after_workload.as_secs_f64(),
        DRAIN_BOUND.as_secs(),
        verify_out.trim().replace('\n', "; "),
        wrong.len(),
        named.len(),
        notify_wrong.len(),
        checked.blocks.len(),
        checked.mutes.len(),
        checked.close.len(),
        checked.follows_across,
        checked.listings_across,
        content_wrong.len(),
        moved.summary,
        moved.wrong.len(),
    );
    std::fs::write(stack.logs.join("faults.md"), &report).unwrap();
    eprintln!("{report}");
    assert!(wrong.is_empty(), "edges differ from the record: {wrong:?}");
    assert!(
        notify_wrong.is_empty(),
        "follow options differ from the record: {notify_wrong:?}"
    );
    assert!(
        checked.blocks.is_empty(),
        "blocks or requests differ from the record: {:?}",
        checked.blocks
    );
    assert!(
        checked.mutes.is_empty(),
        "mutes differ from the record: {:?}",
        checked.mutes
    );
    assert!(
        checked.close.is_empty(),
        "close friends differ from the record: {:?}",
        checked.close
    );
    assert_eq!(checked.follows_across, 0, "follows across a block");
    assert_eq!(checked.listings_across, 0, "close friends across a block");
    assert!(
        moved.wrong.is_empty(),
        "the move left followers where it should not ({}): {:?}",
        moved.summary,
        moved.wrong
    );
    assert!(
        content_wrong.is_empty(),
        "content counters differ: {content_wrong:?}"
    );
    assert_eq!(
        counts.internal.load(Ordering::Relaxed),
        0,
        "requests answered INTERNAL during outages (see the log)"
    );
    assert!(
        faults.len() == ALL_FAULTS.len() || secs < 30,
        "every kind of fault ran: {faults:?}"
    );
}
