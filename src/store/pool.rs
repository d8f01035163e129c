//! The PostgreSQL connection pool (diesel-async over bb8).

use std::time::Duration;

use diesel_async::AsyncPgConnection;
use diesel_async::pooled_connection::AsyncDieselConnectionManager;
use diesel_async::pooled_connection::bb8::Pool;

/// Pool of async PostgreSQL connections.
pub type PgPool = Pool<AsyncPgConnection>;

/// A connection checked out of [`PgPool`].
pub type PgConn = AsyncPgConnection;

/// Builds the pool and checks that one connection can be opened.
pub async fn connect(
    url: &str,
    max_size: u32,
) -> Result<PgPool, diesel_async::pooled_connection::PoolError> {
    let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new(url);
    Pool::builder()
        .max_size(max_size)
        .connection_timeout(Duration::from_secs(5))
        .build(manager)
        .await
}

/// A round trip to the server, for readiness checks.
pub async fn ping(conn: &mut PgConn) -> diesel::QueryResult<()> {
    use diesel_async::RunQueryDsl as _;
    diesel::sql_query("SELECT 1").execute(conn).await.map(drop)
}
