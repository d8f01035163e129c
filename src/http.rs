//! The HTTP transport: GraphQL (POST), GraphiQL (GET), health and readiness.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_graphql::http::GraphiQLSource;
use async_graphql_axum::{GraphQLRequest, GraphQLResponse};
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Json};
use axum::routing::get;

use crate::app::App;
use crate::auth::{TokenError, Viewer};
use crate::graph::{self, KithSchema};

#[derive(Clone)]
struct HttpState {
    app: Arc<App>,
    schema: KithSchema,
}

/// All routes of the API.
pub fn router(app: Arc<App>) -> Router {
    let schema = graph::schema(app.clone());
    Router::new()
        .route("/graphql", get(graphiql).post(graphql))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(HttpState { app, schema })
}

/// Serves the API on the configured address until `shutdown` resolves,
/// then finishes in-flight requests.
pub async fn serve(
    app: Arc<App>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(app.config.http_addr).await?;
    tracing::info!(addr = %listener.local_addr()?, "serving GraphQL at /graphql");
    axum::serve(listener, router(app))
        .with_graceful_shutdown(shutdown)
        .await
}

async fn graphql(
    State(state): State<HttpState>,
    headers: HeaderMap,
    request: GraphQLRequest,
) -> GraphQLResponse {
    let viewer = match headers.get(header::AUTHORIZATION).map(|v| v.to_str()) {
        None => Viewer::Anonymous,
        Some(Err(_)) => Viewer::Rejected(TokenError::Malformed),
        Some(Ok(value)) => Viewer::from_authorization(
            &state.app.tokens,
            Some(value),
            chrono::Utc::now().timestamp(),
        ),
    };
    graph::execute(&state.schema, &state.app, request.into_inner(), viewer)
        .await
        .into()
}

async fn graphiql() -> Html<String> {
    Html(
        GraphiQLSource::build()
            .endpoint("/graphql")
            .title("Kith")
            .finish(),
    )
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<HttpState>) -> impl IntoResponse {
    const LIMIT: Duration = Duration::from_secs(2);
    let postgres = tokio::time::timeout(LIMIT, async {
        let mut conn = state.app.pg.get().await.ok()?;
        crate::store::pool::ping(&mut conn).await.ok()
    });
    let redis = tokio::time::timeout(LIMIT, async {
        let mut conn = state.app.redis.get().await.ok()?;
        redis::cmd("PING")
            .query_async::<String>(&mut *conn)
            .await
            .ok()
    });
    let (postgres, redis) = tokio::join!(postgres, redis);
    let postgres_ok = matches!(postgres, Ok(Some(_)));
    let redis_ok = matches!(redis, Ok(Some(_)));
    let status = if postgres_ok && redis_ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let word = |ok: bool| if ok { "ok" } else { "unreachable" };
    (
        status,
        Json(serde_json::json!({ "postgres": word(postgres_ok), "redis": word(redis_ok) })),
    )
}

async fn metrics(State(state): State<HttpState>) -> impl IntoResponse {
    let backlog = async {
        let mut conn = state.app.pg.get().await.ok()?;
        crate::store::outbox::backlog(&mut conn).await.ok()
    };
    let backlog = tokio::time::timeout(Duration::from_secs(2), backlog)
        .await
        .ok()
        .flatten();
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.app.metrics.render(backlog),
    )
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut stream) => {
                stream.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
    tracing::info!("shutdown requested; finishing in-flight requests");
}
