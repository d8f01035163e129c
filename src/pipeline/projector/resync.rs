//! The Redis side of a batch: every user and edge the batch touched is set
//! to its *current* state in PostgreSQL — counter records and cached lists,
//! each write applied only if newer. Never deltas, so doing it twice, late,
//! or after a crash changes nothing but what was missing.

use std::collections::BTreeSet;

use super::batch::Event;
use crate::app::App;
use crate::cache::counters::CounterRecord;
use crate::cache::lists::EdgeState;
use crate::cache::{self, ListKey};
use crate::model::UserId;
use crate::pipeline::PipelineError;
use crate::store::{follower, following, stats};

/// Writes the current truth of every user and edge in `events` to Redis.
pub async fn resync<'a>(
    app: &App,
    events: impl IntoIterator<Item = &'a Event>,
) -> Result<(), PipelineError> {
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
        }
    }
    if users.is_empty() {
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
            edges.extend(edge_state(row, |from, to| (ListKey::Followers(to), from)));
        }
        for row in following::rows(&mut conn, &pairs).await? {
            edges.extend(edge_state(row, |from, to| (ListKey::Following(from), to)));
        }
        (records, edges)
    };
    let mut redis = app.redis.get().await?;
    cache::write_through(&mut *redis, &app.keys, &records, &edges).await?;
    drop(redis);
    // This process's hot lists see the change now; other processes' within
    // their short TTL.
    for edge in &edges {
        app.hot_lists.invalidate(&edge.list).await;
    }
    Ok(())
}

fn edge_state(
    row: follower::EdgeRow,
    list_and_member: impl Fn(UserId, UserId) -> (ListKey, UserId),
) -> Option<EdgeState> {
    let (list, other) =
        list_and_member(UserId::new(row.from_user_id)?, UserId::new(row.to_user_id)?);
    Some(EdgeState {
        list,
        other,
        active: row.active,
        followed_at_ms: row.followed_at.timestamp_millis(),
        version: row.version,
    })
}
