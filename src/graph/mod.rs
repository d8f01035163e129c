//! The GraphQL schema: types and resolvers, with no transport in here.
//! One `#[Object]` per domain module, merged into the roots below.

pub mod connection;
pub mod count;
pub mod cursor;
pub mod ids;
pub mod limits;
pub mod loaders;
pub mod mutation;
pub mod node;
pub mod relation;
pub mod subscription;
pub mod user;

use std::sync::Arc;

use async_graphql::{
    Context, Data, ErrorExtensions as _, MergedObject, MergedSubscription, Request, Response,
    Schema, SchemaBuilder,
};
use futures_util::StreamExt as _;
use futures_util::stream::BoxStream;

use crate::app::App;
use crate::auth::Viewer;

/// The executable schema.
pub type KithSchema = Schema<Query, Mutation, Subscription>;

/// Root query type.
#[derive(MergedObject, Default)]
pub struct Query(node::NodeQuery, user::UserQuery);

/// Root mutation type.
#[derive(MergedObject, Default)]
pub struct Mutation(mutation::FollowMutation);

/// Root subscription type.
#[derive(MergedSubscription, Default)]
pub struct Subscription(subscription::LiveSubscription);

fn builder() -> SchemaBuilder<Query, Mutation, Subscription> {
    Schema::build(
        Query::default(),
        Mutation::default(),
        Subscription::default(),
    )
}

/// The schema, serving `app`. Run requests through [`execute`].
pub fn schema(app: Arc<App>) -> KithSchema {
    builder()
        .limit_depth(app.config.max_query_depth)
        .limit_complexity(app.config.max_query_complexity)
        .extension(limits::Limits::new(&app.config))
        .data(cursor::CursorKeys::new(&app.config.jwt_secret))
        .data(app)
        .finish()
}

/// The answer to one request.
pub struct Outcome {
    /// What the client gets.
    pub response: Response,
    /// False when the request was refused before execution (it did not
    /// parse, validate or fit the limits): nothing ran, and `data` is absent.
    pub executed: bool,
}

/// Executes one request for `viewer`; see [`run`].
pub async fn execute(
    schema: &KithSchema,
    app: &Arc<App>,
    request: Request,
    viewer: Viewer,
) -> Response {
    run(schema, app, request, viewer).await.response
}

/// Executes one request for `viewer` with fresh per-request DataLoaders,
/// within `KITH_REQUEST_TIMEOUT_MS`: past it the request is dropped — its
/// statements cancelled, its connections returned — and answered `TIMEOUT`.
pub async fn run(schema: &KithSchema, app: &Arc<App>, request: Request, viewer: Viewer) -> Outcome {
    let started = Arc::new(limits::ExecutionStarted::default());
    let request = request
        .data(viewer)
        .data(loaders::Loaders::new(app))
        .data(started.clone());
    let deadline = std::time::Duration::from_millis(app.config.request_timeout_ms);
    let response = match tokio::time::timeout(deadline, schema.execute(request)).await {
        Ok(response) => response,
        Err(_) => {
            crate::metrics::Metrics::add(&app.metrics.requests_timed_out, 1);
            Response::from_errors(vec![
                crate::error::ApiError::Timeout
                    .extend()
                    .into_server_error(Default::default()),
            ])
        }
    };
    Outcome {
        response: with_codes(response),
        executed: started.get(),
    }
}

/// Gives every error without a code `INVALID_INPUT`: the resolvers' errors
/// carry their code already; what remains are parse, validation, depth and
/// complexity errors — the client's query is at fault.
fn with_codes(mut response: Response) -> Response {
    for error in &mut response.errors {
        let extensions = error.extensions.get_or_insert_with(Default::default);
        if extensions.get("code").is_none() {
            extensions.set("code", "INVALID_INPUT");
        }
    }
    response
}

/// Runs what arrives over a WebSocket connection — subscriptions, and the
/// queries and mutations a client may send the same way — with the
/// connection's data (its viewer and limits) as session data. A
/// subscription lives long, so its loaders cache nothing: every event reads
/// what is current.
#[derive(Clone)]
pub struct StreamExecutor {
    schema: KithSchema,
    app: Arc<App>,
}

impl StreamExecutor {
    /// An executor of `schema` serving `app`.
    pub fn new(schema: KithSchema, app: Arc<App>) -> Self {
        Self { schema, app }
    }
}

impl async_graphql::Executor for StreamExecutor {
    async fn execute(&self, request: Request) -> Response {
        run(&self.schema, &self.app, request, Viewer::Anonymous)
            .await
            .response
    }

    fn execute_stream(
        &self,
        request: Request,
        session_data: Option<Arc<Data>>,
    ) -> BoxStream<'static, Response> {
        let request = request
            .data(loaders::Loaders::uncached(&self.app))
            .data(Arc::new(limits::ExecutionStarted::default()));
        self.schema
            .execute_stream_with_session_data(request, session_data.unwrap_or_default())
            .map(with_codes)
            .boxed()
    }
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
