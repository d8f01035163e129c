//! Block and unblock: one statement (`kith_block`) writes the block row,
//! ends the follows between the pair both ways — each exactly as an
//! unfollow, with its event and counters — and appends the block's event.

use crate::app::App;
use crate::cache::counters::CounterRecord;
use crate::cache::lists::EdgeState;
use crate::error::ApiError;
use crate::model::{User, UserId};
use crate::paging::ListKey;
use crate::store::blocks;
use crate::store::failure;
use crate::store::following::{EdgeChangeRow, PairState};

use super::follow::{Refusal, described_user};

/// What a block or unblock did.
#[derive(Clone, Debug)]
pub(crate) struct BlockOutcome {
    /// False when the block was in the asked state already.
    pub changed: bool,
    /// The target user.
    pub target: User,
    /// The pair's follows after the change (none after a block).
    pub relation: PairState,
}

/// Blocks (`block`) or unblocks `target` as `actor`: validates, takes a
/// rate-limit token, then one call to PostgreSQL. Afterwards both users'
/// block sets are dropped in this process (others drop them as the
/// database's notice arrives) and the follows it ended show in the caches.
pub(crate) async fn change_block(
    app: &App,
    actor: UserId,
    target: UserId,
    block: bool,
) -> Result<BlockOutcome, ApiError> {
    if actor == target {
        return Err(ApiError::invalid(
            "a user cannot block or unblock themselves",
        ));
    }
    super::take_tokens(app, actor, 1).await?;
    let rows = {
        let mut conn = app.pg.get().await?;
        let (event_id, unfollow_ids) = (
            uuid::Uuid::new_v4(),
            [uuid::Uuid::new_v4(), uuid::Uuid::new_v4()],
        );
        failure::rerun!({
            blocks::change(
                &mut conn,
                actor,
                target,
                block,
                event_id,
                unfollow_ids,
                app.config.writes.max_blocks,
            )
            .await
        })?
    };
    let mut rows = rows.into_iter();
    let first = rows.next().ok_or_else(|| {
        ApiError::internal(anyhow::anyhow!("the block statement answered no row"))
    })?;
    if first.outcome != "ok" {
        return Err(Refusal::of(&first.outcome).into());
    }
    let target_user = described_user(&first, target).ok_or_else(|| {
        ApiError::internal(anyhow::anyhow!("the block statement: incomplete row"))
    })?;
    let ended: Vec<EdgeChangeRow> = rows.collect();
    app.read.forget_users(&[actor, target]);
    let changed: &[UserId] = if first.edge_version.is_some() {
        &[actor, target]
    } else {
        &[]
    };
    write_through(app, actor, target, &ended, changed).await;
    Ok(BlockOutcome {
        changed: first.edge_version.is_some(),
        target: target_user,
        relation: PairState {
            a_follows_b: first.a_follows_b,
            b_follows_a: first.b_follows_a,
        },
    })
}

/// Read-your-writes for the follows a block ended: the followers' counter
/// records and following lists, and the followed users' followers lists;
/// the kept suggestions of `changed` are outdated in the same round trip.
pub(super) async fn write_through(
    app: &App,
    actor: UserId,
    target: UserId,
    ended: &[EdgeChangeRow],
    changed: &[UserId],
) {
    let mut records = Vec::new();
    let mut edges = Vec::new();
    for row in ended {
        let (from, to) = match row.outcome.as_str() {
            "ended_out" => (actor, target),
            "ended_in" => (target, actor),
            _ => continue,
        };
        let (Some(version), Some(followed_at), Some(stats)) =
            (row.edge_version, row.edge_followed_at, row.stats())
        else {
            continue;
        };
        records.push((from, CounterRecord::from(&stats)));
        for (list, other) in [
            (ListKey::Following(from), to),
            (ListKey::Followers(to), from),
        ] {
            edges.push(EdgeState {
                list,
                other,
                active: false,
                followed_at_ms: followed_at.timestamp_millis(),
                version,
            });
        }
    }
    // The block's own event wakes the relays too.
    super::after_commit_for(app, &records, &edges, changed).await;
}
