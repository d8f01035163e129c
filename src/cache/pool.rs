//! The Redis pool, with short timeouts and a circuit breaker.
//!
//! Every Redis call has a deadline (`KITH_REDIS_TIMEOUT_MS`, for connecting
//! and for each answer). A failure that says Redis as a whole is away — no
//! connection, a timeout, a dropped connection, or a server that answers
//! `LOADING`, `BUSY`, `READONLY`, `TRYAGAIN`, `MASTERDOWN`, `CLUSTERDOWN` —
//! opens the breaker: from then on [`RedisPool::get`] fails at once, so reads
//! go straight to PostgreSQL and writes answer `UNAVAILABLE` without waiting
//! out a timeout each. A background probe pings Redis every
//! [`PROBE_INTERVAL`] and closes the breaker when it answers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, Client, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture};

use super::cluster::{self, Target};

/// How often an open breaker checks whether Redis is back.
pub(crate) const PROBE_INTERVAL: Duration = Duration::from_millis(250);

/// The key the breaker's probe writes (it expires within a second).
const PROBE_KEY: &str = "kith:breaker-probe";

/// Server error codes that mean "this Redis cannot serve now; retry later".
const UNAVAILABLE_CODES: [&str; 6] = [
    "LOADING",
    "BUSY",
    "READONLY",
    "TRYAGAIN",
    "MASTERDOWN",
    "CLUSTERDOWN",
];

/// True when `e` says Redis is unreachable or cannot serve now (as opposed
/// to an error in the command itself).
pub(crate) fn is_unavailable(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.code().is_some_and(|c| UNAVAILABLE_CODES.contains(&c))
        || e.clone().into_server_errors().is_some_and(|errors| {
            errors
                .iter()
                .any(|(_, e)| UNAVAILABLE_CODES.contains(&e.code()))
        })
}

/// Whether Redis is believed reachable, shared by the pool and its connections.
#[derive(Debug, Default)]
struct Breaker {
    open: AtomicBool,
    probing: AtomicBool,
    /// Bumped each time Redis comes back: connections from before the
    /// outage are dropped instead of each failing once (and re-opening the
    /// breaker) on first use.
    generation: AtomicU64,
}

/// Opens connections, with deadlines, to one server or to a cluster.
#[derive(Clone)]
enum Opener {
    Single(Client, AsyncConnectionConfig),
    Cluster(ClusterClient),
}

impl Opener {
    fn new(url: &str, timeout: Duration) -> Result<Self, RedisError> {
        Ok(match Target::parse(url) {
            Target::Single(url) => Self::Single(
                Client::open(url)?,
                AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout)),
            ),
            Target::Cluster(nodes) => Self::Cluster(
                ClusterClient::builder(nodes)
                    .connection_timeout(timeout)
                    .response_timeout(timeout)
                    .build()?,
            ),
        })
    }

    async fn open(&self) -> Result<Inner, RedisError> {
        Ok(match self {
            Self::Single(client, config) => Inner::Single(
                client
                    .get_multiplexed_async_connection_with_config(config)
                    .await?,
            ),
            Self::Cluster(client) => Inner::Cluster(client.get_async_connection().await?),
        })
    }
}

