//! Close friends: one statement (`kith_close_friend`) writes a listing and
//! its event. A listing changes no follow and no public list.

use crate::app::App;
use crate::error::ApiError;
use crate::model::{User, UserId};
use crate::store::following::PairState;
use crate::store::{close_friends, failure};

use super::follow::{Refusal, described_user};

/// What an addition or removal did.
#[derive(Clone, Debug)]
pub(crate) struct CloseFriendOutcome {
    /// False when the listing was in the asked state already.
    pub changed: bool,
    /// The account added or removed.
    pub target: User,
    /// The pair's follows.
    pub relation: PairState,
}

/// Adds (`add`) or removes `target` in `actor`'s close friends: validates,
/// takes a rate-limit token, then one call to PostgreSQL; both users'
/// boundaries are dropped in this process (others drop them on the
/// database's notice).
pub(crate) async fn change_close_friend(
    app: &App,
    actor: UserId,
    target: UserId,
    add: bool,
) -> Result<CloseFriendOutcome, ApiError> {
    if actor == target {
        return Err(ApiError::invalid(
            "a user cannot add or remove themselves in their close friends",
        ));
    }
    super::take_tokens(app, actor, 1).await?;
    let event_id = uuid::Uuid::new_v4();
    let row = {
        let mut conn = app.pg.get().await?;
        failure::rerun!({
            close_friends::change(
                &mut conn,
                actor,
                target,
                add,
                event_id,
                app.config.writes.max_close_friends,
            )
            .await
        })?
    };
    if row.outcome != "ok" {
        return Err(Refusal::of(&row.outcome).into());
    }
    let target_user = described_user(&row, target).ok_or_else(|| {
        ApiError::internal(anyhow::anyhow!(
            "the close-friend statement: incomplete row"
        ))
    })?;
    app.read.forget_users(&[actor, target]);
    let changed = row.edge_version.is_some();
    if changed {
        // The event waits in the outbox: wake the relays.
        super::after_commit(app, &[], &[]).await;
    }
    Ok(CloseFriendOutcome {
        changed,
        target: target_user,
        relation: PairState {
            a_follows_b: row.a_follows_b,
            b_follows_a: row.b_follows_a,
        },
    })
}
