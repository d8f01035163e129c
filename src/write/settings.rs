//! The viewer's own account settings.

use std::sync::Arc;

use crate::app::App;
use crate::error::ApiError;
use crate::model::{User, UserId};
use crate::store::users::{self, SettingsChange};

/// Sets the settings given (`None`: left as they are) on `actor`'s own
/// account, for a rate-limit token. The row's change is dropped from this
/// process's user cache at once, and from the others' as PostgreSQL's
/// notice arrives. An account unlocked by the change has its pending
/// requests accepted in the background, batch by batch (the sweeper
/// finishes what a dying process left).
pub(crate) async fn update_settings(
    app: &Arc<App>,
    actor: UserId,
    change: SettingsChange,
) -> Result<User, ApiError> {
    super::take_tokens(app, actor, 1).await?;
    let user = {
        let mut conn = app.pg.get().await?;
        users::update_settings(&mut conn, actor, change).await?
    };
    app.read.users.invalidate(&[actor]);
    let user = user.ok_or(ApiError::Forbidden(
        "only an active account can change its settings",
    ))?;
    if change.locked == Some(false) {
        super::requests::start_accepting(app, actor);
    }
    Ok(user)
}
