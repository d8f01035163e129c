//! The outbox relay: publishes committed outbox rows to Kafka, then deletes
//! them — only after the broker acknowledged every one (at-least-once).
//!
//! One relay is active per schema: it holds a PostgreSQL advisory lock on its
//! own session, so several relay processes can run and the others stand by.
//! It wakes when a writer says it committed events ([`super::wake`]), with a
//! fallback poll, and publishes in batches of up to `KITH_RELAY_BATCH` rows in id order,
//! keyed by the follower's id so one follower's edges stay in commit order.
//! When the broker is unreachable it backs off and keeps the rows; the API
//! keeps accepting writes meanwhile. It also mirrors the projector's dead
//! letters (recorded in PostgreSQL) to the dead-letter topic, once each.
//! Every event carries its database's origin ([`super::origin`]).

use std::sync::Arc;
use std::time::Duration;

use diesel::sql_types::Bool;
use diesel::{QueryableByName, sql_query};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer as _};

use super::kafka;
use super::wake::{Signal, Wakeups, announce_produced};
use crate::app::App;
use crate::error::PipelineError;
use crate::shutdown::{Backoff, Shutdown};
use crate::store::dead_letters;
use crate::store::outbox::{self, PendingEvent};

/// Dead letters mirrored per round at most.
pub(crate) const DEAD_LETTERS_PER_ROUND: i64 = 100;

/// How often a standby relay retries the leadership lock.
const STANDBY_POLL: Duration = Duration::from_secs(1);

/// Runs the relay until `shutdown`; fails only on a database that is not
/// where its event origin was made ([`PipelineError::Relocated`]).
pub async fn run(app: Arc<App>, mut shutdown: Shutdown) -> Result<(), PipelineError> {
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
    let mut producer = None;
    while !shutdown.requested() {
        let result = async {
            if producer.is_none() {
                kafka::ensure_topics(&app.config).await?;
                producer = Some(kafka::producer(&app.config)?);
            }
            let p = producer.as_ref().expect("just created");
            lead(&app, p, &mut shutdown, &mut backoff).await
        }
        .await;
        match result {
            Ok(()) => break,
            Err(e @ PipelineError::Relocated { .. }) => return Err(e),
            Err(e) => {
                tracing::warn!(error = %e, "outbox relay: restarting");
                // A producer in a fatal state must be replaced.
                if producer
                    .as_ref()
                    .is_some_and(|p| p.client().fatal_error().is_some())
                {
                    producer = None;
                }
                if !shutdown.sleep(backoff.next_delay()).await {
                    break;
                }
            }
        }
    }
    if let Some(p) = producer {
        let _ = p.flush(Duration::from_secs(5));
    }
    tracing::info!("outbox relay stopped");
    Ok(())
}

#[derive(QueryableByName)]
struct Locked {
    #[diesel(sql_type = Bool)]
    locked: bool,
}

