//! Redis: the pool and the key layout shared by the rate limiter and the
//! derived caches.

pub mod keys;

use std::time::Duration;

use bb8_redis::RedisConnectionManager;

pub use keys::RedisKeys;

/// Pool of multiplexed Redis connections.
pub type RedisPool = bb8::Pool<RedisConnectionManager>;

/// Builds the Redis pool and checks that one connection can be opened.
pub async fn connect(url: &str, max_size: u32) -> Result<RedisPool, redis::RedisError> {
    let manager = RedisConnectionManager::new(url)?;
    bb8::Pool::builder()
        .max_size(max_size)
        .connection_timeout(Duration::from_secs(5))
        .build(manager)
        .await
}
