//! Counter records `ucnt:{uid}`: a format byte ([`RECORD_FORMAT`]), then
//! one big-endian u32 per counter in the order of
//! [`crate::model::with_counters`], then the `user_stats` version
//! (big-endian u64) they were read at. Written whole and only when newer
//! (`lua/counter_record_set.lua`), so replays and reorders never move a count.
//! A repair ([`repair`]) sets a record to the truth whatever its version,
//! unless it changed since the repair read it.
//!
//! A record of another format or length reads as missing (it is rebuilt
//! from `user_stats`), and the script replaces it rather than comparing
//! versions with it: adding a counter bumps the format, and the records
//! cached before change over as they are next read or written.

use std::sync::LazyLock;
use std::time::Duration;

use redis::aio::ConnectionLike;

use super::RedisKeys;
use crate::model::UserId;
use crate::store::stats::UserStats;

static SET_IF_NEWER: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../../lua/counter_record_set.lua")));

static REPAIR: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("../../lua/counter_record_repair.lua")));

/// How long an untouched record stays cached; a miss is rebuilt from `user_stats`.
pub(crate) const RECORD_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// The layout of the record, its first byte: bumped whenever the list of
/// counters changes.
pub(crate) const RECORD_FORMAT: u8 = 2;

macro_rules! record {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// How many counters a record holds.
        pub(crate) const COUNTERS: usize = [$(stringify!($name)),*].len();

        /// One user's counters, as cached.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct CounterRecord {
            $($(#[$doc])* pub $name: u32,)*
            /// The `user_stats.version` this snapshot was read at.
            pub version: u64,
        }

        impl CounterRecord {
            /// The counts, in record order.
            fn counts(&self) -> [u32; COUNTERS] {
                [$(self.$name),*]
            }

            fn from_counts(counts: [u32; COUNTERS], version: u64) -> Self {
                let [$($name),*] = counts;
                Self { $($name,)* version }
            }
        }

        impl From<&UserStats> for CounterRecord {
            fn from(s: &UserStats) -> Self {
                Self {
                    $($name: to_u32(s.$name),)*
                    version: u64::try_from(s.version.max(0)).unwrap_or(0),
                }
            }
        }
    };
}
crate::model::with_counters!(record);

/// Encoded size: the format byte, a u32 per counter, the u64 version.
pub(crate) const RECORD_LEN: usize = 1 + 4 * COUNTERS + 8;

fn to_u32(n: i64) -> u32 {
    // user_stats CHECKs keep counts non-negative; a count past u32::MAX
    // saturates rather than wrapping.
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

impl CounterRecord {
    /// The wire form ([`RECORD_LEN`] bytes).
    pub fn encode(&self) -> [u8; RECORD_LEN] {
        let mut out = [0u8; RECORD_LEN];
        out[0] = RECORD_FORMAT;
        for (i, n) in self.counts().iter().enumerate() {
            out[1 + i * 4..1 + i * 4 + 4].copy_from_slice(&n.to_be_bytes());
        }
        out[RECORD_LEN - 8..].copy_from_slice(&self.version.to_be_bytes());
        out
    }

    /// Decodes a record; `None` unless it has this format and length.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let bytes: &[u8; RECORD_LEN] = bytes.try_into().ok()?;
        if bytes[0] != RECORD_FORMAT {
            return None;
        }
        let counts = std::array::from_fn(|i| {
            u32::from_be_bytes(bytes[1 + i * 4..1 + i * 4 + 4].try_into().expect("4 bytes"))
        });
        let version = u64::from_be_bytes(bytes[RECORD_LEN - 8..].try_into().expect("8 bytes"));
        Some(Self::from_counts(counts, version))
    }
}

/// The script the queued stores invoke by hash (see [`super::run_writes`]).
pub(crate) fn store_script() -> &'static redis::Script {
    &SET_IF_NEWER
}

/// Most records one script call stores: a call holds Redis for its whole
/// run, and other clients' commands wait for it. See
/// [`crate::cache::TRIP_BYTES`].
pub(crate) const RECORDS_PER_CALL: usize = 16;

/// Queues "store each record unless a newer one is cached" on `pipe`: in
/// calls of at most [`RECORDS_PER_CALL`] records when `together` (one Redis
/// server), else one call per record (Redis Cluster, where the keys of one
/// call must share a slot).
pub(crate) fn queue_store(
    pipe: &mut redis::Pipeline,
    keys: &RedisKeys,
    records: &[(UserId, CounterRecord)],
    together: bool,
) {
    let per_call = if together { RECORDS_PER_CALL } else { 1 };
    for part in records.chunks(per_call) {
        let mut call = SET_IF_NEWER.prepare_invoke();
        call.arg(RECORD_TTL.as_millis() as u64);
        for (user, record) in part {
            call.key(keys.counter_record(*user))
                .arg(&record.encode()[..])
                .arg(record.version);
        }
        pipe.invoke_script(&call).ignore();
    }
}

