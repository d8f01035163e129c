//! Limits of the write path measured in the same run, each without Kith
//! around it: the follow statement alone under `pgbench`, and the broker
//! alone carrying events from the relay's producer to the projector's
//! consumer. A follow through Kith costs at least the first, and its
//! pipeline lag is at least the second's latency.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use kith::config::Config;
use rdkafka::consumer::{Consumer as _, StreamConsumer};
use rdkafka::message::Message as _;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::FutureRecord;
use rdkafka::{Offset, TopicPartitionList};

use kith::model::UserId;
use serde_json::json;

use crate::bench::{Bench, Graph, PROFILE, Run, gid, mix};
use crate::procs;

/// Users of the follow statement's scratch schema.
const STATEMENT_USERS: i64 = 100_000;

/// `kith_change_edges` under `pgbench` — one follow of a random pair per
/// call, as a lone follow's batch is, then [`BATCHED`] per call — in a
/// scratch schema of its own with Kith's migrations: follows per second,
/// and PostgreSQL CPU ms per follow.
pub async fn follow_statement(
    base_url: &str,
    schema: &str,
    clients: usize,
    seconds: u64,
) -> Statement {
    let scratch = format!("{schema}_statement");
    let separator = if base_url.contains('?') { '&' } else { '?' };
    let url = format!("{base_url}{separator}options=-c%20search_path%3D{scratch}");
    let mut admin = AsyncPgConnection::establish(base_url)
        .await
        .expect("PostgreSQL");
    diesel::sql_query(format!("CREATE SCHEMA {scratch}"))
        .execute(&mut admin)
        .await
        .unwrap();
    kith::testing::store::migrate::run_pending(&url)
        .await
        .expect("migrations");
    let mut conn = AsyncPgConnection::establish(&url)
        .await
        .expect("PostgreSQL");
    for sql in [
        format!(
            "INSERT INTO users (id, handle, display_name) OVERRIDING SYSTEM VALUE
             SELECT g, 's' || g, 's' || g FROM generate_series(1, {STATEMENT_USERS}) g"
        ),
        "INSERT INTO user_stats (user_id) SELECT id FROM users".to_owned(),
        "ANALYZE users, user_stats, following".to_owned(),
    ] {
        diesel::sql_query(sql).execute(&mut conn).await.unwrap();
    }
    drop(conn);
    let script = std::env::temp_dir().join(format!("{scratch}.sql"));
    std::fs::write(
        &script,
        format!(
            "\\set a random(1, {STATEMENT_USERS})\n\
             \\set b 1 + (:a + random(0, {})) % {STATEMENT_USERS}\n\
             SELECT outcome FROM kith_change_edges(ARRAY[:a]::bigint[], ARRAY[:b]::bigint[], \
             ARRAY[true], ARRAY[gen_random_uuid()], 7500, 1.1);\n",
            STATEMENT_USERS - 2
        ),
    )
    .unwrap();
    // A group commit's batch: BATCHED follows of random pairs per call.
    let batched = std::env::temp_dir().join(format!("{scratch}-batched.sql"));
    std::fs::write(
        &batched,
        format!(
            "SELECT count(*) FROM (SELECT array_agg(a) AS a, \
             array_agg(1 + (a + r) % {STATEMENT_USERS}) AS b, array_agg(true) AS f, \
             array_agg(gen_random_uuid()) AS e FROM (SELECT \
             (1 + floor(random() * {STATEMENT_USERS}))::bigint AS a, \
             floor(random() * {})::bigint AS r FROM generate_series(1, {BATCHED})) g) z, \
             LATERAL kith_change_edges(z.a, z.b, z.f, z.e, 7500, 1.1) k;\n",
            STATEMENT_USERS - 2
        ),
    )
    .unwrap();
    // A first run in a new schema is slower (a checkpoint after the load,
    // caches): warm up, then measure.
    pgbench_start(&url, &script, clients, 5)
        .wait()
        .expect("pgbench ends");
    let (tps, pg_ms) = pgbench_measured(&url, &script, clients, seconds).await;
    // Batches come one or two at a time from each process.
    let (calls, call_pg_ms) = pgbench_measured(&url, &batched, 2, seconds).await;
    let follows = Statement {
        single_tps: tps,
        single_pg_ms: pg_ms,
        batched_tps: calls * BATCHED as f64,
        batched_pg_ms: call_pg_ms / BATCHED as f64,
    };
    diesel::sql_query(format!("DROP SCHEMA {scratch} CASCADE"))
        .execute(&mut admin)
        .await
        .unwrap();
    follows
}

/// Follows per call in the batched run of the follow statement.
pub const BATCHED: usize = 16;

