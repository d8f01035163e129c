//! Answers to follow requests: the locked account accepts (the request
//! ends and the follow is made, exactly as any follow) or rejects one; an
//! unlock accepts every pending request in bounded batches.

use std::sync::Arc;

use crate::app::App;
use crate::cache::counters::CounterRecord;
use crate::cache::lists::EdgeState;
use crate::error::ApiError;
use crate::error::PipelineError;
use crate::model::UserId;
use crate::paging::ListKey;
use crate::store::failure;
use crate::store::following::PairState;
use crate::store::requests;

use super::follow::{FollowOutcome, Refusal, described_user};

/// Requests accepted per transaction when an account unlocks.
const BATCH: i32 = 500;

/// `owner` accepts (`accept`) or rejects `requester`'s pending request,
/// for a rate-limit token. The outcome's target is the requester; its
/// relation is the owner's to the requester. Nothing pending: `changed`
/// false.
pub(crate) async fn answer(
    app: &App,
    owner: UserId,
    requester: UserId,
    accept: bool,
) -> Result<FollowOutcome, ApiError> {
    if owner == requester {
        return Err(ApiError::invalid("a user cannot answer its own request"));
    }
    super::take_tokens(app, owner, 1).await?;
    let row = {
        let mut conn = app.pg.get().await?;
        let event_ids = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
        failure::rerun!({
            requests::answer(
                &mut conn,
                owner,
                requester,
                accept,
                event_ids.0,
                event_ids.1,
                crate::store::following::FollowCap::of(&app.config),
            )
            .await
        })?
    };
    if row.outcome != "answered" && row.outcome != "ok" {
        return Err(Refusal::of(&row.outcome).into());
    }
    let target = described_user(&row, requester).ok_or_else(|| {
        ApiError::internal(anyhow::anyhow!("the answer statement: incomplete row"))
    })?;
    let changed = row.outcome == "answered";
    if changed {
        app.read.forget_users(&[owner, requester]);
        // Read-your-writes for the follow an accept made: the requester's
        // counters and following list, the owner's followers list.
        let (mut records, mut edges) = (Vec::new(), Vec::new());
        if let (Some(version), Some(followed_at), Some(stats)) =
            (row.edge_version, row.edge_followed_at, row.stats())
        {
            records.push((requester, CounterRecord::from(&stats)));
            for (list, other) in [
                (ListKey::Following(requester), owner),
                (ListKey::Followers(owner), requester),
            ] {
                edges.push(EdgeState {
                    list,
                    other,
                    active: true,
                    followed_at_ms: followed_at.timestamp_millis(),
                    version,
                });
            }
        }
        super::after_commit(app, &records, &edges).await;
    }
    Ok(FollowOutcome {
        changed,
        requested: false,
        target,
        relation: PairState {
            a_follows_b: row.a_follows_b,
            b_follows_a: row.b_follows_a,
        },
        actor_stats: None,
        event: None,
    })
}

/// Accepts every request pending at `owner`, if its account is not
/// locked, batch by batch (each one transaction); returns how many became
/// follows. Restart-safe: what is left is found again by [`finish_unlocks`].
pub(crate) async fn accept_all(app: &App, owner: UserId) -> Result<u64, PipelineError> {
    let mut accepted = 0;
    loop {
        let batch = {
            let mut conn = app.pg.get().await?;
            let cap = crate::store::following::FollowCap::of(&app.config);
            failure::rerun!(requests::accept_batch(&mut conn, owner, BATCH, cap).await)?
        };
        if batch.is_empty() {
            return Ok(accepted);
        }
        accepted += batch.iter().filter(|a| a.outcome == "answered").count() as u64;
        let mut users: Vec<UserId> = batch
            .iter()
            .filter_map(|a| UserId::new(a.requester))
            .collect();
        users.push(owner);
        app.read.forget_users(&users);
        crate::pipeline::wake::wake(app).await;
    }
}

/// Accepts the requests left pending at accounts that unlocked (an unlock
/// whose process died mid-way, or a request that raced the unlock); returns
/// how many became follows.
pub(crate) async fn finish_unlocks(app: &App) -> Result<u64, PipelineError> {
    let owners = {
        let mut conn = app.pg.get().await?;
        requests::unlocked_with_pending(&mut conn, 100).await?
    };
    let mut accepted = 0;
    for owner in owners {
        accepted += accept_all(app, owner).await?;
    }
    Ok(accepted)
}

/// Starts accepting `owner`'s pending requests in the background.
pub(crate) fn start_accepting(app: &Arc<App>, owner: UserId) {
    let app = app.clone();
    tokio::spawn(async move {
        if let Err(error) = accept_all(&app, owner).await {
            tracing::warn!(%error, %owner, "unlock: requests left pending; the sweeper accepts them");
        }
    });
}
