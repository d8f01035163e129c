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
//! Delivery is best effort, at most once: a message published while a
//! replica is not listening (Redis away, the replica starting) is not
//! replayed, and the follow transitions of a batch whose projector died
//! between its commit and its publish are not sent (the next owner re-syncs
//! the caches and publishes the counters only). Events carry the edge's
//! `version`, so a client can order them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::app::App;
use crate::error::ApiError;
use crate::model::UserId;
use crate::paging::ListKey;
use crate::shutdown::Shutdown;

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

/// How many batches concerning one user a slow subscription may fall
/// behind before it is told it missed some.
const BACKLOG: usize = 1024;

/// Users with channels past which subscribing sweeps the unused ones.
const SWEEP_ABOVE: usize = 1024;

/// The live-update hub of one process: a channel per user someone here
/// subscribes to, so a batch wakes only the subscriptions it concerns.
#[derive(Default)]
pub struct Hub {
    channels: Mutex<HashMap<UserId, broadcast::Sender<Arc<LiveBatch>>>>,
    /// Open WebSocket connections per user.
    connections: Mutex<HashMap<UserId, usize>>,
    /// True while this process listens on the channel.
    listening: AtomicBool,
}

impl Hub {
    /// Every batch received from now on that concerns `user` (sets its
    /// counters, or follows or unfollows it).
    pub fn subscribe(&self, user: UserId) -> broadcast::Receiver<Arc<LiveBatch>> {
        let mut channels = self.channels.lock().expect("channels lock");
        if channels.len() > SWEEP_ABOVE {
            channels.retain(|_, sender| sender.receiver_count() > 0);
        }
        channels
            .entry(user)
            .or_insert_with(|| broadcast::channel(BACKLOG).0)
            .subscribe()
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
        let mut users: Vec<UserId> = batch
            .counters
            .iter()
            .copied()
            .chain(batch.follows.iter().map(|change| change.to))
            .collect();
        users.sort_unstable();
        users.dedup();
        let batch = Arc::new(batch);
        let mut channels = self.channels.lock().expect("channels lock");
        for user in users {
            if let Some(sender) = channels.get(&user)
                && sender.send(batch.clone()).is_err()
            {
                // Nobody listens for this user any more.
                channels.remove(&user);
            }
        }
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
    let target = crate::cache::cluster::Target::parse(&app.config.redis_url);
    let mut attempt = 0;
    loop {
        let subscribed = crate::cache::cluster::subscribe(&target, attempt, &channel);
        attempt += 1;
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
