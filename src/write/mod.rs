//! The write path: rate limit, then one PostgreSQL statement
//! (`kith_change_edges`, through the group commit) that changes the edge,
//! the actor's counters and appends the outbox event together.

pub(crate) mod block;
pub(crate) mod close_friends;
pub(crate) mod follow;
pub(crate) mod follow_options;
pub(crate) mod group_commit;
pub(crate) mod import;
pub(crate) mod lifecycle;
pub(crate) mod move_cap;
pub(crate) mod move_repair;
pub(crate) mod move_runner;
pub(crate) mod moves;
pub(crate) mod mute;
pub(crate) mod rate_limit;
pub(crate) mod requests;
pub(crate) mod settings;
pub(crate) mod suggestions;

pub(crate) use block::change_block;
pub(crate) use close_friends::change_close_friend;
pub use follow::{EdgeChange, change_edge};
pub(crate) use follow::{FollowOutcome, TargetError, change_edges, remove_follower};
pub(crate) use mute::change_mute;
pub(crate) use settings::update_settings;

use crate::app::App;
use crate::cache;
use crate::cache::counters::CounterRecord;
use crate::cache::lists::EdgeState;
use crate::model::UserId;
use crate::paging::ListKey;
use crate::pipeline::wake;

/// Takes `n` tokens from `actor`'s bucket, or fails with `RATE_LIMITED`
/// (counted in the metrics).
pub(crate) async fn take_tokens(
    app: &App,
    actor: UserId,
    n: usize,
) -> Result<(), crate::error::ApiError> {
    match app
        .rate_limiter
        .acquire(&app.redis, &app.keys, actor, n)
        .await
    {
        Ok(_) => Ok(()),
        Err(refused @ crate::error::ApiError::RateLimited { .. }) => {
            app.metrics.rate_limited.inc();
            Err(refused)
        }
        // A full Redis cannot keep the bucket: the write is refused
        // (`UNAVAILABLE`), never let through unlimited.
        Err(other) => {
            if other.is_redis_out_of_memory() {
                app.metrics.redis_oom("rate_limit");
            }
            Err(other)
        }
    }
}

/// Outdates `user`'s kept suggestions after a change they depend on that
/// writes no outbox event (a dismissal; the others go through
/// [`after_commit_for`]'s round trip): their generation
/// moves on, so the next read computes them again — even one computed
/// while this change was being made. Best effort: they end with their TTL
/// anyway, and reads leave out blocked, muted, requested and inactive
/// accounts whatever was kept.
pub(crate) async fn forget_suggestions(app: &App, user: UserId) {
    let mut pipe = redis::pipe();
    queue_forget_suggestions(&mut pipe, app, user);
    if let Ok(mut redis) = app.redis.get().await {
        let _: redis::RedisResult<()> = pipe.query_async(&mut *redis).await;
    }
}

/// Queues [`forget_suggestions`] of `user` on `pipe`.
fn queue_forget_suggestions(pipe: &mut redis::Pipeline, app: &App, user: UserId) {
    let [_, generation] = app.keys.suggestions(user);
    pipe.cmd("INCR").arg(&generation).ignore();
    pipe.cmd("EXPIRE")
        .arg(&generation)
        .arg(2 * app.config.suggestions.ttl_secs.max(1))
        .ignore();
}

/// Queues on `pipe` what every commit of an edge is followed by: relays
/// woken by a `PUBLISH`, and the kept suggestions of `users`, and of the
/// owners of the following lists `edges` change, outdated.
fn queue_after_commit(
    app: &App,
    pipe: &mut redis::Pipeline,
    edges: &[EdgeState],
    users: &[UserId],
) {
    wake::queue_publish(pipe, &app.keys);
    // A change of whom a user follows outdates its kept suggestions.
    let mut owners: Vec<UserId> = edges
        .iter()
        .filter_map(|e| match e.list {
            ListKey::Following(owner) => Some(owner),
            ListKey::Followers(_) => None,
        })
        .chain(users.iter().copied())
        .collect();
    owners.sort_unstable();
    owners.dedup();
    for owner in owners {
        queue_forget_suggestions(pipe, app, owner);
    }
}

/// After a commit that appended outbox events: the changed counter records
/// and following lists show it at once (read-your-writes), and every relay is
/// woken — this process's directly, others' by a `PUBLISH` in the same Redis
/// round trip. The writes are version-guarded no-ops when the projector got
/// there first. A failure is only logged: the change is committed and the
/// projector repairs the caches; until then this process reads the
/// relations of the lists it could not update from PostgreSQL, and their
/// owners' counters until a read has written their records back (for at
/// most as long).
pub(crate) async fn after_commit(
    app: &App,
    records: &[(UserId, CounterRecord)],
    edges: &[EdgeState],
) {
    after_commit_for(app, records, edges, &[]).await;
}

/// [`after_commit`], which also outdates the kept suggestions of `users`
/// (whose blocks, mutes or requests changed) in the same round trip.
pub(crate) async fn after_commit_for(
    app: &App,
    records: &[(UserId, CounterRecord)],
    edges: &[EdgeState],
    users: &[UserId],
) {
    app.wakes.relay.notify_one();
    let result = async {
        let mut redis = app.redis.get().await.map_err(|e| e.to_string())?;
        // Past `KITH_FILL_MEMORY_LIMIT` the lists are dropped rather than
        // grown, as the projector does: reads serve them from PostgreSQL.
        let past = if edges.is_empty() {
            false
        } else {
            let (past, looked) = app.read.past_fill_limit(&mut *redis).await;
            if looked {
                app.round_trips.redis();
            }
            past
        };
        let together = !app.redis.is_cluster();
        let mut pipe = if past {
            app.metrics.caches_shed.inc();
            cache::shed_pipe(&app.keys, records, edges, together)
        } else {
            cache::write_through_pipe(&app.keys, records, edges, together)
        };
        queue_after_commit(app, &mut pipe, edges, users);
        cache::run_writes(&mut *redis, &pipe).await.map_err(|e| {
            if cache::out_of_memory(&e) {
                app.metrics.redis_oom("write_through");
            }
            e.to_string()
        })
    };
    let failed = result.await.err();
    if let Some(error) = &failed {
        tracing::warn!(%error, edges = edges.len(), "caches not updated after a commit; the projector will");
    }
    app.read.after_write(edges, failed.is_none()).await;
}
