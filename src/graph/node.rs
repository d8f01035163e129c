//! The Relay `Node` interface and `Query.node`.

use async_graphql::{Context, ID, Interface, Object};

use super::ids::{self, NodeKind};
use super::user::{self, UserNode};
use crate::error::GraphqlResultExt;

/// An object with a global id, refetchable through `Query.node`.
#[derive(Interface)]
#[graphql(field(name = "id", ty = "ID", desc = "Opaque global id."))]
pub(crate) enum Node {
    /// A user.
    User(UserNode),
}

/// `Query.node`.
#[derive(Default)]
pub(crate) struct NodeQuery;

#[Object]
impl NodeQuery {
    /// Fetches any object by its global id; null when it does not exist.
    async fn node(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "A global id, as any node's `id` gives it.")] id: ID,
    ) -> async_graphql::Result<Option<Node>> {
        let (kind, raw) = ids::decode(&id).gql()?;
        match kind {
            NodeKind::User => Ok(user::load_visible(ctx, raw).await?.map(Node::User)),
        }
    }
}
