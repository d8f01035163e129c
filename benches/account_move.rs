//! A move of an account with `KITH_BENCH_MOVE_FOLLOWERS` (100,000)
//! followers, on the release `kith run` (its move runner, relay and
//! projector) over the local stack, driven over TCP from this process.
//!
//! 1. Seeds a graph (`kith seed-data`'s generator): the old account is its
//!    celebrity, with the followers; the new one an ordinary account.
//! 2. Reads both accounts' profiles at a steady rate (open loop,
//!    `KITH_BENCH_MOVE_READS_PER_SEC`, 40 a second, half each) for
//!    `KITH_BENCH_MOVE_BASELINE_SECS` (30) outside any move: the baseline.
//! 3. The new account claims the old, the old one moves, and the same reads
//!    go on until the move has ended and the pipeline has carried every
//!    follow to the caches. The move runs at `KITH_MOVE_FOLLOWERS_PER_SEC`
//!    (the service's setting, 200 by default; set it to try another pace).
//!    With `KITH_BENCH_MOVE_TURNS_SECS` set, the bench holds the job and
//!    lets it go in turns of that many seconds through the move (through
//!    its row: the service has no such control), and reads in both kinds
//!    of turn: what the move costs the reads is then measured against reads
//!    of the same accounts in the same minutes, not against a baseline
//!    minutes away, which on a shared machine drifts by more than that.
//! 4. Reads the same way for as long again once the move is through.
//! 5. Reports how long the move took, the CPU each process spent on it
//!    (Kith, PostgreSQL, Redis, the broker), and the reads' p50 / p99
//!    during the move against outside it, as the client waited for them
//!    and as Kith took them (each answer's `Server-Timing`, which the bench
//!    turns on), and the Redis round trips a read made in each; then
//!    checks the counts. Each profile is set against its own reads of the
//!    same work: the new account's before and after the move, the old
//!    one's before it only (once moved, its profile lists a follower or
//!    none instead of twenty).
//!
//! In production PostgreSQL and the broker run on machines of their own;
//! here they share the cores with Kith, Redis and the reads. So that the
//! reads measure what a move costs *them*, the bench pins Kith, Redis and
//! itself to the first half of the cores and PostgreSQL and the broker to
//! the rest for its run (and gives every process all the cores back at
//! the end; `scripts/stack clean` does too, after a bench that was killed).
//! `KITH_BENCH_MOVE_CORES=shared` leaves every process on every core, as
//! the machine runs them otherwise; `KITH_BENCH_MOVE_CORES=redis-alone`
//! gives Redis the first half to itself and puts every other process on
//! the rest (it tells Redis's own time from its clients' turns on a
//! core). `KITH_BENCH_MOVE_SHAPE=split` runs Kith as production would,
//! `kith serve` with a `kith relay` and a `kith project` of their own
//! (pinned beside PostgreSQL and the broker),
//! instead of one `kith run`. `KITH_BENCH_MOVE_USERS=warm` loads every
//! user's row into the serving process's cache before the baseline (and
//! keeps it there for the run), so that no read loads one from PostgreSQL:
//! it tells what the reads pay for rows they had not held.
//!
//! Needs the local stack (`scripts/stack up`; `scripts/stack clean` first
//! for a clean measure). Run `cargo bench --bench account_move`; writes
//! `target/bench-reports/account-move.md` and prints it.

use std::net::SocketAddr;
use std::sync::Arc;
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
#[allow(
    dead_code,
    reason = "the suite's process readings, of which this bench uses a part"
)]
#[path = "suite/procs.rs"]
mod procs;

use load::{Call, Conn, MakeCall, Outcome};

/// The profile query of the bench suite.
const PROFILE: &str = "query($id: ID!) { user(id: $id) { handle displayName movedTo { handle }
  counters { followings followers posts likesReceived favsReceived }
  followers(first: 20) { totalCount pageInfo { hasNextPage endCursor }
    edges { cursor followedAt node { id handle displayName
      counters { followings followers posts likesReceived favsReceived } } } } } }";

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map_or(default, |v| v.parse().unwrap_or_else(|_| panic!("{name}")))
}

fn gid(id: i64) -> String {
    kith::testing::graph::ids::user_id(UserId::new(id).unwrap()).to_string()
}

/// One GraphQL call as `token`; its answer, which must have no errors.
async fn call(addr: SocketAddr, token: &str, query: &str, variables: Value) -> Value {
    let mut conn = Conn::open(addr).await.expect("connect");
    let body = json!({ "query": query, "variables": variables }).to_string();
    let (status, body) = conn
        .send("POST", "/graphql", Some(token), &body)
        .await
        .expect("answer");
    let answer: Value = serde_json::from_slice(&body).expect("JSON");
    assert!(
        status == 200 && answer["errors"].is_null(),
        "{query}: {answer}"
    );
    answer
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

/// Whether the pipeline has carried every follow to `user`'s count: the
/// outbox relayed, and its stats counting its followers in the truth.
async fn drained(app: &kith::app::App, user: i64) -> bool {
    number(
        app,
        &format!(
            "SELECT ((SELECT count(*) FROM outbox) = 0
                 AND (SELECT followers FROM user_stats WHERE user_id = {user})
                   = (SELECT count(*) FROM following WHERE to_user_id = {user} AND active))::INT::BIGINT AS n"
        ),
    )
    .await
        == 1
}

