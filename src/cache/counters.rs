//! Counter records `ucnt:{uid}`: five big-endian u32 — followings, followers,
//! posts, likesReceived, favsReceived — followed by the `user_stats` version
//! (big-endian u64) they were read at. Written whole and only when newer
//! (`lua/counter_record_set.lua`), so replays and reorders never move a count.

use std::sync::LazyLock;
use std::time::Duration;

use redis::aio::ConnectionLike;

use super::RedisKeys;
use crate::model::UserId;
use crate::store::stats::UserStats;

static SET_IF_NEWER: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../../lua/counter_record_set.lua")));

/// How long an untouched record stays cached; a miss is rebuilt from `user_stats`.
pub const RECORD_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// Encoded size: 5 × u32 + u64 version.
pub const RECORD_LEN: usize = 28;

/// One user's counters, as cached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CounterRecord {
    /// Users this user follows.
    pub followings: u32,
    /// Users following this user.
    pub followers: u32,
    /// Published posts.
    pub posts: u32,
    /// Likes received.
    pub likes_received: u32,
    /// Favourites received.
    pub favs_received: u32,
    /// The `user_stats.version` this snapshot was read at.
    pub version: u64,
}

fn to_u32(n: i64) -> u32 {
    // user_stats CHECKs keep counts non-negative; a count past u32::MAX
    // saturates rather than wrapping.
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

impl From<&UserStats> for CounterRecord {
    fn from(s: &UserStats) -> Self {
        Self {
            followings: to_u32(s.followings),
            followers: to_u32(s.followers),
            posts: to_u32(s.posts),
            likes_received: to_u32(s.likes_received),
            favs_received: to_u32(s.favs_received),
            version: u64::try_from(s.version.max(0)).unwrap_or(0),
        }
    }
}

impl CounterRecord {
    /// The 28-byte wire form.
    pub fn encode(&self) -> [u8; RECORD_LEN] {
        let mut out = [0u8; RECORD_LEN];
        let counts = [
            self.followings,
            self.followers,
            self.posts,
            self.likes_received,
            self.favs_received,
        ];
        for (i, n) in counts.iter().enumerate() {
            out[i * 4..i * 4 + 4].copy_from_slice(&n.to_be_bytes());
        }
        out[20..].copy_from_slice(&self.version.to_be_bytes());
        out
    }

    /// Decodes a record; `None` when it is not exactly 28 bytes.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let bytes: &[u8; RECORD_LEN] = bytes.try_into().ok()?;
        let u32_at = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
        Some(Self {
            followings: u32_at(0),
            followers: u32_at(4),
            posts: u32_at(8),
            likes_received: u32_at(12),
            favs_received: u32_at(16),
            version: u64::from_be_bytes(bytes[20..].try_into().expect("8 bytes")),
        })
    }
}

/// The script the queued stores invoke by hash (see [`super::run_writes`]).
pub fn store_script() -> &'static redis::Script {
    &SET_IF_NEWER
}

/// Queues "store each record unless a newer one is cached" on `pipe`.
pub fn queue_store(
    pipe: &mut redis::Pipeline,
    keys: &RedisKeys,
    records: &[(UserId, CounterRecord)],
) {
    queue(pipe, keys, records, false);
}

/// Queues "store each record unless a newer one is cached, replacing one of
/// the same version" on `pipe`: a repair of records corrupted in place.
pub fn queue_repair(
    pipe: &mut redis::Pipeline,
    keys: &RedisKeys,
    records: &[(UserId, CounterRecord)],
) {
    queue(pipe, keys, records, true);
}

fn queue(
    pipe: &mut redis::Pipeline,
    keys: &RedisKeys,
    records: &[(UserId, CounterRecord)],
    replace_equal: bool,
) {
    for (user, record) in records {
        pipe.invoke_script(
            SET_IF_NEWER
                .key(keys.counter_record(*user))
                .arg(&record.encode()[..])
                .arg(record.version)
                .arg(RECORD_TTL.as_millis() as u64)
                .arg(if replace_equal { "1" } else { "0" }),
        )
        .ignore();
    }
}

/// Reads the records of `users` in one round trip; `None` where missing or
/// malformed.
pub async fn load_many(
    conn: &mut impl ConnectionLike,
    keys: &RedisKeys,
    users: &[UserId],
) -> redis::RedisResult<Vec<Option<CounterRecord>>> {
    if users.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    queue_load(&mut pipe, keys, users);
    let raw: Vec<redis::Value> = pipe.query_async(conn).await?;
    Ok(raw.iter().map(parse).collect())
}

/// Queues the reads of `users`' records on `pipe`, one reply each
/// ([`parse`]): one `GET` per record, not an `MGET` — the records live in
/// different hash slots, and a cluster client splits a pipeline per node
/// where it would refuse a cross-slot `MGET`.
pub fn queue_load(pipe: &mut redis::Pipeline, keys: &RedisKeys, users: &[UserId]) {
    for user in users {
        pipe.cmd("GET").arg(keys.counter_record(*user));
    }
}

/// The record in one reply of [`queue_load`]; `None` where missing or malformed.
pub fn parse(reply: &redis::Value) -> Option<CounterRecord> {
    let bytes: Option<Vec<u8>> = redis::from_redis_value_ref(reply).ok()?;
    CounterRecord::decode(&bytes?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_layout_is_big_endian_counts_then_version() {
        let record = CounterRecord {
            followings: 1,
            followers: 0x0102_0304,
            posts: 3,
            likes_received: 4,
            favs_received: u32::MAX,
            version: 0x0A0B,
        };
        let bytes = record.encode();
        assert_eq!(&bytes[0..4], &[0, 0, 0, 1]);
        assert_eq!(&bytes[4..8], &[1, 2, 3, 4]);
        assert_eq!(&bytes[16..20], &[0xFF; 4]);
        assert_eq!(&bytes[20..], &[0, 0, 0, 0, 0, 0, 0x0A, 0x0B]);
        assert_eq!(CounterRecord::decode(&bytes), Some(record));
        assert_eq!(CounterRecord::decode(&bytes[..20]), None);
    }
}
