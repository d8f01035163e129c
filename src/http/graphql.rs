//! GraphQL over HTTP, as the GraphQL-over-HTTP spec has it: `POST` with a
//! JSON body (read within `KITH_MAX_BODY_BYTES`), `GET` for queries (a
//! browser's `GET` without a query gets GraphiQL), the two response media
//! types, and the refusals made before a request reaches GraphQL.

use std::time::Duration;

use async_graphql::parser::types::OperationType;
use axum::body::{Body, Bytes};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use serde_json::{Value, json};

use super::HttpState;
use crate::auth::Viewer;
use crate::error::ErrorCode;
use crate::graph;
use crate::graph::run::QueryText;

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
            code: ErrorCode::InvalidInput.as_str(),
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
        // As every answer: what the request sent decides what it gets.
        response.headers_mut().insert(
            header::VARY,
            HeaderValue::from_static("Accept, Authorization"),
        );
        if let Some(allow) = self.allow {
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static(allow));
        }
        response
    }
}

pub(super) async fn graphql_post(State(state): State<HttpState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let media = Media::negotiate(&parts.headers);
    let parsed = async {
        check_json_content_type(&parts.headers)?;
        let config = &state.app.config;
        let deadline = Duration::from_millis(config.limits.request_timeout_ms);
        let body = read_body(&parts.headers, body, config.limits.max_body_bytes, deadline).await?;
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
        // Not held while the request runs: it may be as long as its text.
        drop(body);
        graphql_request(value)
    };
    match parsed.await {
        Ok(request) => execute(&state, &parts.headers, request, media, false).await,
        Err(refusal) => refusal.respond(media),
    }
}

pub(super) async fn graphql_get(State(state): State<HttpState>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let upgrade = parts
        .headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    if upgrade {
        return super::websocket::upgrade(state.app, state.schema, parts).await;
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
        return super::graphiql::graphiql().await.into_response();
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
        if let Err(refused) = state.app.operations.persisted.resolve(&mut request) {
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

/// Runs `request` for the viewer its headers name; `get` when it came
/// over GET (its persisted query was resolved already).
async fn execute(
    state: &HttpState,
    headers: &HeaderMap,
    request: async_graphql::Request,
    media: Media,
    get: bool,
) -> Response {
    let viewer = super::viewer_of(state, headers).await;
    let text = if get {
        QueryText::Resolved
    } else {
        QueryText::Unresolved
    };
    let outcome = graph::run::run(&state.schema, &state.app, request, viewer, text).await;
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
        json!({ "errors": [{ "message": "internal error", "extensions": { "code": ErrorCode::Internal.as_str() } }] })
            .to_string()
    });
    let status = if refused {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    let mut response = (status, body).into_response();
    let public = get
        && viewer == Viewer::Anonymous
        && !headers.contains_key(header::AUTHORIZATION)
        && outcome.response.errors.is_empty();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, media.content_type());
    // A shared cache may keep only what anyone would be answered: a GET
    // with no token that ran without errors. Everything varies by who asks
    // and by the media type negotiated.
    let seconds = state.app.config.limits.public_cache_secs;
    let cache = if public && seconds > 0 {
        HeaderValue::from_str(&format!("public, max-age={seconds}"))
            .expect("a number is a header value")
    } else if public {
        HeaderValue::from_static("no-cache")
    } else {
        HeaderValue::from_static("private, no-cache")
    };
    headers.insert(header::CACHE_CONTROL, cache);
    headers.insert(
        header::VARY,
        HeaderValue::from_static("Accept, Authorization"),
    );
    response
}