/// A move's job as the bench holds and releases it in turns
/// (`KITH_BENCH_MOVE_TURNS_SECS`), through its row: the service has no
/// such control, and needs none.
struct Job<'a> {
    app: &'a kith::app::App,
    id: i64,
    /// The lease the bench holds the job under.
    token: String,
}

impl Job<'_> {
    fn new(app: &kith::app::App, id: i64) -> Job<'_> {
        let token = format!("00000000-0000-4000-8000-{:012x}", std::process::id());
        Job { app, id, token }
    }

    /// Followers handled so far, or -1 once the job has ended.
    async fn handled(&self) -> i64 {
        number(
            self.app,
            &format!(
                "SELECT CASE WHEN state = 'running' THEN (moved + requested + skipped + failed)::BIGINT
                             ELSE -1 END AS n FROM account_move WHERE id = {}",
                self.id
            ),
        )
        .await
    }

    /// Leased to the bench for an hour: no runner claims it, and a runner
    /// that claimed it before finds its lease gone when its batch's
    /// transaction fences the job, so the batch does nothing. (A batch that
    /// fenced it first holds the row until it commits; the lease is taken
    /// after it.)
    async fn hold(&self) {
        self.set(&format!(
            "lease_token = '{}', lease_until = now() + interval '1 hour'",
            self.token
        ))
        .await;
    }

    /// Whether the job is still held under the bench's lease (no batch of
    /// it can have committed since [`Self::hold`]).
    async fn still_held(&self) -> bool {
        number(
            self.app,
            &format!(
                "SELECT (lease_token IS NOT DISTINCT FROM '{}'::UUID AND state = 'running')::INT::BIGINT AS n
                   FROM account_move WHERE id = {}",
                self.token, self.id
            ),
        )
        .await
            == 1
    }

    /// Free and due now; returns once a batch has committed (or the job
    /// ended, or 10 s passed).
    async fn release(&self) {
        let at = self.handled().await;
        self.set("lease_token = NULL, lease_until = NULL, due_at = now()")
            .await;
        let released = Instant::now();
        while self.handled().await == at && released.elapsed() < Duration::from_secs(10) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn set(&self, assignments: &str) {
        number(
            self.app,
            &format!(
                "WITH changed AS (UPDATE account_move SET {assignments} WHERE id = {} RETURNING 1)
                 SELECT count(*) AS n FROM changed",
                self.id
            ),
        )
        .await;
    }
}

/// The reads of a move taken in turns.
#[derive(Default)]
struct Turns {
    /// While its job ran (from a batch committed).
    running: Phase,
    /// While it was held (from 1 s after the pipeline carried its last
    /// batch to both accounts' counts).
    held: Phase,
    /// Held turns in which the bench's lease was lost after all: left out.
    spoilt: u32,
    /// How long the reads ran in each kind of turn, s.
    running_secs: f64,
    held_secs: f64,
}

/// The reads through a move taken in turns of `window`, as [`Turns`] has
/// them, until the job has ended; `kiths` are checked while the bench
/// waits, for at most an hour.
async fn read_in_turns(
    addr: SocketAddr,
    rate: f64,
    ids: [i64; 2],
    (job, kiths): (&Job<'_>, &mut Kiths),
    window: Duration,
) -> Turns {
    let mut turns = Turns::default();
    let merge = |into: &mut Phase, from: Phase| {
        for (into, from) in into.iter_mut().zip(&from) {
            into.merge(from);
        }
    };
    let started = Instant::now();
    let mut check = || {
        kiths.check();
        assert!(
            started.elapsed() < Duration::from_secs(3600),
            "the move did not end within an hour"
        );
    };
    while job.handled().await >= 0 {
        check();
        job.release().await;
        let reading = Instant::now();
        merge(&mut turns.running, read_both(addr, rate, window, ids).await);
        turns.running_secs += reading.elapsed().as_secs_f64();
        job.hold().await;
        if job.handled().await < 0 {
            break;
        }
        while !(drained(job.app, ids[0]).await && drained(job.app, ids[1]).await) {
            check();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // The projector writes Redis after its commit: a batch's trips take
        // well under this.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let reading = Instant::now();
        let reads = read_both(addr, rate, window, ids).await;
        turns.held_secs += reading.elapsed().as_secs_f64();
        match job.still_held().await {
            true => merge(&mut turns.held, reads),
            false => turns.spoilt += 1,
        }
    }
    turns
}

/// The Redis round trips reads made and the PostgreSQL statements the
/// process made so far, from Kith's `/metrics`.
async fn work(metrics: SocketAddr) -> (f64, f64) {
    let mut conn = Conn::open(metrics).await.expect("connect");
    let (_, body) = conn.send("GET", "/metrics", None, "").await.expect("GET");
    let text = String::from_utf8_lossy(&body);
    let counter = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} in /metrics"))
    };
    (
        counter("kith_read_redis_round_trips_total"),
        counter("kith_postgres_statements_total"),
    )
}

