//! Redis: the pool, the key layout, and the derived caches — counter
//! records and list caches — that the write path and the projector keep right.

pub(crate) mod cluster;
pub(crate) mod counters;
pub(crate) mod keys;
pub(crate) mod lists;
pub(crate) mod pool;
pub(crate) mod sweep;

pub(crate) use keys::RedisKeys;
pub use pool::RedisPool;

use counters::CounterRecord;
use lists::EdgeState;
use redis::aio::ConnectionLike;

use crate::model::UserId;

/// Writes counter records and edge states through to the caches in one round
/// trip; each write applies only if newer (and, for lists, only if cached).
/// `together`: one Redis server, where one script call may write the keys
/// of many users (not Redis Cluster, where a call's keys share a slot).
pub async fn write_through(
    conn: &mut impl ConnectionLike,
    keys: &RedisKeys,
    records: &[(UserId, CounterRecord)],
    edges: &[EdgeState],
    together: bool,
) -> redis::RedisResult<()> {
    if records.is_empty() && edges.is_empty() {
        return Ok(());
    }
    run_writes(conn, &write_through_pipe(keys, records, edges, together)).await
}

/// The pipeline of [`write_through`], for callers that add to it.
pub(crate) fn write_through_pipe(
    keys: &RedisKeys,
    records: &[(UserId, CounterRecord)],
    edges: &[EdgeState],
    together: bool,
) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    queue_write_through(&mut pipe, keys, records, edges, together);
    pipe
}

/// Queues [`write_through`]'s writes on `pipe`.
fn queue_write_through(
    pipe: &mut redis::Pipeline,
    keys: &RedisKeys,
    records: &[(UserId, CounterRecord)],
    edges: &[EdgeState],
    together: bool,
) {
    counters::queue_store(pipe, keys, records, together);
    lists::queue_apply(pipe, keys, edges, together);
}

/// [`write_through`] for a Redis past what caches may take: counter
/// records are written (a record is small, and its version must stand
/// against an older one sent late), the lists of `edges` are dropped —
/// their members and coverage, not their versions — and each edge is then
/// applied to its list, which is no longer cached: a removal leaves its
/// tombstone, so an update sent before it and late cannot bring the edge
/// back when a read fills the list again.
pub(crate) fn shed_pipe(
    keys: &RedisKeys,
    records: &[(UserId, CounterRecord)],
    edges: &[EdgeState],
    together: bool,
) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    let mut dropped = std::collections::HashSet::new();
    for list in edges.iter().map(|edge| edge.list) {
        if !dropped.insert(list) {
            continue;
        }
        let [members, _, coverage] = keys.list(list);
        pipe.cmd("DEL").arg(members).arg(coverage).ignore();
    }
    queue_write_through(&mut pipe, keys, records, edges, together);
    pipe
}

/// The pipeline that drops, whole, what [`write_through`] would have
/// written to, for a Redis that refuses writes (`OOM`): the counter records
/// of `records`' users and the lists of `edges` with their versions (one
/// `DEL` per user's keys, one hash slot each). A cache that cannot take a
/// change must not keep the old state either; reads serve what is dropped
/// from PostgreSQL.
pub(crate) fn drop_pipe(
    keys: &RedisKeys,
    records: &[(UserId, CounterRecord)],
    edges: &[EdgeState],
) -> redis::Pipeline {
    let mut del = redis::pipe();
    for (user, _) in records {
        del.cmd("DEL").arg(keys.counter_record(*user)).ignore();
    }
    for edge in edges {
        del.cmd("DEL")
            .arg(&keys.list(edge.list)[..])
            .arg(keys.list_tombstones(edge.list))
            .ignore();
    }
    del
}

/// Runs a pipeline of cache writes (the version-guarded scripts of
/// [`counters`] and [`lists`], by hash). Every such write may run twice
/// (a second run finds its version applied and changes nothing), so a
/// `NOSCRIPT` answer is met by loading the scripts and running it again.
pub(crate) async fn run_writes(
    conn: &mut impl ConnectionLike,
    pipe: &redis::Pipeline,
) -> redis::RedisResult<()> {
    if pipe.is_empty() {
        return Ok(());
    }
    query_with_scripts(
        conn,
        pipe,
        &[counters::store_script(), lists::apply_script()],
    )
    .await
}

