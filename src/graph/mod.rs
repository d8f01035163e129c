//! The GraphQL schema: types and resolvers, with no transport in here.
//! One `#[Object]` per domain module, merged into the roots below.

pub(crate) mod close_friends;
pub(crate) mod connection;
pub(crate) mod count;
pub(crate) mod cursor;
pub(crate) mod federation;
pub(crate) mod follow_options;
pub(crate) mod ids;
pub(crate) mod import_rows;
pub(crate) mod limits;
pub(crate) mod loaders;
pub(crate) mod moves;
pub(crate) mod mutation;
pub(crate) mod node;
pub(crate) mod notify;
pub(crate) mod page_args;
pub(crate) mod persisted;
pub(crate) mod portability;
pub(crate) mod relation;
pub(crate) mod run;
pub(crate) mod safety;
pub(crate) mod state;
pub(crate) mod stream;
pub(crate) mod subscription;
pub(crate) mod suggest;
pub(crate) mod user;
pub(crate) mod user_lists;
pub(crate) mod user_query;

use std::sync::Arc;

use async_graphql::parser::types::OperationType;
use async_graphql::{Context, MergedObject, MergedSubscription, Request, Schema, SchemaBuilder};

use crate::app::App;
use crate::auth::Viewer;

/// The executable schema.
pub type KithSchema = Schema<Query, Mutation, Subscription>;

/// Root query type.
#[derive(MergedObject, Default)]
pub struct Query(
    node::NodeQuery,
    user_query::UserQuery,
    close_friends::CloseFriendQuery,
    notify::NotifyQuery,
    portability::ImportQuery,
    moves::MoveQuery,
    federation::EntityQuery,
);

/// Root mutation type.
#[derive(MergedObject, Default)]
pub struct Mutation(
    mutation::FollowMutation,
    follow_options::FollowOptionsMutation,
    safety::BlockMutation,
    safety::MuteMutation,
    close_friends::CloseFriendMutation,
    safety::SettingsMutation,
    safety::RequestMutation,
    portability::ImportMutation,
    moves::MoveMutation,
    suggest::SuggestionMutation,
);

/// Root subscription type.
#[derive(MergedSubscription, Default)]
pub struct Subscription(
    subscription::LiveSubscription,
    portability::ImportSubscription,
);

fn builder() -> SchemaBuilder<Query, Mutation, Subscription> {
    Schema::build(
        Query::default(),
        Mutation::default(),
        Subscription::default(),
    )
    // A gateway carries the subscriptions too: they are part of the
    // subgraph schema.
    .enable_subscription_in_federation()
}

/// The schema, serving `app`. Run requests through [`run::run`].
pub fn schema(app: Arc<App>) -> KithSchema {
    // Depth is limited by `limits`, where introspection has its own bound.
    builder()
        .limit_complexity(app.config.limits.max_query_complexity)
        .data(cursor::CursorKeys::new(&app.config.auth.cursor_key))
        .data(app)
        .finish()
}

/// True when the operation `request` selects is of type `ty` (false when the
/// document is too long or does not parse: the limits and the executor
/// report that). A text seen before is not parsed again (the process's
/// document cache); one parsed now stays in the request for its run.
pub(crate) fn operation_is(app: &App, request: &mut Request, ty: OperationType) -> bool {
    let limits = limits::Limits::new(&app.config, app.operations.documents.clone());
    limits.operation_type(request).ok().flatten() == Some(ty)
}

/// The schema in SDL, as committed in `schema.graphql` — with the
/// `@specifiedBy` of custom scalars, as introspection reports them.
pub fn sdl() -> String {
    builder()
        .finish()
        .sdl_with_options(async_graphql::SDLExportOptions::new().include_specified_by())
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
