//! The HTTP transport: GraphQL over HTTP (POST and GET, as the
//! GraphQL-over-HTTP spec has it), GraphiQL for browsers, CORS, health and
//! readiness; metrics on a listener of their own ([`serve_metrics`]).
//!
//! - `POST /graphql` takes `application/json` only (`415` otherwise: a form
//!   or `text/plain` POST skips the browser's CORS preflight), at most
//!   `KITH_MAX_BODY_BYTES` (`413`, counted while the body streams in).
//! - `GET /graphql?query=…` runs queries (cacheable); mutations get `405`. A
//!   browser's GET without a query (`Accept: text/html`) gets GraphiQL,
//!   served from `assets/graphiql` under `/graphiql/` (no CDN: works offline).
//! - `GET /graphql` with a WebSocket upgrade speaks `graphql-transport-ws`
//!   (the protocol of `graphql-ws` and Apollo Client; the older
//!   `graphql-ws` subprotocol too) for subscriptions. The bearer token
//!   travels in `connection_init`'s payload (`{"authorization": "Bearer …"}`);
//!   the connection ends with it ([`websocket`]).
//! - `GET /export/{following,followers,blocks,mutes}.csv` streams the
//!   bearer token's own lists as CSV files ([`export`]).
//! - W3C `traceparent` is honoured: its trace id tags the request's logs
//!   and comes back in the answer's `traceparent` (a new one when absent);
//!   built with the `otlp` feature, spans are exported over OTLP as well.
//! - With `KITH_SERVER_TIMING`, every answer of this listener names its
//!   time in Kith in `Server-Timing` ([`timing`]).
//! - The answer is `application/graphql-response+json` when the client asks
//!   for it: then a request refused before execution (it does not parse,
//!   validate or fit the limits) is `400` with no `data`. Otherwise it is
//!   `application/json` and `200`, as legacy clients expect.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::middleware;
use axum::routing::get;

use crate::app::App;
use crate::auth::{TokenError, Viewer};
use crate::graph::{self, KithSchema};

mod cors;
mod deadline;
mod export;
mod graphiql;
mod graphql;
mod health;
mod metrics;
mod timing;
mod trace;
mod websocket;

pub use metrics::{metrics_router, sample_backlog, serve_metrics};

#[derive(Clone)]
struct HttpState {
    app: Arc<App>,
    schema: KithSchema,
    /// Exports in flight ([`export::AT_ONCE`], one per account).
    exports: Arc<export::Slots>,
}

/// The viewer a request's `Authorization` header names.
async fn viewer_of(state: &HttpState, headers: &axum::http::HeaderMap) -> Viewer {
    match headers
        .get(axum::http::header::AUTHORIZATION)
        .map(|v| v.to_str())
    {
        None => Viewer::Anonymous,
        Some(Err(_)) => Viewer::Rejected(TokenError::Malformed),
        Some(Ok(value)) => {
            state
                .app
                .auth
                .authenticate(state.app.read.users(), &state.app.pg, Some(value))
                .await
        }
    }
}

/// All routes of the API.
pub fn router(app: Arc<App>) -> Router {
    let schema = graph::schema(app.clone());
    let state = HttpState {
        app,
        schema,
        exports: export::slots(),
    };
    let timed = state.app.config.http.server_timing;
    let router = Router::new()
        .route(
            "/graphql",
            get(graphql::graphql_get).post(graphql::graphql_post),
        )
        .route("/graphiql/{name}", get(graphiql::graphiql_asset))
        .route("/export/{file}", get(export::export))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .layer(middleware::from_fn_with_state(state.clone(), cors::cors))
        .layer(middleware::from_fn(trace::trace_context));
    // Outermost, so that the time covers every other layer's.
    let router = if timed {
        router.layer(middleware::from_fn(timing::server_timing))
    } else {
        router
    };
    router.with_state(state)
}

/// Serves the API on the configured address until `shutdown` resolves,
/// then finishes in-flight requests.
pub(crate) async fn serve(
    app: Arc<App>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt as _;
    let listener = tokio::net::TcpListener::bind(app.config.http.addr).await?;
    tracing::info!(addr = %listener.local_addr()?, "serving GraphQL at /graphql");
    // TCP keepalive on every connection: a client that vanished without a
    // goodbye (a phone losing its network) is noticed within about a minute,
    // and its WebSocket — with its subscriptions and its place among its
    // user's connections — is closed.
    let listener = listener.tap_io(|tcp| {
        let keepalive = socket2::TcpKeepalive::new()
            .with_time(Duration::from_secs(30))
            .with_interval(Duration::from_secs(10))
            .with_retries(3);
        if let Err(error) = socket2::SockRef::from(&*tcp).set_tcp_keepalive(&keepalive) {
            tracing::debug!(%error, "no TCP keepalive on a connection");
        }
    });
    let listener = deadline::Deadlined::new(
        listener,
        Duration::from_secs(app.config.limits.write_timeout_secs.max(1)),
    );
    axum::serve(listener, router(app))
        .with_graceful_shutdown(shutdown)
        .await
}

/// Resolves on SIGINT or SIGTERM.
pub(crate) async fn shutdown_signal() {
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
