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
//! A move's runner also tells of each batch as it commits, before the
//! pipeline brings it to the caches ([`announce`]): each process loads the
//! rows of the users its readers are about to see at the heads of the
//! lists the batch changes, and the counter records Redis lacks of those
//! rising into them ([`crate::read::heads`]).
//!
//! Delivery is best effort, at most once: a message published while a
//! replica is not listening (Redis away, the replica starting) is not
//! replayed, and the follow transitions of a batch whose projector died
//! between its commit and its publish are not sent (the next owner re-syncs
//! the caches and publishes the counters only). Events carry the edge's
//! `version`, so a client can order them.

mod coming;
pub(crate) mod hub;

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;

use self::hub::{FollowChange, LiveBatch};
use crate::app::App;
use crate::paging::ListKey;
use crate::shutdown::Shutdown;

/// Publishes what a batch changed (best effort: logged, never failing the
/// batch, whose effects are committed and cached already).
pub(crate) async fn publish(app: &App, batch: &LiveBatch) {
    if batch.counters.is_empty() && batch.follows.is_empty() {
        return;
    }
    if let Err(error) = send(app, batch).await {
        tracing::warn!(%error, "live update not published; subscribers miss this batch");
    }
}

/// Tells every process of follow transitions just committed that the
/// caches do not show yet (best effort, as [`publish`]): each loads the
/// rows its readers are about to see, and the counter records of those
/// rising into a first page ([`coming`]).
pub(crate) async fn announce(app: &App, coming: Vec<FollowChange>) {
    if coming.is_empty() {
        return;
    }
    let batch = LiveBatch {
        coming,
        ..LiveBatch::default()
    };
    if let Err(error) = send(app, &batch).await {
        tracing::debug!(%error, "coming follows not announced");
    }
}

async fn send(app: &App, batch: &LiveBatch) -> Result<(), String> {
    let payload = serde_json::to_string(batch).map_err(|e| e.to_string())?;
    let mut redis = app.redis.get().await.map_err(|e| e.to_string())?;
    redis::cmd("PUBLISH")
        .arg(app.keys.live_channel())
        .arg(payload)
        .query_async::<()>(&mut *redis)
        .await
        .map_err(|e| e.to_string())
}

/// How long a lost subscription waits before subscribing again.
const RESUBSCRIBE_AFTER: Duration = Duration::from_secs(1);

/// Listens for the projectors' batches until `shutdown`, re-subscribing
/// when the connection is lost; each batch drops this process's stale
/// in-process lists, then goes to its subscriptions. A move's batch told
/// as it commits (`coming`) has the rows it is about to show loaded, and
/// the counter records of those rising into first pages ([`coming`]).
pub async fn listen(app: Arc<App>, mut shutdown: Shutdown) {
    let channel = app.keys.live_channel();
    let target = crate::cache::cluster::Target::parse(&app.config.redis.url);
    let mut attempt = 0;
    loop {
        let subscribed = crate::cache::cluster::subscribe(&target, attempt, &channel);
        attempt += 1;
        match tokio::time::timeout(Duration::from_secs(2), subscribed).await {
            Ok(Ok(mut messages)) => {
                app.live.set_listening(true);
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
                app.live.set_listening(false);
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

async fn receive(app: &Arc<App>, mut batch: LiveBatch) {
    let coming = std::mem::take(&mut batch.coming);
    if !coming.is_empty() {
        coming::load(app, &coming);
        if batch.counters.is_empty() && batch.follows.is_empty() {
            return;
        }
    }
    // A move's batch changes one list hundreds of times: each is forgotten
    // once.
    let mut lists: Vec<ListKey> = batch
        .follows
        .iter()
        .flat_map(|c| [ListKey::Followers(c.to), ListKey::Following(c.from)])
        .collect();
    lists.sort_unstable();
    lists.dedup();
    for list in &lists {
        app.read.forget_list(list).await;
    }
    app.live.deliver(batch);
}
