//! Partition ownership without the broker's group coordinator.
//!
//! Each projector is a member of its group in `projector_member` and holds
//! leases on partitions in `projector_partition`, all on PostgreSQL's clock.
//! Every tick (a fifth of the lease) the keeper heartbeats, renews what it
//! holds, and shares the partitions out: each topic's partitions divided by
//! the live members, rounded up, is a member's share. A member above its share
//! releases the excess (a newcomer then claims it); a member below claims
//! partitions that are free or whose lease ran out — a member that died
//! without a word loses its partitions one lease after its last heartbeat.
//!
//! Claiming bumps the partition's epoch; a batch commits only under the epoch
//! it was read in (`store::partitions::advance`), so an owner that stalls past
//! its lease cannot write after the partition moved on.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use diesel_async::{AsyncConnection as _, AsyncPgConnection};
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::error::KafkaError;
use tokio::sync::watch;
use uuid::Uuid;

use crate::app::App;
use crate::error::PipelineError;
use crate::pipeline::kafka;
use crate::shutdown::Shutdown;
use crate::store::partitions::{self, Lease, TopicPartition};

/// The partitions a member holds, with the lease each was claimed under.
pub(crate) type Assignment = BTreeMap<TopicPartition, Lease>;

/// Partitions per topic, as the broker reports them.
type PartitionCounts = Vec<(String, i32)>;

/// How often the partition counts are read from the broker.
const PARTITION_CHECK: Duration = Duration::from_secs(30);

