//! GraphQL over WebSocket (`graphql-transport-ws`, and the older
//! `graphql-ws` subprotocol) at `GET /graphql`.
//!
//! The connection is accepted once its `connection_init` carries a valid
//! bearer token (`{"authorization": "Bearer …"}`) and its user has a free
//! connection (`KITH_MAX_LIVE_CONNECTIONS_PER_USER`); one that has not
//! authenticated within `KITH_WS_INIT_TIMEOUT_MS` is dropped. A connection
//! lives only as long as what admitted it:
//!
//! - when its token passes its `exp` (plus `KITH_JWT_LEEWAY_SECS`), the
//!   socket is closed with `4403 Forbidden: token expired` — clients
//!   (`graphql-ws` retries on 4403) reconnect with a fresh token — and any
//!   operation that arrives meanwhile is refused (`UNAUTHENTICATED`);
//! - when its account is suspended or deleted, the socket is closed with
//!   `4403 Forbidden: account not active` within [`ACCOUNT_CHECK`].

use std::sync::Arc;
use std::time::Duration;

use std::str::FromStr as _;

use async_graphql::http::{ALL_WEBSOCKET_PROTOCOLS, WebSocketProtocols, WsMessage};
use axum::extract::ws::{CloseFrame, Message, WebSocket};
use axum::extract::{FromRequestParts as _, WebSocketUpgrade};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::Value;

use crate::app::App;
use crate::auth::Viewer;
use crate::graph::KithSchema;
use crate::graph::stream::{Session, StreamExecutor};
use crate::model::{UserId, UserStatus};

/// How often a connection checks that its account is still active.
pub(super) const ACCOUNT_CHECK: Duration = Duration::from_secs(2);

/// How long one message may take to reach a client that stopped reading.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// The close code of a connection whose authentication no longer holds
/// (`graphql-transport-ws`'s "Forbidden").
const FORBIDDEN: u16 = 4403;

/// Upgrades a `GET /graphql` to a WebSocket served by [`serve`].
pub(super) async fn upgrade(
    app: Arc<App>,
    schema: KithSchema,
    mut parts: axum::http::request::Parts,
) -> Response {
    let protocol = parts
        .headers
        .get(axum::http::header::SEC_WEBSOCKET_PROTOCOL)
        .and_then(|value| value.to_str().ok())
        .and_then(|protocols| {
            protocols
                .split(',')
                .find_map(|p| WebSocketProtocols::from_str(p.trim()).ok())
        });
    let Some(protocol) = protocol else {
        return (
            axum::http::StatusCode::BAD_REQUEST,
            "ask for the graphql-transport-ws subprotocol (Sec-WebSocket-Protocol)",
        )
            .into_response();
    };
    let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        Ok(upgrade) => upgrade,
        Err(rejection) => return rejection.into_response(),
    };
    let max_message = app.config.limits.max_body_bytes;
    upgrade
        .protocols(ALL_WEBSOCKET_PROTOCOLS)
        .max_message_size(max_message)
        .max_frame_size(max_message)
        .on_upgrade(move |socket| serve(socket, app, schema, protocol))
}

