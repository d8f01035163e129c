//! The projector: a Kafka consumer group that applies follow and content
//! events to every derived view.
//!
//! For each batch: one PostgreSQL transaction applies follow events to the
//! `follower` projection under per-edge version guards and content events
//! under an event-id ledger, and adjusts `user_stats` once per user by the
//! transitions that really happened. Then Redis is brought to the current
//! truth of every user and edge the batch touched — counter records and list
//! caches, each write applied only if newer — and only then are the offsets
//! committed. A crash anywhere is repaired by replay: PostgreSQL rejects the
//! repeats, and the Redis step rewrites current state, never deltas.
//!
//! Undecodable messages, and events a constraint rejects three times, go to
//! the dead-letter topic with their origin in headers; they never block a
//! partition and are never dropped silently.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{TimeZone, Utc};
use diesel_async::AsyncConnection as _;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::message::{Header, Message, OwnedHeaders, OwnedMessage};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

use super::content::ContentEvent;
use super::events::{FollowEvent, FollowEventType, SCHEMA_VERSION};
use super::{Backoff, PipelineError, Shutdown, kafka};
use crate::app::App;
use crate::cache::counters::CounterRecord;
use crate::cache::lists::EdgeState;
use crate::cache::{self, ListKey};
use crate::metrics::Metrics;
use crate::model::UserId;
use crate::store::follower::{self, Applied, EdgeEvent};
use crate::store::stats::{self, StatsDelta};
use crate::store::{PgConn, content, following};

/// How many times an event a constraint rejects is retried before it is dead-lettered.
const PERMANENT_ATTEMPTS: u32 = 3;

/// Fault injection and measurement for tests and benchmarks.
#[derive(Default)]
pub struct ProjectorHooks {
    /// When set, the projector stops right after its next PostgreSQL commit,
    /// before Redis and before committing offsets — as a kill there would.
    pub crash_after_pg_commit: AtomicBool,
    /// When set, receives the lag (ms, commit to applied) of every follow event.
    pub lag_samples: Option<std::sync::Mutex<Vec<i64>>>,
}

/// One decoded message.
#[derive(Clone, Debug)]
enum Event {
    Follow(FollowEvent),
    Content(ContentEvent),
}

/// Runs the projector until `shutdown` (Ok) or a simulated crash (Err).
pub async fn run(
    app: Arc<App>,
    mut shutdown: Shutdown,
    hooks: Arc<ProjectorHooks>,
) -> Result<(), PipelineError> {
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
    let (consumer, dead_letters) = loop {
        match connect(&app).await {
            Ok(clients) => break clients,
            Err(e) => {
                tracing::warn!(error = %e, "projector: broker not ready; retrying");
                if !shutdown.sleep(backoff.next_delay()).await {
                    return Ok(());
                }
            }
        }
    };
    tracing::info!(group = %app.config.consumer_group, "projector running");
    loop {
        let Some(batch) = next_batch(&consumer, app.config.projector_batch, &mut shutdown).await
        else {
            break;
        };
        if batch.is_empty() {
            continue;
        }
        let started = std::time::Instant::now();
        if !process(&app, &batch, &dead_letters, &hooks, &mut shutdown).await? {
            break;
        }
        commit(&consumer, &batch);
        tracing::debug!(events = batch.len(), elapsed = ?started.elapsed(), "projector batch applied");
    }
    tracing::info!("projector stopped");
    Ok(())
}

async fn connect(app: &App) -> Result<(StreamConsumer, FutureProducer), PipelineError> {
    kafka::ensure_topics(&app.config).await?;
    let consumer: StreamConsumer = kafka::client_config(&app.config)
        .set("group.id", &app.config.consumer_group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "false")
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "1000")
        // tansu answers a fetch only when its wait expires, not when data
        // arrives, so the wait bounds the lag; against Kafka it can be raised.
        .set("fetch.wait.max.ms", app.config.fetch_wait_ms.to_string())
        .create()?;
    consumer.subscribe(&[&app.config.follow_topic, &app.config.content_topic])?;
    Ok((consumer, kafka::producer(&app.config)?))
}

