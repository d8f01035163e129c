//! Follow and unfollow: one statement writes the edge transition, the
//! actor's `followings` and the outbox event — all of them or none.

use std::collections::HashSet;

use crate::app::App;
use crate::cache::counters::CounterRecord;
use crate::cache::lists::EdgeState;
use crate::error::ApiError;
use crate::events::follow::{FollowEvent, FollowEventType};
use crate::model::{User, UserId, UserStatus};
use crate::paging::ListKey;
use crate::store::failure;
use crate::store::following::{self, EdgeChangeRow, EdgeItem, PairState};
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
    /// A request to follow the (locked) target is pending after this call.
    pub requested: bool,
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
/// token, then joins the group commit ([`super::group_commit`]): one call to
/// PostgreSQL (`kith_change_edges`) checks both parties, transitions the
/// edge, counts the actor's followings and appends the outbox event, with
/// the changes other requests asked meanwhile, in one transaction.
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
    super::take_tokens(app, actor, 1).await?;
    let event_id = uuid::Uuid::new_v4();
    // Gathered with the changes other requests ask meanwhile into one
    // transaction; answered once it committed.
    let row = crate::cost::shared_statement(app.edge_writes.change(EdgeItem {
        actor,
        target,
        follow: change == EdgeChange::Follow,
        event_id,
    }))
    .await?;
    let edge = Edge {
        from: actor,
        to: target,
        change,
        event_id,
    };
    let outcome = outcome(row, edge, target)?;
    after_change(app, &outcome, actor, target).await;
    Ok(outcome)
}

/// What every process serving `actor`'s change of its edge to `target`
/// does after it committed: the caches show it at once, and a request made
/// or cancelled drops the pair's cached requests (its event waits in the
/// outbox).
pub(super) async fn after_change(
    app: &App,
    outcome: &FollowOutcome,
    actor: UserId,
    target: UserId,
) {
    write_through(app, std::slice::from_ref(outcome), &[]).await;
    if outcome.changed && outcome.event.is_none() {
        app.read.forget_users(&[actor, target]);
        super::after_commit_for(app, &[], &[], &[actor]).await;
    }
}

/// `owner` makes `follower` stop following them: the follower's unfollow,
/// with its event, counters and caches, asked by the followed user. Rate
/// limited like any edge write (the owner's bucket). The outcome's target is
/// the follower; its relation is the owner's to the follower.
pub(crate) async fn remove_follower(
    app: &App,
    owner: UserId,
    follower: UserId,
) -> Result<FollowOutcome, ApiError> {
    if owner == follower {
        return Err(ApiError::invalid("a user cannot remove themselves"));
    }
    super::take_tokens(app, owner, 1).await?;
    let event_id = uuid::Uuid::new_v4();
    let row = {
        let mut conn = app.pg.get().await?;
        failure::rerun!({ following::remove_follower(&mut conn, owner, follower, event_id).await })?
    };
    let edge = Edge {
        from: follower,
        to: owner,
        change: EdgeChange::Unfollow,
        event_id,
    };
    let mut outcome = outcome(row, edge, follower)?;
    // The owner's followers list shows the removal at once too (the
    // projector's later write of the same version is a no-op).
    let followers_edge = outcome.event.as_ref().map(|event| EdgeState {
        list: ListKey::Followers(owner),
        other: follower,
        active: false,
        followed_at_ms: event.followed_at_ms,
        version: event.version,
    });
    write_through(
        app,
        std::slice::from_ref(&outcome),
        followers_edge.as_slice(),
    )
    .await;
    outcome.relation = PairState {
        a_follows_b: outcome.relation.b_follows_a,
        b_follows_a: outcome.relation.a_follows_b,
    };
    Ok(outcome)
}

/// Most targets one batch call takes.
pub(crate) const MAX_BATCH: usize = 100;

/// Why one target of a batch was not applied (the others were).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TargetError {
    /// The actor itself.
    SelfTarget,
    /// Named earlier in the same list (the first mention applies).
    Duplicate,
    /// No such user.
    NotFound,
    /// A follow of an account that is not active (suspended, deleted).
    NotFollowable,
    /// A follow between two accounts one of which blocks the other.
    Blocked,
    /// A follow past the actor's follow cap (the follows before it that
    /// fit were applied).
    FollowLimit,
}

/// One target's result in a batch.
pub(crate) type TargetResult = Result<FollowOutcome, TargetError>;

