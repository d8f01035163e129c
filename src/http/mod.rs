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
//! - W3C `traceparent` is honoured: its trace id tags the request's logs
//!   and comes back in the answer's `traceparent` (a new one when absent);
//!   built with the `otlp` feature, spans are exported over OTLP as well.
//! - The answer is `application/graphql-response+json` when the client asks
//!   for it: then a request refused before execution (it does not parse,
//!   validate or fit the limits) is `400` with no `data`. Otherwise it is
//!   `application/json` and `200`, as legacy clients expect.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_graphql::parser::types::OperationType;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Json, Response};
use axum::routing::get;
use futures_util::StreamExt as _;
use serde_json::{Value, json};

use crate::app::App;
use crate::auth::{TokenError, Viewer};
use crate::graph::{self, KithSchema};

mod metrics;
mod websocket;

pub use metrics::{metrics_router, sample_backlog, serve_metrics};

#[derive(Clone)]
struct HttpState {
    app: Arc<App>,
    schema: KithSchema,
}

/// All routes of the API.
pub fn router(app: Arc<App>) -> Router {
    let schema = graph::schema(app.clone());
    let state = HttpState { app, schema };
    Router::new()
        .route("/graphql", get(graphql_get).post(graphql_post))
        .route("/graphiql/{name}", get(graphiql_asset))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .layer(middleware::from_fn_with_state(state.clone(), cors))
        .layer(middleware::from_fn(trace_context))
        .with_state(state)
}

/// Serves the API on the configured address until `shutdown` resolves,
/// then finishes in-flight requests.
pub async fn serve(
    app: Arc<App>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt as _;
    let listener = tokio::net::TcpListener::bind(app.config.http_addr).await?;
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
    axum::serve(listener, router(app))
        .with_graceful_shutdown(shutdown)
        .await
}

/// The two response media types of the spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Media {
    /// `application/graphql-response+json`: status codes carry meaning.
    GraphqlResponse,
    /// `application/json`: always `200` for a well-formed request.
    Json,
}

impl Media {
    /// `application/graphql-response+json` when `Accept` asks for it (with
    /// a non-zero `q`); JSON otherwise — also when `Accept` is missing or
    /// names nothing Kith can send (the spec allows that instead of `406`).
    fn negotiate(headers: &HeaderMap) -> Self {
        let accept = headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let asks = accept.split(',').any(|range| {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or_default();
            media.eq_ignore_ascii_case("application/graphql-response+json")
                && !parts.any(|p| {
                    p.split_once('=').is_some_and(|(k, v)| {
                        k.trim().eq_ignore_ascii_case("q") && v.trim().parse::<f32>() == Ok(0.0)
                    })
                })
        });
        if asks {
            Self::GraphqlResponse
        } else {
            Self::Json
        }
    }

    fn content_type(self) -> HeaderValue {
        HeaderValue::from_static(match self {
            Self::GraphqlResponse => "application/graphql-response+json; charset=utf-8",
            Self::Json => "application/json; charset=utf-8",
        })
    }
}

/// A request refused before it reached GraphQL: its status and message.
struct Refusal {
    status: StatusCode,
    message: String,
    code: &'static str,
    allow: Option<&'static str>,
}

impl Refusal {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            code: "INVALID_INPUT",
            allow: None,
        }
    }

    /// A persisted query that cannot run (answered as Apollo's links expect).
    fn persisted(refused: &graph::persisted::PersistedError) -> Self {
        Self {
            code: refused.code(),
            ..Self::new(StatusCode::OK, refused.to_string())
        }
    }

    fn respond(self, media: Media) -> Response {
        let body = json!({
            "errors": [{ "message": self.message, "extensions": { "code": self.code } }]
        });
        let mut response = (self.status, body.to_string()).into_response();
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, media.content_type());
        // Never cached: the same request may well succeed next time.
        response.headers_mut().insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("private, no-cache, must-revalidate"),
        );
        if let Some(allow) = self.allow {
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static(allow));
        }
        response
    }
}

async fn graphql_post(State(state): State<HttpState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let media = Media::negotiate(&parts.headers);
    let parsed = async {
        check_json_content_type(&parts.headers)?;
        let config = &state.app.config;
        let deadline = Duration::from_millis(config.request_timeout_ms);
        let body = read_body(&parts.headers, body, config.max_body_bytes, deadline).await?;
        if body.iter().all(u8::is_ascii_whitespace) {
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                "the request body is empty",
            ));
        }
        let value: Value = serde_json::from_slice(&body).map_err(|e| {
            Refusal::new(
                StatusCode::BAD_REQUEST,
                format!("the body is not valid JSON: {e}"),
            )
        })?;
        graphql_request(value)
    };
    match parsed.await {
        Ok(request) => execute(&state, &parts.headers, request, media, false).await,
        Err(refusal) => refusal.respond(media),
    }
}