/// Waits for one message, then takes whatever else is ready, up to `max`.
/// `None` when shutdown was requested.
async fn next_batch(
    consumer: &StreamConsumer,
    max: usize,
    shutdown: &mut Shutdown,
) -> Option<Vec<OwnedMessage>> {
    let first = tokio::select! {
        message = consumer.recv() => message,
        () = shutdown.wait() => return None,
    };
    let mut batch = Vec::new();
    match first {
        Ok(message) => batch.push(message.detach()),
        Err(e) => {
            tracing::warn!(error = %e, "projector: consume error");
            return shutdown
                .sleep(Duration::from_millis(200))
                .await
                .then(Vec::new);
        }
    }
    while batch.len() < max {
        match tokio::time::timeout(Duration::from_millis(2), consumer.recv()).await {
            Ok(Ok(message)) => batch.push(message.detach()),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "projector: consume error");
                break;
            }
            Err(_elapsed) => break,
        }
    }
    Some(batch)
}

fn decode(app: &App, message: &OwnedMessage) -> Result<Event, String> {
    let payload = message.payload().ok_or("empty payload")?;
    if message.topic() == app.config.follow_topic {
        let event: FollowEvent = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
        if event.schema_version > SCHEMA_VERSION {
            return Err(format!(
                "unsupported schemaVersion {}",
                event.schema_version
            ));
        }
        Ok(Event::Follow(event))
    } else if message.topic() == app.config.content_topic {
        serde_json::from_slice(payload)
            .map(Event::Content)
            .map_err(|e| e.to_string())
    } else {
        Err(format!("unexpected topic {}", message.topic()))
    }
}

/// Applies a batch, dead-lettering what can never be applied. Returns false
/// when shutdown interrupted it (offsets must then not be committed).
async fn process(
    app: &App,
    batch: &[OwnedMessage],
    dead_letters: &FutureProducer,
    hooks: &ProjectorHooks,
    shutdown: &mut Shutdown,
) -> Result<bool, PipelineError> {
    let mut events = Vec::with_capacity(batch.len());
    for message in batch {
        match decode(app, message) {
            Ok(event) => events.push((message, event)),
            Err(reason) => {
                if !dead_letter(app, dead_letters, message, &reason, shutdown).await {
                    return Ok(false);
                }
            }
        }
    }
    let all: Vec<Event> = events.iter().map(|(_, e)| e.clone()).collect();
    match apply_with_retry(app, &all, hooks, shutdown).await? {
        Outcome::Applied => return Ok(true),
        Outcome::Interrupted => return Ok(false),
        Outcome::Rejected(_) => {}
    }
    // Something in the batch is rejected for good: find it by applying one by one.
    for (message, event) in events {
        match apply_with_retry(app, std::slice::from_ref(&event), hooks, shutdown).await? {
            Outcome::Applied => {}
            Outcome::Interrupted => return Ok(false),
            Outcome::Rejected(reason) => {
                if !dead_letter(app, dead_letters, message, &reason, shutdown).await {
                    return Ok(false);
                }
            }
        }
    }
    Ok(true)
}

enum Outcome {
    Applied,
    Interrupted,
    Rejected(String),
}

/// Retries outages until they pass; gives up on a rejection after a few tries.
async fn apply_with_retry(
    app: &App,
    events: &[Event],
    hooks: &ProjectorHooks,
    shutdown: &mut Shutdown,
) -> Result<Outcome, PipelineError> {
    let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(5));
    let mut rejections = 0;
    loop {
        match apply(app, events, hooks).await {
            Ok(()) => return Ok(Outcome::Applied),
            Err(PipelineError::SimulatedCrash) => return Err(PipelineError::SimulatedCrash),
            Err(e) if e.is_permanent() => {
                rejections += 1;
                tracing::warn!(error = %e, events = events.len(), rejections, "projector: events rejected");
                if rejections >= PERMANENT_ATTEMPTS {
                    return Ok(Outcome::Rejected(e.to_string()));
                }
            }
            Err(e) => tracing::warn!(error = %e, "projector: apply failed; retrying"),
        }
        if !shutdown.sleep(backoff.next_delay()).await {
            return Ok(Outcome::Interrupted);
        }
    }
}

