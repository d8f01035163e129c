//! Set-up shared by the benches: an isolated `App` on the local stack.

use std::sync::Arc;

use kith::app::App;
use kith::config::Config;

/// An `App` with its own PostgreSQL schema, Redis prefix, topics and group.
pub async fn isolated_app(name: &str, tweak: impl FnOnce(&mut Config)) -> Arc<App> {
    let mut config = Config::from_env().expect("configuration");
    // Through a transaction pooler (`scripts/stack pooler up`): a database
    // of its own, named for `scripts/stack pooler clean`.
    let pooler = std::env::var("KITH_BENCH_POOLER_URL").ok();
    let place = match pooler {
        Some(_) => format!("kt_{}_{name}", chrono::Utc::now().timestamp()),
        None => name.to_owned(),
    };
    kith::testing::isolate_postgres(&mut config, &place, pooler.as_deref())
        .await
        .expect("PostgreSQL is up (scripts/stack up)");
    config.redis.prefix = format!("{name}:");
    config.pipeline.follow_topic = format!("{name}.follow");
    config.pipeline.content_topic = format!("{name}.content");
    config.pipeline.dead_letter_topic = format!("{name}.dead");
    config.pipeline.consumer_group = format!("{name}.projector");
    config.pipeline.topic_replication_factor = 1;
    config.pipeline.topic_min_insync_replicas = 1;
    tweak(&mut config);
    App::start(config).await.expect("app starts")
}

/// The allocator `kith` itself runs with.
#[cfg(not(feature = "jemalloc"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// jemalloc instead, to compare (`--features jemalloc`).
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The release `kith <command>` on `config`'s stores (its schema, Redis
/// prefix, topics and group), serving on `http` and `metrics`, writing its
/// output to `log`, migrations left to the bench. The caller adds its own
/// settings and spawns it.
#[allow(
    dead_code,
    reason = "only the benches that run Kith as a process of its own call it"
)]
pub fn kith_command(
    config: &Config,
    command: &str,
    http: std::net::SocketAddr,
    metrics: std::net::SocketAddr,
    log: &std::path::Path,
) -> std::process::Command {
    let log = std::fs::File::create(log).unwrap();
    let mut kith = std::process::Command::new(env!("CARGO_BIN_EXE_kith"));
    kith.arg(command)
        .env("DATABASE_URL", &config.database.url)
        .env("DATABASE_SESSION_URL", config.session_url())
        .env(
            "KITH_PG_STATEMENT_CACHE",
            config.database.pg_statement_cache.to_string(),
        )
        .env("REDIS_URL", &config.redis.url)
        .env("KITH_REDIS_PREFIX", &config.redis.prefix)
        .env("KITH_FOLLOW_TOPIC", &config.pipeline.follow_topic)
        .env("KITH_CONTENT_TOPIC", &config.pipeline.content_topic)
        .env("KITH_DEAD_LETTER_TOPIC", &config.pipeline.dead_letter_topic)
        .env("KITH_CONSUMER_GROUP", &config.pipeline.consumer_group)
        .env("KITH_TOPIC_REPLICATION_FACTOR", "1")
        .env("KITH_TOPIC_MIN_INSYNC_REPLICAS", "1")
        .env("KITH_HTTP_ADDR", http.to_string())
        .env("KITH_METRICS_ADDR", metrics.to_string())
        .env("KITH_AUTO_MIGRATE", "false")
        .stdout(log.try_clone().unwrap())
        .stderr(log);
    kith
}

/// An isolated app for write benches: no rate limit to speak of, a pool of
/// 32, and `users` users `b0`… with ids 1…`users`.
#[allow(
    dead_code,
    reason = "profile_query includes this module and needs no writers"
)]
pub async fn writer_app(name: &str, users: i64) -> Arc<App> {
    let app = isolated_app(name, |config| {
        config.writes.rate_limit_capacity = 1_000_000;
        config.writes.rate_limit_per_sec = 1_000_000.0;
        config.database.pool_size = 32;
    })
    .await;
    let mut conn = app.pg.get().await.unwrap();
    kith::testing::store::users::seed(&mut conn, "b", users)
        .await
        .unwrap();
    drop(conn);
    app
}

/// p-th percentile of sorted samples.
#[allow(dead_code, reason = "the export bench reads no percentiles")]
pub fn percentile<T: Copy + Default>(sorted: &[T], p: f64) -> T {
    if sorted.is_empty() {
        return T::default();
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Writes `report` to `target/bench-reports/<file>` and prints it.
///
/// Through a pooler (`KITH_BENCH_POOLER_URL`), the report says so and goes
/// to `<name>-pooler.md`, beside the direct run's.
pub fn write_report(file: &str, report: &str) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-reports");
    std::fs::create_dir_all(&dir).unwrap();
    let (file, report) = match std::env::var("KITH_BENCH_POOLER_URL") {
        Ok(pooler) => (
            file.replace(".md", "-pooler.md"),
            format!(
                "{report}\nPostgreSQL through the transaction pooler at {pooler} \
                 (unnamed statements; sessions on PostgreSQL itself).\n"
            ),
        ),
        Err(_) => (file.to_owned(), report.to_owned()),
    };
    std::fs::write(dir.join(&file), &report).unwrap();
    println!("\n{report}");
}
