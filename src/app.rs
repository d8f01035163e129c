//! The application state every handler and job shares.

use std::sync::Arc;

use crate::auth::TokenKeys;
use crate::cache::{self, RedisKeys, RedisPool};
use crate::config::Config;
use crate::metrics::Metrics;
use crate::store::{self, PgPool};
use crate::write::RateLimiter;

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
    /// Signs and verifies bearer tokens.
    pub tokens: TokenKeys,
    /// Token bucket for edge-writing mutations.
    pub rate_limiter: RateLimiter,
    /// Counters and histograms served at `/metrics`.
    pub metrics: Metrics,
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
}

impl App {
    /// Connects to PostgreSQL and Redis (applying migrations first when configured).
    pub async fn start(config: Config) -> Result<Arc<Self>, StartError> {
        if config.auto_migrate {
            let applied = store::migrate::run_pending(&config.database_url).await?;
            if !applied.is_empty() {
                tracing::info!(?applied, "applied migrations");
            }
        }
        let pg = store::pool::connect(&config.database_url, config.database_pool_size).await?;
        let redis = cache::connect(&config.redis_url, config.redis_pool_size).await?;
        Ok(Arc::new(Self {
            keys: RedisKeys::new(config.redis_prefix.clone()),
            tokens: TokenKeys::new(&config.jwt_secret),
            rate_limiter: RateLimiter::new(config.rate_limit_capacity, config.rate_limit_per_sec),
            metrics: Metrics::default(),
            pg,
            redis,
            config,
        }))
    }
}