/// The CPU group of `kith relay` and `kith project` when they run apart.
const PIPELINE: &str = "kith pipeline";

/// CPU seconds so far of each group, and of the pipeline's processes.
fn cpu(kith_pid: u32, pipeline: &[u32]) -> procs::Cpu {
    let mut cpu = procs::cpu(kith_pid);
    cpu.0
        .insert(PIPELINE, pipeline.iter().map(|p| procs::cpu_of(*p)).sum());
    cpu
}

/// The reads of one phase: of the old account's profile, of the new one's.
type Phase = [Outcome; 2];

/// Reads both profiles for `duration`, open loop, at `rate` a second in
/// all: half each, taking turns (the new account's a read later), each
/// timed apart so that each profile's figures are its own.
async fn read_both(addr: SocketAddr, rate: f64, duration: Duration, ids: [i64; 2]) -> Phase {
    let each = (rate / 2.0 * duration.as_secs_f64()) as u64;
    read_both_while(addr, rate, ids, move |i| i < each).await
}

/// Reads both profiles as [`read_both`] does, for as long as `more(i)`
/// holds of each one's next read `i`.
async fn read_both_while(
    addr: SocketAddr,
    rate: f64,
    ids: [i64; 2],
    more: impl Fn(u64) -> bool + Clone,
) -> Phase {
    let profile = |id: i64| -> MakeCall {
        let body = json!({ "query": PROFILE, "variables": { "id": gid(id) } }).to_string();
        Arc::new(move |_| Call {
            token: None,
            body: body.clone(),
        })
    };
    let (old, new) = tokio::join!(
        load::open_loop_while(addr, rate / 2.0, 8, profile(ids[0]), more.clone()),
        async {
            tokio::time::sleep(Duration::from_secs_f64(1.0 / rate)).await;
            load::open_loop_while(addr, rate / 2.0, 8, profile(ids[1]), more).await
        },
    );
    [old, new]
}

/// The reads sent in `phases`.
fn requests(phases: &[&Phase]) -> u64 {
    phases
        .iter()
        .flat_map(|p| p.iter())
        .map(Outcome::requests)
        .sum()
}

/// A line of the reads' tables: the latencies of some of them, together,
/// as the client waited for them and as Kith took them.
struct Row {
    what: &'static str,
    p50: f64,
    p99: f64,
    /// Kith's own time (`Server-Timing`); NaN when no answer carried it.
    kith_p50: f64,
    kith_p99: f64,
    requests: u64,
    failed: u64,
}

impl Row {
    fn of(what: &'static str, parts: &[&Outcome]) -> Self {
        let mut all = Outcome::default();
        for part in parts {
            all.merge(part);
        }
        Self {
            what,
            p50: all.percentile_ms(50.0),
            p99: all.percentile_ms(99.0),
            kith_p50: all.server_percentile_ms(50.0).unwrap_or(f64::NAN),
            kith_p99: all.server_percentile_ms(99.0).unwrap_or(f64::NAN),
            requests: parts.iter().map(|p| p.requests()).sum(),
            failed: parts.iter().map(|p| p.failed()).sum(),
        }
    }

    fn line(&self) -> String {
        format!(
            "| {} | {:.2} ms | {:.2} ms | {} | {} |\n",
            self.what, self.p50, self.p99, self.requests, self.failed
        )
    }

    fn kith_line(&self) -> String {
        format!(
            "| {} | {:.2} ms | {:.2} ms |\n",
            self.what, self.kith_p50, self.kith_p99
        )
    }

    /// The lines of `rows`, then the ratios of each pair in `against`
    /// (its name, the row, the row it is set against): as the client
    /// waited, and in Kith.
    fn tables(rows: &[Self], against: &[(&str, &Self, &Self)]) -> (String, String) {
        let table = |line: fn(&Self) -> String, ratios: fn(&str, &Self, &Self) -> String| {
            rows.iter()
                .map(line)
                .chain(
                    against
                        .iter()
                        .map(|(what, row, base)| ratios(what, row, base)),
                )
                .collect()
        };
        (
            table(Self::line, Self::against),
            table(Self::kith_line, Self::against_in_kith),
        )
    }

    /// `row`'s latencies over `base`'s, and whether within 10%.
    fn against(what: &str, row: &Self, base: &Self) -> String {
        Self::ratios(what, (row.p50, row.p99), (base.p50, base.p99), "| | |")
    }

    /// `row`'s times in Kith over `base`'s, and whether within 10%.
    fn against_in_kith(what: &str, row: &Self, base: &Self) -> String {
        let (at, of) = ((row.kith_p50, row.kith_p99), (base.kith_p50, base.kith_p99));
        Self::ratios(what, at, of, "|")
    }

    /// The p50 and p99 of `at` over those of `of`, and whether within 10%,
    /// with `rest` closing the line.
    fn ratios(what: &str, at: (f64, f64), of: (f64, f64), rest: &str) -> String {
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
        let within = |r: f64| if r <= 1.10 { "yes" } else { "no" };
        let (p50, p99) = (ratio(at.0, of.0), ratio(at.1, of.1));
        format!(
            "| {what} | {p50:.2}× (within 10%: {}) | {p99:.2}× (within 10%: {}) {rest}\n",
            within(p50),
            within(p99)
        )
    }
}

