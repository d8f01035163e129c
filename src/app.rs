//! The application state every handler and job shares: the handles
//! (configuration, pools, keys, metrics) and one state struct per part of
//! Kith, each built by its part from the configuration. Every part names
//! `App`; `App` names only their state types, which name nothing that takes
//! an `App` (`tests/layers` keeps it so).

use std::sync::Arc;
use std::time::Duration;

use crate::auth::Authenticator;
use crate::cache::{self, RedisKeys, RedisPool};
use crate::config::Config;
use crate::consistency::state::SampledCheck;
use crate::graph::state::Operations;
use crate::live::hub::Hub;
use crate::metrics::Metrics;
use crate::pipeline::state::Wakes;
use crate::read::RoundTrips;
use crate::read::state::ReadModel;
use crate::store::{self, PgPool};
use crate::write::rate_limit::RateLimiter;

/// Shared state of one Kith process, handed around as `Arc<App>`.
pub struct App {
    /// The configuration the process started with.
    pub config: Config,
    /// PostgreSQL pool: the truth, the outbox and the projections.
    pub pg: PgPool,
    /// Redis pool: rate limits and caches.
    pub redis: RedisPool,
    /// Builds every Redis key under the configured prefix.
    pub keys: RedisKeys,
    /// Counters and histograms served at `/metrics`.
    pub metrics: Metrics,
    /// Round trips made by reads (PostgreSQL statements, Redis calls).
    pub round_trips: RoundTrips,
    /// Bearer tokens: the development secret and the identity provider.
    pub auth: Authenticator,
    /// The read model's caches in process.
    pub read: ReadModel,
    /// Token bucket for edge-writing mutations.
    pub rate_limiter: RateLimiter,
    /// Persisted queries and parsed documents.
    pub operations: Operations,
    /// Live updates: the projectors' batches, for this process's subscriptions.
    pub live: Arc<Hub>,
    /// Wakes this process's relay and projector ([`crate::pipeline::wake`]).
    pub wakes: Wakes,
    /// The sampled check of counters as they are read.
    pub consistency: SampledCheck,
    /// Gathers concurrent follows and unfollows into one transaction.
    pub(crate) edge_writes: crate::write::group_commit::GroupCommit,
}

/// Why the application could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// PostgreSQL refused or timed out.
    #[error("cannot connect to PostgreSQL: {0}")]
    Postgres(#[from] diesel_async::pooled_connection::PoolError),
    /// Redis refused or timed out.
    #[error("cannot connect to Redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// Pending migrations could not be applied.
    #[error(transparent)]
    Migrate(#[from] store::migrate::MigrateError),
    /// Redis may evict keys: one key of a cached list could go without the
    /// others, and a list would read as emptier than it is.
    #[error(
        "Redis maxmemory-policy is {0:?}; Kith needs noeviction (its cached lists span three keys \
         that must expire together; size Redis so the caches fit, see docs/configuration.md)"
    )]
    RedisEviction(String),
    /// A setting's contents are not what its part of Kith can use.
    #[error("{0}")]
    Config(String),
    /// `REDIS_URL` names one server, and that server is a cluster node.
    #[error(
        "the Redis at REDIS_URL is a cluster node; name the cluster as \
         redis+cluster://host:port,host:port,… (Kith batches keys of several users \
         into one call only where one server holds every slot)"
    )]
    RedisClusterAsSingle,
}

impl App {
    /// Connects to PostgreSQL and Redis (applying migrations first when configured).
    pub async fn start(config: Config) -> Result<Arc<Self>, StartError> {
        // Each part checks its own settings' contents, before anything connects.
        let auth = Authenticator::new(&config).map_err(StartError::Config)?;
        let operations = Operations::new(&config).map_err(StartError::Config)?;
        if config.database.auto_migrate {
            let applied = store::migrate::run_pending(config.session_url()).await?;
            if !applied.is_empty() {
                tracing::info!(?applied, "applied migrations");
            }
        }
        let round_trips = RoundTrips::default();
        let pg = store::pool::connect(
            &config.database.url,
            config.database.pool_size,
            config.connection_wait(),
            Duration::from_millis(config.database.statement_timeout_ms),
            config.database.pg_statement_cache,
            round_trips.postgres.clone(),
        )
        .await?;
        let redis = RedisPool::new(
            &config.redis.url,
            config.redis.pool_size,
            Duration::from_millis(config.redis.timeout_ms),
            config.connection_wait(),
        )?;
        let mut conn = redis.get().await.map_err(|e| match e {
            bb8::RunError::User(e) => e,
            bb8::RunError::TimedOut => {
                redis::RedisError::from((redis::ErrorKind::Io, "timed out connecting to Redis"))
            }
        })?;
        let policy = cache::eviction_policy(&mut *conn).await?;
        if let Some(policy) = policy.filter(|p| p != "noeviction") {
            return Err(StartError::RedisEviction(policy));
        }
        if !redis.is_cluster() && cache::cluster_enabled(&mut *conn).await? {
            return Err(StartError::RedisClusterAsSingle);
        }
        drop(conn);
        Ok(Self::assemble(
            config,
            pg,
            redis,
            round_trips,
            auth,
            operations,
        ))
    }

    /// Assembles the state from pools that are already open. `round_trips`
    /// must be the counter the PostgreSQL pool was built with.
    pub fn new(config: Config, pg: PgPool, redis: RedisPool, round_trips: RoundTrips) -> Arc<Self> {
        let auth = Authenticator::new(&config).expect("the key file is checked by App::start");
        let operations = Operations::new(&config).expect("the manifest is checked by App::start");
        Self::assemble(config, pg, redis, round_trips, auth, operations)
    }

    /// The handles, and each part's state as the part builds it from `config`.
    fn assemble(
        config: Config,
        pg: PgPool,
        redis: RedisPool,
        round_trips: RoundTrips,
        auth: Authenticator,
        operations: Operations,
    ) -> Arc<Self> {
        let metrics = Metrics::default();
        metrics.name_operations(operations.persisted.operation_names());
        let read = ReadModel::new(
            &config,
            round_trips.postgres.clone(),
            metrics.replica_reads.clone(),
        );
        let edge_writes = crate::write::group_commit::GroupCommit::start(
            pg.clone(),
            crate::store::following::FollowCap::of(&config),
            config.database.write_batch,
            config.database.write_batches_in_flight,
            config.connection_wait(),
            crate::write::group_commit::Counted {
                batches: metrics.write_batches.clone(),
                changes: metrics.write_batch_changes.clone(),
            },
        );
        let app = Arc::new(Self {
            keys: RedisKeys::new(config.redis.prefix.clone()),
            metrics,
            round_trips,
            auth,
            read,
            rate_limiter: RateLimiter::from_config(&config),
            operations,
            live: Arc::default(),
            wakes: Wakes::default(),
            consistency: SampledCheck::from_config(&config),
            edge_writes,
            pg,
            redis,
            config,
        });
        if let Some(replica) = app.read.replica() {
            replica.watch(app.pg.clone());
        }
        app
    }
}
