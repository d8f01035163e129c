//! The root queries that find users: by id, by handle, many at once, and
//! the viewer's relation to many.

use async_graphql::{Context, ErrorExtensions as _, ID, Object};

use super::loaders::Loaders;
use super::relation::Relationship;
use super::user::UserNode;
use super::user::load_visible;
use super::{ids, viewer};
use crate::error::{ApiError, GraphqlResultExt};
use crate::model::UserId;
use crate::store::following::PairState;

/// No handle is longer; a longer one is not looked up.
const MAX_HANDLE_CHARS: usize = 64;

/// Decodes up to 100 global user ids.
pub(crate) fn decode_many(ids: &[ID]) -> Result<Vec<UserId>, ApiError> {
    if ids.len() > 100 {
        return Err(ApiError::invalid("at most 100 ids per call"));
    }
    ids.iter().map(ids::decode_user).collect()
}

/// Queries that find users.
#[derive(Default)]
pub(crate) struct UserQuery;

#[Object]
impl UserQuery {
    /// The user with this global id; null when unknown or deleted.
    async fn user(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Global id of the user.")] id: ID,
    ) -> async_graphql::Result<Option<UserNode>> {
        let id = ids::decode_user(&id).gql()?;
        load_visible(ctx, id).await
    }

    /// The user with this handle; null when unknown or deleted.
    async fn user_by_handle(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The handle, as the user chose it (at most 64 characters).")]
        handle: String,
    ) -> async_graphql::Result<Option<UserNode>> {
        if handle.chars().count() > MAX_HANDLE_CHARS {
            return Ok(None);
        }
        let user = ctx
            .data_unchecked::<Loaders>()
            .user_by_handle(handle)
            .await
            .map_err(|e| e.as_ref().extend())?;
        Ok(user.map(UserNode))
    }

    /// Up to 100 users by global id, in the order asked; null where unknown or deleted.
    #[graphql(complexity = "ids.len() * child_complexity + 1")]
    async fn users(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Global ids of the users, at most 100.")] ids: Vec<ID>,
    ) -> async_graphql::Result<Vec<Option<UserNode>>> {
        let ids = decode_many(&ids).gql()?;
        let found = ctx
            .data_unchecked::<Loaders>()
            .users(&ids)
            .await
            .map_err(|e| e.as_ref().extend())?;
        Ok(ids
            .iter()
            .map(|id| found.get(id).cloned().map(UserNode))
            .collect())
    }

    /// The viewer's relation to up to 100 users, in the order asked; null
    /// where the user is unknown or deleted. Requires a signed-in viewer.
    #[graphql(complexity = "ids.len() * child_complexity + 1")]
    async fn relationships(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Global ids of the users, at most 100.")] ids: Vec<ID>,
    ) -> async_graphql::Result<Vec<Option<Relationship>>> {
        let me = viewer(ctx).require().gql()?;
        let ids = decode_many(&ids).gql()?;
        let loaders = ctx.data_unchecked::<Loaders>();
        let pairs: Vec<(UserId, UserId)> = ids.iter().map(|id| (me, *id)).collect();
        let (users, relations) = tokio::join!(loaders.users(&ids), loaders.relations(&pairs));
        let users = users.map_err(|e| e.as_ref().extend())?;
        let relations = relations.map_err(|e| e.as_ref().extend())?;
        Ok(ids
            .iter()
            .map(|id| {
                users.contains_key(id).then(|| {
                    let state = if *id == me {
                        PairState::default()
                    } else {
                        relations.get(&(me, *id)).copied().unwrap_or_default()
                    };
                    Relationship::between(me, *id, state)
                })
            })
            .collect())
    }

    /// The signed-in user; null when anonymous.
    async fn viewer(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<UserNode>> {
        let Some(id) = viewer(ctx).optional().gql()? else {
            return Ok(None);
        };
        load_visible(ctx, id).await
    }
}
