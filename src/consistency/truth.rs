//! Repairs of the truth against itself, for `kith reconcile --full` and
//! `--user`: a follow across a block is ended as an unfollow, and a
//! pending follow request beside a follow or across a block is cancelled —
//! each under the pair's lock, with its event. Kith's writes never leave
//! either (a block ends and drops them in its own transaction), so these
//! find faults, not lag; `kith verify` reports them.

use crate::app::App;
use crate::model::UserId;
use crate::pipeline::PipelineError;

/// Ends every follow across a block (of `user`, if given).
pub(crate) async fn end_follows_across(
    app: &App,
    user: Option<UserId>,
) -> Result<Vec<(UserId, UserId)>, PipelineError> {
    let mut conn = app.pg.get().await?;
    let found = crate::store::blocks::follows_across(&mut conn, 10_000).await?;
    let mut ended = Vec::new();
    for row in found {
        let (Some(from), Some(to)) = (UserId::new(row.from_user_id), UserId::new(row.to_user_id))
        else {
            continue;
        };
        if user.is_some_and(|u| u != from && u != to) {
            continue;
        }
        if crate::store::blocks::end_follow_across(&mut conn, from, to, uuid::Uuid::new_v4())
            .await?
        {
            ended.push((from, to));
        }
    }
    Ok(ended)
}

/// Cancels every pending request beside a follow or across a block (of
/// the scope's user, if one).
pub(crate) async fn cancel_stray_requests(
    app: &App,
    user: Option<UserId>,
) -> Result<Vec<(UserId, UserId)>, PipelineError> {
    let mut conn = app.pg.get().await?;
    let found = crate::store::requests::strays(&mut conn, 10_000).await?;
    let mut cancelled = Vec::new();
    for row in found {
        let (Some(from), Some(to)) = (UserId::new(row.from_user_id), UserId::new(row.to_user_id))
        else {
            continue;
        };
        if user.is_some_and(|u| u != from && u != to) {
            continue;
        }
        if crate::store::requests::cancel(&mut conn, from, to).await? {
            cancelled.push((from, to));
        }
    }
    if !cancelled.is_empty() {
        let users: Vec<UserId> = cancelled.iter().flat_map(|(a, b)| [*a, *b]).collect();
        app.read.users.invalidate(&users);
    }
    Ok(cancelled)
}