async fn graphql_get(State(state): State<HttpState>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let upgrade = parts
        .headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    if upgrade {
        return websocket::upgrade(state.app, state.schema, parts).await;
    }
    let query = Query::<Vec<(String, String)>>::try_from_uri(&parts.uri);
    graphql_query_get(state, parts.headers, query).await
}

async fn graphql_query_get(
    state: HttpState,
    headers: HeaderMap,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Response {
    let params = query.map(|Query(pairs)| pairs).unwrap_or_default();
    let param = |name: &str| {
        params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let wants_html = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/html"));
    if param("query").is_none() && param("extensions").is_none() && wants_html {
        return graphiql().await.into_response();
    }
    let media = Media::negotiate(&headers);
    let parsed = (|| {
        let json_param = |name: &str| -> Result<Value, Refusal> {
            match param(name) {
                None => Ok(Value::Null),
                Some(text) => serde_json::from_str(text).map_err(|e| {
                    Refusal::new(
                        StatusCode::BAD_REQUEST,
                        format!("`{name}` is not valid JSON: {e}"),
                    )
                }),
            }
        };
        let value = json!({
            "query": param("query").map(str::to_owned),
            "operationName": param("operationName").map(str::to_owned),
            "variables": json_param("variables")?,
            "extensions": json_param("extensions")?,
        });
        let mut request = graphql_request(value)?;
        // A persisted query's text decides whether it is a mutation: it is
        // resolved here, once, and executed as resolved (a refusal is
        // answered at once, so that a text registered meanwhile cannot run
        // as a GET mutation).
        if let Err(refused) = state.app.persisted.resolve(&mut request) {
            return Err(Refusal::persisted(&refused));
        }
        if graph::operation_is(&state.app, &mut request, OperationType::Mutation) {
            return Err(Refusal {
                allow: Some("POST"),
                ..Refusal::new(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "mutations must be sent with POST",
                )
            });
        }
        Ok(request)
    })();
    match parsed {
        Ok(request) => execute(&state, &headers, request, media, true).await,
        Err(refusal) => refusal.respond(media),
    }
}

/// `415` unless the body is declared JSON (UTF-8, the only charset allowed).
fn check_json_content_type(headers: &HeaderMap) -> Result<(), Refusal> {
    let unsupported = || {
        Refusal::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the request as `content-type: application/json`",
        )
    };
    let value = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(unsupported)?;
    let mut parts = value.split(';').map(str::trim);
    if !parts
        .next()
        .is_some_and(|m| m.eq_ignore_ascii_case("application/json"))
    {
        return Err(unsupported());
    }
    for param in parts {
        if let Some((name, charset)) = param.split_once('=')
            && name.trim().eq_ignore_ascii_case("charset")
            && !charset
                .trim()
                .trim_matches('"')
                .eq_ignore_ascii_case("utf-8")
        {
            return Err(unsupported());
        }
    }
    Ok(())
}

/// The body, refused with `413` as soon as it passes `limit` bytes (before
/// reading any of it when `content-length` says so already).
async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    deadline: Duration,
) -> Result<Bytes, Refusal> {
    let too_large = || {
        Refusal::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is larger than {limit} bytes"),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut stream = body.into_data_stream();
    // What the client declares is not trusted for an allocation.
    let mut buffer = Vec::with_capacity(declared.unwrap_or(0).min(64 * 1024) as usize);
    let read = async {
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|_| {
                Refusal::new(
                    StatusCode::BAD_REQUEST,
                    "the request body could not be read",
                )
            })?;
            if buffer.len() + chunk.len() > limit {
                return Err(too_large());
            }
            buffer.extend_from_slice(&chunk);
        }
        Ok(())
    };
    // A client that declares a body and sends it slowly (or never) does not
    // hold the connection and the buffer past the request deadline.
    tokio::time::timeout(deadline, read).await.map_err(|_| {
        Refusal::new(
            StatusCode::REQUEST_TIMEOUT,
            "the request body did not arrive in time",
        )
    })??;
    Ok(buffer.into())
}

