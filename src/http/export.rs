//! `GET /export/{following,followers,blocks,mutes}.csv`: the signed-in
//! viewer's own lists as CSV files ([`crate::portability::export`]), for
//! the bearer token in `Authorization`. A refusal is JSON, as GraphQL's
//! errors are: `{"errors": [{"message", "extensions": {"code"}}]}`, with
//! the HTTP status its code calls for.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use std::collections::HashSet;
use std::sync::Mutex;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::HttpState;
use crate::error::ApiError;
use crate::model::{UserId, UserStatus};
use crate::portability::export;

/// Exports one process streams at once: each holds a PostgreSQL connection
/// while a batch is read, so they are bounded apart from requests.
pub(super) const AT_ONCE: usize = 8;

/// The exports a process streams: at most [`AT_ONCE`], and one per account,
/// so that one account cannot hold them all by opening several and reading
/// none (the write deadline drops a client that stops reading).
pub(super) struct Slots {
    at_once: Arc<Semaphore>,
    owners: Mutex<HashSet<UserId>>,
}

/// One export's place, given back when its stream ends or is dropped.
pub(super) struct Slot {
    _permit: OwnedSemaphorePermit,
    owner: UserId,
    slots: Arc<Slots>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.owners().remove(&self.owner);
    }
}

impl Slots {
    fn owners(&self) -> std::sync::MutexGuard<'_, HashSet<UserId>> {
        self.owners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A place for `owner`'s export: `RATE_LIMITED` while the account
    /// streams one already, or every place is taken.
    fn take(self: &Arc<Self>, owner: UserId) -> Result<Slot, ApiError> {
        let busy = ApiError::RateLimited {
            retry_after_ms: 1000,
        };
        if !self.owners().insert(owner) {
            return Err(busy);
        }
        match self.at_once.clone().try_acquire_owned() {
            Ok(permit) => Ok(Slot {
                _permit: permit,
                owner,
                slots: self.clone(),
            }),
            Err(_) => {
                self.owners().remove(&owner);
                Err(busy)
            }
        }
    }
}

/// The places of this process's exports.
pub(super) fn slots() -> Arc<Slots> {
    Arc::new(Slots {
        at_once: Arc::new(Semaphore::new(AT_ONCE)),
        owners: Mutex::default(),
    })
}

pub(super) async fn export(
    State(state): State<HttpState>,
    Path(file): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some(list) = export::by_file_name(&file) else {
        return refusal(&ApiError::NotFound("export"));
    };
    let owner = match super::viewer_of(&state, &headers).await.require() {
        Ok(owner) => owner,
        Err(e) => return refusal(&e),
    };
    // A token of no account (a deleted one) exports nothing; a suspended
    // account may still take its data.
    match state.app.read.users().by_ids(&state.app.pg, &[owner]).await {
        Ok(found) if found.iter().any(|u| u.status != UserStatus::Deleted) => {}
        Ok(_) => {
            return refusal(&ApiError::Unauthenticated(
                "the token's user does not exist",
            ));
        }
        Err(e) => return refusal(&e),
    }
    let slot = match state.exports.take(owner) {
        Ok(slot) => slot,
        Err(e) => return refusal(&e),
    };
    let stream = match export::start(state.app.clone(), list, owner).await {
        Ok(stream) => stream,
        Err(e) => return refusal(&e),
    };
    // The slot is held as long as the body streams.
    let body = Body::from_stream(stream.map(move |chunk| {
        let _slot = &slot;
        chunk
    }));
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(disposition) = HeaderValue::from_str(&format!("attachment; filename=\"{file}\"")) {
        headers.insert(header::CONTENT_DISPOSITION, disposition);
    }
    response
}

/// A refusal as JSON, with the status its code calls for.
fn refusal(error: &ApiError) -> Response {
    let status = match error {
        ApiError::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
        ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
        ApiError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
        ApiError::NotFound(_) => StatusCode::NOT_FOUND,
        ApiError::Unavailable(cause) => {
            tracing::warn!(error = %format_args!("{cause:#}"), "export: dependency unavailable");
            StatusCode::SERVICE_UNAVAILABLE
        }
        ApiError::Timeout => StatusCode::GATEWAY_TIMEOUT,
        ApiError::Internal(cause) => {
            tracing::error!(error = ?cause, "export: internal error");
            StatusCode::INTERNAL_SERVER_ERROR
        }
        _ => StatusCode::BAD_REQUEST,
    };
    let mut extensions = serde_json::json!({ "code": error.code() });
    if let ApiError::RateLimited { retry_after_ms } = error {
        extensions["retryAfterMs"] = (*retry_after_ms).into();
    }
    let body = serde_json::json!({ "errors": [{ "message": error.to_string(), "extensions": extensions }] });
    let mut response = (status, body.to_string()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    match error {
        ApiError::Unauthenticated(_) => {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        ApiError::RateLimited { retry_after_ms } => {
            headers.insert(
                header::RETRY_AFTER,
                HeaderValue::from(retry_after_ms.div_ceil(1000).max(1)),
            );
        }
        _ => {}
    }
    response
}
