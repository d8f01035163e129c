//! The GraphQL schema: types and resolvers, with no transport in here.
//! One `#[Object]` per domain module, merged into the roots below.

pub mod ids;
pub mod mutation;
pub mod node;
pub mod relation;
pub mod user;

use std::sync::Arc;

use async_graphql::{Context, EmptySubscription, MergedObject, Schema, SchemaBuilder};

use crate::app::App;
use crate::auth::Viewer;

/// The executable schema.
pub type KithSchema = Schema<Query, Mutation, EmptySubscription>;

/// Root query type.
#[derive(MergedObject, Default)]
pub struct Query(node::NodeQuery, user::UserQuery);

/// Root mutation type.
#[derive(MergedObject, Default)]
pub struct Mutation(mutation::FollowMutation);

fn builder() -> SchemaBuilder<Query, Mutation, EmptySubscription> {
    Schema::build(Query::default(), Mutation::default(), EmptySubscription)
}

/// The schema, serving `app`. Each request must carry its [`Viewer`] as data.
pub fn schema(app: Arc<App>) -> KithSchema {
    builder().data(app).finish()
}

/// The schema in SDL, as committed in `schema.graphql`.
pub fn sdl() -> String {
    builder().finish().sdl()
}

/// The application state of the running schema.
pub(crate) fn app<'a>(ctx: &Context<'a>) -> &'a Arc<App> {
    ctx.data_unchecked::<Arc<App>>()
}

/// Who is asking; anonymous when the transport attached no viewer.
pub(crate) fn viewer(ctx: &Context<'_>) -> Viewer {
    ctx.data_opt::<Viewer>()
        .copied()
        .unwrap_or(Viewer::Anonymous)
}
