//! Set-up shared by the benches: an isolated `App` on the local stack.

use std::sync::Arc;

use diesel_async::{AsyncConnection, AsyncPgConnection};
use kith::app::App;
use kith::config::Config;

/// An `App` with its own PostgreSQL schema, Redis prefix, topics and group.
pub async fn isolated_app(name: &str, tweak: impl FnOnce(&mut Config)) -> Arc<App> {
    use diesel_async::RunQueryDsl;
    let mut config = Config::from_env().expect("configuration");
    let mut admin = AsyncPgConnection::establish(&config.database_url)
        .await
        .expect("PostgreSQL is up (scripts/stack up)");
    match std::env::var("KITH_BENCH_POOLER_URL") {
        // Through a transaction pooler (`scripts/stack pooler up`), which
        // carries no search_path: a database of its own, PostgreSQL itself
        // for the sessions (`scripts/stack pooler clean` drops it).
        Ok(pooler) => {
            let name = format!("kt_{}_{name}", chrono::Utc::now().timestamp());
            diesel::sql_query(format!("CREATE DATABASE {name}"))
                .execute(&mut admin)
                .await
                .unwrap();
            config.database_session_url = Some(with_database(&config.database_url, &name));
            config.database_url = with_database(&pooler, &name);
            config.pg_statement_cache = false;
        }
        Err(_) => {
            diesel::sql_query(format!("CREATE SCHEMA {name}"))
                .execute(&mut admin)
                .await
                .unwrap();
            let separator = if config.database_url.contains('?') {
                '&'
            } else {
                '?'
            };
            config.database_url = format!(
                "{}{separator}options=-c%20search_path%3D{name}",
                config.database_url
            );
        }
    }
    config.redis_prefix = format!("{name}:");
    config.follow_topic = format!("{name}.follow");
    config.content_topic = format!("{name}.content");
    config.dead_letter_topic = format!("{name}.dead");
    config.consumer_group = format!("{name}.projector");
    config.topic_replication_factor = 1;
    config.topic_min_insync_replicas = 1;
    tweak(&mut config);
    App::start(config).await.expect("app starts")
}

/// `url` with its database replaced by `database`.
fn with_database(url: &str, database: &str) -> String {
    let host = url.find("://").map_or(0, |i| i + 3);
    let path = url[host..].find('/').map_or(url.len(), |i| host + i);
    let query = url[path..].find('?').map_or(url.len(), |i| path + i);
    format!("{}/{database}{}", &url[..path], &url[query..])
}

/// The allocator `kith` itself runs with.
#[cfg(not(feature = "jemalloc"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// jemalloc instead, to compare (`--features jemalloc`).
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// An isolated app for write benches: no rate limit to speak of, a pool of
/// 32, and `users` users `b0`… with ids 1…`users`.
#[allow(
    dead_code,
    reason = "profile_query includes this module and needs no writers"
)]
pub async fn writer_app(name: &str, users: i64) -> Arc<App> {
    let app = isolated_app(name, |config| {
        config.rate_limit_capacity = 1_000_000;
        config.rate_limit_per_sec = 1_000_000.0;
        config.database_pool_size = 32;
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
