//! The event pipeline: the outbox relay publishes committed events to Kafka,
//! the projector consumes them and keeps every derived view right — the
//! `follower` projection and `user_stats` in PostgreSQL, the list caches and
//! counter records in Redis.

pub mod content;
pub mod dead_letters;
pub mod events;
pub mod kafka;
pub mod projector;
pub mod relay;
pub mod wake;

use std::time::Duration;

use tokio::sync::watch;

/// Asks long-running jobs to stop.
#[derive(Clone)]
pub struct Shutdown(watch::Receiver<bool>);

/// The sending side of [`Shutdown`].
pub struct ShutdownTrigger(watch::Sender<bool>);

impl Shutdown {
    /// A trigger and the signal it controls.
    pub fn new() -> (ShutdownTrigger, Self) {
        let (tx, rx) = watch::channel(false);
        (ShutdownTrigger(tx), Self(rx))
    }

    /// True once stopping was requested.
    pub fn requested(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves when stopping is requested (or the trigger is dropped).
    pub async fn wait(&mut self) {
        let _ = self.0.wait_for(|stop| *stop).await;
    }

    /// Sleeps for `duration`; returns false when stopping was requested first.
    pub async fn sleep(&mut self, duration: Duration) -> bool {
        tokio::select! {
            () = tokio::time::sleep(duration) => true,
            () = self.wait() => false,
        }
    }
}

impl ShutdownTrigger {
    /// Requests every holder of the signal to stop.
    pub fn trigger(&self) {
        let _ = self.0.send(true);
    }
}

/// Exponential back-off between retries of a failing dependency.
#[derive(Clone, Debug)]
pub struct Backoff {
    next: Duration,
    min: Duration,
    max: Duration,
}

impl Backoff {
    /// Starts at `min`, doubles up to `max`.
    pub fn new(min: Duration, max: Duration) -> Self {
        Self {
            next: min,
            min,
            max,
        }
    }

    /// The delay before the next retry.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(self.max);
        delay
    }

    /// Back to the shortest delay after a success.
    pub fn reset(&mut self) {
        self.next = self.min;
    }
}

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
    /// The test hook stopped the projector between its PostgreSQL commit and
    /// its Redis writes, as a crash there would.
    #[error("simulated crash after the PostgreSQL commit")]
    SimulatedCrash,
}

impl PipelineError {
    /// True when retrying the same input can never succeed (a constraint
    /// rejects it); false for outages, which are retried until they pass.
    pub fn is_permanent(&self) -> bool {
        use diesel::result::{DatabaseErrorKind as Kind, Error};
        matches!(
            self,
            Self::Postgres(Error::DatabaseError(
                Kind::CheckViolation
                    | Kind::ForeignKeyViolation
                    | Kind::NotNullViolation
                    | Kind::UniqueViolation,
                _
            ))
        )
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
