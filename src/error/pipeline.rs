//! The errors of the pipeline's steps (relay, projector, cache fills): not
//! seen by clients; each says whether running the step again can succeed.

/// Why a pipeline step failed.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// A PostgreSQL statement failed.
    #[error("postgres: {0}")]
    Postgres(#[from] diesel::result::Error),
    /// No PostgreSQL connection could be had.
    #[error("postgres connection: {0}")]
    PostgresConnection(String),
    /// A Redis command failed.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// No Redis connection could be had.
    #[error("redis connection: {0}")]
    RedisConnection(String),
    /// The broker refused or timed out.
    #[error("kafka: {0}")]
    Kafka(#[from] rdkafka::error::KafkaError),
    /// A list cache could not be filled.
    #[error("list cache fill: {0}")]
    CacheFill(String),
    /// A repair's write, made through the API's own write path, failed.
    #[error("repair: {0}")]
    Repair(String),
    /// The database is not where its event origin was made: a logical
    /// restore or copy of the database that wrote its events, or the same
    /// data on another cluster. Its relay and projector must not run until
    /// an operator says which (`docs/operations.md`, Restores and copies).
    #[error(
        "this database is not the one its event origin was made on (made on {made}, now on {now}): \
         it is a restore, a copy, or a move of it. A backup restored to an earlier point: run \
         `kith after-restore`. A copy that is to live beside the original: `kith origin renew`. \
         The same data moved or upgraded with nothing lost: `kith origin adopt`"
    )]
    Relocated {
        /// Where the origin was made (system identifier / table oid).
        made: String,
        /// Where the database is now.
        now: String,
    },
    /// The test hook stopped the projector between its PostgreSQL commit and
    /// its Redis writes, as a crash there would.
    #[error("simulated crash after the PostgreSQL commit")]
    SimulatedCrash,
}

impl PipelineError {
    /// True when retrying the same input can never succeed (a constraint
    /// rejects it); false for outages, which are retried until they pass.
    pub fn is_permanent(&self) -> bool {
        use crate::store::failure::{Failure, classify};
        matches!(self, Self::Postgres(e) if classify(e) == Failure::Rejected)
    }
}

impl From<bb8::RunError<diesel_async::pooled_connection::PoolError>> for PipelineError {
    fn from(e: bb8::RunError<diesel_async::pooled_connection::PoolError>) -> Self {
        Self::PostgresConnection(e.to_string())
    }
}

impl From<bb8::RunError<redis::RedisError>> for PipelineError {
    fn from(e: bb8::RunError<redis::RedisError>) -> Self {
        Self::RedisConnection(e.to_string())
    }
}

impl From<diesel::ConnectionError> for PipelineError {
    fn from(e: diesel::ConnectionError) -> Self {
        Self::PostgresConnection(e.to_string())
    }
}

impl crate::store::failure::FromPostgres for PipelineError {
    fn postgres(&self) -> Option<&diesel::result::Error> {
        match self {
            Self::Postgres(e) => Some(e),
            _ => None,
        }
    }
}