/// The follow statement alone under `pgbench`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Statement {
    /// Calls of one follow per second (16 clients).
    pub single_tps: f64,
    /// PostgreSQL CPU ms per such call.
    pub single_pg_ms: f64,
    /// Follows per second in calls of [`BATCHED`] (2 clients).
    pub batched_tps: f64,
    /// PostgreSQL CPU ms per follow in those calls.
    pub batched_pg_ms: f64,
}

/// `pgbench` running `script`: transactions per second, and PostgreSQL's
/// CPU ms per transaction (all its processes, read while pgbench runs:
/// its backends end with it).
async fn pgbench_measured(
    url: &str,
    script: &std::path::Path,
    clients: usize,
    seconds: u64,
) -> (f64, f64) {
    let child = pgbench_start(url, script, clients, seconds);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = procs::cpu(u32::MAX);
    let window = seconds.saturating_sub(2).max(1);
    tokio::time::sleep(Duration::from_secs(window)).await;
    let cpu = procs::cpu(u32::MAX).since(&before);
    let output = child.wait_with_output().expect("pgbench ends");
    let tps = pgbench_tps(&output);
    (
        tps,
        cpu.of("postgres") * 1000.0 / (tps * window as f64).max(1e-9),
    )
}

/// What the broker alone did with paced events.
#[derive(Clone, Debug, Default)]
pub struct Broker {
    /// Events sent per second (target).
    pub rate: f64,
    /// Events that reached the consumer.
    pub received: usize,
    /// Events sent.
    pub sent: usize,
    /// Produce acknowledgement latency, ms.
    pub ack_p50: f64,
    /// Produce acknowledgement latency, ms.
    pub ack_p99: f64,
    /// Send → consumed, ms.
    pub end_p50: f64,
    /// Send → consumed, ms.
    pub end_p99: f64,
    /// Broker CPU ms per event.
    pub cpu_ms: f64,
    /// The broker's CPU, in cores, while the consumer only fetched (its
    /// partitions assigned, nothing produced): what fetching costs it
    /// whatever the rate.
    pub fetch_cores: f64,
}

/// How long the broker's cost of fetching alone is measured.
const FETCH_ONLY: Duration = Duration::from_secs(3);

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Sends `rate` events a second for `seconds` with the relay's producer
/// settings (one at a time, as commits arrive) to scratch topics shaped like
/// Kith's (the same partitions), and reads them with the projector's
/// consumer settings (both topics' partitions, as the projector fetches).
pub async fn broker(config: &Config, schema: &str, rate: u64, seconds: u64) -> Broker {
    let mut config = config.clone();
    config.pipeline.follow_topic = format!("{schema}.limit.follow");
    config.pipeline.content_topic = format!("{schema}.limit.content");
    config.pipeline.dead_letter_topic = format!("{schema}.limit.dead");
    config.pipeline.consumer_group = format!("{schema}.limit");
    kith::testing::pipeline::kafka::ensure_topics(&config)
        .await
        .expect("topics");
    let producer = kith::testing::pipeline::kafka::producer(&config).expect("producer");
    let consumer: StreamConsumer = kith::testing::pipeline::kafka::consumer_config(&config)
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    for topic in [
        &config.pipeline.follow_topic,
        &config.pipeline.content_topic,
    ] {
        for partition in 0..config.pipeline.topic_partitions {
            assignment
                .add_partition_offset(topic, partition, Offset::Beginning)
                .unwrap();
        }
    }
    consumer.assign(&assignment).expect("assign");

    let start = Instant::now();
    let total = (rate * seconds) as usize;
    let consumed = tokio::spawn(async move {
        let mut latencies = Vec::with_capacity(total);
        let deadline = Instant::now() + Duration::from_secs(seconds + 30);
        while latencies.len() < total && Instant::now() < deadline {
            let Ok(Ok(message)) =
                tokio::time::timeout(Duration::from_secs(1), consumer.recv()).await
            else {
                continue;
            };
            let sent_us: u64 = message
                .payload()
                .and_then(|p| std::str::from_utf8(p.get(..16)?).ok())
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let now_us = start.elapsed().as_micros() as u64;
            latencies.push(now_us.saturating_sub(sent_us) as f64 / 1000.0);
        }
        latencies
    });
    // Let the consumer's first fetches start before the clock runs.
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Fetching alone: the consumer asks, nothing is produced.
    let fetch_before = procs::cpu(u32::MAX);
    let fetch_started = Instant::now();
    tokio::time::sleep(FETCH_ONLY).await;
    let fetch_cores = procs::cpu(u32::MAX).since(&fetch_before).of("broker")
        / fetch_started.elapsed().as_secs_f64();

    let acks = Arc::new(Mutex::new(Vec::with_capacity(total)));
    let cpu_before = procs::cpu(u32::MAX);
    let begun = Instant::now();
    let mut waits = Vec::with_capacity(total);
    // A follow event's size, keyed by a follower id, with the relay's origin
    // header (a database's id).
    const ORIGIN: &str = "00000000-0000-4000-8000-000000000000";
    let padding = "x".repeat(220);
    for i in 0..total {
        let due = begun + Duration::from_secs_f64(i as f64 / rate as f64);
        tokio::time::sleep_until(due.into()).await;
        let sent_us = start.elapsed().as_micros() as u64;
        let payload = format!("{sent_us:016}{padding}");
        let key = (mix(i as u64) % 1_000_000).to_string();
        let delivery = producer
            .send_result(
                FutureRecord::to(&config.pipeline.follow_topic)
                    .key(&key)
                    .payload(&payload)
                    .headers(OwnedHeaders::new().insert(Header {
                        key: kith::testing::pipeline::origin::HEADER,
                        value: Some(ORIGIN),
                    })),
            )
            .map_err(|(e, _)| e)
            .expect("enqueued");
        let acks = acks.clone();
        let sent = Instant::now();
        waits.push(tokio::spawn(async move {
            if let Ok(Ok(_)) = delivery.await {
                acks.lock()
                    .unwrap()
                    .push(sent.elapsed().as_secs_f64() * 1000.0);
            }
        }));
    }
    for wait in waits {
        let _ = wait.await;
    }
    let mut ends = consumed.await.unwrap_or_default();
    let cpu = procs::cpu(u32::MAX).since(&cpu_before);
    let mut acks = std::mem::take(&mut *acks.lock().unwrap());
    acks.sort_by(f64::total_cmp);
    ends.sort_by(f64::total_cmp);
    let received = ends.len();
    Broker {
        rate: rate as f64,
        received,
        sent: total,
        ack_p50: quantile(&acks, 0.5),
        ack_p99: quantile(&acks, 0.99),
        end_p50: quantile(&ends, 0.5),
        end_p99: quantile(&ends, 0.99),
        // The window ends at the last event consumed (idle fetches of the
        // `kith run` under test are in it too: an upper bound).
        cpu_ms: cpu.of("broker") * 1000.0 / received.max(1) as f64,
        fetch_cores,
    }
}

