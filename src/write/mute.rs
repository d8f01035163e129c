//! Mute and unmute: one statement (`kith_mute`) writes the mute and its
//! event. A mute changes no follow and no list.

use crate::app::App;
use crate::error::ApiError;
use crate::model::{User, UserId};
use crate::store::failure;
use crate::store::following::PairState;
use crate::store::mutes;

use super::follow::{Refusal, described_user};

/// Longest mute with an end: ten years (longer: mute until unmuted).
pub(crate) const MAX_MUTE_SECS: i64 = 10 * 365 * 24 * 3600;

/// What a mute or unmute did.
#[derive(Clone, Debug)]
pub(crate) struct MuteOutcome {
    /// False when nothing changed.
    pub changed: bool,
    /// The target user.
    pub target: User,
    /// The pair's follows.
    pub relation: PairState,
    /// When a mute made now ends by itself (database time), if it does.
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// Mutes (`seconds`: for that long, or until unmuted when `None`) or,
/// with `mute` false, unmutes `target` as `actor`: validates, takes a
/// rate-limit token, then one call to PostgreSQL; both users' boundaries
/// are dropped in this process (others drop them on the database's notice).
pub(crate) async fn change_mute(
    app: &App,
    actor: UserId,
    target: UserId,
    mute: bool,
    seconds: Option<i64>,
) -> Result<MuteOutcome, ApiError> {
    if actor == target {
        return Err(ApiError::invalid("a user cannot mute or unmute themselves"));
    }
    if let Some(s) = seconds
        && !(1..=MAX_MUTE_SECS).contains(&s)
    {
        return Err(ApiError::invalid(format!(
            "`durationSecs` must be between 1 and {MAX_MUTE_SECS}, or null for no end"
        )));
    }
    super::take_tokens(app, actor, 1).await?;
    let row = {
        let mut conn = app.pg.get().await?;
        let event_id = uuid::Uuid::new_v4();
        failure::rerun!({ mutes::change(&mut conn, actor, target, mute, seconds, event_id).await })?
    };
    if row.outcome != "ok" {
        return Err(Refusal::of(&row.outcome).into());
    }
    let target_user = described_user(&row, target)
        .ok_or_else(|| ApiError::internal(anyhow::anyhow!("the mute statement: incomplete row")))?;
    app.read.forget_users(&[actor, target]);
    let changed = row.edge_version.is_some();
    if changed {
        // The event waits in the outbox: wake the relays.
        super::after_commit_for(app, &[], &[], &[actor]).await;
    }
    Ok(MuteOutcome {
        changed,
        target: target_user,
        relation: PairState {
            a_follows_b: row.a_follows_b,
            b_follows_a: row.b_follows_a,
        },
        expires_at: match (mute, changed, seconds, row.occurred_at) {
            (true, true, Some(s), Some(at)) => Some(at + chrono::Duration::seconds(s)),
            _ => None,
        },
    })
}
