//! The GraphQL schema: types and resolvers, with no transport in here.
//! One `#[Object]` per domain module, merged into the roots below.

pub mod connection;
pub mod cursor;
pub mod ids;
pub mod loaders;
pub mod mutation;
pub mod node;
pub mod relation;
pub mod user;

use std::sync::Arc;

use async_graphql::{
    Context, EmptySubscription, MergedObject, Request, Response, Schema, SchemaBuilder,
};

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

/// The schema, serving `app`. Run requests through [`execute`].
pub fn schema(app: Arc<App>) -> KithSchema {
    builder()
        .limit_depth(app.config.max_query_depth)
        .limit_complexity(app.config.max_query_complexity)
        .data(cursor::CursorKeys::new(&app.config.jwt_secret))
        .data(app)
        .finish()
}

/// Executes one request for `viewer` with fresh per-request DataLoaders.
///
/// Errors the resolvers raise carry their code already; what remains are
/// parse, validation, depth and complexity errors — the client's query is at
/// fault, so they get `INVALID_INPUT`.
pub async fn execute(
    schema: &KithSchema,
    app: &Arc<App>,
    request: Request,
    viewer: Viewer,
) -> Response {
    let request = request.data(viewer).data(loaders::Loaders::new(app));
    let mut response = schema.execute(request).await;
    for error in &mut response.errors {
        let extensions = error.extensions.get_or_insert_with(Default::default);
        if extensions.get("code").is_none() {
            extensions.set("code", "INVALID_INPUT");
        }
    }
    response
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
