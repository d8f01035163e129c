//! `dismissSuggestion`: an account leaves another out of its suggestions
//! for `KITH_SUGGESTION_DISMISS_SECS`.

use crate::app::App;
use crate::error::ApiError;
use crate::model::UserId;
use crate::store::failure;
use crate::store::suggestions;

/// Leaves `target` out of `actor`'s suggestions (again: for the whole
/// period from now), for a rate-limit token; drops the kept suggestions.
pub(crate) async fn dismiss(app: &App, actor: UserId, target: UserId) -> Result<(), ApiError> {
    if actor == target {
        return Err(ApiError::invalid("a user is never suggested to itself"));
    }
    let known = app.read.users().by_ids(&app.pg, &[target]).await?;
    if !known
        .iter()
        .any(|u| u.id == target && u.status != crate::model::UserStatus::Deleted)
    {
        return Err(ApiError::NotFound("user"));
    }
    super::take_tokens(app, actor, 1).await?;
    {
        let mut conn = app.pg.get().await?;
        let secs = app.config.suggestions.dismiss_secs;
        failure::rerun!(suggestions::dismiss(&mut conn, actor, target, secs).await)?;
    }
    super::forget_suggestions(app, actor).await;
    Ok(())
}