/// The GraphQL request in a JSON object: `query` a string, `operationName`
/// a string or null, `variables` and `extensions` maps or null.
fn graphql_request(value: Value) -> Result<async_graphql::Request, Refusal> {
    let invalid = |m: &str| Refusal::new(StatusCode::BAD_REQUEST, m);
    let Value::Object(mut map) = value else {
        return Err(invalid("the request must be a JSON object"));
    };
    let persisted = matches!(map.get("extensions"), Some(Value::Object(e)) if graph::persisted::names_persisted_query(e));
    // Moved out, not copied: a query text may be as long as the body.
    let query = match map.remove("query") {
        Some(Value::String(query)) => query,
        // A persisted query may come by its hash alone.
        None | Some(Value::Null) if persisted => String::new(),
        None | Some(Value::Null) => return Err(invalid("the request has no `query`")),
        Some(_) => return Err(invalid("`query` must be a string")),
    };
    let mut request = async_graphql::Request::new(query);
    match map.remove("operationName") {
        None | Some(Value::Null) => {}
        Some(Value::String(name)) => request = request.operation_name(name),
        Some(_) => return Err(invalid("`operationName` must be a string")),
    }
    match map.remove("variables") {
        None | Some(Value::Null) => {}
        Some(variables @ Value::Object(_)) => {
            request = request.variables(async_graphql::Variables::from_json(variables));
        }
        Some(_) => return Err(invalid("`variables` must be a map")),
    }
    match map.remove("extensions") {
        None | Some(Value::Null) => {}
        Some(Value::Object(extensions)) => {
            for (key, value) in extensions {
                let value = async_graphql::Value::from_json(value)
                    .map_err(|_| invalid("`extensions` must be a map"))?;
                request.extensions.insert(key, value);
            }
        }
        Some(_) => return Err(invalid("`extensions` must be a map")),
    }
    Ok(request)
}

/// Runs `request` for the viewer its headers name; `resolved` when its
/// persisted query was resolved already.
async fn execute(
    state: &HttpState,
    headers: &HeaderMap,
    request: async_graphql::Request,
    media: Media,
    resolved: bool,
) -> Response {
    let viewer = match headers.get(header::AUTHORIZATION).map(|v| v.to_str()) {
        None => Viewer::Anonymous,
        Some(Err(_)) => Viewer::Rejected(TokenError::Malformed),
        Some(Ok(value)) => crate::auth::authenticate(&state.app, Some(value)).await,
    };
    let outcome = if resolved {
        graph::run_resolved(&state.schema, &state.app, request, viewer).await
    } else {
        graph::run(&state.schema, &state.app, request, viewer).await
    };
    let refused = !outcome.executed && media == Media::GraphqlResponse;
    let body = if refused {
        // Nothing ran: the answer has no `data` at all.
        serde_json::to_value(&outcome.response).map(|mut body| {
            if let Value::Object(map) = &mut body {
                map.remove("data");
            }
            body.to_string()
        })
    } else {
        serde_json::to_string(&outcome.response)
    };
    let body = body.unwrap_or_else(|e| {
        tracing::error!(error = %e, "response not serialisable");
        json!({ "errors": [{ "message": "internal error", "extensions": { "code": "INTERNAL" } }] })
            .to_string()
    });
    let status = if refused {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    let mut response = (status, body).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, media.content_type());
    response
}

/// W3C trace context: a request's `traceparent` (version 00) gives its trace
/// id, else a new one is made. Every log line of the request carries it (a
/// `request` span), and the answer's `traceparent` names it with this
/// request as the parent, so a caller can find Kith's logs of its trace.
async fn trace_context(request: Request, next: Next) -> Response {
    use tracing::Instrument as _;
    let incoming = request
        .headers()
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .and_then(parse_traceparent);
    let ids = uuid::Uuid::new_v4().as_u128();
    let (trace_id, sampled) = incoming.unwrap_or_else(|| (format!("{:032x}", ids), false));
    let span_id = format!("{:016x}", (ids >> 64) as u64 | 1);
    let span = tracing::info_span!(
        "request",
        trace_id = %trace_id,
        method = %request.method(),
        path = %request.uri().path(),
    );
    #[cfg(feature = "otlp")]
    otlp::continue_trace(&span, request.headers());
    let mut response = next.run(request).instrument(span).await;
    let flags = if sampled { "01" } else { "00" };
    if let Ok(value) = HeaderValue::from_str(&format!("00-{trace_id}-{span_id}-{flags}")) {
        response.headers_mut().insert("traceparent", value);
    }
    response
}