/// One record to set to the truth: the user, the record as read before the
/// truth was (raw bytes; `None`: missing), and the truth's record (`None`:
/// the truth has no counters for the user, and the record goes).
pub(crate) type RepairItem = (UserId, Option<Vec<u8>>, Option<CounterRecord>);

/// How a compare-and-set repair of one record ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Repaired {
    /// Set to the truth (or deleted).
    Written,
    /// It was the truth already.
    Equal,
    /// It changed since it was read: left alone, to be read again.
    Moved,
}

/// Sets each record to its truth unless it changed since it was read
/// (`lua/counter_record_repair.lua`), in one round trip. Versions are not
/// compared: a record ahead of the truth is set back too.
pub(crate) async fn repair(
    conn: &mut impl ConnectionLike,
    keys: &RedisKeys,
    items: &[RepairItem],
) -> redis::RedisResult<Vec<Repaired>> {
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for (user, seen, truth) in items {
        let truth = truth.map(|r| r.encode().to_vec()).unwrap_or_default();
        pipe.invoke_script(
            REPAIR
                .key(keys.counter_record(*user))
                .arg(seen.as_deref().unwrap_or_default())
                .arg(truth)
                .arg(RECORD_TTL.as_millis() as u64),
        );
    }
    let answers: Vec<i64> = super::query_with_scripts(conn, &pipe, &[&REPAIR]).await?;
    Ok(answers
        .into_iter()
        .map(|a| match a {
            1 => Repaired::Written,
            0 => Repaired::Equal,
            _ => Repaired::Moved,
        })
        .collect())
}

/// The stored bytes of `users`' records, whatever their format, in one
/// round trip (`None`: missing).
pub(crate) async fn load_raw(
    conn: &mut impl ConnectionLike,
    keys: &RedisKeys,
    users: &[UserId],
) -> redis::RedisResult<Vec<Option<Vec<u8>>>> {
    if users.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    queue_load(&mut pipe, keys, users);
    pipe.query_async(conn).await
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
/// different hash slots, and Kith's cluster connection splits a pipeline
/// by slot (`super::cluster`) where Redis would refuse a cross-slot `MGET`.
pub(crate) fn queue_load(pipe: &mut redis::Pipeline, keys: &RedisKeys, users: &[UserId]) {
    for user in users {
        pipe.cmd("GET").arg(keys.counter_record(*user));
    }
}

/// The record in one reply of [`queue_load`]; `None` where missing or malformed.
pub(crate) fn parse(reply: &redis::Value) -> Option<CounterRecord> {
    let bytes: Option<Vec<u8>> = redis::from_redis_value_ref(reply).ok()?;
    CounterRecord::decode(&bytes?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_layout_is_the_format_then_big_endian_counts_then_version() {
        let record = CounterRecord {
            followings: 1,
            followers: 0x0102_0304,
            posts: 3,
            likes_received: 4,
            favs_received: u32::MAX,
            version: 0x0A0B,
        };
        let bytes = record.encode();
        assert_eq!(bytes.len(), 29);
        assert_eq!(bytes[0], RECORD_FORMAT);
        assert_eq!(&bytes[1..5], &[0, 0, 0, 1]);
        assert_eq!(&bytes[5..9], &[1, 2, 3, 4]);
        assert_eq!(&bytes[17..21], &[0xFF; 4]);
        assert_eq!(&bytes[21..], &[0, 0, 0, 0, 0, 0, 0x0A, 0x0B]);
        assert_eq!(CounterRecord::decode(&bytes), Some(record));
        assert_eq!(CounterRecord::decode(&bytes[..20]), None);
        let mut other_format = bytes;
        other_format[0] = RECORD_FORMAT + 1;
        assert_eq!(CounterRecord::decode(&other_format), None);
        // The format before it had one: five counts and the version, 28 bytes.
        assert_eq!(CounterRecord::decode(&bytes[1..]), None);
    }

    #[test]
    fn records_go_many_to_a_call_on_one_server_one_each_on_a_cluster() {
        let keys = RedisKeys::new("t:");
        let records: Vec<(UserId, CounterRecord)> = (1..=2 * RECORDS_PER_CALL as i64 + 2)
            .map(|n| {
                let record = CounterRecord {
                    followings: 1,
                    followers: 2,
                    posts: 3,
                    likes_received: 4,
                    favs_received: 5,
                    version: n as u64,
                };
                (UserId::new(n).unwrap(), record)
            })
            .collect();
        let calls = |together| {
            let mut pipe = redis::pipe();
            queue_store(&mut pipe, &keys, &records, together);
            let last = pipe.cmd_iter().last().map(|c| c.args_iter().count());
            (pipe.len(), last)
        };
        // EVALSHA, the hash, the key count, then per record its key, its
        // bytes and its version after the TTL.
        assert_eq!(calls(true), (3, Some(3 + 1 + 2 * 3)));
        assert_eq!(calls(false), (records.len(), Some(3 + 1 + 3)));
    }
}