/// The PostgreSQL transaction, then the Redis re-sync of everything touched.
async fn apply(app: &App, events: &[Event], hooks: &ProjectorHooks) -> Result<(), PipelineError> {
    let mut conn = app.pg.get().await?;
    conn.transaction::<_, PipelineError, _>(async |conn| apply_to_postgres(conn, events).await)
        .await?;
    if hooks.crash_after_pg_commit.swap(false, Ordering::SeqCst) {
        return Err(PipelineError::SimulatedCrash);
    }
    resync_redis(app, &mut conn, events).await?;

    let now_ms = Utc::now().timestamp_millis();
    let mut samples = hooks
        .lag_samples
        .as_ref()
        .map(|s| s.lock().expect("lag samples"));
    for event in events {
        let occurred = match event {
            Event::Follow(e) => Some(e.occurred_at_ms),
            Event::Content(e) => e.occurred_at_ms,
        };
        if let Some(occurred) = occurred {
            app.metrics
                .pipeline_lag
                .observe((now_ms - occurred) as f64 / 1000.0);
            if let (Some(samples), Event::Follow(_)) = (samples.as_mut(), event) {
                samples.push(now_ms - occurred);
            }
        }
    }
    Metrics::add(&app.metrics.events_applied, events.len() as u64);
    Ok(())
}

async fn apply_to_postgres(conn: &mut PgConn, events: &[Event]) -> Result<(), PipelineError> {
    // Three statements per batch whatever its size: the follow events in
    // order, the content-event claims, then the counter deltas per user.
    let follows: Vec<EdgeEvent> = events
        .iter()
        .filter_map(|event| match event {
            Event::Follow(e) => Some(EdgeEvent {
                from: e.from,
                to: e.to,
                active: e.event_type == FollowEventType::FollowCreated,
                followed_at: Utc
                    .timestamp_millis_opt(e.followed_at_ms)
                    .single()
                    .unwrap_or_default(),
                version: e.version,
            }),
            Event::Content(_) => None,
        })
        .collect();
    let contents: Vec<&ContentEvent> = events
        .iter()
        .filter_map(|event| match event {
            Event::Content(e) => Some(e),
            Event::Follow(_) => None,
        })
        .collect();

    let mut deltas: BTreeMap<UserId, StatsDelta> = BTreeMap::new();
    for (event, applied) in follows
        .iter()
        .zip(follower::apply_many(conn, &follows).await?)
    {
        if let Applied::Changed { was_active, active } = applied {
            deltas.entry(event.to).or_default().followers +=
                i64::from(active) - i64::from(was_active);
        }
    }
    let claims: Vec<_> = contents.iter().map(|e| (e.event_id, e.author_id)).collect();
    let mut claimed = content::claim_many(conn, &claims).await?;
    for event in contents {
        // `remove`: an id repeated within the batch counts once.
        if claimed.remove(&event.event_id) {
            let d = event.delta();
            let entry = deltas.entry(event.author_id).or_default();
            entry.posts += d.posts;
            entry.likes_received += d.likes_received;
            entry.favs_received += d.favs_received;
        }
    }
    // BTreeMap order: user id ascending, so batches never deadlock each other.
    let deltas: Vec<(UserId, StatsDelta)> =
        deltas.into_iter().filter(|(_, d)| !d.is_zero()).collect();
    stats::apply_deltas(conn, &deltas).await?;
    Ok(())
}