/// With the `otlp` feature: the request's span continues the caller's trace.
#[cfg(feature = "otlp")]
mod otlp {
    use axum::http::HeaderMap;
    use opentelemetry::propagation::{Extractor, TextMapPropagator as _};
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;

    struct Headers<'a>(&'a HeaderMap);

    impl Extractor for Headers<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            self.0.get(key).and_then(|v| v.to_str().ok())
        }

        fn keys(&self) -> Vec<&str> {
            self.0.keys().map(|k| k.as_str()).collect()
        }
    }

    pub(super) fn continue_trace(span: &tracing::Span, headers: &HeaderMap) {
        let propagator = opentelemetry_sdk::propagation::TraceContextPropagator::new();
        let _ = span.set_parent(propagator.extract(&Headers(headers)));
    }
}

/// `(trace id, sampled)` of a valid version-00 `traceparent`.
fn parse_traceparent(value: &str) -> Option<(String, bool)> {
    let mut parts = value.trim().split('-');
    let (version, trace, parent, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let valid = version == "00"
        && parts.next().is_none()
        && hex(trace, 32)
        && hex(parent, 16)
        && hex(flags, 2)
        && trace.bytes().any(|b| b != b'0')
        && parent.bytes().any(|b| b != b'0');
    let sampled = u8::from_str_radix(flags, 16).ok()? & 1 == 1;
    valid.then(|| (trace.to_owned(), sampled))
}

/// CORS for the origins in `KITH_CORS_ORIGINS` (none by default): preflights
/// answered here, and the allowed origin echoed on every answer. Tokens
/// travel in `Authorization`, never in cookies, so credentials stay off.
async fn cors(State(state): State<HttpState>, request: Request, next: Next) -> Response {
    let allowed = &state.app.config.cors_origins;
    let origin = request
        .headers()
        .get(header::ORIGIN)
        .filter(|origin| {
            origin
                .to_str()
                .is_ok_and(|o| allowed.iter().any(|a| a == "*" || a == o))
        })
        .cloned();
    let preflight = request.method() == Method::OPTIONS
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let mut response = if preflight {
        StatusCode::NO_CONTENT.into_response()
    } else {
        next.run(request).await
    };
    let headers = response.headers_mut();
    headers.append(header::VARY, HeaderValue::from_static("origin"));
    if let Some(origin) = origin {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        if preflight {
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static("GET, POST, OPTIONS"),
            );
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static("authorization, content-type, accept"),
            );
            headers.insert(
                header::ACCESS_CONTROL_MAX_AGE,
                HeaderValue::from_static("600"),
            );
        }
    }
    response
}

async fn graphiql() -> Html<&'static str> {
    Html(include_str!("../../assets/graphiql/index.html"))
}

/// GraphiQL's scripts and styles, vendored (`assets/graphiql`): the page
/// works without internet access. The names carry no version, so browsers
/// keep them an hour, not for good.
async fn graphiql_asset(Path(name): Path<String>) -> Response {
    let (body, content_type): (&'static [u8], &'static str) = match name.as_str() {
        "graphiql.min.js" => (
            include_bytes!("../../assets/graphiql/graphiql.min.js"),
            "text/javascript; charset=utf-8",
        ),
        "graphiql.min.css" => (
            include_bytes!("../../assets/graphiql/graphiql.min.css"),
            "text/css; charset=utf-8",
        ),
        "react.production.min.js" => (
            include_bytes!("../../assets/graphiql/react.production.min.js"),
            "text/javascript; charset=utf-8",
        ),
        "react-dom.production.min.js" => (
            include_bytes!("../../assets/graphiql/react-dom.production.min.js"),
            "text/javascript; charset=utf-8",
        ),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        body,
    )
        .into_response()
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
    // Without Redis, reads are still served (from PostgreSQL) and writes are
    // refused fast; taking every instance out of rotation would turn a
    // degraded service into an outage. PostgreSQL decides readiness.
    let status = if postgres_ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let word = |ok: bool| if ok { "ok" } else { "unreachable" };
    // Informational: without it subscriptions here get no updates, but
    // queries and mutations are served.
    let live = if state.app.live.is_listening() {
        "listening"
    } else {
        "not listening"
    };
    (
        status,
        Json(serde_json::json!({
            "postgres": word(postgres_ok),
            "redis": word(redis_ok),
            "live": live,
        })),
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