/// How much one round trip of [`run_writes_in_trips`] carries at most, in
/// bytes of commands: what Redis parses and applies grows with the records
/// and edge states (60–80 bytes each) a call carries. Redis runs a round
/// trip's scripts one after another, and a read that arrives meanwhile
/// waits for all of them: a move's batch of 200 followers sent whole held
/// Redis for about ten milliseconds. A call of 16 records or states is
/// 1–2.5 KiB, so a trip of this size is in practice one call (a longer one
/// goes alone): the per-call limits set a trip's length, a fraction of a
/// millisecond of Redis. In
/// moves of 20,000 followers read in turns of the job running and held
/// (`account_move`, docs/performance.md), the p99 of the reads in Kith
/// while the job ran was 0.96× and 0.98× of theirs while it was held,
/// against 1.22× and 1.12× with trips of 16 KiB of calls of 64, and 1.10×
/// with trips of one call of 64, all with a pause after each trip (since
/// dropped); for about twice Redis's CPU a follower (more calls, each with
/// its own start).
pub(crate) const TRIP_BYTES: usize = 2 * 1024;

/// [`run_writes`] for a batch too big to hold Redis at once, as the
/// projector's (and reconcile's repairs, which go through it): in round
/// trips of at most [`TRIP_BYTES`] (or one command, if longer), in order,
/// one after the other. Redis runs a trip as one piece, and a read's
/// round trip that arrives meanwhile waits for that trip, not for the
/// batch. A pause after each trip, as long as the trip (at most 20 ms),
/// once kept the reads' wait down with trips of many calls; with trips of
/// one short call it was not shown to help. In moves of 20,000 followers
/// read in turns of the job running and held (`account_move`,
/// docs/performance.md), the p99 of the reads in Kith while the job ran
/// was 0.92× and 1.02× of theirs while it was held without the pause,
/// 1.07× and 0.96× with it; the machine's services spent 0.72 ms of CPU a
/// follower against 0.83–0.86 ms, and the projector's lag at 1,000 follows
/// a second was 8–14 ms higher at p50 (`pipeline_lag`). Reconcile's
/// repairs, dead-letter replays and a new owner's re-sync take this path
/// too, unmeasured without the pause.
pub(crate) async fn run_writes_in_trips(
    conn: &mut impl ConnectionLike,
    pipe: &redis::Pipeline,
) -> redis::RedisResult<()> {
    for trip in trips(pipe, TRIP_BYTES) {
        run_writes(conn, &trip).await?;
    }
    Ok(())
}

/// `pipe`'s commands, in order, in pipelines of at most `bytes` of
/// commands each (a longer command alone), their answers ignored, as
/// [`run_writes`] takes none.
fn trips(pipe: &redis::Pipeline, bytes: usize) -> Vec<redis::Pipeline> {
    let mut trips = Vec::new();
    let mut trip = redis::pipe();
    let mut size = 0;
    for command in pipe.cmd_iter() {
        let length = command.get_packed_command().len();
        if !trip.is_empty() && size + length > bytes {
            trips.push(std::mem::replace(&mut trip, redis::pipe()));
            size = 0;
        }
        trip.add_command(command.clone()).ignore();
        size += length;
    }
    if !trip.is_empty() {
        trips.push(trip);
    }
    trips
}

/// Runs `pipe`, which invokes `scripts` by hash (`EVALSHA`). When Redis does
/// not know one of them (`NOSCRIPT`: after a restart, a failover or `SCRIPT
/// FLUSH`), loads them and runs `pipe` once more — so only for pipelines that
/// may safely run twice, such as reads.
pub(crate) async fn query_with_scripts<T: redis::FromRedisValue>(
    conn: &mut impl ConnectionLike,
    pipe: &redis::Pipeline,
    scripts: &[&redis::Script],
) -> redis::RedisResult<T> {
    match pipe.query_async(conn).await {
        Err(e) if has_code(&e, "NOSCRIPT") => {
            let mut load = redis::pipe();
            for script in scripts {
                load.load_script(script).ignore();
            }
            load.query_async::<()>(conn).await?;
            pipe.query_async(conn).await
        }
        other => other,
    }
}

