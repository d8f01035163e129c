//! A move's follower at the follow cap. Its follow of the new account
//! would pass the cap only until the move's unfollow of the old account:
//! the net change is none. So it makes both in one call of the group
//! commit's statement, which counts an unfollow of the same call against
//! the cap, inside a savepoint that is undone if the follow is refused
//! all the same (an account past the cap already, say): then the follower
//! stays with the old account, left behind with `FOLLOW_LIMIT`.

use diesel_async::AsyncConnection as _;

use crate::error::ApiError;
use crate::model::UserId;
use crate::store::following::{self, EdgeItem, FollowCap};
use crate::store::moves::Follower;
use crate::store::{PgConn, follow_options};

use super::follow::{EdgeChange, FollowOutcome, Refusal, outcome_of};

/// What bringing one follower at the cap along made.
pub(super) struct AtCap {
    /// Whether the new account was asked (it is locked), not followed.
    pub requested: bool,
    /// The follow (or request) of the new account and the unfollow of the
    /// old, for the caches.
    pub follows: Vec<FollowOutcome>,
}

/// Why the savepoint ends undone.
enum Undone {
    /// The follow was refused even with the unfollow counted: why, if it
    /// said (the new account or the follower may have changed since).
    Refused(Option<Refusal>),
    Failed(ApiError),
}

impl From<diesel::result::Error> for Undone {
    fn from(e: diesel::result::Error) -> Self {
        Self::Failed(e.into())
    }
}

/// Brings `follower` of `from`, whose follow of `to` the cap refused,
/// along in `conn`'s transaction; the refusal when it is refused still.
pub(super) async fn bring(
    conn: &mut PgConn,
    cap: FollowCap,
    (from, to): (UserId, UserId),
    actor: UserId,
    follower: &Follower,
) -> Result<Result<AtCap, Option<Refusal>>, ApiError> {
    let items = [
        EdgeItem {
            actor,
            target: from,
            follow: false,
            event_id: uuid::Uuid::new_v4(),
        },
        EdgeItem {
            actor,
            target: to,
            follow: true,
            event_id: uuid::Uuid::new_v4(),
        },
    ];
    let done = conn
        .transaction::<_, Undone, _>(async |conn| {
            let mut rows = following::change_set(conn, &items, cap).await?;
            let (Some(made), Some(ended)) = (rows.pop(), rows.pop()) else {
                return Err(Undone::Refused(None));
            };
            let requested = match Refusal::check(&made.outcome) {
                Ok(requested) if made.edge_version.is_some() => requested,
                Ok(_) => return Err(Undone::Refused(None)),
                Err(refusal) => return Err(Undone::Refused(Some(refusal))),
            };
            carry_options(conn, actor, to, follower)
                .await
                .map_err(Undone::Failed)?;
            let mut follows = Vec::new();
            for (row, item, change) in [
                (ended, &items[0], EdgeChange::Unfollow),
                (made, &items[1], EdgeChange::Follow),
            ] {
                if row.edge_version.is_some()
                    && let Ok(outcome) = outcome_of(row, actor, item.target, change, item.event_id)
                {
                    follows.push(outcome);
                }
            }
            Ok(AtCap { requested, follows })
        })
        .await;
    match done {
        Ok(at_cap) => Ok(Ok(at_cap)),
        Err(Undone::Refused(refusal)) => Ok(Err(refusal)),
        Err(Undone::Failed(e)) => Err(e),
    }
}

/// The follow (or request) of `to` that `actor` was just made takes the
/// options of the follow (or request) of the old account it replaces.
pub(super) async fn carry_options(
    conn: &mut PgConn,
    actor: UserId,
    to: UserId,
    follower: &Follower,
) -> Result<(), ApiError> {
    if let Some(options) = follower.options() {
        let change = follow_options::OptionsChange::from(&options);
        follow_options::set(conn, actor, to, &change, uuid::Uuid::new_v4()).await?;
    }
    Ok(())
}
