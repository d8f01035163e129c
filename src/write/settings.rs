//! The viewer's own account settings.

use crate::app::App;
use crate::error::ApiError;
use crate::model::{User, UserId};
use crate::store::users;

/// Sets the settings given (`None`: left as they are) on `actor`'s own
/// account, for a rate-limit token. The row's change is dropped from this
/// process's user cache at once, and from the others' as PostgreSQL's
/// notice arrives.
pub(crate) async fn update_settings(
    app: &App,
    actor: UserId,
    hides_collections: Option<bool>,
) -> Result<User, ApiError> {
    super::take_tokens(app, actor, 1).await?;
    let user = {
        let mut conn = app.pg.get().await?;
        users::update_settings(&mut conn, actor, hides_collections).await?
    };
    app.read.users.invalidate(&[actor]);
    user.ok_or(ApiError::Forbidden(
        "only an active account can change its settings",
    ))
}
