//! Live updates: what the projector applied, told to the subscribers of
//! every replica.
//!
//! After a batch's Redis writes, the projector publishes one message on
//! `{prefix}kith:live`: the users whose counters it set and the follow
//! transitions it applied ([`LiveBatch`]). Every process that serves the API
//! listens on that channel ([`listen`], one Redis pub/sub connection), drops
//! its in-process copies of the lists the batch changed — so a subscriber
//! that re-queries on an event never reads older data than the event — and
//! hands the batch to its subscriptions through a broadcast channel.
//!
//! Delivery is best effort: a message published while a replica is not
//! listening (Redis away, the replica starting) is not replayed, and a
//! projector that re-applies a batch after a crash publishes it again.
//! Events carry the edge's `version`, so a client can drop a repeat.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::app::App;
use crate::cache::ListKey;
use crate::error::ApiError;
use crate::model::UserId;
use crate::pipeline::Shutdown;

/// What one projector batch changed, as published.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveBatch {
    /// Users whose counters the batch set.
    #[serde(default)]
    pub counters: Vec<UserId>,
    /// Follow transitions the batch applied.
    #[serde(default)]
    pub follows: Vec<FollowChange>,
}

/// One follow transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FollowChange {
    /// The follower.
    pub from: UserId,
    /// The followed user.
    pub to: UserId,
    /// True for a follow, false for an unfollow.
    pub active: bool,
    /// The edge's version after the transition.
    pub version: i64,
    /// The (latest) follow time, ms.
    pub followed_at_ms: i64,
    /// When the transition happened, ms.
    pub occurred_at_ms: i64,
}

/// How many batches a slow subscription may fall behind before it is told
/// it missed some.
const BACKLOG: usize = 1024;

/// The live-update hub of one process.
pub struct Hub {
    sender: broadcast::Sender<Arc<LiveBatch>>,
    /// Open WebSocket connections per user.
    connections: Mutex<HashMap<UserId, usize>>,
    /// True while this process listens on the channel.
    listening: AtomicBool,
}

impl Default for Hub {
    fn default() -> Self {
        Self {
            sender: broadcast::channel(BACKLOG).0,
            connections: Mutex::default(),
            listening: AtomicBool::new(false),
        }
    }
}

impl Hub {
    /// Every batch received from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<LiveBatch>> {
        self.sender.subscribe()
    }

    /// True while this process receives the projectors' batches.
    pub fn is_listening(&self) -> bool {
        self.listening.load(Ordering::Relaxed)
    }

    /// Counts one more connection of `user`, unless it has `max` open here.
    pub fn connect(
        self: &Arc<Self>,
        user: UserId,
        max: usize,
    ) -> Result<ConnectionGuard, ApiError> {
        let mut connections = self.connections.lock().expect("connections lock");
        let open = connections.entry(user).or_default();
        if *open >= max {
            return Err(ApiError::invalid(format!(
                "at most {max} live connections per user"
            )));
        }
        *open += 1;
        Ok(ConnectionGuard {
            hub: self.clone(),
            user,
        })
    }

    fn deliver(&self, batch: LiveBatch) {
        // No receiver is no error: nobody subscribed here.
        let _ = self.sender.send(Arc::new(batch));
    }
}

/// One open connection of a user; closing it (dropping this) frees its place.
pub struct ConnectionGuard {
    hub: Arc<Hub>,
    user: UserId,
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        let mut connections = self.hub.connections.lock().expect("connections lock");
        if let Some(open) = connections.get_mut(&self.user) {
            *open -= 1;
            if *open == 0 {
                connections.remove(&self.user);
            }
        }
    }
}

/// Publishes what a batch changed (best effort: logged, never failing the
/// batch, whose effects are committed and cached already).
pub async fn publish(app: &App, batch: &LiveBatch) {
    if batch.counters.is_empty() && batch.follows.is_empty() {
        return;
    }
    let published = async {
        let payload = serde_json::to_string(batch).map_err(|e| e.to_string())?;
        let mut redis = app.redis.get().await.map_err(|e| e.to_string())?;
        redis::cmd("PUBLISH")
            .arg(app.keys.live_channel())
            .arg(payload)
            .query_async::<()>(&mut *redis)
            .await
            .map_err(|e| e.to_string())
    };
    if let Err(error) = published.await {
        tracing::warn!(%error, "live update not published; subscribers miss this batch");
    }
}

/// How long a lost subscription waits before subscribing again.
const RESUBSCRIBE_AFTER: Duration = Duration::from_secs(1);

/// Listens for the projectors' batches until `shutdown`, re-subscribing
/// when the connection is lost; each batch drops this process's stale
/// in-process lists, then goes to its subscriptions.
pub async fn listen(app: Arc<App>, mut shutdown: Shutdown) {
    let channel = app.keys.live_channel();
    loop {
        let subscribed = async {
            let client = redis::Client::open(app.config.redis_url.as_str())?;
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(&channel).await?;
            Ok::<_, redis::RedisError>(pubsub.into_on_message())
        };
        match tokio::time::timeout(Duration::from_secs(2), subscribed).await {
            Ok(Ok(mut messages)) => {
                app.live.listening.store(true, Ordering::Relaxed);
                tracing::info!("live updates: listening");
                loop {
                    let message = tokio::select! {
                        () = shutdown.wait() => break,
                        message = messages.next() => message,
                    };
                    let Some(message) = message else { break };
                    let batch = message
                        .get_payload::<String>()
                        .ok()
                        .and_then(|p| serde_json::from_str::<LiveBatch>(&p).ok());
                    match batch {
                        Some(batch) => receive(&app, batch).await,
                        None => tracing::warn!("live updates: a message that does not decode"),
                    }
                }
                app.live.listening.store(false, Ordering::Relaxed);
                if !shutdown.requested() {
                    tracing::warn!("live updates: subscription lost; subscribing again");
                }
            }
            Ok(Err(error)) => tracing::warn!(%error, "live updates: cannot subscribe"),
            Err(_) => tracing::warn!("live updates: subscribing timed out"),
        }
        if !shutdown.sleep(RESUBSCRIBE_AFTER).await {
            return;
        }
    }
}

async fn receive(app: &App, batch: LiveBatch) {
    for change in &batch.follows {
        app.hot_lists
            .invalidate(&ListKey::Followers(change.to))
            .await;
        app.hot_lists
            .invalidate(&ListKey::Following(change.from))
            .await;
    }
    app.live.deliver(batch);
}
