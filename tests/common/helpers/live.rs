//! Kith served over real sockets in the test process (a replica: HTTP and
//! WebSocket, optionally with its relay and projector), and a
//! `graphql-transport-ws` client to talk to it.

use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt as _, StreamExt as _};
use kith::app::App;
use kith::model::UserId;
use kith::testing::graph::ids;
use kith::testing::pipeline::projector::ProjectorHooks;
use kith::testing::shutdown::Shutdown;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::*;

/// How long a live client waits for a message.
const WAIT: Duration = Duration::from_secs(20);

/// A `graphql-transport-ws` client, message by message.
pub struct LiveClient {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    /// Messages received while waiting for another operation's.
    pub held: Vec<Value>,
}

impl LiveClient {
    /// Opens a connection and sends `connection_init` with `payload`; Ok
    /// once the server acknowledges, Err with the close reason otherwise.
    pub async fn connect(port: u16, payload: Value) -> Result<Self, String> {
        let mut client = Self::open(port).await?;
        client
            .send(json!({ "type": "connection_init", "payload": payload }))
            .await;
        match client.next().await {
            Ok(message) if message["type"] == "connection_ack" => Ok(client),
            Ok(message) => Err(format!("unexpected {message}")),
            Err(reason) => Err(reason),
        }
    }

    /// Opens a connection (the WebSocket handshake only).
    pub async fn open(port: u16) -> Result<Self, String> {
        let mut request = format!("ws://127.0.0.1:{port}/graphql")
            .into_client_request()
            .unwrap();
        request.headers_mut().insert(
            "Sec-WebSocket-Protocol",
            "graphql-transport-ws".parse().unwrap(),
        );
        let (ws, response) = tokio_tungstenite::connect_async(request)
            .await
            .map_err(|e| e.to_string())?;
        assert_eq!(
            response.headers()["sec-websocket-protocol"],
            "graphql-transport-ws"
        );
        Ok(Self {
            ws,
            held: Vec::new(),
        })
    }

    pub async fn send(&mut self, message: Value) {
        self.ws
            .send(Message::text(message.to_string()))
            .await
            .unwrap();
    }

    /// Starts operation `id`.
    pub async fn subscribe(&mut self, id: &str, query: &str, variables: Value) {
        self.send(json!({
            "id": id, "type": "subscribe",
            "payload": { "query": query, "variables": variables },
        }))
        .await;
    }

    /// The next protocol message (pings answered on the way); Err with the
    /// close frame's code and reason when the server closes.
    pub async fn next(&mut self) -> Result<Value, String> {
        loop {
            let message = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .map_err(|_| "no message in time".to_owned())?;
            match message {
                Some(Ok(Message::Text(text))) => {
                    let value: Value = serde_json::from_str(&text).unwrap();
                    if value["type"] == "ping" {
                        self.send(json!({ "type": "pong" })).await;
                        continue;
                    }
                    return Ok(value);
                }
                Some(Ok(Message::Close(frame))) => {
                    return Err(frame.map_or("closed".into(), |f| {
                        format!("closed {}: {}", u16::from(f.code), f.reason)
                    }));
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e.to_string()),
                None => return Err("closed".into()),
            }
        }
    }

    /// The errors operation `id` ends with (an `error` message, or a
    /// `next` carrying errors, as the protocol allows either).
    pub async fn errors_of(&mut self, id: &str) -> Value {
        let message = self.next_message_of(id).await;
        match message["type"].as_str() {
            Some("error") => message["payload"].clone(),
            Some("next") if !message["payload"]["errors"].is_null() => {
                message["payload"]["errors"].clone()
            }
            _ => panic!("operation {id} did not fail: {message}"),
        }
    }

    /// The data of the next `next` message of operation `id`.
    pub async fn next_of(&mut self, id: &str) -> Value {
        let message = self.next_message_of(id).await;
        assert_eq!(message["type"], "next", "{message}");
        assert!(message["payload"]["errors"].is_null(), "{message}");
        message["payload"]["data"].clone()
    }

    /// The next message of operation `id`; the other operations' messages
    /// received meanwhile are held for their turn (the server interleaves
    /// operations as their data comes).
    pub async fn next_message_of(&mut self, id: &str) -> Value {
        if let Some(i) = self.held.iter().position(|m| m["id"] == id) {
            return self.held.remove(i);
        }
        loop {
            let message = self
                .next()
                .await
                .unwrap_or_else(|e| panic!("waiting for operation {id}: {e}"));
            if message["id"] == id {
                return message;
            }
            self.held.push(message);
        }
    }
}

pub fn auth(t: &TestApp, user: UserId) -> Value {
    json!({ "authorization": format!("Bearer {}", t.token(user)) })
}

pub fn gid(user: UserId) -> String {
    ids::user_id(user).to_string()
}

/// A replica in this process: the API on a free port, its live-update
/// listener, and (when `pipeline`) a relay and a projector.
pub struct Replica {
    pub port: u16,
    stop: kith::testing::shutdown::ShutdownTrigger,
    _jobs: Vec<crate::helpers::Job>,
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.stop.trigger();
    }
}

pub async fn replica(t: &TestApp, app: Arc<App>, pipeline: bool) -> Replica {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (stop, shutdown) = Shutdown::new();
    tokio::spawn(kith::testing::live::listen(app.clone(), shutdown.clone()));
    let router = kith::testing::http::router(app.clone());
    let mut served = shutdown.clone();
    tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async move { served.wait().await })
            .await
    });
    eventually("the live listener", 10, || async {
        app.live.is_listening().then_some(())
    })
    .await;
    let jobs = if pipeline {
        vec![
            t.start_relay(),
            t.start_projector(Arc::new(ProjectorHooks::default())),
        ]
    } else {
        Vec::new()
    };
    Replica {
        port,
        stop,
        _jobs: jobs,
    }
}
