//! `type User` and the queries that find users.

use async_graphql::{Context, ID, Object};

use super::{app, ids, viewer};
use crate::error::{ApiError, GraphqlResultExt};
use crate::model::{User, UserId, UserStatus};
use crate::store::users;

/// A user's public profile. Private fields (email, phone) are never exposed.
pub struct UserNode(pub User);

/// A user's public profile.
#[Object(name = "User")]
impl UserNode {
    /// Opaque global id.
    pub async fn id(&self) -> ID {
        ids::user_id(self.0.id)
    }

    /// Unique public handle.
    async fn handle(&self) -> &str {
        &self.0.handle
    }

    /// Name shown in the UI.
    async fn display_name(&self) -> &str {
        &self.0.display_name
    }
}

/// Loads a user that readers may see (deleted accounts are invisible).
pub(crate) async fn load_visible(
    ctx: &Context<'_>,
    id: UserId,
) -> Result<Option<UserNode>, ApiError> {
    let mut conn = app(ctx).pg.get().await?;
    let user = users::find(&mut conn, id).await?;
    Ok(visible(user))
}

fn visible(user: Option<User>) -> Option<UserNode> {
    user.filter(|u| u.status != UserStatus::Deleted)
        .map(UserNode)
}

/// Queries that find users.
#[derive(Default)]
pub struct UserQuery;

#[Object]
impl UserQuery {
    /// The user with this global id; null when unknown or deleted.
    async fn user(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Option<UserNode>> {
        let id = ids::decode_user(&id).gql()?;
        load_visible(ctx, id).await.gql()
    }

    /// The user with this handle; null when unknown or deleted.
    async fn user_by_handle(
        &self,
        ctx: &Context<'_>,
        handle: String,
    ) -> async_graphql::Result<Option<UserNode>> {
        let lookup = async {
            let mut conn = app(ctx).pg.get().await?;
            Ok::<_, ApiError>(visible(users::find_by_handle(&mut conn, &handle).await?))
        };
        lookup.await.gql()
    }

    /// The signed-in user; null when anonymous.
    async fn viewer(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<UserNode>> {
        let Some(id) = viewer(ctx).optional().gql()? else {
            return Ok(None);
        };
        load_visible(ctx, id).await.gql()
    }
}