/// The machine's limits, measured in the same run.
pub struct Limits {
    /// pgbench single-row inserts per second, and PostgreSQL's CPU ms per insert.
    pub pg_tps: f64,
    pub insert_pg_ms: f64,
    pub redis_get: f64,
    pub redis_zrange: f64,
    /// The follow statement alone, one follow and a batch per call.
    pub statement: Statement,
    pub broker: Broker,
}

/// Measures the limits: pgbench, redis-benchmark on a page's commands, the
/// follow statement alone and the broker alone.
pub async fn measure(run: &Run, graph: &Graph, bench: &mut Bench) -> Limits {
    let (app, base_url, schema, clients, seconds, celebrity) = (
        &run.app,
        &run.base_url,
        &run.schema,
        run.clients,
        run.seconds,
        graph.celebrity,
    );
    let (pg_tps, insert_pg_ms) = pgbench(base_url, schema, clients, seconds).await;
    eprintln!("pgbench: {pg_tps:.0} tps, PostgreSQL {insert_pg_ms:.3} ms each");
    let counter_key = app.keys.counter_record(UserId::new(celebrity).unwrap());
    let [list_key, _, _] = app.keys.list(kith::testing::paging::ListKey::Followers(
        UserId::new(celebrity).unwrap(),
    ));
    let _ = bench
        .post(None, PROFILE, json!({ "id": gid(celebrity) }))
        .await;
    kith::testing::read::pages::fill(
        app,
        kith::testing::paging::ListKey::Followers(UserId::new(celebrity).unwrap()),
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
    let statement = follow_statement(base_url, schema, clients, seconds).await;
    eprintln!("kith_change_edges alone: {statement:?}");
    let broker = broker(&app.config, schema, 1000, seconds).await;
    eprintln!("broker alone: {broker:?}");

    Limits {
        pg_tps,
        insert_pg_ms,
        redis_get,
        redis_zrange,
        statement,
        broker,
    }
}

async fn pgbench(url: &str, schema: &str, clients: usize, seconds: u64) -> (f64, f64) {
    let script = std::env::temp_dir().join(format!("{schema}.sql"));
    std::fs::write(
        &script,
        format!("INSERT INTO {schema}.bench_insert (v) VALUES (1);\n"),
    )
    .unwrap();
    pgbench_measured(url, &script, clients, seconds).await
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
