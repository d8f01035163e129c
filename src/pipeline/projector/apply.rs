//! The PostgreSQL side of a batch, in one transaction: move the consumed
//! positions forward (only under the lease the batch was read with), apply
//! follow events to `follower` under per-edge version guards, apply the
//! counter changes, and record dead letters (block, mute and request
//! events change nothing here). Either all of it commits or none; each
//! step is one statement over the whole batch.

use std::collections::BTreeMap;

use chrono::{TimeZone, Utc};
use diesel_async::AsyncConnection as _;
use rdkafka::message::Message as _;
use uuid::Uuid;

use super::batch::{Action, Event, Item};
use crate::error::PipelineError;
use crate::events::follow::FollowEventType;
use crate::model::UserId;
use crate::store::dead_letters::{self, NewDeadLetter};
use crate::store::follower::{self, Applied, EdgeEvent};
use crate::store::partitions::{self, Advance, TopicPartition};
use crate::store::stats::{self, ContentOutcome};
use crate::store::{PgConn, PgPool};

/// What one committed transaction did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Committed {
    /// Events applied (duplicates and stale events included: they were processed).
    pub applied: usize,
    /// Messages recorded as dead letters.
    pub dead_lettered: usize,
}

/// Why a transaction did not commit.
#[derive(Debug)]
pub(crate) enum CommitError {
    /// These partitions are no longer this member's (or moved under it):
    /// nothing was written; their messages must be dropped.
    Fenced(Vec<TopicPartition>),
    /// PostgreSQL failed or rejected something; nothing was written.
    Failed(PipelineError),
}

impl From<PipelineError> for CommitError {
    fn from(e: PipelineError) -> Self {
        Self::Failed(e)
    }
}

impl From<diesel::result::Error> for CommitError {
    fn from(e: diesel::result::Error) -> Self {
        Self::Failed(e.into())
    }
}

/// Who is committing, and under which group.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Owner<'a> {
    /// The consumer group.
    pub group: &'a str,
    /// This projector.
    pub member: Uuid,
}

/// Applies `items` and the `advances` of their partitions in one transaction.
pub(crate) async fn commit(
    pg: &PgPool,
    owner: Owner<'_>,
    items: &[&Item],
    advances: &[Advance],
) -> Result<Committed, CommitError> {
    let mut conn = pg.get().await.map_err(PipelineError::from)?;
    conn.transaction::<_, CommitError, _>(async |conn| {
        let lost = partitions::advance(conn, owner.group, owner.member, advances).await?;
        if !lost.is_empty() {
            return Err(CommitError::Fenced(lost));
        }
        Ok(apply_items(conn, items).await?)
    })
    .await
}

/// The effects of `items` (no position change): follow events, counters, dead letters.
pub async fn apply_items(conn: &mut PgConn, items: &[&Item]) -> Result<Committed, PipelineError> {
    let mut committed = Committed::default();
    let mut follows = Vec::new();
    let mut contents = Vec::new();
    let mut dead = Vec::new();
    for item in items {
        match &item.action {
            Action::Apply(Event::Follow(e)) => follows.push(EdgeEvent {
                from: e.from,
                to: e.to,
                active: e.event_type == FollowEventType::FollowCreated,
                followed_at: Utc
                    .timestamp_millis_opt(e.followed_at_ms)
                    .single()
                    .unwrap_or_default(),
                version: e.version,
            }),
            Action::Apply(Event::Content(e)) => contents.push((*item, e.change())),
            // Blocks, mutes, requests, close friends, follow options and
            // settings have no projection: reads take them from the truth, and the follows a
            // block ends or an accepted request makes come as follow events.
            Action::Apply(
                Event::Block(_)
                | Event::Mute(_)
                | Event::Request(_)
                | Event::CloseFriend(_)
                | Event::FollowOptions(_)
                | Event::Settings(_)
                | Event::Moved(_),
            ) => {}
            Action::DeadLetter(reason) => dead.push(dead_letter(item, reason)),
            Action::Resync(_) => continue,
        }
        committed.applied += usize::from(matches!(item.action, Action::Apply(_)));
    }

    let mut followers: BTreeMap<UserId, i64> = BTreeMap::new();
    for (event, applied) in follows
        .iter()
        .zip(follower::apply_many(conn, &follows).await?)
    {
        if let Applied::Changed { was_active, active } = applied {
            *followers.entry(event.to).or_default() += i64::from(active) - i64::from(was_active);
        }
    }
    let followers: Vec<(UserId, i64)> = followers.into_iter().filter(|(_, d)| *d != 0).collect();
    let changes: Vec<_> = contents.iter().map(|(_, change)| *change).collect();
    let outcomes = stats::apply_counters(conn, &followers, &changes).await?;
    for ((item, _), outcome) in contents.iter().zip(outcomes) {
        let reason = match outcome {
            ContentOutcome::Applied | ContentOutcome::Duplicate => continue,
            ContentOutcome::BelowZero => "the event would take a counter below zero",
            ContentOutcome::UnknownAuthor => "no such author",
        };
        committed.applied -= 1;
        dead.push(dead_letter(item, reason));
    }
    committed.dead_lettered = dead_letters::insert(conn, &dead).await?;
    Ok(committed)
}

fn dead_letter(item: &Item, reason: &str) -> NewDeadLetter {
    NewDeadLetter {
        source_topic: item.partition.topic.clone(),
        source_partition: item.partition.partition,
        source_offset: item.offset,
        key: item.message.key().map(<[u8]>::to_vec),
        payload: item.message.payload().map(<[u8]>::to_vec),
        error: reason.to_owned(),
        origin: crate::pipeline::origin::stamp(&item.message),
    }
}
