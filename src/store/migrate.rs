//! Schema migrations, embedded in the binary at compile time.

use diesel::RunQueryDsl as _;
use diesel::connection::Connection as _;
use diesel_async::AsyncPgConnection;
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};

/// Every migration in `migrations/`.
pub const MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations");

/// Why migrations could not be applied.
#[derive(Debug, thiserror::Error)]
#[error("migrations failed: {0}")]
pub struct MigrateError(String);

/// Applies pending migrations to the database at `url`; returns the versions applied.
///
/// Runs under an advisory lock keyed by the current schema, so replicas starting
/// together apply each migration once, while isolated test schemas do not wait
/// for one another.
pub async fn run_pending(url: &str) -> Result<Vec<String>, MigrateError> {
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut conn = AsyncConnectionWrapper::<AsyncPgConnection>::establish(&url)
            .map_err(|e| MigrateError(e.to_string()))?;
        diesel::sql_query("SELECT pg_advisory_lock(hashtext('kith.migrate.' || current_schema()))")
            .execute(&mut conn)
            .map_err(|e| MigrateError(e.to_string()))?;
        let applied = conn
            .run_pending_migrations(MIGRATIONS)
            .map(|versions| versions.iter().map(ToString::to_string).collect())
            .map_err(|e| MigrateError(e.to_string()));
        // The lock is released with the session anyway; unlocking is just tidy.
        let _ = diesel::sql_query("SELECT pg_advisory_unlock_all()").execute(&mut conn);
        applied
    })
    .await
    .map_err(|e| MigrateError(e.to_string()))?
}
