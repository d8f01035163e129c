//! Kith as a subgraph of a GraphQL Federation 2 supergraph.
//!
//! `User` is an entity keyed by its global id — the opaque id other
//! services hold — so a gateway that has a user's id from another subgraph
//! (a post's author) asks Kith for the rest through `_entities`. Every
//! representation of one request goes through the request's loaders at
//! once: one batch for the users, one for their counters and relations, as
//! for a page of a list. The Relay types other subgraphs also define
//! (`PageInfo`, the connection shapes) are `@shareable`.
//!
//! The subgraph schema (`schema.subgraph.graphql`, what `_service { sdl }`
//! answers) is committed beside the plain one; composition reads it.

use async_graphql::{Any, Context, ID, Object, Value};

use super::connection;
use super::ids;
use super::loaders::Loaders;
use super::user::UserNode;
use super::user::load_visible;
use crate::model::UserId;

/// The entity resolvers of `_entities`.
#[derive(Default)]
pub(crate) struct EntityQuery;

#[Object]
impl EntityQuery {
    /// A `User` representation: the user, or null for an id that is not a
    /// user's global id, an account Kith does not know, or one deleted,
    /// without failing the other representations of the request. (A
    /// representation without an `id` fails the whole call, as
    /// async-graphql reads keys.)
    #[graphql(entity)]
    async fn find_user_by_id(
        &self,
        ctx: &Context<'_>,
        id: ID,
    ) -> async_graphql::Result<Option<UserNode>> {
        let Ok(user) = ids::decode_user(&id) else {
            return Ok(None);
        };
        let loaders = ctx.data_unchecked::<Loaders>();
        // Every representation's user at once, as a page's: `ctx` is the
        // `_entities` field's, with all of them.
        loaders
            .prime_entities_once(ctx.item.pos, async {
                let Ok(representations) = ctx.param_value::<Vec<Any>>("representations", None)
                else {
                    return;
                };
                let users: Vec<UserId> = representations
                    .1
                    .iter()
                    .filter_map(|r| match &r.0 {
                        Value::Object(fields) => match fields.get("id") {
                            Some(Value::String(id)) => ids::decode_user(&ID(id.clone())).ok(),
                            _ => None,
                        },
                        _ => None,
                    })
                    .collect();
                connection::prime(ctx, loaders, &users, ctx.look_ahead()).await;
            })
            .await;
        load_visible(ctx, user).await
    }
}

/// The subgraph schema in SDL, as committed in `schema.subgraph.graphql`
/// and answered by `_service { sdl }`: the Federation 2 `@link`, the
/// entities' `@key`s and the `@shareable` types.
pub fn subgraph_sdl() -> String {
    super::builder().finish().sdl_with_options(
        async_graphql::SDLExportOptions::new()
            .federation()
            .compose_directive(),
    )
}
