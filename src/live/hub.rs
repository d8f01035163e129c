//! The live-update hub of one process: a broadcast channel per user someone
//! here subscribes to, and the count of each user's open connections.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::error::ApiError;
use crate::events::follow::{FollowEvent, FollowEventType};
use crate::model::UserId;

/// What one projector batch changed, as published; or a move's batch as
/// it commits, in `coming` alone.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveBatch {
    /// Users whose counters the batch set.
    #[serde(default)]
    pub counters: Vec<UserId>,
    /// Follow transitions the batch applied.
    #[serde(default)]
    pub follows: Vec<FollowChange>,
    /// Follow transitions committed that the caches do not show yet: told
    /// by a move's runner as its batch commits, so that each process loads
    /// the rows of users its readers are about to see, and the counter
    /// records of those rising into first pages ([`super::announce`]).
    /// Not handed to subscriptions: the batch that applies them tells them
    /// in `follows`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub coming: Vec<FollowChange>,
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

impl From<&FollowEvent> for FollowChange {
    fn from(e: &FollowEvent) -> Self {
        Self {
            from: e.from,
            to: e.to,
            active: e.event_type == FollowEventType::FollowCreated,
            version: e.version,
            followed_at_ms: e.followed_at_ms,
            occurred_at_ms: e.occurred_at_ms,
        }
    }
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

    /// Records whether this process listens on the channel now.
    pub(super) fn set_listening(&self, listening: bool) {
        self.listening.store(listening, Ordering::Relaxed);
    }

    /// Hands `batch` to the subscriptions it concerns.
    pub(super) fn deliver(&self, batch: LiveBatch) {
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