/// Writes the current truth of every user and edge in `events` to Redis.
async fn resync_redis(app: &App, conn: &mut PgConn, events: &[Event]) -> Result<(), PipelineError> {
    let mut users = BTreeSet::new();
    let mut pairs = BTreeSet::new();
    for event in events {
        match event {
            Event::Follow(e) => {
                users.extend([e.from, e.to]);
                pairs.insert((e.from, e.to));
            }
            Event::Content(e) => {
                users.insert(e.author_id);
            }
        }
    }
    let users: Vec<UserId> = users.into_iter().collect();
    let pairs: Vec<(UserId, UserId)> = pairs.into_iter().collect();
    let records: Vec<(UserId, CounterRecord)> = stats::find_many(conn, &users)
        .await?
        .iter()
        .map(|(user, s)| (*user, CounterRecord::from(s)))
        .collect();
    let mut edges = Vec::new();
    for row in follower::rows(conn, &pairs).await? {
        edges.extend(edge_state(row, |from, to| (ListKey::Followers(to), from)));
    }
    for row in following::rows(conn, &pairs).await? {
        edges.extend(edge_state(row, |from, to| (ListKey::Following(from), to)));
    }
    let mut redis = app.redis.get().await?;
    cache::write_through(&mut *redis, &app.keys, &records, &edges).await?;
    // This process's hot lists see the change now; other processes' within
    // their short TTL.
    for edge in &edges {
        app.hot_lists.invalidate(&edge.list).await;
    }
    Ok(())
}

fn edge_state(
    row: follower::EdgeRow,
    list_and_member: impl Fn(UserId, UserId) -> (ListKey, UserId),
) -> Option<EdgeState> {
    let (list, other) =
        list_and_member(UserId::new(row.from_user_id)?, UserId::new(row.to_user_id)?);
    Some(EdgeState {
        list,
        other,
        active: row.active,
        followed_at_ms: row.followed_at.timestamp_millis(),
        version: row.version,
    })
}

/// Sends `message` to the dead-letter topic, retrying until the broker takes
/// it. Returns false when shutdown interrupted the retries.
async fn dead_letter(
    app: &App,
    producer: &FutureProducer,
    message: &OwnedMessage,
    reason: &str,
    shutdown: &mut Shutdown,
) -> bool {
    let partition = message.partition().to_string();
    let offset = message.offset().to_string();
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
    loop {
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: "kith-source-topic",
                value: Some(message.topic()),
            })
            .insert(Header {
                key: "kith-source-partition",
                value: Some(&partition),
            })
            .insert(Header {
                key: "kith-source-offset",
                value: Some(&offset),
            })
            .insert(Header {
                key: "kith-error",
                value: Some(reason),
            });
        let mut record =
            FutureRecord::<[u8], [u8]>::to(&app.config.dead_letter_topic).headers(headers);
        if let Some(key) = message.key() {
            record = record.key(key);
        }
        if let Some(payload) = message.payload() {
            record = record.payload(payload);
        }
        match producer.send(record, Duration::from_secs(10)).await {
            Ok(_) => {
                tracing::warn!(topic = message.topic(), %partition, %offset, reason, "dead-lettered");
                Metrics::add(&app.metrics.events_dead_lettered, 1);
                return true;
            }
            Err((e, _)) => tracing::warn!(error = %e, "dead-letter publish failed; retrying"),
        }
        if !shutdown.sleep(backoff.next_delay()).await {
            return false;
        }
    }
}

/// Commits the offset after each partition's last message of the batch.
fn commit(consumer: &StreamConsumer, batch: &[OwnedMessage]) {
    let mut next: BTreeMap<(&str, i32), i64> = BTreeMap::new();
    for message in batch {
        let slot = next
            .entry((message.topic(), message.partition()))
            .or_default();
        *slot = (*slot).max(message.offset() + 1);
    }
    let mut offsets = TopicPartitionList::new();
    for ((topic, partition), offset) in next {
        if let Err(e) = offsets.add_partition_offset(topic, partition, Offset::Offset(offset)) {
            tracing::warn!(error = %e, "projector: bad offset");
        }
    }
    // Asynchronous: the effects are already durable, so the next batch need not
    // wait for the broker. A failed commit (say, after a rebalance) only means
    // a replay, which is harmless. Closing the consumer commits what is pending.
    if let Err(e) = consumer.commit(&offsets, CommitMode::Async) {
        tracing::warn!(error = %e, "projector: offset commit failed; the batch will be replayed");
    }
}
