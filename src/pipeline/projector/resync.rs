//! The Redis side of a batch: every user and edge the batch touched is set
//! to its *current* state in PostgreSQL — counter records and cached lists,
//! each write applied only if newer. Never deltas, so doing it twice, late,
//! or after a crash changes nothing but what was missing.

use std::collections::BTreeSet;

use super::batch::{Action, Event, Item};
use crate::app::App;
use crate::cache;
use crate::cache::counters::CounterRecord;
use crate::cache::lists::EdgeState;
use crate::error::PipelineError;
use crate::live::hub::{FollowChange, LiveBatch};
use crate::model::UserId;
use crate::store::{follower, following, stats};

/// Writes the current truth of every user and edge in `events` to Redis.
pub(crate) async fn resync<'a>(
    app: &App,
    events: impl IntoIterator<Item = &'a Event>,
) -> Result<(), PipelineError> {
    let (users, pairs) = touched(events);
    resync_state(app, users, pairs).await
}

/// What subscribers are told once a batch's caches are written: every user
/// whose counters it set, and the follow transitions applied now — not the
/// ones re-synced after a handover, applied earlier and told then, which
/// would reach subscribers late and out of order.
pub(crate) fn live_batch(items: &[Item]) -> LiveBatch {
    let (users, _) = touched(items.iter().filter_map(Item::event));
    let follows = items
        .iter()
        .filter_map(|item| match &item.action {
            Action::Apply(Event::Follow(e)) => Some(FollowChange::from(e)),
            _ => None,
        })
        .collect();
    LiveBatch {
        counters: users.into_iter().collect(),
        follows,
        coming: Vec::new(),
    }
}

/// The users and edges `events` touch.
fn touched<'a>(
    events: impl IntoIterator<Item = &'a Event>,
) -> (BTreeSet<UserId>, BTreeSet<(UserId, UserId)>) {
    let mut users = BTreeSet::new();
    let mut pairs = BTreeSet::new();
    for event in events {
        match event {
            Event::Follow(e) => {
                users.extend([e.from, e.to]);
                pairs.insert((e.from, e.to));
            }
            Event::Content(e) => {
                users.insert(e.author_id);
            }
            // Nothing of a block, a mute, a request, a close friend, a
            // follow's options or settings is cached in Redis.
            Event::Block(_)
            | Event::Mute(_)
            | Event::Request(_)
            | Event::CloseFriend(_)
            | Event::FollowOptions(_)
            | Event::Settings(_)
            | Event::Moved(_) => {}
        }
    }
    (users, pairs)
}

/// Writes the current state of `users` (counter records) and `pairs` (both
/// lists of each edge) from PostgreSQL to Redis, only where newer.
pub(crate) async fn resync_state(
    app: &App,
    users: BTreeSet<UserId>,
    pairs: BTreeSet<(UserId, UserId)>,
) -> Result<(), PipelineError> {
    if users.is_empty() && pairs.is_empty() {
        return Ok(());
    }
    let users: Vec<UserId> = users.into_iter().collect();
    let pairs: Vec<(UserId, UserId)> = pairs.into_iter().collect();
    // Read everything first and give the connection back: no PostgreSQL
    // connection is held while waiting on Redis.
    let (records, edges) = {
        let mut conn = app.pg.get().await?;
        let records: Vec<(UserId, CounterRecord)> = stats::find_many(&mut conn, &users)
            .await?
            .iter()
            .map(|(user, s)| (*user, CounterRecord::from(s)))
            .collect();
        let mut edges = Vec::new();
        for row in follower::rows(&mut conn, &pairs).await? {
            edges.extend(EdgeState::in_followers(&row));
        }
        for row in following::rows(&mut conn, &pairs).await? {
            edges.extend(EdgeState::in_following(&row));
        }
        (records, edges)
    };
    let mut redis = app.redis.get().await?;
    // Past `KITH_FILL_MEMORY_LIMIT` the batch's lists are dropped rather
    // than grown: what is cached shrinks back under the limit, and reads
    // fill it again from there.
    let (past, _) = app.read.past_fill_limit(&mut *redis).await;
    let together = !app.redis.is_cluster();
    let pipe = if past && !edges.is_empty() {
        app.metrics.caches_shed.inc();
        cache::shed_pipe(&app.keys, &records, &edges, together)
    } else {
        cache::write_through_pipe(&app.keys, &records, &edges, together)
    };
    match cache::run_writes_in_trips(&mut *redis, &pipe).await {
        Ok(()) => {}
        // Redis is full (`maxmemory` with `noeviction`): a cache that cannot
        // take the change must not keep the old state either. Dropping the
        // keys frees memory and leaves these users and lists uncached, which
        // reads serve from PostgreSQL — right, only slower.
        Err(e) if cache::out_of_memory(&e) => {
            app.metrics.redis_oom("projector");
            tracing::warn!(error = %e, "Redis is out of memory: dropping the caches this batch touched");
            cache::drop_pipe(&app.keys, &records, &edges)
                .query_async::<()>(&mut *redis)
                .await?;
        }
        Err(e) => return Err(e.into()),
    }
    drop(redis);
    // This process's hot lists see the change now; other processes' within
    // their short TTL.
    for edge in &edges {
        app.read.forget_list(&edge.list).await;
    }
    Ok(())
}