/// The report's part on the reads taken in turns of `secs` through the
/// move: `running` (the running turns' reads, by account) and the rest of
/// `turns`.
fn turns_section(secs: u64, running: [&Outcome; 2], turns: &Turns) -> String {
    let [held_old, held_new] = &turns.held;
    let rows = [
        Row::of("old account, the job running", &[running[0]]),
        Row::of("old account, the job held", &[held_old]),
        Row::of("new account, the job running", &[running[1]]),
        Row::of("new account, the job held", &[held_new]),
        Row::of("both, the job running", &running),
        Row::of("both, the job held", &[held_old, held_new]),
    ];
    let [
        old_running,
        old_held,
        new_running,
        new_held,
        both_running,
        both_held,
    ] = &rows;
    let (client, kith) = Row::tables(
        &rows,
        &[
            ("old account: running ÷ held", old_running, old_held),
            ("new account: running ÷ held", new_running, new_held),
            ("both: running ÷ held", both_running, both_held),
        ],
    );
    let slowest: String = [
        slowest_line("old account, the job running", &[running[0]]),
        slowest_line("old account, the job held", &[held_old]),
        slowest_line("new account, the job running", &[running[1]]),
        slowest_line("new account, the job held", &[held_new]),
        slowest_line("both, the job running", &running),
        slowest_line("both, the job held", &[held_old, held_new]),
    ]
    .concat();
    format!(
        "**The reads in turns** (`KITH_BENCH_MOVE_TURNS_SECS={secs}`): through the move, \
         turns of {secs} s while its job runs (from a batch committed) and while it is held \
         (leased to the bench, from 1 s after the pipeline carried its last batch to both \
         accounts' counts), one after the other, so that both meet the machine in the same \
         minutes. The reads during the move above are the running turns'; the job's time \
         above counts both kinds of turn and the waits between them (reads: {:.0} s running, \
         {:.0} s held). Held turns in which the bench's lease was lost, left out: {}.\n\n\
         | reads in turns | p50 | p99 | requests | failed |\n|---|---|---|---|---|\n\
         {client}\n\
         | the same, each one's time in Kith | p50 | p99 |\n|---|---|---|\n\
         {kith}\n\
         | the reads at or past their p99 in Kith | p99 in Kith | reads | with a PostgreSQL \
         statement (of all reads) | their mean in Kith | in PostgreSQL | in Redis | the rest | \
         their mean Redis round trips | p99 of the reads without a statement |\n\
         |---|---|---|---|---|---|---|---|---|---|\n\
         {slowest}\n",
        turns.running_secs, turns.held_secs, turns.spoilt,
    )
}

/// What the reads of `parts` at or past their p99 in Kith waited for (each
/// answer's `Server-Timing`): how many made a PostgreSQL statement, their
/// mean time in Kith, in PostgreSQL, in Redis and the rest (waits for a
/// pooled connection, the process's own work and its turns on the core;
/// at least zero for each read, though its parts are summed times), their
/// mean Redis round trips; and the p99 of the reads that made no statement.
fn slowest_line(what: &str, parts: &[&Outcome]) -> String {
    let mut timings: Vec<load::Timing> = parts
        .iter()
        .flat_map(|p| p.timings.iter().copied())
        .collect();
    if timings.is_empty() {
        return format!("| {what} | — | | | | | | | | |\n");
    }
    timings.sort_by_key(|t| t.kith_us);
    let p99 = common::percentile(&timings, 99.0).kith_us;
    let slow: Vec<&load::Timing> = timings.iter().filter(|t| t.kith_us >= p99).collect();
    let mean = |of: fn(&load::Timing) -> u64| {
        slow.iter().map(|t| of(t)).sum::<u64>() as f64 / slow.len() as f64 / 1000.0
    };
    let quiet: Vec<u64> = timings
        .iter()
        .filter(|t| t.statements == 0)
        .map(|t| t.kith_us)
        .collect();
    let quiet_p99 = match quiet.is_empty() {
        true => "—".to_owned(),
        false => format!("{:.2} ms", common::percentile(&quiet, 99.0) as f64 / 1000.0),
    };
    format!(
        "| {what} | {:.2} ms | {} | {} ({} of all {}) | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} | {quiet_p99} |\n",
        p99 as f64 / 1000.0,
        slow.len(),
        slow.iter().filter(|t| t.statements > 0).count(),
        timings.iter().filter(|t| t.statements > 0).count(),
        timings.len(),
        mean(|t| t.kith_us),
        mean(|t| t.pg_us),
        mean(|t| t.redis_us),
        mean(|t| t.kith_us.saturating_sub(t.pg_us + t.redis_us)),
        slow.iter().map(|t| t.round_trips).sum::<u64>() as f64 / slow.len() as f64,
    )
}

