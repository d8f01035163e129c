//! Follow and unfollow: one transaction writes the edge transition, the
//! actor's `followings` and the outbox event — all of them or none.

use diesel_async::AsyncConnection as _;

use crate::app::App;
use crate::cache::counters::CounterRecord;
use crate::cache::lists::EdgeState;
use crate::cache::{self, ListKey};
use crate::error::ApiError;
use crate::model::{User, UserId, UserStatus};
use crate::pipeline::events::{FollowEvent, FollowEventType};
use crate::store::following::{self, PairState};
use crate::store::stats::{self, UserStats};
use crate::store::{hidden_edges, outbox, users};

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
/// token, then runs one transaction.
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
    let mut conn = app.pg.get().await?;
    let outcome = conn
        .transaction::<_, ApiError, _>(async move |conn| {
            let target = check_parties(conn, actor, target, change).await?;
            let transition = match change {
                EdgeChange::Follow => following::activate(conn, actor, target.id).await?,
                EdgeChange::Unfollow => following::deactivate(conn, actor, target.id).await?,
            };
            let (actor_stats, event) = match transition {
                // An unfollow of an edge hidden with a suspended account:
                // its restore must not bring it back.
                None if change == EdgeChange::Unfollow => {
                    hidden_edges::forget(conn, actor, target.id).await?;
                    (None, None)
                }
                None => (None, None),
                Some(t) => {
                    let (delta, event_type) = match change {
                        EdgeChange::Follow => (1, FollowEventType::FollowCreated),
                        EdgeChange::Unfollow => (-1, FollowEventType::FollowCanceled),
                    };
                    let stats = stats::add_followings(conn, actor, delta).await?;
                    let event = FollowEvent::new(
                        event_type,
                        actor,
                        target.id,
                        t.version,
                        t.followed_at,
                        t.occurred_at,
                    );
                    outbox::append(conn, &event).await?;
                    (Some(stats), Some(event))
                }
            };
            let relation = following::pair_state(conn, actor, target.id).await?;
            Ok(FollowOutcome {
                changed: event.is_some(),
                target,
                relation,
                actor_stats,
                event,
            })
        })
        .await?;
    // Never hold a PostgreSQL connection while waiting for Redis.
    drop(conn);
    if let (Some(stats), Some(event)) = (&outcome.actor_stats, &outcome.event) {
        write_through_for_actor(app, stats, event).await;
    }
    Ok(outcome)
}

/// Read-your-writes: the actor's counter record and cached following list
/// show the change before the mutation returns. Both writes are version-guarded
/// no-ops when the projector (or a later mutation) got there first. A failure
/// here is only logged: the change is committed, and the projector repairs
/// the caches when the event reaches it.
async fn write_through_for_actor(app: &App, stats: &UserStats, event: &FollowEvent) {
    let record = [(event.from, CounterRecord::from(stats))];
    let edge = [EdgeState {
        list: ListKey::Following(event.from),
        other: event.to,
        active: event.event_type == FollowEventType::FollowCreated,
        followed_at_ms: event.followed_at_ms,
        version: event.version,
    }];
    let result = async {
        let mut redis = app.redis.get().await.map_err(|e| e.to_string())?;
        cache::write_through(&mut *redis, &app.keys, &record, &edge)
            .await
            .map_err(|e| e.to_string())
    };
    if let Err(error) = result.await {
        tracing::warn!(%error, actor = %event.from, "read-your-writes cache update failed");
    }
    app.hot_lists
        .invalidate(&ListKey::Following(event.from))
        .await;
}

/// Checks that the actor may act and the target may be (un)followed.
async fn check_parties(
    conn: &mut crate::store::PgConn,
    actor: UserId,
    target: UserId,
    change: EdgeChange,
) -> Result<User, ApiError> {
    // Both parties in one statement: this runs inside every follow.
    let parties = users::find_many(conn, &[actor, target]).await?;
    let status_of = |id: UserId| parties.iter().find(|u| u.id == id).map(|u| u.status);
    match status_of(actor) {
        Some(UserStatus::Active) => {}
        Some(UserStatus::Suspended) => {
            return Err(ApiError::Forbidden("this account is suspended"));
        }
        Some(UserStatus::Deleted) | None => {
            return Err(ApiError::Unauthenticated("the token's user does not exist"));
        }
    }
    let target = parties
        .into_iter()
        .find(|u| u.id == target)
        .ok_or(ApiError::NotFound("user"))?;
    if change == EdgeChange::Follow && target.status != UserStatus::Active {
        return Err(ApiError::invalid("this user cannot be followed"));
    }
    Ok(target)
}
