//! The application state every handler and job shares.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::auth::TokenKeys;
use crate::cache::{self, RedisKeys, RedisPool};
use crate::config::Config;
use crate::consistency::sampled::SampledCheck;
use crate::metrics::Metrics;
use crate::model::UserId;
use crate::paging::ListKey;
use crate::paging::Page;
use crate::read::RoundTrips;
use crate::read::intersect::{Intersection, IntersectionKey};
use crate::read::users::UserCache;
use crate::store::{self, PgPool};
use crate::write::RateLimiter;

/// How long this process reads a user's relations from PostgreSQL after it
/// failed to write that user's cached following list.
const UNSYNCED_FOLLOWING_TTL: Duration = Duration::from_secs(30);
/// Members of computed intersections held in process, all together.
const INTERSECTION_CACHE_WEIGHT: u64 = 2_000_000;

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
    /// Signs and verifies development (HS256) bearer tokens.
    pub tokens: TokenKeys,
    /// The identity provider whose tokens are accepted, if one is configured.
    pub identity: Option<crate::auth::identity::Identity>,
    /// Token bucket for edge-writing mutations.
    pub rate_limiter: RateLimiter,
    /// Counters and histograms served at `/metrics`.
    pub metrics: Metrics,
    /// Round trips made by reads (PostgreSQL statements, Redis calls).
    pub round_trips: RoundTrips,
    /// Wakes this process's outbox relay after a commit ([`crate::pipeline::wake`]).
    pub relay_wake: tokio::sync::Notify,
    /// Wakes this process's parked projector after its relay published
    /// events ([`crate::pipeline::wake`]).
    pub projector_wake: tokio::sync::Notify,
    /// Users whose cached following list this process failed to update after
    /// a change it made: their relations are read from PostgreSQL until the
    /// entry expires (by then the projector has written the list).
    pub unsynced_following: moka::sync::Cache<UserId, ()>,
    /// User rows held in process, dropped when PostgreSQL notifies a change.
    pub users: Arc<UserCache>,
    /// The newest edges of hot lists, held in process for `KITH_HOT_PAGE_TTL_MS`.
    pub hot_lists: moka::future::Cache<ListKey, Arc<Page>>,
    /// Persisted queries: texts learnt through APQ, the manifest, the allow-list mode.
    pub persisted: crate::graph::persisted::PersistedQueries,
    /// Parsed GraphQL documents by query text ([`crate::graph::limits`]).
    pub documents: crate::graph::limits::Documents,
    /// Live updates: the projectors' batches, for this process's subscriptions.
    pub live: Arc<crate::live::Hub>,
    /// Computed intersections of two lists (`commonFollowing`, `knownFollowers`)
    /// under the two owners' counter versions they were computed at.
    pub intersections: moka::future::Cache<IntersectionKey, Arc<Intersection>>,
    /// Lists this process is filling now (in-process single flight).
    pub fills_in_flight: Mutex<HashSet<ListKey>>,
    /// Permits for list-cache fills started by reads (`KITH_MAX_CONCURRENT_FILLS`).
    pub fill_permits: Arc<tokio::sync::Semaphore>,
    /// Lists reads may still fill this second (`KITH_MAX_FILLS_PER_SEC`).
    pub fill_budget: crate::read::pages::FillBudget,
    /// The sampled check of counters as they are read.
    pub sampled_check: SampledCheck,
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
        crate::auth::identity::Identity::from_config(&config).map_err(StartError::Config)?;
        crate::graph::persisted::PersistedQueries::new(&config).map_err(StartError::Config)?;
        if config.auto_migrate {
            let applied = store::migrate::run_pending(&config.database_url).await?;
            if !applied.is_empty() {
                tracing::info!(?applied, "applied migrations");
            }
        }
        let round_trips = RoundTrips::default();
        let pg = store::pool::connect(
            &config.database_url,
            config.database_pool_size,
            // Within the request deadline, so that PostgreSQL being away
            // answers UNAVAILABLE rather than TIMEOUT.
            Duration::from_millis((config.request_timeout_ms / 2).max(100)),
            Duration::from_millis(config.statement_timeout_ms),
            round_trips.postgres.clone(),
        )
        .await?;
        let redis = RedisPool::new(
            &config.redis_url,
            config.redis_pool_size,
            Duration::from_millis(config.redis_timeout_ms),
            Duration::from_millis((config.request_timeout_ms / 2).max(100)),
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
        Ok(Self::new(config, pg, redis, round_trips))
    }

    /// Assembles the state from pools that are already open. `round_trips`
    /// must be the counter the PostgreSQL pool was built with.
    pub fn new(config: Config, pg: PgPool, redis: RedisPool, round_trips: RoundTrips) -> Arc<Self> {
        let persisted = crate::graph::persisted::PersistedQueries::new(&config)
            .expect("the manifest is checked by App::start");
        let metrics = Metrics::default();
        metrics.name_operations(persisted.operation_names());
        Arc::new(Self {
            keys: RedisKeys::new(config.redis_prefix.clone()),
            tokens: TokenKeys::with_leeway(&config.jwt_secret, config.jwt_leeway_secs),
            identity: crate::auth::identity::Identity::from_config(&config)
                .expect("the key file is checked by App::start"),
            rate_limiter: RateLimiter::new(config.rate_limit_capacity, config.rate_limit_per_sec),
            metrics,
            round_trips,
            relay_wake: tokio::sync::Notify::new(),
            projector_wake: tokio::sync::Notify::new(),
            unsynced_following: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(UNSYNCED_FOLLOWING_TTL)
                .build(),
            users: UserCache::new(
                &config.database_url,
                config.user_cache_capacity,
                Duration::from_secs(config.user_cache_ttl_secs),
            ),
            hot_lists: moka::future::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(Duration::from_millis(config.hot_page_ttl_ms))
                .build(),
            persisted,
            documents: crate::graph::limits::documents(),
            live: Arc::default(),
            intersections: moka::future::Cache::builder()
                .max_capacity(INTERSECTION_CACHE_WEIGHT)
                .weigher(|_, result: &Arc<Intersection>| {
                    u32::try_from(result.items.len() + 1).unwrap_or(u32::MAX)
                })
                .time_to_live(Duration::from_secs(config.intersection_cache_ttl_secs))
                .build(),
            fills_in_flight: Mutex::new(HashSet::new()),
            fill_permits: Arc::new(tokio::sync::Semaphore::new(config.max_concurrent_fills)),
            fill_budget: crate::read::pages::FillBudget::new(config.max_fills_per_sec),
            sampled_check: SampledCheck::new(Duration::from_secs(
                config.counter_check_interval_secs,
            )),
            pg,
            redis,
            config,
        })
    }
}