/// Speaks the protocol on `socket` until either side ends it, the token
/// passes or the account is no longer active.
async fn serve(socket: WebSocket, app: Arc<App>, schema: KithSchema, protocol: WebSocketProtocols) {
    let session = Session::new(app.config.live.max_operations_per_connection);
    let executor = StreamExecutor::new(schema, app.clone(), session.clone());
    let (mut sink, stream) = socket.split();
    let input = stream
        .take_while(|message| std::future::ready(message.is_ok()))
        .filter_map(|message| {
            std::future::ready(match message {
                Ok(message @ (Message::Text(_) | Message::Binary(_))) => Some(message.into_data()),
                _ => None,
            })
        });
    let (init_app, init_session) = (app.clone(), session.clone());
    let mut protocol_messages = async_graphql::http::WebSocket::new(executor, input, protocol)
        .on_connection_init(move |payload| connection_init(init_app, init_session, payload));
    let init_deadline =
        tokio::time::sleep(Duration::from_millis(app.config.live.ws_init_timeout_ms));
    tokio::pin!(init_deadline);
    let mut account_checks = tokio::time::interval(ACCOUNT_CHECK);
    account_checks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let expiry = until(session.valid_until());
        let message = tokio::select! {
            message = protocol_messages.next() => match message {
                Some(message) => message,
                None => break,
            },
            // A connection that has not authenticated in time is dropped.
            () = &mut init_deadline, if !session.admitted() => break,
            () = expiry => WsMessage::Close(FORBIDDEN, "Forbidden: token expired".into()),
            _ = account_checks.tick(), if session.admitted() => {
                match session.viewer() {
                    Some(Viewer::User(user)) if !account_active(&app, user).await => {
                        WsMessage::Close(FORBIDDEN, "Forbidden: account not active".into())
                    }
                    _ => continue,
                }
            }
        };
        let close = matches!(message, WsMessage::Close(..));
        let message = match message {
            WsMessage::Text(text) => Message::Text(text.into()),
            WsMessage::Close(code, reason) => Message::Close(Some(CloseFrame {
                code,
                reason: reason.into(),
            })),
        };
        // A client that stops reading cannot hold the connection (and its
        // place among its user's connections) past its end.
        let sent = tokio::time::timeout(SEND_TIMEOUT, sink.send(message)).await;
        if !matches!(sent, Ok(Ok(()))) || close {
            break;
        }
    }
}

/// Resolves at `valid_until` (unix seconds); never without one.
async fn until(valid_until: Option<i64>) {
    let Some(until) = valid_until else {
        return std::future::pending().await;
    };
    let now_ms = chrono::Utc::now().timestamp_millis();
    let left = until.saturating_mul(1000).saturating_sub(now_ms).max(0);
    tokio::time::sleep(Duration::from_millis(left.unsigned_abs())).await;
}

/// True unless the account is known to be suspended, deleted or gone (a
/// database that cannot answer closes nothing).
async fn account_active(app: &App, user: UserId) -> bool {
    let ids = [user];
    match tokio::time::timeout(ACCOUNT_CHECK, app.read.users().by_ids(&app.pg, &ids)).await {
        Ok(Ok(found)) => found.first().map(|u| u.status) == Some(UserStatus::Active),
        Ok(Err(_)) | Err(_) => true,
    }
}

/// Admits a WebSocket connection: its viewer and its share of the limits
/// become the data of everything it runs.
async fn connection_init(
    app: Arc<App>,
    session: Arc<Session>,
    payload: Value,
) -> async_graphql::Result<async_graphql::Data> {
    let authorization = ["authorization", "Authorization"]
        .iter()
        .find_map(|key| payload.get(*key).and_then(Value::as_str).map(str::to_owned))
        .or_else(|| {
            payload
                .get("token")
                .and_then(Value::as_str)
                .map(|token| format!("Bearer {token}"))
        });
    let (viewer, valid_until) = app
        .auth
        .authenticate_until(app.read.users(), &app.pg, authorization.as_deref())
        .await;
    let user = viewer
        .require()
        .map_err(|e| async_graphql::Error::new(e.to_string()))?;
    if !account_active(&app, user).await {
        return Err(async_graphql::Error::new("the account is not active"));
    }
    let place = app
        .live
        .connect(user, app.config.live.max_connections_per_user)
        .map_err(|e| async_graphql::Error::new(e.to_string()))?;
    session.admit(viewer, valid_until);
    let mut data = async_graphql::Data::default();
    data.insert(viewer);
    data.insert(crate::graph::subscription::LiveConnection::new(
        place,
        app.config.live.max_subscriptions_per_connection,
    ));
    Ok(data)
}
