//! What arrives over one WebSocket connection (`graphql-transport-ws`),
//! and how long the connection may run it.
//!
//! A connection is a [`Session`]: the viewer its `connection_init` token
//! named, until when that token is valid, and its share of the server.
//! Every operation checks the token is still valid before it runs (the
//! transport closes the socket when it passes, [`crate::http`]); queries
//! and mutations run at most `KITH_MAX_OPERATIONS_PER_CONNECTION` at once
//! — the rest wait their turn, at most [`MAX_WAITING`] of them, and past
//! that are refused (`RATE_LIMITED`) — so one socket cannot take every
//! PostgreSQL connection. Subscriptions are bounded by
//! `KITH_MAX_SUBSCRIPTIONS_PER_CONNECTION` ([`super::subscription`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use async_graphql::parser::types::OperationType;
use async_graphql::{Data, ErrorExtensions as _, Request, Response};
use futures_util::StreamExt as _;
use futures_util::stream::BoxStream;

use super::run::{self, QueryText, persisted_refusal, with_codes};
use super::{KithSchema, limits, loaders, operation_is};
use crate::app::App;
use crate::auth::Viewer;
use crate::error::ApiError;

/// Queries and mutations of one connection that may wait for a turn.
pub(crate) const MAX_WAITING: usize = 64;

/// One WebSocket connection: who it runs as, until when, and its turns.
pub(crate) struct Session {
    admitted: OnceLock<(Viewer, Option<i64>)>,
    turns: tokio::sync::Semaphore,
    waiting: AtomicUsize,
}

impl Session {
    /// A connection not authenticated yet, running `max_operations` at once.
    pub(crate) fn new(max_operations: usize) -> Arc<Self> {
        Arc::new(Self {
            admitted: OnceLock::new(),
            turns: tokio::sync::Semaphore::new(max_operations.max(1)),
            waiting: AtomicUsize::new(0),
        })
    }

    /// Records the viewer the connection authenticated as, and the time
    /// (unix seconds) from which its token is refused.
    pub(crate) fn admit(&self, viewer: Viewer, valid_until: Option<i64>) {
        let _ = self.admitted.set((viewer, valid_until));
    }

    /// True once the connection has authenticated.
    pub(crate) fn admitted(&self) -> bool {
        self.admitted.get().is_some()
    }

    /// The viewer, once admitted.
    pub(crate) fn viewer(&self) -> Option<Viewer> {
        self.admitted.get().map(|(viewer, _)| *viewer)
    }

    /// When (unix seconds) the connection's token stops being valid.
    pub(crate) fn valid_until(&self) -> Option<i64> {
        self.admitted.get().and_then(|(_, until)| *until)
    }

    /// True once the token has passed its validity.
    pub(crate) fn expired(&self) -> bool {
        self.valid_until()
            .is_some_and(|until| chrono::Utc::now().timestamp() >= until)
    }
}

/// Runs what arrives over one connection. Subscriptions run with the
/// connection's data (its viewer and limits) as session data; a
/// subscription lives long, so its loaders cache nothing — every event
/// reads what is current. Queries and mutations sent the same way run as
/// over HTTP ([`run::run`]: fresh loaders, `KITH_REQUEST_TIMEOUT_MS`) as
/// the connection's viewer, one turn each.
#[derive(Clone)]
pub(crate) struct StreamExecutor {
    schema: KithSchema,
    app: Arc<App>,
    session: Arc<Session>,
}

impl StreamExecutor {
    /// An executor of `schema` serving `app`, for the connection `session`.
    pub(crate) fn new(schema: KithSchema, app: Arc<App>, session: Arc<Session>) -> Self {
        Self {
            schema,
            app,
            session,
        }
    }

    /// Why nothing more may run on this connection, if so.
    fn refusal(&self) -> Option<Response> {
        self.session
            .expired()
            .then(|| refuse(ApiError::Unauthenticated("token expired")))
    }
}

/// One operation waiting for a turn, counted in its connection's queue for
/// as long as it lives.
struct Waiting<'a> {
    count: &'a AtomicUsize,
    /// How many were waiting before it.
    ahead: usize,
}

impl<'a> Waiting<'a> {
    fn join(count: &'a AtomicUsize) -> Self {
        let ahead = count.fetch_add(1, Ordering::SeqCst);
        Self { count, ahead }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::SeqCst);
    }
}

fn refuse(error: ApiError) -> Response {
    Response::from_errors(vec![error.extend().into_server_error(Default::default())])
}

impl async_graphql::Executor for StreamExecutor {
    async fn execute(&self, request: Request) -> Response {
        if let Some(refused) = self.refusal() {
            return refused;
        }
        // Reached from `execute_stream` only, which resolved the request.
        let viewer = self.session.viewer().unwrap_or(Viewer::Anonymous);
        let turn = {
            // Counted while it waits — also when the client cancels it then
            // (the future is dropped mid-wait): the count goes with the guard.
            let waiting = Waiting::join(&self.session.waiting);
            if waiting.ahead < MAX_WAITING {
                self.session.turns.acquire().await.ok()
            } else {
                None
            }
        };
        let Some(_turn) = turn else {
            return refuse(ApiError::RateLimited {
                retry_after_ms: 100,
            });
        };
        // The token may have passed while the operation waited.
        if let Some(refused) = self.refusal() {
            return refused;
        }
        run::run(
            &self.schema,
            &self.app,
            request,
            viewer,
            QueryText::Resolved,
        )
        .await
        .response
    }

    fn execute_stream(
        &self,
        mut request: Request,
        session_data: Option<Arc<Data>>,
    ) -> BoxStream<'static, Response> {
        if let Some(refused) = self.refusal() {
            return futures_util::stream::once(std::future::ready(refused)).boxed();
        }
        if let Err(refused) = self.app.operations.persisted.resolve(&mut request) {
            return futures_util::stream::once(std::future::ready(persisted_refusal(&refused)))
                .boxed();
        }
        if !operation_is(&self.app, &mut request, OperationType::Subscription) {
            let executor = self.clone();
            return futures_util::stream::once(async move {
                async_graphql::Executor::execute(&executor, request).await
            })
            .boxed();
        }
        let limits = limits::Limits::new(&self.app.config, self.app.operations.documents.clone());
        if let Err(refused) = limits.admit(&mut request) {
            let refusal = with_codes(Response::from_errors(vec![refused]));
            return futures_util::stream::once(std::future::ready(refusal)).boxed();
        }
        let request = request.data(loaders::Loaders::uncached(&self.app));
        self.schema
            .execute_stream_with_session_data(request, session_data.unwrap_or_default())
            .map(with_codes)
            .boxed()
    }
}
