//! Per-actor token bucket for edge-writing mutations, in Redis (`lua/token_bucket.lua`).

use std::sync::LazyLock;

use crate::cache::{RedisKeys, RedisPool};
use crate::error::ApiError;
use crate::model::UserId;

static TOKEN_BUCKET: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../../lua/token_bucket.lua")));

/// The bucket's answer to one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateDecision {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// Whole tokens left after this request.
    pub remaining: u64,
    /// When refused: milliseconds until a token is available.
    pub retry_after_ms: u64,
}

/// Token bucket settings shared by every actor.
#[derive(Clone, Copy, Debug)]
pub struct RateLimiter {
    capacity: u32,
    per_sec: f64,
}

impl RateLimiter {
    /// The bucket `KITH_RATE_LIMIT_CAPACITY` and `KITH_RATE_LIMIT_PER_SEC` configure.
    pub(crate) fn from_config(config: &crate::config::Config) -> Self {
        Self::new(
            config.writes.rate_limit_capacity,
            config.writes.rate_limit_per_sec,
        )
    }

    /// A bucket of `capacity` tokens refilled at `per_sec` tokens per second.
    pub fn new(capacity: u32, per_sec: f64) -> Self {
        Self { capacity, per_sec }
    }

    /// Takes one token from `actor`'s bucket.
    pub async fn check(
        &self,
        redis: &RedisPool,
        keys: &RedisKeys,
        actor: UserId,
    ) -> Result<RateDecision, ApiError> {
        self.check_many(redis, keys, actor, 1).await
    }

    /// Takes `cost` tokens from `actor`'s bucket at once, or none.
    pub async fn check_many(
        &self,
        redis: &RedisPool,
        keys: &RedisKeys,
        actor: UserId,
        cost: usize,
    ) -> Result<RateDecision, ApiError> {
        self.check_key(redis, keys.follow_rate_limit(actor), cost)
            .await
    }

    /// Takes `cost` tokens from the bucket at `key` at once, or none.
    pub(crate) async fn check_key(
        &self,
        redis: &RedisPool,
        key: String,
        cost: usize,
    ) -> Result<RateDecision, ApiError> {
        let mut conn = redis.get().await?;
        let (allowed, remaining, retry_after_ms): (i64, i64, i64) = TOKEN_BUCKET
            .key(key)
            .arg(self.capacity)
            .arg(self.per_sec)
            .arg(cost)
            .invoke_async(&mut *conn)
            .await?;
        Ok(RateDecision {
            allowed: allowed == 1,
            remaining: remaining.max(0).unsigned_abs(),
            retry_after_ms: retry_after_ms.max(0).unsigned_abs(),
        })
    }

    /// Takes `cost` tokens at once, or none and fails with `RATE_LIMITED`.
    /// A cost above the bucket's capacity could never be covered: it is
    /// refused as `INVALID_INPUT`, not told to wait.
    pub async fn acquire(
        &self,
        redis: &RedisPool,
        keys: &RedisKeys,
        actor: UserId,
        cost: usize,
    ) -> Result<RateDecision, ApiError> {
        if cost > self.capacity as usize {
            return Err(ApiError::invalid(format!(
                "one call may change at most {} edges (the rate limit's bucket size)",
                self.capacity
            )));
        }
        let decision = self.check_many(redis, keys, actor, cost).await?;
        if decision.allowed {
            Ok(decision)
        } else {
            Err(ApiError::RateLimited {
                retry_after_ms: decision.retry_after_ms,
            })
        }
    }
}