/// Applies `change` from `actor` to each of `targets` (at most
/// [`MAX_BATCH`]): one rate-limit token per target, all taken up front
/// (refused whole with `RATE_LIMITED` when the bucket cannot cover them);
/// then one statement — one transaction — that applies every valid target
/// (follows past the follow cap are refused one by one, in order).
/// Results come in the order of `targets`. An actor that may not write fails
/// the whole call; a target that cannot be applied fails only itself.
pub(crate) async fn change_edges(
    app: &App,
    actor: UserId,
    targets: &[UserId],
    change: EdgeChange,
) -> Result<Vec<TargetResult>, ApiError> {
    if targets.len() > MAX_BATCH {
        return Err(ApiError::invalid(format!(
            "at most {MAX_BATCH} users per call"
        )));
    }
    if targets.is_empty() {
        return Ok(Vec::new());
    }
    super::take_tokens(app, actor, targets.len()).await?;
    let mut results: Vec<Option<TargetResult>> = vec![None; targets.len()];
    let mut valid: Vec<(UserId, usize)> = Vec::with_capacity(targets.len());
    let mut seen = HashSet::with_capacity(targets.len());
    for (i, target) in targets.iter().enumerate() {
        if *target == actor {
            results[i] = Some(Err(TargetError::SelfTarget));
        } else if !seen.insert(*target) {
            results[i] = Some(Err(TargetError::Duplicate));
        } else {
            valid.push((*target, i));
        }
    }
    let follow = change == EdgeChange::Follow;
    let items: Vec<EdgeItem> = valid
        .iter()
        .map(|(target, _)| EdgeItem {
            actor,
            target: *target,
            follow,
            event_id: uuid::Uuid::new_v4(),
        })
        .collect();
    let rows = if items.is_empty() {
        Vec::new()
    } else {
        let mut conn = app.pg.get().await?;
        let cap = following::FollowCap::of(&app.config);
        failure::rerun!(following::change_set(&mut conn, &items, cap).await)?
    };
    let mut applied = Vec::new();
    for ((row, item), (_, index)) in rows.into_iter().zip(items).zip(&valid) {
        let edge = Edge {
            from: actor,
            to: item.target,
            change,
            event_id: item.event_id,
        };
        results[*index] = Some(match outcome(row, edge, item.target) {
            Ok(outcome) => {
                applied.push(outcome.clone());
                Ok(outcome)
            }
            Err(Refusal::TargetUnknown) => Err(TargetError::NotFound),
            Err(Refusal::TargetUnfollowable | Refusal::TargetMoved) => {
                Err(TargetError::NotFollowable)
            }
            Err(Refusal::Blocked) => Err(TargetError::Blocked),
            Err(Refusal::FollowLimit) => Err(TargetError::FollowLimit),
            // The actor's refusal comes on every row, and nothing changed.
            Err(other) => return Err(other.into()),
        });
    }
    write_through(app, &applied, &[]).await;
    let requests: Vec<UserId> = applied
        .iter()
        .filter(|o| o.changed && o.event.is_none())
        .map(|o| o.target.id)
        .collect();
    if !requests.is_empty() {
        let mut users = requests;
        users.push(actor);
        app.read.forget_users(&users);
        // As a single request does: the actor's suggestions are outdated.
        super::after_commit_for(app, &[], &[], &[actor]).await;
    }
    Ok(results
        .into_iter()
        .map(|r| r.expect("every target has a result"))
        .collect())
}

/// One edge transition asked of PostgreSQL.
#[derive(Clone, Copy, Debug)]
pub(super) struct Edge {
    pub(super) from: UserId,
    pub(super) to: UserId,
    pub(super) change: EdgeChange,
    pub(super) event_id: uuid::Uuid,
}

/// Why PostgreSQL did nothing (the `outcome` column).
#[derive(Debug)]
pub(super) enum Refusal {
    ActorUnknown,
    ActorSuspended,
    /// A moved account accepting a request.
    ActorMoved,
    TargetUnknown,
    TargetUnfollowable,
    TargetMoved,
    Blocked,
    BlockLimit,
    CloseFriendsLimit,
    FollowLimit,
    Unexpected(String),
}

impl Refusal {
    /// What an edge transition's `outcome` says: accepted (`true` when a
    /// follow of a locked account made, or found, a pending request; an
    /// unfollow that cancelled one moved no edge either), or refused.
    pub(super) fn check(outcome: &str) -> Result<bool, Self> {
        match outcome {
            "ok" | "request_canceled" => Ok(false),
            "requested" => Ok(true),
            refused => Err(Self::of(refused)),
        }
    }

    /// The refusal an `outcome` other than `ok` names.
    pub(super) fn of(outcome: &str) -> Self {
        match outcome {
            "actor_suspended" => Self::ActorSuspended,
            "actor_unknown" => Self::ActorUnknown,
            "actor_moved" => Self::ActorMoved,
            "target_unknown" => Self::TargetUnknown,
            "target_unfollowable" => Self::TargetUnfollowable,
            "target_moved" => Self::TargetMoved,
            "blocked" => Self::Blocked,
            "block_limit" => Self::BlockLimit,
            "close_friends_limit" => Self::CloseFriendsLimit,
            "follow_limit" => Self::FollowLimit,
            other => Self::Unexpected(format!("the edge transition answered {other:?}")),
        }
    }
}

impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::ActorSuspended => ApiError::Forbidden("this account is suspended"),
            Refusal::ActorUnknown => ApiError::Unauthenticated("the token's user does not exist"),
            Refusal::ActorMoved => ApiError::Moved(
                "this account has moved: those who asked to follow it are asked of its new account",
            ),
            Refusal::TargetUnknown => ApiError::NotFound("user"),
            Refusal::TargetUnfollowable => ApiError::invalid("this user cannot be followed"),
            Refusal::TargetMoved => {
                ApiError::Moved("this account has moved: follow the account its movedTo names")
            }
            Refusal::Blocked => ApiError::Blocked,
            Refusal::BlockLimit => ApiError::BlockLimit,
            Refusal::CloseFriendsLimit => ApiError::CloseFriendsLimit,
            Refusal::FollowLimit => ApiError::FollowLimit,
            Refusal::Unexpected(why) => ApiError::internal(anyhow::anyhow!("{why}")),
        }
    }
}

/// What a follow or unfollow of `target` by `actor` did, from the row
/// PostgreSQL returned (its `outcome` one of the changes, not a refusal).
pub(super) fn outcome_of(
    row: EdgeChangeRow,
    actor: UserId,
    target: UserId,
    change: EdgeChange,
    event_id: uuid::Uuid,
) -> Result<FollowOutcome, Refusal> {
    let edge = Edge {
        from: actor,
        to: target,
        change,
        event_id,
    };
    outcome(row, edge, target)
}

/// The result of `edge` from the row PostgreSQL returned; `described` is the
/// user the row's target columns describe.
pub(super) fn outcome(
    row: EdgeChangeRow,
    edge: Edge,
    described: UserId,
) -> Result<FollowOutcome, Refusal> {
    let requested = Refusal::check(&row.outcome)?;
    let missing = || Refusal::Unexpected("the edge transition: incomplete row".into());
    let target = described_user(&row, described).ok_or_else(missing)?;
    let relation = PairState {
        a_follows_b: row.a_follows_b,
        b_follows_a: row.b_follows_a,
    };
    if row.outcome != "ok" {
        return Ok(FollowOutcome {
            changed: row.edge_version.is_some(),
            requested,
            target,
            relation,
            actor_stats: None,
            event: None,
        });
    }
    let stats = row.stats();
    let (actor_stats, event) = match (row.edge_version, row.edge_followed_at, row.occurred_at) {
        (Some(version), Some(followed_at), Some(occurred_at)) => {
            let event_type = match edge.change {
                EdgeChange::Follow => FollowEventType::FollowCreated,
                EdgeChange::Unfollow => FollowEventType::FollowCanceled,
            };
            let event = FollowEvent::new(
                edge.event_id,
                event_type,
                edge.from,
                edge.to,
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
        requested: false,
        target,
        relation,
        actor_stats,
        event,
    })
}

/// The user `described` as the row's target columns describe it.
pub(super) fn described_user(row: &EdgeChangeRow, described: UserId) -> Option<User> {
    Some(User {
        id: described,
        handle: row.target_handle.clone()?,
        display_name: row.target_display_name.clone()?,
        status: UserStatus::from_db(row.target_status.as_deref()?),
        locked: row.target_locked?,
        hides_collections: row.target_hides_collections?,
        // Not among the row's columns: the `User` object reads it from the
        // held row (`User.movedTo`).
        moved_to: None,
    })
}

/// Read-your-writes for the edges' owners: the counter record of each
/// event's follower (its latest version) and its cached following list,
/// plus `extra` list edges, show the changes before the mutation returns
/// ([`super::after_commit`]). Nothing to do when nothing changed.
pub(super) async fn write_through(app: &App, outcomes: &[FollowOutcome], extra: &[EdgeState]) {
    let mut records: Vec<(UserId, CounterRecord)> = Vec::new();
    let mut edges: Vec<EdgeState> = extra.to_vec();
    for outcome in outcomes {
        let (Some(stats), Some(event)) = (&outcome.actor_stats, &outcome.event) else {
            continue;
        };
        let latest = CounterRecord::from(stats);
        match records.iter_mut().find(|(user, _)| *user == event.from) {
            Some((_, record)) if record.version >= latest.version => {}
            Some((_, record)) => *record = latest,
            None => records.push((event.from, latest)),
        }
        edges.push(EdgeState {
            list: ListKey::Following(event.from),
            other: event.to,
            active: event.event_type == FollowEventType::FollowCreated,
            followed_at_ms: event.followed_at_ms,
            version: event.version,
        });
    }
    if !edges.is_empty() {
        super::after_commit(app, &records, &edges).await;
    }
}