/// Keeps this member's leases until `shutdown`, publishing what it holds.
/// It does not release them when it stops: the projector does, once its
/// last batch is done.
pub(crate) async fn keep(
    app: Arc<App>,
    member: Uuid,
    topics: Vec<String>,
    publish: watch::Sender<Assignment>,
    mut shutdown: Shutdown,
) {
    let lease = Duration::from_millis(app.config.pipeline.projector_lease_ms);
    let mut keeper = Keeper {
        app,
        member,
        topics,
        lease,
        conn: None,
        metadata: None,
        counts: None,
        partitions_checked: None,
        lag: None,
    };
    loop {
        match keeper.tick().await {
            Ok(held) => {
                keeper.record_lag(&held);
                publish.send_if_modified(|current| {
                    let same = current.len() == held.len()
                        && current
                            .iter()
                            .zip(&held)
                            .all(|((a, la), (b, lb))| a == b && la.epoch == lb.epoch);
                    if !same {
                        *current = held;
                    }
                    !same
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "projector leases: tick failed; retrying");
            }
        }
        if !shutdown.sleep(lease / 5).await {
            return;
        }
    }
}

struct Keeper {
    app: Arc<App>,
    member: Uuid,
    topics: Vec<String>,
    lease: Duration,
    /// A session of its own: a busy pool must not starve the heartbeat.
    conn: Option<AsyncPgConnection>,
    metadata: Option<Arc<BaseConsumer>>,
    /// A partition-count read in flight.
    counts: Option<tokio::task::JoinHandle<Result<PartitionCounts, KafkaError>>>,
    partitions_checked: Option<Instant>,
    /// A consumer-lag reading in flight.
    lag: Option<tokio::task::JoinHandle<()>>,
}

impl Keeper {
    async fn tick(&mut self) -> Result<Assignment, PipelineError> {
        let counts = self.partition_counts().await;
        let mut conn = match self.conn.take() {
            Some(conn) => conn,
            None => {
                AsyncPgConnection::establish(&crate::store::pool::with_keepalives(
                    self.app.config.session_url(),
                ))
                .await?
            }
        };
        // Kept only when the tick succeeds: a failed session is opened afresh.
        let held = self.tick_on(&mut conn, counts).await?;
        self.conn = Some(conn);
        Ok(held)
    }

    async fn tick_on(
        &mut self,
        conn: &mut AsyncPgConnection,
        counts: PartitionCounts,
    ) -> Result<Assignment, PipelineError> {
        let app = self.app.clone();
        let group = app.config.pipeline.consumer_group.as_str();
        for (topic, count) in &counts {
            partitions::ensure(conn, group, topic, *count).await?;
        }
        partitions::heartbeat(conn, group, self.member).await?;
        let mut held: Assignment = partitions::renew(conn, group, self.member, self.lease)
            .await?
            .into_iter()
            .map(|lease| (lease.topic_partition(), lease))
            .collect();
        for share in partitions::shares(conn, group, self.lease).await? {
            let members = share.members.max(1);
            let fair = (share.partitions + members - 1) / members;
            let mine: Vec<TopicPartition> = held
                .keys()
                .filter(|tp| tp.topic == share.topic)
                .cloned()
                .collect();
            let count = i64::try_from(mine.len()).unwrap_or(i64::MAX);
            if count > fair {
                let excess: Vec<(TopicPartition, Option<i64>)> = mine
                    .into_iter()
                    .rev()
                    .take(usize::try_from(count - fair).unwrap_or(0))
                    .map(|tp| (tp, None))
                    .collect();
                partitions::release(conn, group, self.member, &excess).await?;
                for (tp, _) in &excess {
                    held.remove(tp);
                }
                tracing::info!(topic = %share.topic, released = excess.len(), "projector leases: sharing with new members");
            } else if count < fair {
                let claimed = partitions::claim(
                    conn,
                    group,
                    &share.topic,
                    self.member,
                    self.lease,
                    fair - count,
                )
                .await?;
                for mut lease in claimed {
                    self.check_log_reset(conn, &mut lease).await?;
                    tracing::info!(partition = %lease.topic_partition(), epoch = lease.epoch, next_offset = ?lease.next_offset, "projector leases: claimed");
                    held.insert(lease.topic_partition(), lease);
                }
            }
        }
        Ok(held)
    }

    /// Partition counts of the topics, read from the broker now and then in
    /// the background (a broker that does not answer must not delay the
    /// heartbeat). Empty when there is nothing new.
    async fn partition_counts(&mut self) -> PartitionCounts {
        let first = self.partitions_checked.is_none();
        if self.counts.is_none()
            && self
                .partitions_checked
                .is_none_or(|at| at.elapsed() >= PARTITION_CHECK)
            && let Some(metadata) = self.metadata_client()
        {
            let topics = self.topics.clone();
            self.counts = Some(tokio::task::spawn_blocking(move || {
                let mut counts = Vec::new();
                for topic in topics {
                    let meta = metadata.fetch_metadata(Some(&topic), Duration::from_secs(5))?;
                    if let Some(t) = meta.topics().first()
                        && t.error().is_none()
                        && !t.partitions().is_empty()
                    {
                        counts.push((
                            topic,
                            i32::try_from(t.partitions().len()).unwrap_or(i32::MAX),
                        ));
                    }
                }
                Ok(counts)
            }));
        }
        let Some(mut pending) = self.counts.take() else {
            return Vec::new();
        };
        let result = if first {
            // At start-up the rows may not exist yet: worth a short wait.
            match tokio::time::timeout(self.lease / 5, &mut pending).await {
                Ok(result) => result,
                Err(_) => {
                    self.counts = Some(pending);
                    return Vec::new();
                }
            }
        } else if pending.is_finished() {
            pending.await
        } else {
            self.counts = Some(pending);
            return Vec::new();
        };
        self.partitions_checked = Some(Instant::now());
        match result {
            Ok(Ok(counts)) => counts,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "projector leases: cannot read partition counts");
                Vec::new()
            }
            Err(e) => {
                tracing::warn!(error = %e, "projector leases: metadata task failed");
                Vec::new()
            }
        }
    }

    /// Measures in the background how far each held partition's stored
    /// position is behind its end (`kith_consumer_lag_messages`), at most
    /// one reading at a time.
    fn record_lag(&mut self, held: &Assignment) {
        if self
            .lag
            .as_ref()
            .is_some_and(|reading| !reading.is_finished())
        {
            return;
        }
        let Some(metadata) = self.metadata_client() else {
            return;
        };
        let app = self.app.clone();
        let positions: Vec<(TopicPartition, Option<i64>)> = held
            .iter()
            .map(|(tp, lease)| (tp.clone(), lease.next_offset))
            .collect();
        self.lag = Some(tokio::task::spawn_blocking(move || {
            // Read everything first, then replace the readings at once: a
            // scrape never sees a half-measured set. A partition whose end
            // could not be read keeps no (stale) reading.
            let readings: Vec<(crate::metrics::PartitionLabels, i64)> = positions
                .into_iter()
                .filter_map(|(tp, next)| {
                    let (low, high) = metadata
                        .fetch_watermarks(&tp.topic, tp.partition, Duration::from_secs(1))
                        .ok()?;
                    let labels = crate::metrics::PartitionLabels {
                        topic: tp.topic,
                        partition: tp.partition,
                    };
                    Some((labels, (high - next.unwrap_or(low)).max(0)))
                })
                .collect();
            let lag = &app.metrics.consumer_lag;
            lag.clear();
            for (labels, value) in readings {
                lag.get_or_create(&labels).set(value);
            }
        }));
    }

    fn metadata_client(&mut self) -> Option<Arc<BaseConsumer>> {
        if self.metadata.is_none() {
            match kafka::client_config(&self.app.config).create::<BaseConsumer>() {
                Ok(client) => self.metadata = Some(Arc::new(client)),
                Err(e) => tracing::warn!(error = %e, "projector leases: no metadata client"),
            }
        }
        self.metadata.clone()
    }

    /// A stored position past the end of the partition means the topic was
    /// deleted and created again (offsets restart at 0): start it from the
    /// beginning rather than skip everything up to the old position.
    async fn check_log_reset(
        &mut self,
        conn: &mut AsyncPgConnection,
        lease: &mut Lease,
    ) -> Result<(), PipelineError> {
        let Some(next) = lease.next_offset else {
            return Ok(());
        };
        let Some(metadata) = self.metadata_client() else {
            return Ok(());
        };
        let (topic, partition) = (lease.topic.clone(), lease.partition);
        let watermarks = tokio::time::timeout(
            self.lease / 5,
            tokio::task::spawn_blocking(move || {
                metadata.fetch_watermarks(&topic, partition, Duration::from_secs(2))
            }),
        )
        .await;
        let Ok(Ok(Ok((_low, high)))) = watermarks else {
            // Unknown: keep the position; the next claim checks again.
            return Ok(());
        };
        if high >= next {
            return Ok(());
        }
        tracing::warn!(
            partition = %lease.topic_partition(),
            stored = next,
            end = high,
            "projector leases: the partition ends before the stored position (topic recreated?); reading it from the beginning"
        );
        partitions::reset_position(
            conn,
            &self.app.config.pipeline.consumer_group,
            self.member,
            &lease.topic_partition(),
            lease.epoch,
        )
        .await?;
        lease.next_offset = None;
        lease.synced_offset = None;
        Ok(())
    }
}