/// A connection to one server, or a cluster client's connection to all.
#[derive(Clone)]
enum Inner {
    Single(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Inner {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, redis::Value> {
        match self {
            Self::Single(conn) => conn.req_packed_command(cmd),
            Self::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<redis::Value>> {
        match self {
            Self::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Self::Cluster(conn) => Box::pin(cluster::split(conn, pipeline, offset, count)),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(conn) => conn.get_db(),
            Self::Cluster(conn) => conn.get_db(),
        }
    }
}

/// Builds connections with deadlines and hands out [`RedisConn`]s.
#[derive(Clone)]
pub struct RedisManager {
    opener: Opener,
    breaker: Arc<Breaker>,
}

impl bb8::ManageConnection for RedisManager {
    type Connection = RedisConn;
    type Error = RedisError;

    async fn connect(&self) -> Result<RedisConn, RedisError> {
        let inner = self.opener.open().await?;
        Ok(RedisConn {
            inner,
            broken: false,
            generation: self.breaker.generation.load(Ordering::Acquire),
            breaker: self.breaker.clone(),
        })
    }

    async fn is_valid(&self, conn: &mut RedisConn) -> Result<(), RedisError> {
        redis::cmd("PING").query_async::<()>(conn).await
    }

    fn has_broken(&self, conn: &mut RedisConn) -> bool {
        conn.broken
    }
}

/// A pooled Redis connection. A failure that means the connection (or Redis)
/// is gone marks it broken, so the pool drops it instead of lending it again,
/// and opens the breaker.
pub struct RedisConn {
    inner: Inner,
    broken: bool,
    generation: u64,
    breaker: Arc<Breaker>,
}

impl RedisConn {
    /// Deletes every key matching `patterns`, on every primary of a
    /// cluster; returns how many ([`super::sweep`]).
    pub(crate) async fn sweep(&mut self, patterns: &[String]) -> Result<u64, RedisError> {
        let result = match &mut self.inner {
            Inner::Single(conn) => super::sweep::single(conn, patterns).await,
            Inner::Cluster(conn) => super::sweep::cluster(conn, patterns).await,
        };
        self.observe(&result);
        result
    }

    fn observe<T>(&mut self, result: &Result<T, RedisError>) {
        if let Err(e) = result
            && is_unavailable(e)
        {
            if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() {
                self.broken = true;
            }
            self.breaker.open.store(true, Ordering::Relaxed);
        }
    }
}

impl ConnectionLike for RedisConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, redis::Value> {
        Box::pin(async move {
            let result = crate::cost::round_trip(self.inner.req_packed_command(cmd)).await;
            self.observe(&result);
            result
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<redis::Value>> {
        Box::pin(async move {
            let result =
                crate::cost::round_trip(self.inner.req_packed_commands(pipeline, offset, count))
                    .await;
            self.observe(&result);
            result
        })
    }

    fn get_db(&self) -> i64 {
        self.inner.get_db()
    }
}

/// A connection checked out of [`RedisPool`].
pub(crate) type PooledRedis<'a> = bb8::PooledConnection<'a, RedisManager>;

/// Pool of multiplexed Redis connections behind a circuit breaker.
#[derive(Clone)]
pub struct RedisPool {
    pool: bb8::Pool<RedisManager>,
    max_size: u32,
    breaker: Arc<Breaker>,
    opener: Opener,
}

impl RedisPool {
    /// Builds the pool; `timeout` bounds connecting and every answer,
    /// `acquire_timeout` the wait for a free connection when all are lent
    /// out (load, not an outage). Opens no connection yet.
    pub fn new(
        url: &str,
        max_size: u32,
        timeout: Duration,
        acquire_timeout: Duration,
    ) -> Result<Self, RedisError> {
        let opener = Opener::new(url, timeout)?;
        let breaker = Arc::new(Breaker::default());
        let manager = RedisManager {
            opener: opener.clone(),
            breaker: breaker.clone(),
        };
        let pool = bb8::Pool::builder()
            .max_size(max_size)
            .connection_timeout(acquire_timeout.max(timeout))
            // A failed connect is reported at once (and opens the breaker)
            // instead of being retried until the wait runs out.
            .retry_connection(false)
            // A dead connection is noticed by its failed command and marked
            // broken; no PING before every checkout.
            .test_on_check_out(false)
            .build_unchecked(manager);
        Ok(Self {
            pool,
            max_size,
            breaker,
            opener,
        })
    }

    /// True when the pool talks to a Redis Cluster, where one script may
    /// only touch keys of one slot.
    pub fn is_cluster(&self) -> bool {
        matches!(self.opener, Opener::Cluster(_))
    }

    /// The pool's connections and checkout statistics (for metrics).
    pub fn state(&self) -> bb8::State {
        self.pool.state()
    }

    /// A connection, or at once an error while the breaker is open.
    pub async fn get(&self) -> Result<PooledRedis<'_>, bb8::RunError<RedisError>> {
        if self.is_down() {
            return Err(bb8::RunError::User(RedisError::from((
                ErrorKind::Io,
                "Redis is unavailable (circuit open)",
            ))));
        }
        for _ in 0..=self.max_size {
            match self.pool.get().await {
                Ok(mut conn) => {
                    if conn.generation == self.breaker.generation.load(Ordering::Acquire) {
                        return Ok(conn);
                    }
                    // From before the last outage: let the pool drop it.
                    conn.broken = true;
                }
                Err(e) => {
                    let redis_away = match &e {
                        bb8::RunError::User(e) => is_unavailable(e),
                        // Every connection lent out is load, not an outage;
                        // fewer connections than allowed means none could be opened.
                        bb8::RunError::TimedOut => self.pool.state().connections < self.max_size,
                    };
                    if redis_away {
                        self.trip();
                    }
                    return Err(e);
                }
            }
        }
        Err(bb8::RunError::TimedOut)
    }

    /// True while the breaker is open (Redis believed unreachable).
    pub fn is_down(&self) -> bool {
        if self.breaker.open.load(Ordering::Relaxed) {
            self.start_probe();
            true
        } else {
            false
        }
    }

    fn trip(&self) {
        self.breaker.open.store(true, Ordering::Relaxed);
        self.start_probe();
    }

    /// Starts the background probe unless one runs already.
    fn start_probe(&self) {
        if self.breaker.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let breaker = self.breaker.clone();
        let opener = self.opener.clone();
        tokio::spawn(async move {
            tracing::warn!("Redis unavailable; serving without it until it answers again");
            loop {
                tokio::time::sleep(PROBE_INTERVAL).await;
                // A write, not a PING: a replica (`READONLY`) or a primary
                // without its replicas (`MASTERDOWN`) answers PING but still
                // cannot take Kith's writes. A full Redis (`OOM`) can serve.
                let probe = async {
                    let mut conn = opener.open().await?;
                    redis::cmd("SET")
                        .arg(PROBE_KEY)
                        .arg(1)
                        .arg("PX")
                        .arg(1000)
                        .query_async::<()>(&mut conn)
                        .await
                };
                match probe.await {
                    Ok(()) => break,
                    Err(e) if e.code() == Some("OOM") => break,
                    Err(_) => {}
                }
            }
            breaker.generation.fetch_add(1, Ordering::AcqRel);
            breaker.open.store(false, Ordering::Relaxed);
            breaker.probing.store(false, Ordering::Release);
            tracing::info!("Redis answers again");
        });
    }
}
