//! The viewer's own account settings.

use std::sync::Arc;

use crate::app::App;
use crate::error::ApiError;
use crate::model::{User, UserId, UserStatus};
use crate::store::failure;
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
    let mut conn = app.pg.get().await?;
    let event_id = uuid::Uuid::new_v4();
    let user = failure::rerun!(users::update_settings(&mut conn, actor, change, event_id).await)?;
    app.read.forget_users(&[actor]);
    let Some(user) = user else {
        return Err(match users::status_of(&mut conn, actor).await? {
            None | Some(UserStatus::Deleted) => {
                ApiError::Unauthenticated("the token's user does not exist")
            }
            Some(_) => ApiError::Forbidden("only an active account can change its settings"),
        });
    };
    drop(conn);
    if change.locked.is_some() || change.hides_collections.is_some() {
        // A change wrote its event: wake the relays.
        super::after_commit(app, &[], &[]).await;
    }
    if change.locked == Some(false) {
        super::requests::start_accepting(app, actor);
    }
    Ok(user)
}
