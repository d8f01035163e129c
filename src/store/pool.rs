//! The PostgreSQL connection pool (diesel-async over bb8).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use diesel::connection::{Instrumentation, InstrumentationEvent};
use diesel_async::pooled_connection::bb8::Pool;
use diesel_async::pooled_connection::{AsyncDieselConnectionManager, ManagerConfig};
use diesel_async::{AsyncConnection, AsyncPgConnection};
use futures_util::FutureExt as _;

/// Pool of async PostgreSQL connections.
pub type PgPool = Pool<AsyncPgConnection>;

/// A connection checked out of [`PgPool`].
pub type PgConn = AsyncPgConnection;

/// Builds the pool and checks that one connection can be opened. Every
/// statement any pooled connection runs is counted in `statements`.
pub async fn connect(
    url: &str,
    max_size: u32,
    statements: Arc<AtomicU64>,
) -> Result<PgPool, diesel_async::pooled_connection::PoolError> {
    let mut config = ManagerConfig::<AsyncPgConnection>::default();
    config.custom_setup = Box::new(move |url| {
        let statements = statements.clone();
        async move {
            let mut conn = AsyncPgConnection::establish(url).await?;
            conn.set_instrumentation(StatementCounter(statements));
            Ok(conn)
        }
        .boxed()
    });
    let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new_with_config(url, config);
    Pool::builder()
        .max_size(max_size)
        .connection_timeout(Duration::from_secs(5))
        // No `SELECT 1` before every checkout: a broken connection is noticed
        // by its failed statement and not returned to the pool.
        .test_on_check_out(false)
        .build(manager)
        .await
}

struct StatementCounter(Arc<AtomicU64>);

impl Instrumentation for StatementCounter {
    fn on_connection_event(&mut self, event: InstrumentationEvent<'_>) {
        if let InstrumentationEvent::StartQuery { .. } = event {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A round trip to the server, for readiness checks.
pub async fn ping(conn: &mut PgConn) -> diesel::QueryResult<()> {
    use diesel_async::RunQueryDsl as _;
    diesel::sql_query("SELECT 1").execute(conn).await.map(drop)
}
