//! Kafka clients and topics.

use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::KafkaError;
use rdkafka::producer::FutureProducer;
use rdkafka::types::RDKafkaErrorCode;

use crate::config::Config;

/// The settings every client shares: the brokers, then the configured
/// librdkafka properties (`KITH_KAFKA_*`: TLS, SASL, timeouts…). The
/// settings each client sets after this (the producer's `acks=all` and one
/// request in flight, the consumer's manual offsets) are Kith's guarantees
/// and win over these.
pub fn client_config(config: &Config) -> ClientConfig {
    let mut client = ClientConfig::new();
    client
        .set("bootstrap.servers", &config.pipeline.kafka_brokers)
        .set("client.id", "kith")
        .set("log_level", "4");
    for (name, value) in &config.pipeline.kafka_properties {
        client.set(name, value);
    }
    client
}

/// A producer that waits for every in-sync replica (`acks=all`), so an
/// acknowledged message is durable, with one request in flight per broker,
/// so a retry never reorders a partition. A message the broker cannot take
/// within `message.timeout.ms` fails its delivery instead of hanging forever
/// (the relay then sends the batch again).
///
/// Not idempotent: a retry after a lost acknowledgement may duplicate a
/// message, which the projector's positions and per-edge versions make
/// harmless — and an idempotent producer recovering from an outage asks the
/// broker to bump its epoch, which some Kafka-compatible brokers (tansu
/// 0.6.0) cannot do. The same settings behave the same on Kafka.
pub fn producer(config: &Config) -> Result<FutureProducer, KafkaError> {
    producer_config(config).create()
}

/// The producer's settings (see [`producer`]).
pub fn producer_config(config: &Config) -> ClientConfig {
    let mut client = client_config(config);
    client
        .set("enable.idempotence", "false")
        .set("acks", "all")
        .set("max.in.flight.requests.per.connection", "1")
        .set("linger.ms", "2")
        .set("message.timeout.ms", "10000");
    client
}

/// The projector's consumer settings. Partitions are assigned explicitly and
/// positions live in PostgreSQL: the group id only names the client to the
/// broker; nothing joins a group or commits offsets there.
pub fn consumer_config(config: &Config) -> ClientConfig {
    let mut client = client_config(config);
    client
        .set("group.id", &config.pipeline.consumer_group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "false")
        // tansu answers a fetch only when its wait expires, not when data
        // arrives, so the wait bounds the lag; against Kafka it can be raised.
        .set(
            "fetch.wait.max.ms",
            config.pipeline.fetch_wait_ms.to_string(),
        );
    client
}

/// Creates the follow, content and dead-letter topics when missing (the local
/// broker does not create topics on first produce), replicated as configured:
/// with `acks=all`, a write is acknowledged once `min.insync.replicas` copies
/// hold it. Existing topics are left as they are.
pub async fn ensure_topics(config: &Config) -> Result<(), KafkaError> {
    let admin: AdminClient<DefaultClientContext> = client_config(config).create()?;
    let min_insync = config.pipeline.topic_min_insync_replicas.to_string();
    let topics: Vec<NewTopic<'_>> = [
        &config.pipeline.follow_topic,
        &config.pipeline.content_topic,
        &config.pipeline.dead_letter_topic,
    ]
    .into_iter()
    .map(|name| {
        NewTopic::new(
            name,
            config.pipeline.topic_partitions,
            TopicReplication::Fixed(config.pipeline.topic_replication_factor),
        )
        .set("min.insync.replicas", &min_insync)
    })
    .collect();
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    for result in admin.create_topics(&topics, &options).await? {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((topic, code)) => {
                tracing::warn!(%topic, ?code, "cannot create topic");
                return Err(KafkaError::AdminOp(code));
            }
        }
    }
    Ok(())
}

/// The low and high watermarks librdkafka last saw for a partition, without
/// asking the broker (`rd_kafka_get_watermark_offsets`: the high one comes
/// with every fetch answer). `None` while unknown.
pub(crate) fn cached_watermarks<C: rdkafka::ClientContext>(
    client: &rdkafka::client::Client<C>,
    topic: &str,
    partition: i32,
) -> Option<(i64, i64)> {
    let topic = std::ffi::CString::new(topic).ok()?;
    let (mut low, mut high) = (-1_i64, -1_i64);
    // SAFETY: the handle is alive for `client`'s lifetime, `topic` is a
    // NUL-terminated string that outlives the call, and the out-pointers
    // point to live locals. The function takes librdkafka's own locks; it
    // may create the local topic/partition object (harmless: callers ask for
    // partitions they hold).
    let err = unsafe {
        rdkafka::bindings::rd_kafka_get_watermark_offsets(
            client.native_ptr(),
            topic.as_ptr(),
            partition,
            &raw mut low,
            &raw mut high,
        )
    };
    (err == rdkafka::types::RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR && high >= 0)
        .then_some((low, high))
}