#[tokio::main]
async fn main() {
    let followers = env_or("KITH_BENCH_MOVE_FOLLOWERS", 100_000) as i64;
    let rate = env_or("KITH_BENCH_MOVE_READS_PER_SEC", 40) as f64;
    let baseline_secs = env_or("KITH_BENCH_MOVE_BASELINE_SECS", 30);
    let name = format!("bench_move_{}", std::process::id());
    let app = common::isolated_app(&name, |c| c.database.statement_timeout_ms = 0).await;
    let pace = app.config.portability.move_followers_per_sec;

    // 1. The graph: the followers and 20,000 more users.
    let users = followers + 20_000;
    let seeded = Instant::now();
    let summary = {
        let mut conn = app.pg.get().await.unwrap();
        kith::testing::store::seed::generate(
            &mut conn,
            &kith::testing::store::seed::Plan {
                users,
                edges: followers + 100_000,
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
    let old = summary.first_id;
    let new = number(
        &app,
        "SELECT user_id AS n FROM user_stats WHERE followers BETWEEN 20 AND 200
          ORDER BY user_id LIMIT 1",
    )
    .await;
    let before_new = number(
        &app,
        &format!("SELECT followers AS n FROM user_stats WHERE user_id = {new}"),
    )
    .await;
    let overlap = number(
        &app,
        &format!(
            "SELECT count(*) AS n FROM following a JOIN following b
                ON b.from_user_id = a.from_user_id AND b.to_user_id = {new} AND b.active
              WHERE a.to_user_id = {old} AND a.active"
        ),
    )
    .await;
    eprintln!(
        "seeded in {:.1} s: old {old} with {followers} followers, new {new} with {before_new} ({overlap} of them follow both)",
        seeded.elapsed().as_secs_f64()
    );

    // The release Kith: one `kith run`, or (`KITH_BENCH_MOVE_SHAPE=split`)
    // `kith serve` with a `kith relay` and a `kith project` beside it.
    let split = std::env::var("KITH_BENCH_MOVE_SHAPE").is_ok_and(|v| v == "split");
    let free = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    };
    let (addr, metrics) = (free(), free());
    std::fs::create_dir_all("target/bench-reports").unwrap();
    let warm_users = std::env::var("KITH_BENCH_MOVE_USERS").is_ok_and(|v| v == "warm");
    let kith = |command: &str, http: SocketAddr, metrics: SocketAddr| {
        let log = format!("target/bench-reports/account-move-kith-{command}.log");
        let mut kith = common::kith_command(&app.config, command, http, metrics, log.as_ref());
        kith.env("KITH_MOVE_FOLLOWERS_PER_SEC", pace.to_string())
            .env("KITH_SERVER_TIMING", "true");
        if warm_users {
            kith.env("KITH_USER_CACHE_TTL_SECS", "86400")
                .env("KITH_USER_CACHE_CAPACITY", users.to_string());
        }
        kith.spawn().expect("kith starts")
    };
    let serving = kith(if split { "serve" } else { "run" }, addr, metrics);
    let pid = serving.id();
    let pipeline: Vec<std::process::Child> = if split {
        ["relay", "project"]
            .iter()
            .map(|command| kith(command, free(), free()))
            .collect()
    } else {
        Vec::new()
    };
    let pipeline_pids: Vec<u32> = pipeline.iter().map(std::process::Child::id).collect();
    let mut kiths = Kiths(std::iter::once(serving).chain(pipeline).collect());
    let ready = Instant::now();
    loop {
        kiths.check();
        if let Ok(mut conn) = Conn::open(addr).await
            && let Ok((200, _)) = conn.send("GET", "/readyz", None, "").await
        {
            break;
        }
        assert!(
            ready.elapsed() < Duration::from_secs(60),
            "kith never got ready"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut cores = Cores::split(pid, &pipeline_pids);
    let tokens = app.auth.tokens.clone();
    let token = move |user: i64| {
        tokens.issue(
            UserId::new(user).unwrap(),
            chrono::Utc::now().timestamp(),
            6 * 3600,
        )
    };
    let reads: MakeCall = Arc::new(move |i| {
        Call {
        token: None,
        body: json!({ "query": PROFILE, "variables": { "id": gid(if i % 2 == 0 { old } else { new }) } })
            .to_string(),
    }
    });

    if warm_users {
        // Every user's row in the serving process's cache, so that no read
        // of the run loads one from PostgreSQL.
        for first in (1..=users).step_by(100) {
            let ids: Vec<String> = (first..=(first + 99).min(users)).map(gid).collect();
            call(
                addr,
                &token(new),
                "query($ids: [ID!]!) { users(ids: $ids) { id } }",
                json!({ "ids": ids }),
            )
            .await;
        }
    }
    // 2. Warm-up, then the baseline.
    load::closed_loop(addr, 4, Duration::from_secs(5), None, reads).await;
    let work_before = work(metrics).await;
    let cpu_before = cpu(pid, &pipeline_pids);
    let before = read_both(addr, rate, Duration::from_secs(baseline_secs), [old, new]).await;
    let baseline_cpu = cpu(pid, &pipeline_pids).since(&cpu_before);
    let work_after_baseline = work(metrics).await;
    let mut calls_outside = work_after_baseline.0 - work_before.0;
    let statements_before = work_after_baseline.1 - work_before.1;

    // 3. The move, with the reads going on until it has ended and the
    //    pipeline has carried it to the caches.
    call(
        addr,
        &token(new),
        "mutation($id: ID!) { addAccountAlias(input: {userId: $id}) { changed } }",
        json!({ "id": gid(old) }),
    )
    .await;
    let cpu_start = cpu(pid, &pipeline_pids);
    let started = Instant::now();
    let answer = call(
        addr,
        &token(old),
        "mutation($id: ID!) { moveAccount(input: {targetId: $id}) { move { id total } } }",
        json!({ "id": gid(new) }),
    )
    .await;
    let move_id = answer["data"]["moveAccount"]["move"]["id"].clone();
    let calls_start = work(metrics).await.0;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let turn_secs = env_or("KITH_BENCH_MOVE_TURNS_SECS", 0);
    let reading = (turn_secs == 0).then(|| {
        let stop = stop.clone();
        tokio::spawn(read_both_while(addr, rate, [old, new], move |_| {
            !stop.load(std::sync::atomic::Ordering::Relaxed)
        }))
    });
    let in_turns = match turn_secs {
        0 => None,
        secs => {
            let id = number(
                &app,
                &format!("SELECT max(id) AS n FROM account_move WHERE from_id = {old}"),
            )
            .await;
            let job = Job::new(&app, id);
            let window = Duration::from_secs(secs);
            Some(read_in_turns(addr, rate, [old, new], (&job, &mut kiths), window).await)
        }
    };
    let watch =
        "query($id: ID!) { accountMove(id: $id) { state total moved requested skipped failed } }";
    let job = loop {
        let r = call(addr, &token(old), watch, json!({ "id": move_id })).await;
        let job = r["data"]["accountMove"].clone();
        if job["state"] != "RUNNING" {
            break job;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let job_secs = started.elapsed().as_secs_f64();
    // The pipeline: the outbox relayed and every follower counted.
    let expected = |user: i64| {
        format!("SELECT count(*) AS n FROM following WHERE to_user_id = {user} AND active")
    };
    let (truth_new, truth_old) = (
        number(&app, &expected(new)).await,
        number(&app, &expected(old)).await,
    );
    while !(drained(&app, old).await && drained(&app, new).await) {
        kiths.check();
        assert!(
            started.elapsed() < Duration::from_secs(3600),
            "the pipeline did not drain"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let through_secs = started.elapsed().as_secs_f64();
    let move_cpu = cpu(pid, &pipeline_pids).since(&cpu_start);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    // How long reads ran through the move (for their share of its CPU).
    let (during, turns, reading_secs) = match (reading, in_turns) {
        (Some(reading), _) => (reading.await.expect("reads"), None, through_secs),
        (None, Some(mut turns)) => {
            let secs = turns.running_secs + turns.held_secs;
            (std::mem::take(&mut turns.running), Some(turns), secs)
        }
        (None, None) => unreachable!("the reads run in turns or all through"),
    };
    let calls_during = work(metrics).await.0 - calls_start;

    // The counts, as a profile reads them once the move is through (the
    // counter records follow the projector's by a moment).
    let counts = loop {
        let r = call(
            addr,
            &token(old),
            "query($a: ID!, $b: ID!) { old: user(id: $a) { movedTo { handle } counters { followers } }
                new: user(id: $b) { counters { followers } } }",
            json!({ "a": gid(old), "b": gid(new) }),
        )
        .await;
        let counts = (
            r["data"]["old"]["counters"]["followers"]
                .as_i64()
                .unwrap_or(-1),
            r["data"]["new"]["counters"]["followers"]
                .as_i64()
                .unwrap_or(-1),
        );
        if counts == (truth_old, truth_new) || started.elapsed().as_secs_f64() > through_secs + 30.0
        {
            break counts;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let work_start = work(metrics).await;
    let after = read_both(addr, rate, Duration::from_secs(baseline_secs), [old, new]).await;
    let work_end = work(metrics).await;
    calls_outside += work_end.0 - work_start.0;
    let statements_after = work_end.1 - work_start.1;
    drop(kiths);
    cores.release();

    let per_read = |n: f64, phases: &[&Phase]| n / requests(phases).max(1) as f64;
    let (statements_before, statements_after) = (
        per_read(statements_before, &[&before]),
        per_read(statements_after, &[&after]),
    );
    let (calls_outside, calls_during) = (
        per_read(calls_outside, &[&before, &after]),
        per_read(
            calls_during,
            &std::iter::once(&during)
                .chain(turns.as_ref().map(|t| &t.held))
                .collect::<Vec<_>>(),
        ),
    );
    let [old_before, new_before] = &before;
    let [old_during, new_during] = &during;
    let [old_after, new_after] = &after;
    let reads_table = [
        Row::of("old account, before the move", &[old_before]),
        Row::of("old account, during the move", &[old_during]),
        Row::of(
            "old account, after the move (a follower or none)",
            &[old_after],
        ),
        Row::of(
            "new account, before and after the move",
            &[new_before, new_after],
        ),
        Row::of("new account, during the move", &[new_during]),
        // The old account's reads after the move do less work: left out.
        Row::of(
            "both, outside a move (before it, and the new account's after it)",
            &[old_before, new_before, new_after],
        ),
        Row::of("both, during the move", &[old_during, new_during]),
    ];
    let [
        old_outside,
        old_move,
        _,
        new_outside,
        new_move,
        both_outside,
        both_move,
    ] = &reads_table;
    let (reads_rows, kith_rows) = Row::tables(
        &reads_table,
        &[
            ("old account: during ÷ before", old_move, old_outside),
            ("new account: during ÷ outside", new_move, new_outside),
            ("both: during ÷ outside", both_move, both_outside),
        ],
    );
    let during_is = match turns {
        Some(_) => "through it (its running and held turns together)",
        None => "during it",
    };
    let turns_section = turns.as_ref().map_or_else(String::new, |turns| {
        turns_section(turn_secs, [old_during, new_during], turns)
    });
    let slowest_rows: String = [
        slowest_line("old account, before the move", &[old_before]),
        slowest_line("old account, during the move", &[old_during]),
        slowest_line(
            "new account, before and after the move",
            &[new_before, new_after],
        ),
        slowest_line("new account, during the move", &[new_during]),
        slowest_line("both, outside a move", &[old_before, new_before, new_after]),
        slowest_line("both, during the move", &[old_during, new_during]),
    ]
    .concat();
    let moved = job["moved"].as_i64().unwrap_or(0)
        + job["requested"].as_i64().unwrap_or(0)
        + job["skipped"].as_i64().unwrap_or(0);
    // The reads go on through the move: their share of the CPU is the
    // baseline's, for as long as the move took; the rest is the move's.
    let share = |g: &str| {
        (move_cpu.of(g) - baseline_cpu.of(g) * reading_secs / baseline_secs as f64).max(0.0)
    };
    let groups: Vec<&str> = procs::GROUPS
        .iter()
        .copied()
        .filter(|g| *g != "bench")
        .chain(split.then_some(PIPELINE))
        .collect();
    let cpu_rows: String = groups
        .iter()
        .map(|g| {
            format!(
                "| {g} | {:.1} s | {:.1} s | {:.1} s | {:.3} ms |\n",
                move_cpu.of(g),
                move_cpu.of(g) - share(g),
                share(g),
                share(g) * 1000.0 / moved.max(1) as f64,
            )
        })
        .collect();
    let total_cpu: f64 = groups.iter().map(|g| share(g)).sum();
    let report = format!(
        "# An account move\n\n\
         `cargo bench --bench account_move`: the release {} on the local stack; the old \
         account has {followers} followers (seeded), the new one {before_new} ({overlap} follow \
         both); the move at `KITH_MOVE_FOLLOWERS_PER_SEC={pace}`; profile reads of both accounts \
         over TCP at {rate} a second, open loop. Cores: {}. User rows: {}.\n\n\
         | what | figure |\n|---|---|\n\
         | the move's job: {} | {:.1} s ({:.0} followers a second) |\n\
         | moved / requested / already following / left behind | {} / {} / {} / {} |\n\
         | until every follow was relayed and counted | {through_secs:.1} s |\n\
         | followers after (old, new), as read / in the truth | ({}, {}) / ({truth_old}, {truth_new}) |\n\
         | CPU of the machine's services for the move (the reads' share taken out) | {total_cpu:.1} s ({:.2} ms a follower) |\n\n\
         | process | CPU while the move ran | of it the reads' (the baseline's rate) | the move's | per follower |\n|---|---|---|---|---|\n\
         {cpu_rows}\n\
         | profile reads ({baseline_secs} s before the move, through it, {baseline_secs} s after it) | p50 | p99 | requests | failed |\n|---|---|---|---|---|\n\
         {reads_rows}\n\
         | the same reads, each one's time in Kith (its `Server-Timing`: from its request \
         reaching Kith's router to its answer's head) | p50 | p99 |\n|---|---|---|\n\
         {kith_rows}\n\
         | what the reads at or past their p99 in Kith waited for (`Server-Timing`'s `pg` and \
         `redis`) | p99 in Kith | reads | with a PostgreSQL statement (of all reads) | their mean \
         in Kith | in PostgreSQL | in Redis | the rest | their mean Redis round trips | p99 of the \
         reads without a statement |\n|---|---|---|---|---|---|---|---|---|---|\n\
         {slowest_rows}\n\
         The client's time is Kith's and the rest of the trip: the request's and the answer's \
         way through the kernel, and the client's own turn on the core it shares with Kith and \
         Redis. Once moved, the old account has a follower or none: its profile's reads after the move \
         list one follower instead of twenty, so its reads during the move are compared with \
         those before it only, and left out of both accounts' reads outside it.\n\n\
         {turns_section}\
         The work of a read (Kith's `kith_read_redis_round_trips_total` over the reads): \
         {calls_outside:.2} Redis round trips outside a move, {calls_during:.2} {during_is}. \
         PostgreSQL statements of the process serving the reads (`kith_postgres_statements_total`, \
         with its own jobs' — {}), per read: {statements_before:.3} before the move, \
         {statements_after:.3} after it.\n",
        match split {
            true => "`kith serve` (`kith relay` and `kith project` beside it)",
            false => "`kith run`",
        },
        cores.describe(),
        match warm_users {
            true =>
                "every one held in the serving process from before the baseline \
                     (`KITH_BENCH_MOVE_USERS=warm`)",
            false => "loaded as the reads ask for them",
        },
        job["state"],
        job_secs,
        moved as f64 / job_secs,
        job["moved"],
        job["requested"],
        job["skipped"],
        job["failed"],
        counts.0,
        counts.1,
        total_cpu * 1000.0 / moved.max(1) as f64,
        match split {
            true => "the move runner",
            false => "the move runner, the relay and the projector",
        },
    );
    common::write_report("account-move.md", &report);
    println!("{report}");
    assert_eq!(job["state"], "DONE", "the move ended {job}");
    assert_eq!(counts, (truth_old, truth_new), "the counts as read");
    assert_eq!(
        truth_new,
        before_new + job["moved"].as_i64().unwrap_or(-1),
        "every follower moved counts once"
    );
}

/// The Kith processes of the run, killed when the bench ends, even by a
/// panic: a `kith project` left behind would share the next run's
/// partitions.
struct Kiths(Vec<std::process::Child>);

impl Kiths {
    /// Panics when one of them has exited: the figures would be wrong.
    fn check(&mut self) {
        for child in &mut self.0 {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "kith {} exited ({status}): see target/bench-reports",
                    child.id()
                );
            }
        }
    }
}

impl Drop for Kiths {
    fn drop(&mut self) {
        for child in &mut self.0 {
            child.kill().ok();
            child.wait().ok();
        }
    }
}

/// Where the bench's processes run: Kith's API, Redis and the bench on the
/// first half of the cores, PostgreSQL, the broker and Kith's pipeline
/// processes (when apart) on the rest; or Redis alone on the first half
/// (`KITH_BENCH_MOVE_CORES=redis-alone`); or all on all.
struct Cores {
    /// The CPUs of every core (`"0-N"`), `None` when nothing was pinned.
    all: Option<String>,
    /// Whether the processes were pinned for the run.
    pinned: bool,
    /// Whether Redis has the first half to itself.
    redis_alone: bool,
    /// The two halves, as the report names them.
    halves: (String, String),
    kith_pid: u32,
    pipeline: Vec<u32>,
}

impl Cores {
    /// Pins the processes unless `KITH_BENCH_MOVE_CORES=shared` or the
    /// machine has a single core; with `redis-alone`, Redis on the first
    /// half and every other process on the rest.
    fn split(kith_pid: u32, pipeline: &[u32]) -> Self {
        // The CPUs this bench may use, which need not be 0..n-1.
        let cpus = procs::allowed_cpus();
        let n = cpus.len();
        let layout = std::env::var("KITH_BENCH_MOVE_CORES").unwrap_or_default();
        let (shared, alone) = (layout == "shared", layout == "redis-alone");
        let list = |part: &[usize]| {
            part.iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        let halves = (list(&cpus[..n / 2]), list(&cpus[n / 2..]));
        let mut cores = Self {
            all: None,
            pinned: false,
            redis_alone: false,
            halves,
            kith_pid,
            pipeline: pipeline.to_vec(),
        };
        if shared || n < 2 {
            return cores;
        }
        let mut pinned = procs::pin(kith_pid, |group| match group {
            "redis" => Some(cores.halves.0.clone()),
            "kith" | "bench" if !alone => Some(cores.halves.0.clone()),
            "kith" | "bench" | "postgres" | "broker" => Some(cores.halves.1.clone()),
            _ => None,
        });
        for pid in pipeline {
            pinned &= procs::pin_one(*pid, &cores.halves.1);
        }
        cores.all = Some(list(&cpus));
        cores.pinned = true;
        cores.redis_alone = alone;
        assert!(pinned, "taskset could not pin the processes");
        cores
    }

    fn describe(&self) -> String {
        let pipeline = match self.pipeline.is_empty() {
            true => "",
            false => ", Kith's relay and projector",
        };
        match self.pinned {
            true if self.redis_alone => format!(
                "Redis alone on CPU {}, Kith's API, the reads, PostgreSQL{pipeline} and the \
                 broker on CPU {} (`KITH_BENCH_MOVE_CORES=redis-alone`)",
                self.halves.0, self.halves.1
            ),
            true => format!(
                "Kith's API, Redis and the reads on CPU {}, PostgreSQL{pipeline} and the \
                 broker on CPU {} (`KITH_BENCH_MOVE_CORES=shared` to share them)",
                self.halves.0, self.halves.1
            ),
            false => "every process on every core".to_owned(),
        }
    }

    /// Every process on every core again.
    fn release(&mut self) {
        if let Some(all) = self.all.take() {
            procs::pin(self.kith_pid, |_| Some(all.clone()));
            for pid in &self.pipeline {
                procs::pin_one(*pid, &all);
            }
        }
    }
}

impl Drop for Cores {
    fn drop(&mut self) {
        self.release();
    }
}