/// True when Redis answered `code` to the command, or to any command of a pipeline.
fn has_code(e: &redis::RedisError, code: &str) -> bool {
    e.code() == Some(code)
        || e.clone()
            .into_server_errors()
            .is_some_and(|errors| errors.iter().any(|(_, e)| e.code() == code))
}

/// The texts of an `INFO` answer: one on a single server, one per node on
/// a cluster (which answers a map of node to text).
fn info_texts(value: &redis::Value) -> Vec<String> {
    match value {
        redis::Value::Map(nodes) => nodes.iter().flat_map(|(_, v)| info_texts(v)).collect(),
        redis::Value::Array(values) => values.iter().flat_map(info_texts).collect(),
        other => redis::from_redis_value_ref::<String>(other)
            .ok()
            .into_iter()
            .collect(),
    }
}

/// Redis's `maxmemory-policy`, read from `INFO memory` or, where that does
/// not tell, with `CONFIG GET`; `None` when neither tells. On a cluster
/// `INFO` answers for every primary: a policy other than `noeviction` on any
/// of them is the answer.
pub(crate) async fn eviction_policy(
    conn: &mut impl ConnectionLike,
) -> Result<Option<String>, redis::RedisError> {
    fn policy_in(info: &str) -> Option<String> {
        info.lines()
            .find_map(|line| line.strip_prefix("maxmemory_policy:"))
            .map(|p| p.trim().to_owned())
    }
    let info: Option<redis::Value> = redis::cmd("INFO")
        .arg("memory")
        .query_async(conn)
        .await
        .ok();
    let policies: Vec<String> = info
        .as_ref()
        .map(info_texts)
        .unwrap_or_default()
        .iter()
        .filter_map(|text| policy_in(text))
        .collect();
    if !policies.is_empty() {
        let evicting = policies.iter().find(|p| *p != "noeviction");
        return Ok(evicting.or(policies.first()).cloned());
    }
    let pair: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory-policy")
        .query_async(conn)
        .await?;
    Ok(pair.get(1).cloned())
}

/// How full Redis is: `used_memory` and `maxmemory` (0: none, or not
/// told) of each server that answered (on a cluster `INFO` answers for
/// every primary; a node's error is left out).
pub(crate) async fn memory_use(
    conn: &mut impl ConnectionLike,
) -> Result<Vec<(u64, u64)>, redis::RedisError> {
    fn field(info: &str, name: &str) -> Option<u64> {
        info.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse().ok())
    }
    let info: redis::Value = redis::cmd("INFO").arg("memory").query_async(conn).await?;
    Ok(info_texts(&info)
        .iter()
        .filter_map(|text| {
            let used = field(text, "used_memory")?;
            Some((used, field(text, "maxmemory").unwrap_or(0)))
        })
        .collect())
}

/// True when the server runs in cluster mode (`INFO cluster`); false when
/// it does not say (a server too old to have the section).
pub(crate) async fn cluster_enabled(
    conn: &mut impl ConnectionLike,
) -> Result<bool, redis::RedisError> {
    let info: String = redis::cmd("INFO").arg("cluster").query_async(conn).await?;
    Ok(info.lines().any(|line| line.trim() == "cluster_enabled:1"))
}

/// True when Redis refused a write for lack of memory (`OOM`), alone or
/// anywhere in a pipeline.
pub(crate) fn out_of_memory(e: &redis::RedisError) -> bool {
    has_code(e, "OOM")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trips_keep_every_command_in_order_at_most_size_each() {
        let mut pipe = redis::pipe();
        for i in 0..20 {
            pipe.cmd("SET").arg(format!("k{i}")).arg(i).ignore();
        }
        // Each SET is 28 or 30 bytes packed: 100 bytes take three.
        let trips = trips(&pipe, 100);
        let sizes: Vec<usize> = trips.iter().map(redis::Pipeline::len).collect();
        assert_eq!(sizes, [3, 3, 3, 3, 3, 3, 2]);
        // A command longer than a trip goes alone.
        assert_eq!(super::trips(&pipe, 1).len(), 20);
        let sent: Vec<u8> = trips
            .iter()
            .flat_map(redis::Pipeline::get_packed_pipeline)
            .collect();
        assert_eq!(sent, pipe.get_packed_pipeline());
        assert!(super::trips(&redis::pipe(), 8).is_empty());
    }
}
