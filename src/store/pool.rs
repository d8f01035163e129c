//! The PostgreSQL connection pool (diesel-async over bb8).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use diesel::connection::{Instrumentation, InstrumentationEvent};
use diesel_async::pooled_connection::bb8::Pool;
use diesel_async::pooled_connection::{AsyncDieselConnectionManager, ManagerConfig};
use diesel_async::{AsyncConnection, AsyncPgConnection};
use futures_util::FutureExt as _;

/// Pool of async PostgreSQL connections.
pub(crate) type PgPool = Pool<AsyncPgConnection>;

/// A connection checked out of [`PgPool`].
pub(crate) type PgConn = AsyncPgConnection;

/// Builds the pool; its connections open on first use. Every
/// statement any pooled connection runs after its set-up is counted in
/// `statements`; each connection gets `statement_timeout` (zero: none).
/// Waiting for a connection longer than `acquire_timeout` fails (the caller
/// answers `UNAVAILABLE`).
///
/// Without `statement_cache` (`url` is a transaction pooler), statements go
/// unnamed, each with its values in one round trip, and no session setting
/// is made: the pooler hands each transaction to any server session, so a
/// named statement or a `SET` would land on one the next transaction may
/// not get (the pooler's `connect_query` sets `statement_timeout` there).
pub(crate) async fn connect(
    url: &str,
    max_size: u32,
    acquire_timeout: Duration,
    statement_timeout: Duration,
    statement_cache: bool,
    statements: Arc<AtomicU64>,
) -> Result<PgPool, diesel_async::pooled_connection::PoolError> {
    builder(max_size, acquire_timeout)
        .build(manager(url, statement_timeout, statement_cache, statements))
        .await
}

/// A pool as [`connect`] builds it, that opens no connection until asked
/// (for a server that may be away when the process starts: a read replica).
pub(crate) fn connect_lazy(
    url: &str,
    max_size: u32,
    acquire_timeout: Duration,
    statement_timeout: Duration,
    statements: Arc<AtomicU64>,
) -> PgPool {
    builder(max_size, acquire_timeout).build_unchecked(manager(
        url,
        statement_timeout,
        true,
        statements,
    ))
}

fn builder(
    max_size: u32,
    acquire_timeout: Duration,
) -> bb8::Builder<AsyncDieselConnectionManager<AsyncPgConnection>> {
    Pool::builder()
        .max_size(max_size)
        .connection_timeout(acquire_timeout)
        // No `SELECT 1` before every checkout: a broken connection is noticed
        // by its failed statement and not returned to the pool.
        .test_on_check_out(false)
}

fn manager(
    url: &str,
    statement_timeout: Duration,
    statement_cache: bool,
    statements: Arc<AtomicU64>,
) -> AsyncDieselConnectionManager<AsyncPgConnection> {
    let mut config = ManagerConfig::<AsyncPgConnection>::default();
    let timeout_ms = statement_timeout.as_millis();
    config.custom_setup = Box::new(move |url| {
        let statements = statements.clone();
        async move {
            use diesel_async::RunQueryDsl as _;
            let mut conn = AsyncPgConnection::establish(&with_keepalives(url)).await?;
            if statement_cache {
                // A runaway statement is cancelled by the server itself, so its
                // connection comes back even if the client has gone.
                diesel::sql_query(format!("SET statement_timeout = {timeout_ms}"))
                    .execute(&mut conn)
                    .await
                    .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
            } else {
                conn.set_prepared_statement_cache_size(diesel::connection::CacheSize::Disabled);
            }
            conn.set_instrumentation(StatementCounter {
                statements,
                started: None,
                // Whatever the process installed as diesel's default (a tracer,
                // or the distribution test's recorder) still sees every event.
                inner: diesel::connection::get_default_instrumentation(),
            });
            Ok(conn)
        }
        .boxed()
    });
    AsyncDieselConnectionManager::<AsyncPgConnection>::new_with_config(url, config)
}

