//! Follow and unfollow: one statement writes the edge transition, the
//! actor's `followings` and the outbox event — all of them or none.

use crate::app::App;
use crate::cache::ListKey;
use crate::cache::counters::CounterRecord;
use crate::cache::lists::EdgeState;
use crate::error::ApiError;
use crate::model::{User, UserId, UserStatus};
use crate::pipeline::events::{FollowEvent, FollowEventType};
use crate::store::following::{self, EdgeChangeRow, PairState};
use crate::store::stats::UserStats;

/// The transition a mutation asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EdgeChange {
    /// Make the edge active.
    Follow,
    /// Make the edge inactive.
    Unfollow,
}

/// What a follow or unfollow did.
#[derive(Clone, Debug)]
pub struct FollowOutcome {
    /// False when the edge was already in the requested state (nothing written).
    pub changed: bool,
    /// The target user.
    pub target: User,
    /// The actor's relation to the target after the change, from the truth.
    pub relation: PairState,
    /// The actor's counters after the change, when it changed.
    pub actor_stats: Option<UserStats>,
    /// The event appended to the outbox, when the edge changed.
    pub event: Option<FollowEvent>,
}

/// Applies `change` to the edge `actor → target`: validates, takes a rate-limit
/// token, then makes one call to PostgreSQL (`kith_change_edge`), which checks
/// both parties, transitions the edge, counts the actor's followings and
/// appends the outbox event in one statement.
pub async fn change_edge(
    app: &App,
    actor: UserId,
    target: UserId,
    change: EdgeChange,
) -> Result<FollowOutcome, ApiError> {
    if actor == target {
        return Err(ApiError::invalid(
            "a user cannot follow or unfollow themselves",
        ));
    }
    app.rate_limiter
        .acquire(&app.redis, &app.keys, actor)
        .await?;
    let event_id = uuid::Uuid::new_v4();
    let row = {
        // Never hold a PostgreSQL connection while waiting for Redis.
        let mut conn = app.pg.get().await?;
        following::change_edge(
            &mut conn,
            actor,
            target,
            change == EdgeChange::Follow,
            event_id,
        )
        .await?
    };
    let outcome = outcome(row, actor, target, change, event_id)?;
    if let (Some(stats), Some(event)) = (&outcome.actor_stats, &outcome.event) {
        write_through_for_actor(app, stats, event).await;
    }
    Ok(outcome)
}

/// The mutation's result from the row `kith_change_edge` returned.
fn outcome(
    row: EdgeChangeRow,
    actor: UserId,
    target: UserId,
    change: EdgeChange,
    event_id: uuid::Uuid,
) -> Result<FollowOutcome, ApiError> {
    match row.outcome.as_str() {
        "ok" => {}
        "actor_suspended" => return Err(ApiError::Forbidden("this account is suspended")),
        "actor_unknown" => {
            return Err(ApiError::Unauthenticated("the token's user does not exist"));
        }
        "target_unknown" => return Err(ApiError::NotFound("user")),
        "target_unfollowable" => return Err(ApiError::invalid("this user cannot be followed")),
        other => {
            return Err(ApiError::internal(anyhow::anyhow!(
                "kith_change_edge answered {other:?}"
            )));
        }
    }
    let missing = || ApiError::internal(anyhow::anyhow!("kith_change_edge: incomplete row"));
    let stats = row.stats();
    let target = User {
        id: target,
        handle: row.target_handle.ok_or_else(missing)?,
        display_name: row.target_display_name.ok_or_else(missing)?,
        status: UserStatus::from_db(row.target_status.as_deref().ok_or_else(missing)?),
    };
    let relation = PairState {
        a_follows_b: row.a_follows_b,
        b_follows_a: row.b_follows_a,
    };
    let (actor_stats, event) = match (row.edge_version, row.edge_followed_at, row.occurred_at) {
        (Some(version), Some(followed_at), Some(occurred_at)) => {
            let event_type = match change {
                EdgeChange::Follow => FollowEventType::FollowCreated,
                EdgeChange::Unfollow => FollowEventType::FollowCanceled,
            };
            let event = FollowEvent::new(
                event_id,
                event_type,
                actor,
                target.id,
                version,
                followed_at,
                occurred_at,
            );
            (Some(stats.ok_or_else(missing)?), Some(event))
        }
        _ => (None, None),
    };
    Ok(FollowOutcome {
        changed: event.is_some(),
        target,
        relation,
        actor_stats,
        event,
    })
}

/// Read-your-writes for the actor: its counter record and cached following
/// list show the change before the mutation returns ([`super::after_commit`]).
async fn write_through_for_actor(app: &App, stats: &UserStats, event: &FollowEvent) {
    let record = [(event.from, CounterRecord::from(stats))];
    let edge = [EdgeState {
        list: ListKey::Following(event.from),
        other: event.to,
        active: event.event_type == FollowEventType::FollowCreated,
        followed_at_ms: event.followed_at_ms,
        version: event.version,
    }];
    super::after_commit(app, &record, &edge).await;
}
