//! Waking the outbox relay when events commit — without PostgreSQL's
//! `NOTIFY`. A transaction that notifies holds a database-wide lock from
//! just before its commit to its end, so every writing transaction would
//! commit (and flush its WAL) one after another, never in a group: on this
//! project's two-core machine, 16 clients inserting one row each reached
//! 17,600 commits/s without a notifying trigger and 4,600 with one.
//!
//! Instead a writer, after its commit:
//! - wakes the relay of its own process (`kith run`) through a
//!   [`tokio::sync::Notify`];
//! - publishes on the Redis channel `{prefix}kith:outbox`, in the same
//!   pipeline as its cache write-through (no extra round trip), for a relay
//!   in another process, which subscribes to it.
//!
//! A wake-up lost to a crash between the commit and the publish, or to Redis
//! being away, only delays its events until the next wake-up or the relay's
//! fallback poll (`KITH_RELAY_POLL_MS`); nothing is lost either way.
//!
//! The same way, a relay whose batch the broker acknowledged wakes parked
//! projectors (an idle projector stops fetching, see
//! [`crate::pipeline::projector`]): its own process's through a `Notify`,
//! others' on `{prefix}kith:produced`. A projector lacking that wake-up
//! still looks every `KITH_PROJECTOR_IDLE_POLL_MS`.

use std::time::Duration;

use futures_util::StreamExt as _;

use crate::app::App;
use crate::cache::RedisKeys;

/// Queues the cross-process wake-up on a pipeline the writer sends anyway.
pub(crate) fn queue_publish(pipe: &mut redis::Pipeline, keys: &RedisKeys) {
    pipe.cmd("PUBLISH")
        .arg(keys.relay_wake_channel())
        .arg("")
        .ignore();
}

/// Wakes every relay after a commit that appended outbox rows: this
/// process's at once, others' through Redis (best effort, logged: a lost
/// wake-up only waits for the fallback poll).
pub(crate) async fn wake(app: &App) {
    Signal::Relay.local(app).notify_one();
    publish(app, Signal::Relay).await;
}

/// Publishes `signal`'s wake-up on Redis for other processes (best effort).
async fn publish(app: &App, signal: Signal) {
    let published = async {
        let mut redis = app.redis.get().await.map_err(|e| e.to_string())?;
        redis::cmd("PUBLISH")
            .arg(signal.channel(&app.keys))
            .arg("")
            .query_async::<()>(&mut *redis)
            .await
            .map_err(|e| e.to_string())
    };
    if let Err(error) = published.await {
        let signal = signal.name();
        tracing::debug!(%error, signal, "wake-up not published; the fallback poll will find the events");
    }
}

/// Who is woken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Signal {
    /// Outbox relays, after a commit that appended outbox rows.
    Relay,
    /// Parked projectors, after a relay's batch reached the broker.
    Projector,
}

impl Signal {
    fn channel(self, keys: &RedisKeys) -> String {
        match self {
            Self::Relay => keys.relay_wake_channel(),
            Self::Projector => keys.projector_wake_channel(),
        }
    }

    fn local(self, app: &App) -> &tokio::sync::Notify {
        match self {
            Self::Relay => &app.wakes.relay,
            Self::Projector => &app.wakes.projector,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Relay => "relay",
            Self::Projector => "projector",
        }
    }
}

/// Tells parked projectors that a relay's batch reached the broker: this
/// process's at once, others' through Redis without holding the relay up
/// (a publish waits on Redis; the relay goes on to its next batch).
pub(crate) fn announce_produced(app: &std::sync::Arc<App>) {
    Signal::Projector.local(app).notify_one();
    let app = app.clone();
    tokio::spawn(async move { publish(&app, Signal::Projector).await });
}

/// What ended a [`Wakeups::wait`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Woken {
    /// A wake-up from this process.
    Here,
    /// A wake-up from another process, through Redis.
    Elsewhere,
    /// The poll interval (or the subscription was lost).
    Nothing,
}

/// What a relay waits on between rounds, or a parked projector.
pub(crate) struct Wakeups {
    signal: Signal,
    subscription: Option<redis::aio::PubSubStream>,
    target: crate::cache::cluster::Target,
    channel: String,
    next_attempt: tokio::time::Instant,
    /// Subscriptions tried: each tries the next node of a cluster.
    attempts: usize,
}

/// How often a relay without a subscription tries to subscribe again.
const RESUBSCRIBE_EVERY: Duration = Duration::from_secs(5);

/// How long subscribing may take before the relay goes on without it.
const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(2);

impl Wakeups {
    /// Subscribes to `signal`'s channel (retried later if Redis is away).
    pub(crate) async fn new(app: &App, signal: Signal) -> Self {
        let mut wakeups = Self {
            signal,
            subscription: None,
            target: crate::cache::cluster::Target::parse(&app.config.redis.url),
            channel: signal.channel(&app.keys),
            next_attempt: tokio::time::Instant::now(),
            attempts: 0,
        };
        wakeups.subscribe().await;
        wakeups
    }

    async fn subscribe(&mut self) {
        // While Redis is away, try again at most every RESUBSCRIBE_EVERY.
        self.next_attempt = tokio::time::Instant::now() + RESUBSCRIBE_EVERY;
        let subscribed =
            crate::cache::cluster::subscribe(&self.target, self.attempts, &self.channel);
        self.attempts += 1;
        match tokio::time::timeout(SUBSCRIBE_TIMEOUT, subscribed).await {
            Ok(Ok(stream)) => self.subscription = Some(stream),
            Ok(Err(error)) => {
                let signal = self.signal.name();
                tracing::warn!(%error, signal, "no wake-ups from other processes until Redis is back");
            }
            Err(_) => {
                let signal = self.signal.name();
                tracing::warn!(signal, "subscribing to wake-ups timed out");
            }
        }
    }

    /// Forgets wake-ups already received: the read that follows answers them.
    pub(crate) fn drain(&mut self, app: &App) {
        // A stored local permit is consumed here (or harmlessly later).
        let local = self.signal.local(app).notified();
        futures_util::pin_mut!(local);
        let _ = futures_util::FutureExt::now_or_never(local.as_mut());
        if let Some(stream) = self.subscription.as_mut() {
            while let Some(message) = futures_util::FutureExt::now_or_never(stream.next()) {
                if message.is_none() {
                    self.subscription = None;
                    break;
                }
            }
        }
    }

    /// Subscribes again if the subscription was lost and a retry is due.
    pub(crate) async fn resubscribe_if_due(&mut self) {
        if self.subscription.is_none() && tokio::time::Instant::now() >= self.next_attempt {
            self.subscribe().await;
        }
    }

    /// Whether wake-ups from other processes can arrive now.
    pub(crate) fn subscribed(&self) -> bool {
        self.subscription.is_some()
    }

    /// Waits for a wake-up (local or from another process) or `poll`.
    pub(crate) async fn wait(&mut self, app: &App, poll: Duration) -> Woken {
        self.resubscribe_if_due().await;
        let remote = async {
            match self.subscription.as_mut() {
                Some(stream) => stream.next().await.is_some(),
                None => std::future::pending().await,
            }
        };
        let (woken, lost) = tokio::select! {
            () = self.signal.local(app).notified() => (Woken::Here, false),
            open = remote => if open { (Woken::Elsewhere, false) } else { (Woken::Nothing, true) },
            () = tokio::time::sleep(poll) => (Woken::Nothing, false),
        };
        if lost {
            self.subscription = None;
        }
        woken
    }
}