/// `url` with TCP keepalives and a TCP user timeout, so that a session whose
/// server vanished without a goodbye (a network partition, a host that lost
/// power) is declared dead within about 15 s instead of the kernel's two
/// hours — for the relay's leadership session above all: its advisory lock
/// is held by the server until the server notices, and the relay itself must
/// notice to stop acting as leader. And a time limit on each connection
/// attempt: with several hosts (`postgres://h1,h2/kith?target_session_attrs=
/// read-write`, a failover formation), a host that swallows packets would
/// otherwise hold every reconnection for the kernel's SYN retries (about two
/// minutes) before the next host is tried. Settings already in `url` win.
pub(crate) fn with_keepalives(url: &str) -> String {
    const SETTINGS: [(&str, &str); 6] = [
        ("keepalives", "1"),
        ("keepalives_idle", "5"),
        ("keepalives_interval", "2"),
        ("keepalives_retries", "3"),
        // tokio-postgres reads this one in seconds (libpq: milliseconds).
        ("tcp_user_timeout", "15"),
        // Seconds, per host tried.
        ("connect_timeout", "5"),
    ];
    SETTINGS.iter().fold(url.to_owned(), |url, (name, value)| {
        with_setting(&url, name, value)
    })
}

/// `url` with the connection setting `name=value`, unless `url` sets it
/// already; in either URL form (`postgres://…?a=b` or `host=… a=b`).
pub(crate) fn with_setting(url: &str, name: &str, value: &str) -> String {
    if url.contains(&format!("{name}=")) {
        return url.to_owned();
    }
    let separator = if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        ' '
    } else if url.contains('?') {
        '&'
    } else {
        '?'
    };
    format!("{url}{separator}{name}={value}")
}

/// Counts every statement of the process, and times each one for the
/// request it is made for, if any ([`crate::cost`]).
struct StatementCounter {
    statements: Arc<AtomicU64>,
    /// When the statement under way began. A statement dropped before it
    /// finished (a request's deadline, a client gone) never reports its
    /// finish: the next statement's start replaces it, so a connection
    /// lent out again times its own statements only.
    started: Option<Instant>,
    inner: Option<Box<dyn Instrumentation>>,
}

impl Instrumentation for StatementCounter {
    fn on_connection_event(&mut self, event: InstrumentationEvent<'_>) {
        match event {
            InstrumentationEvent::StartQuery { .. } => {
                self.statements.fetch_add(1, Ordering::Relaxed);
                self.started = crate::cost::counting().then(Instant::now);
            }
            InstrumentationEvent::FinishQuery { .. } => {
                if let Some(started) = self.started.take() {
                    crate::cost::statement(started.elapsed());
                }
            }
            _ => {}
        }
        if let Some(inner) = self.inner.as_mut() {
            inner.on_connection_event(event);
        }
    }
}

/// A round trip to the server, for readiness checks.
pub(crate) async fn ping(conn: &mut PgConn) -> diesel::QueryResult<()> {
    use diesel_async::RunQueryDsl as _;
    diesel::sql_query("SELECT 1").execute(conn).await.map(drop)
}

#[cfg(test)]
mod tests {
    use super::with_keepalives;

    #[test]
    fn sessions_get_keepalives_in_either_url_form() {
        let url = with_keepalives("postgres://kith:kith@127.0.0.1:5432/kith");
        assert!(url.starts_with("postgres://kith:kith@127.0.0.1:5432/kith?keepalives=1&"));
        assert!(url.contains("&keepalives_idle=5&") && url.contains("&tcp_user_timeout=15&"));
        assert!(url.ends_with("&connect_timeout=5"));
        let url = with_keepalives("postgres://h/db?options=-c%20search_path%3Dx&keepalives_idle=9");
        assert!(url.contains("keepalives_idle=9") && !url.contains("keepalives_idle=5"));
        assert_eq!(
            with_keepalives("host=h dbname=kith keepalives=0"),
            "host=h dbname=kith keepalives=0 keepalives_idle=5 keepalives_interval=2 \
             keepalives_retries=3 tcp_user_timeout=15 connect_timeout=5"
        );
    }
}
