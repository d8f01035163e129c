//! Dead letters after the fact: mirrored to the dead-letter topic (by the
//! relay), and replayed by `kith dead-letters replay` once whatever rejected
//! them is fixed. A replay goes through the projector's own apply step, so
//! its guards hold: a follow event older than the edge changes nothing, a
//! content event counts once, and one that would still take a counter below
//! zero stays dead.

use std::time::Duration;

use diesel_async::AsyncConnection as _;
use rdkafka::Timestamp;
use rdkafka::message::{Header, OwnedHeaders, OwnedMessage};
use rdkafka::producer::{FutureProducer, FutureRecord};

use super::origin::Writer;
use super::projector::apply;
use super::projector::batch::{self, Action, Item};
use super::projector::resync;
use crate::app::App;
use crate::error::PipelineError;
use crate::store::dead_letters::{self, DeadLetter};
use crate::store::origin::Origin;
use crate::store::partitions::TopicPartition;

/// Sends `letters` to the dead-letter topic with their origin in headers and
/// waits for every acknowledgement.
pub(crate) async fn publish(
    producer: &FutureProducer,
    topic: &str,
    letters: &[DeadLetter],
) -> Result<(), PipelineError> {
    let mut deliveries = Vec::with_capacity(letters.len());
    for letter in letters {
        let partition = letter.source_partition.to_string();
        let offset = letter.source_offset.to_string();
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: "kith-source-topic",
                value: Some(&letter.source_topic),
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
                value: Some(&letter.error),
            });
        let mut record = FutureRecord::<[u8], [u8]>::to(topic).headers(headers);
        if let Some(key) = &letter.message_key {
            record = record.key(key);
        }
        if let Some(payload) = &letter.payload {
            record = record.payload(payload);
        }
        deliveries.push(producer.send(record, Duration::from_secs(10)));
    }
    for delivery in deliveries {
        delivery.await.map_err(|(e, _)| e)?;
    }
    Ok(())
}

/// What a replay did.
#[derive(Debug, Default)]
pub struct ReplayReport {
    /// Dead letters applied now (marked replayed).
    pub replayed: Vec<i64>,
    /// Dead letters that still cannot be applied, with the reason.
    pub still_dead: Vec<(i64, String)>,
}

/// Re-applies the dead letters not replayed yet (only `ids`, when given),
/// oldest first.
pub async fn replay(app: &App, ids: Option<&[i64]>) -> Result<ReplayReport, PipelineError> {
    let mut report = ReplayReport::default();
    // A follow event another database wrote stays dead, as the projector
    // left it.
    let origin = {
        let mut conn = app.pg.get().await?;
        super::origin::check(&mut conn).await?
    };
    let mut after = 0;
    loop {
        let letters = {
            let mut conn = app.pg.get().await?;
            dead_letters::list(&mut conn, after, 500, true).await?
        };
        let Some(last) = letters.last() else {
            break;
        };
        after = last.id;
        for letter in letters {
            if ids.is_some_and(|ids| !ids.contains(&letter.id)) {
                continue;
            }
            match replay_one(app, &origin, &letter).await? {
                Ok(()) => report.replayed.push(letter.id),
                Err(reason) => report.still_dead.push((letter.id, reason)),
            }
        }
    }
    Ok(report)
}

async fn replay_one(
    app: &App,
    origin: &Origin,
    letter: &DeadLetter,
) -> Result<Result<(), String>, PipelineError> {
    if letter.source_topic == app.config.pipeline.follow_topic
        && let Some(refusal) = Writer::from_stamp(letter.origin, origin).refusal()
    {
        return Ok(Err(refusal));
    }
    let message = OwnedMessage::new(
        letter.payload.clone(),
        letter.message_key.clone(),
        letter.source_topic.clone(),
        Timestamp::NotAvailable,
        letter.source_partition,
        letter.source_offset,
        None,
    );
    let event = match batch::decode(&app.config, &message) {
        Ok(event) => event,
        Err(reason) => return Ok(Err(reason)),
    };
    let item = Item {
        partition: TopicPartition {
            topic: letter.source_topic.clone(),
            partition: letter.source_partition,
        },
        offset: letter.source_offset,
        message,
        action: Action::Apply(event),
    };
    let mut conn = app.pg.get().await?;
    let id = letter.id;
    let applied = conn
        .transaction::<_, PipelineError, _>(async |conn| {
            let committed = apply::apply_items(conn, &[&item]).await?;
            if committed.applied == 1 {
                dead_letters::mark_replayed(conn, id).await?;
            }
            Ok(committed.applied == 1)
        })
        .await;
    drop(conn);
    match applied {
        Ok(true) => {
            resync::resync(app, item.event()).await?;
            Ok(Ok(()))
        }
        Ok(false) => Ok(Err(
            "still rejected: it would take a counter below zero, or its author is unknown".into(),
        )),
        Err(e) if e.is_permanent() => Ok(Err(e.to_string())),
        Err(e) => Err(e),
    }
}