/// Waits for leadership, then publishes until shutdown or a failure.
async fn lead(
    app: &Arc<App>,
    producer: &FutureProducer,
    shutdown: &mut Shutdown,
    backoff: &mut Backoff,
) -> Result<(), PipelineError> {
    // A dedicated session: the advisory lock lives and dies with it.
    let mut conn = AsyncPgConnection::establish(&crate::store::pool::with_keepalives(
        app.config.session_url(),
    ))
    .await?;
    loop {
        let Locked { locked } = sql_query(
            "SELECT pg_try_advisory_lock(hashtext('kith.outbox_relay.' || current_schema())) AS locked",
        )
        .get_result(&mut conn)
        .await?;
        if locked {
            break;
        }
        if !shutdown.sleep(STANDBY_POLL).await {
            return Ok(());
        }
    }
    // Every event goes out stamped with the database that wrote it.
    let origin = super::origin::check(&mut conn).await?.origin.to_string();
    let mut wakeups = Wakeups::new(app, Signal::Relay).await;
    tracing::info!(%origin, "outbox relay active");
    let poll = Duration::from_millis(app.config.pipeline.relay_poll_ms);

    // Rows the broker acknowledged, deleted with the next round's read (or
    // before stopping). A relay that dies first leaves them to be sent again,
    // which the projector's positions and edge versions make harmless.
    let mut published: Vec<i64> = Vec::new();
    // A producer in a fatal state: the loop ends, and so does this lead.
    let mut failed = None;
    while !shutdown.requested() {
        // Wake-ups so far are answered by the reads below; one that arrives
        // after them is still there when we wait, so no commit is left for
        // the fallback poll.
        wakeups.drain(app);
        let batch =
            outbox::settle_and_read(&mut conn, &published, app.config.pipeline.relay_batch).await?;
        published.clear();
        // Every round, so a busy outbox never starves them.
        let letters = dead_letters::unpublished(&mut conn, DEAD_LETTERS_PER_ROUND).await?;
        if batch.is_empty() && letters.is_empty() {
            tokio::select! {
                _ = wakeups.wait(app, poll) => {}
                () = shutdown.wait() => {}
            }
            continue;
        }
        let started = std::time::Instant::now();
        let mut sent = Ok(());
        if !batch.is_empty() {
            sent = publish(producer, &app.config.pipeline.follow_topic, &origin, &batch).await;
            if sent.is_ok() {
                // The events are on the broker: a parked projector may read.
                announce_produced(app);
                app.metrics.events_relayed.inc_by(batch.len() as u64);
                published = batch.iter().map(|e| e.id).collect();
            }
        }
        if sent.is_ok() && !letters.is_empty() {
            sent = async {
                crate::pipeline::dead_letters::publish(
                    producer,
                    &app.config.pipeline.dead_letter_topic,
                    &letters,
                )
                .await?;
                let ids: Vec<i64> = letters.iter().map(|l| l.id).collect();
                dead_letters::mark_published(&mut conn, &ids).await?;
                Ok::<_, PipelineError>(())
            }
            .await;
        }
        match sent {
            Ok(()) => {
                tracing::debug!(rows = batch.len(), dead_letters = letters.len(), elapsed = ?started.elapsed(), "outbox batch published");
                backoff.reset();
            }
            Err(e) => {
                // What the broker did not acknowledge stays and is sent
                // again; the projector's version guards make repeats harmless.
                tracing::warn!(error = %e, rows = batch.len(), "outbox relay: publish failed; backing off");
                if !shutdown.sleep(backoff.next_delay()).await {
                    break;
                }
                if producer.client().fatal_error().is_some() {
                    failed = Some(e);
                    break;
                }
            }
        }
    }
    // What was acknowledged need not be sent again by the next relay.
    if !published.is_empty() {
        let deleted = outbox::delete(&mut conn, &published).await;
        if failed.is_none() {
            deleted?;
        }
    }
    failed.map_or(Ok(()), Err)
}

/// Sends every row, stamped with `origin`, and waits for every
/// acknowledgement.
async fn publish(
    producer: &FutureProducer,
    topic: &str,
    origin: &str,
    batch: &[PendingEvent],
) -> Result<(), PipelineError> {
    let mut deliveries = Vec::with_capacity(batch.len());
    for event in batch {
        let payload = serde_json::to_vec(&event.payload).expect("JSON values serialize");
        let headers = OwnedHeaders::new().insert(Header {
            key: super::origin::HEADER,
            value: Some(origin),
        });
        let record = FutureRecord::to(topic)
            .key(&event.partition_key)
            .payload(&payload)
            .headers(headers);
        let delivery = producer.send_result(record).map_err(|(e, _)| e)?;
        deliveries.push(delivery);
    }
    for delivery in deliveries {
        match delivery.await {
            Ok(Ok(_)) => {}
            Ok(Err((e, _))) => return Err(e.into()),
            Err(_canceled) => {
                return Err(rdkafka::error::KafkaError::Canceled.into());
            }
        }
    }
    Ok(())
}
