//! Running one GraphQL request, whatever the transport: the persisted
//! query's text, the limits, fresh DataLoaders, the deadline, the codes of
//! refusals and the request metrics.

use std::sync::Arc;

use async_graphql::parser::types::OperationType;
use async_graphql::{ErrorExtensions as _, Request, Response};

use super::{KithSchema, limits, loaders, persisted};
use crate::app::App;
use crate::auth::Viewer;

/// The answer to one request.
pub struct Outcome {
    /// What the client gets.
    pub response: Response,
    /// False when the request was refused before execution (it did not
    /// parse, validate or fit the limits): nothing ran, and `data` is absent.
    pub executed: bool,
}

/// Whether a request's persisted query (a hash instead of a text) is
/// still to be looked up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueryText {
    /// Look the hash up first ([`super::persisted`]).
    Unresolved,
    /// The caller resolved it already (the GET path, which needs the text
    /// to refuse mutations; the WebSocket, [`super::stream`]).
    Resolved,
}

/// Executes one request for `viewer` with fresh per-request DataLoaders,
/// within `KITH_REQUEST_TIMEOUT_MS`: past it the request is dropped — its
/// statements cancelled, its connections returned — and answered `TIMEOUT`.
/// Every query and mutation runs through here, over HTTP or a WebSocket,
/// and is counted in the metrics by operation, viewer and code;
/// subscriptions run in [`super::stream`] under the same limits.
pub async fn run(
    schema: &KithSchema,
    app: &Arc<App>,
    request: Request,
    viewer: Viewer,
    text: QueryText,
) -> Outcome {
    let resolve = text == QueryText::Unresolved;
    let clock = std::time::Instant::now();
    let source = match viewer {
        Viewer::User(user) => crate::metrics::NameSource::User(user),
        Viewer::Anonymous | Viewer::Service(_) | Viewer::Rejected(_) => {
            crate::metrics::NameSource::Anonymous
        }
    };
    let outcome = run_timed(schema, app, request, viewer, resolve).await;
    let code = outcome
        .response
        .errors
        .first()
        .and_then(|e| e.extensions.as_ref()?.get("code").cloned());
    let code = match code {
        None => "ok".to_owned(),
        Some(async_graphql::Value::String(code)) => code,
        Some(other) => other.to_string(),
    };
    app.metrics.observe_request(
        outcome.operation.as_deref(),
        source,
        outcome.executed,
        &code,
        clock.elapsed(),
    );
    Outcome {
        response: outcome.response,
        executed: outcome.executed,
    }
}

/// What [`run`] learns besides the answer.
struct Ran {
    response: Response,
    executed: bool,
    operation: Option<String>,
}

async fn run_timed(
    schema: &KithSchema,
    app: &Arc<App>,
    mut request: Request,
    viewer: Viewer,
    resolve: bool,
) -> Ran {
    let resolved = if resolve {
        app.operations.persisted.resolve(&mut request)
    } else {
        Ok(())
    };
    if let Err(refused) = resolved {
        return Ran {
            response: persisted_refusal(&refused),
            executed: false,
            operation: None,
        };
    }
    let limits = limits::Limits::new(&app.config, app.operations.documents.clone());
    let mut admitted = match limits.admit(&mut request) {
        Ok(admitted) => admitted,
        Err(refused) => {
            return Ran {
                response: with_codes(Response::from_errors(vec![refused])),
                executed: false,
                operation: None,
            };
        }
    };
    let user = match viewer {
        Viewer::User(user) => Some(user),
        Viewer::Anonymous | Viewer::Service(_) | Viewer::Rejected(_) => None,
    };
    let writing = admitted.ty == Some(OperationType::Mutation);
    let request = request.data(viewer).data(loaders::Loaders::new(app));
    let deadline = std::time::Duration::from_millis(app.config.limits.request_timeout_ms);
    // Batched loads run in tasks of their own: they see that a mutation runs.
    let _writing = app
        .read
        .replica()
        .filter(|_| writing)
        .map(|replica| replica.writing());
    let execution = crate::read::replica::as_reader(user, writing, schema.execute(request));
    let answer = tokio::time::timeout(deadline, execution).await;
    // Whatever it wrote, its viewer reads back from the primary until the
    // replica has it.
    if let (true, Some(user), Some(replica)) = (writing, user, app.read.replica()) {
        replica.wrote(user);
    }
    let (response, executed) = match answer {
        Ok(response) => {
            let executed = executed(&response, &admitted);
            if executed {
                limits.remember(&mut admitted);
            }
            (response, executed)
        }
        Err(_) => {
            app.metrics.requests_timed_out.inc();
            let response = Response::from_errors(vec![
                crate::error::ApiError::Timeout
                    .extend()
                    .into_server_error(Default::default()),
            ]);
            (response, true)
        }
    };
    Ran {
        response: with_codes(response),
        executed,
        operation: admitted.operation.filter(|_| executed),
    }
}

/// True when the executor ran `admitted`'s operation: it refuses a document
/// that fails validation (or names no operation of it) with errors that
/// have no path and no data, while every error a resolver raises carries
/// the path of its field. A valid subscription sent as a plain request runs,
/// and is told (with no path either) that its transport cannot serve it.
fn executed(response: &Response, admitted: &limits::Admitted) -> bool {
    let refused = response.data == async_graphql::Value::Null
        && !response.errors.is_empty()
        && response.errors.iter().all(|e| e.path.is_empty());
    let transport_refused = admitted.ty == Some(OperationType::Subscription)
        && matches!(response.errors.as_slice(), [e] if e.message == SUBSCRIPTION_NOT_HERE);
    !refused || transport_refused
}

/// What the executor answers a valid subscription sent as a plain request.
const SUBSCRIPTION_NOT_HERE: &str = "Subscriptions are not supported on this transport.";

/// The answer to a request refused by [`persisted::PersistedQueries`].
pub(crate) fn persisted_refusal(refused: &persisted::PersistedError) -> Response {
    let mut error = async_graphql::ServerError::new(refused.to_string(), None);
    let mut extensions = async_graphql::ErrorExtensionValues::default();
    extensions.set("code", refused.code());
    error.extensions = Some(extensions);
    Response::from_errors(vec![error])
}

/// Gives every error without a code `INVALID_INPUT`: the resolvers' errors
/// carry their code already; what remains are parse, validation, depth and
/// complexity errors — the client's query is at fault.
pub(crate) fn with_codes(mut response: Response) -> Response {
    for error in &mut response.errors {
        let extensions = error.extensions.get_or_insert_with(Default::default);
        if extensions.get("code").is_none() {
            extensions.set("code", crate::error::ErrorCode::InvalidInput.as_str());
        }
    }
    response
}
