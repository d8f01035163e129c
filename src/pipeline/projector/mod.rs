//! The projector: consumes follow and content events and keeps every derived
//! view right — `follower` and `user_stats` in PostgreSQL, the list caches
//! and counter records in Redis.
//!
//! It does not depend on the broker's group coordinator. Partitions are
//! shared between projectors by leases in PostgreSQL ([`leases`]) and read
//! with explicit assignments; the consumed position of each partition lives in
//! PostgreSQL and moves in the same transaction as the batch's effects
//! ([`apply`]), under the lease's epoch. So a batch is applied exactly once,
//! and a projector that dies (`kill -9`) hands its partitions on one lease
//! later, whatever the broker does.
//!
//! Per batch: one PostgreSQL transaction (positions, `follower` under
//! per-edge version guards, counters, dead letters); then Redis is set to the
//! current truth of everything the batch touched ([`resync`]). How far Redis
//! is known to be written is stored beside the position; a new owner first
//! re-syncs the messages between the two, so a crash between PostgreSQL and
//! Redis is repaired without applying anything twice.
//!
//! A projector with nothing to read stops fetching (it unassigns its
//! partitions) until a relay announces a batch it published, its leases
//! change, or `KITH_PROJECTOR_IDLE_POLL_MS` passes; it then reads on from
//! where it stood. It parks only once it has read to the end the broker last
//! reported, so no fetch answer in flight is dropped.
//!
//! Messages that never decode, and content events that would take a counter
//! below zero, are recorded as dead letters in the same transaction (the
//! relay mirrors them to the dead-letter topic). A batch a constraint rejects
//! is retried, then applied one message at a time so that only the offending
//! message is dead-lettered. Outages are retried until they pass.

pub mod apply;
pub mod batch;
pub mod leases;
pub mod resync;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::Utc;
use futures_util::FutureExt as _;
use rdkafka::consumer::{Consumer as _, StreamConsumer};
use rdkafka::message::{Message as _, OwnedMessage};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::watch;
use uuid::Uuid;

use self::apply::{CommitError, Committed, Owner};
use self::batch::{Action, Event, Item};
use self::leases::Assignment;
use super::wake::{Signal, Wakeups, Woken};
use super::{Backoff, PipelineError, Shutdown, kafka};
use crate::app::App;
use crate::store::partitions::{self, Advance, TopicPartition};

/// How many times a batch a constraint rejects is retried before it is
/// applied message by message (and the offending one dead-lettered).
const PERMANENT_ATTEMPTS: u32 = 3;

/// Fault injection and measurement for tests and benchmarks.
#[derive(Default)]
pub struct ProjectorHooks {
    /// When set, the projector stops right after its next PostgreSQL commit,
    /// before Redis and without releasing its leases — as a kill there would.
    pub crash_after_pg_commit: AtomicBool,
    /// When set, the next PostgreSQL commit lands but reports a lost
    /// connection, as when the server's answer never arrives.
    pub lose_next_commit_answer: AtomicBool,
    /// When set, receives the lag (ms, commit to applied) of every follow event.
    pub lag_samples: Option<std::sync::Mutex<Vec<i64>>>,
}

/// Where one held partition stands.
#[derive(Clone, Debug)]
struct Held {
    /// The lease epoch its batches commit under.
    epoch: i64,
    /// The position PostgreSQL holds: messages below it are applied.
    applied_to: Option<i64>,
    /// How far Redis is known to be written.
    synced_to: Option<i64>,
    /// Where reading goes on after a re-assignment.
    read_from: Option<i64>,
}

/// The partitions this projector reads, and where each stands.
#[derive(Default)]
struct Partitions {
    held: BTreeMap<TopicPartition, Held>,
    /// Leases a batch found taken (partition, epoch): not read again until reclaimed.
    lost: HashSet<(TopicPartition, i64)>,
}

/// Runs the projector until `shutdown` (Ok) or a simulated crash (Err).
pub async fn run(
    app: Arc<App>,
    mut shutdown: Shutdown,
    hooks: Arc<ProjectorHooks>,
) -> Result<(), PipelineError> {
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
    let consumer = loop {
        match connect(&app).await {
            Ok(consumer) => break consumer,
            Err(e) => {
                tracing::warn!(error = %e, "projector: broker not ready; retrying");
                if !shutdown.sleep(backoff.next_delay()).await {
                    return Ok(());
                }
            }
        }
    };
    let member = Uuid::new_v4();
    let topics = vec![
        app.config.follow_topic.clone(),
        app.config.content_topic.clone(),
    ];
    let (publish, assignment) = watch::channel(Assignment::new());
    let (stop_keeper, keeper_shutdown) = Shutdown::new();
    let keeper = tokio::spawn(leases::keep(
        app.clone(),
        member,
        topics,
        publish,
        keeper_shutdown,
    ));
    tracing::info!(group = %app.config.consumer_group, %member, "projector running");

    let mut projector = Projector {
        app,
        consumer,
        member,
        partitions: Partitions::default(),
        hooks,
    };
    let result = projector.consume(assignment, &mut shutdown).await;
    stop_keeper.trigger();
    let _ = keeper.await;
    if result.is_ok() {
        projector.leave().await;
    }
    tracing::info!("projector stopped");
    result
}

async fn connect(app: &App) -> Result<StreamConsumer, PipelineError> {
    kafka::ensure_topics(&app.config).await?;
    let consumer: StreamConsumer = kafka::consumer_config(&app.config).create()?;
    Ok(consumer)
}

struct Projector {
    app: Arc<App>,
    consumer: StreamConsumer,
    member: Uuid,
    partitions: Partitions,
    hooks: Arc<ProjectorHooks>,
}

impl Projector {
    fn owner(&self) -> Owner<'_> {
        Owner {
            group: &self.app.config.consumer_group,
            member: self.member,
        }
    }

    async fn consume(
        &mut self,
        mut assignment: watch::Receiver<Assignment>,
        shutdown: &mut Shutdown,
    ) -> Result<(), PipelineError> {
        let mut wakeups = Wakeups::new(&self.app, Signal::Projector).await;
        let park_after = park_after(&self.app.config);
        // How long the next look waits for a first message before parking.
        let mut window = park_after;
        loop {
            // Between batches only: a batch never straddles a re-assignment.
            if assignment.has_changed().unwrap_or(false) {
                let leases = assignment.borrow_and_update().clone();
                self.reassign(&leases);
            }
            // Wake-ups so far announce events the reads below will see.
            wakeups.drain(&self.app);
            // Only the wait for a first message races the leases and
            // shutdown: once librdkafka hands messages over, they are
            // collected and processed, never dropped.
            let first = tokio::select! {
                first = first_message(&self.consumer, window) => first,
                changed = assignment.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    let leases = assignment.borrow_and_update().clone();
                    self.reassign(&leases);
                    continue;
                }
                () = shutdown.wait() => return Ok(()),
            };
            let first = match first {
                First::Idle => {
                    window = match self.park(&mut wakeups, &assignment, shutdown).await {
                        Parked::Shutdown => return Ok(()),
                        // Events were announced: their fetch may take longer
                        // than an idle look, and the first one after
                        // re-assigning still sees the old end, so wait.
                        Parked::Announced => park_after.max(ANNOUNCED_WINDOW),
                        Parked::Looked | Parked::Fetching => park_after,
                    };
                    continue;
                }
                First::Failed => continue,
                First::Message(message) => message,
            };
            window = park_after;
            let batch = rest_of_batch(&self.consumer, first, self.app.config.projector_batch).await;
            let started = std::time::Instant::now();
            if !self.process(batch, shutdown).await? {
                return Ok(());
            }
            tracing::debug!(elapsed = ?started.elapsed(), "projector batch done");
        }
    }

    /// Nothing arrived for a while: stops fetching until a relay says it
    /// published (in this process or through Redis), the leases change, or
    /// `KITH_PROJECTOR_IDLE_POLL_MS` passes — the bound for events no relay
    /// announces (content events from other services). An idle projector
    /// then costs the broker one short look per interval instead of a fetch
    /// every `KITH_FETCH_WAIT_MS`. It keeps fetching without a wake-up
    /// subscription, while a fetch may still be on its way, or when the
    /// interval is 0.
    async fn park(
        &mut self,
        wakeups: &mut Wakeups,
        assignment: &watch::Receiver<Assignment>,
        shutdown: &mut Shutdown,
    ) -> Parked {
        let poll_ms = self.app.config.projector_idle_poll_ms;
        if poll_ms == 0 {
            return Parked::Fetching;
        }
        if !wakeups.subscribed() {
            wakeups.resubscribe_if_due().await;
            return Parked::Fetching;
        }
        if !self.caught_up() {
            // A fetch is still on its way (a broker serving a backlog can
            // take longer than `park_after`): parking now would drop its
            // answer, and the same would happen at every wake-up.
            return Parked::Fetching;
        }
        // Unassigned rather than paused: librdkafka wakes its broker thread
        // when a partition starts fetching, but not when one is resumed, so
        // a resumed partition could wait up to a second for its next fetch.
        if let Err(e) = self.consumer.assign(&TopicPartitionList::new()) {
            tracing::warn!(error = %e, "projector: cannot stop fetching; fetching on");
            return Parked::Fetching;
        }
        tracing::trace!("projector: idle; fetching parked");
        self.app.metrics.projector_parks.inc();
        // A clone, so the loop still sees the change as new.
        let mut leases = assignment.clone();
        let (parked, cause) = tokio::select! {
            woken = wakeups.wait(&self.app, Duration::from_millis(poll_ms)) => match woken {
                Woken::Here => (Parked::Announced, "local"),
                Woken::Elsewhere => (Parked::Announced, "redis"),
                Woken::Nothing => (Parked::Looked, "idle"),
            },
            changed = leases.changed() => {
                if changed.is_ok() { (Parked::Looked, "leases") } else { (Parked::Shutdown, "shutdown") }
            }
            () = shutdown.wait() => (Parked::Shutdown, "shutdown"),
        };
        self.app.metrics.projector_woken(cause);
        if parked != Parked::Shutdown {
            tracing::trace!("projector: fetching again");
            // Each held partition from where reading stood.
            self.point_consumer();
        }
        parked
    }

    /// Whether every held partition has been read to the end the broker
    /// last reported (librdkafka keeps each fetch answer's high watermark,
    /// even of an answer it drops). Unknown ends count as not caught up.
    /// When all are, a partition never read from (nothing left in it below
    /// its end) is then read from its end, so fetching again needs no
    /// offset lookup.
    fn caught_up(&mut self) -> bool {
        // librdkafka's own position passes what it never hands over
        // (transaction markers), which `read_from` cannot.
        let positions = self.consumer.position().ok();
        let mut ends = Vec::with_capacity(self.partitions.held.len());
        for (tp, held) in &self.partitions.held {
            let position = positions
                .as_ref()
                .and_then(|list| list.find_partition(&tp.topic, tp.partition))
                .and_then(|entry| match entry.offset() {
                    Offset::Offset(offset) => Some(offset),
                    _ => None,
                });
            match kafka::cached_watermarks(self.consumer.client(), &tp.topic, tp.partition) {
                Some((low, high))
                    if held
                        .read_from
                        .unwrap_or(low.max(0))
                        .max(position.unwrap_or(-1))
                        >= high =>
                {
                    ends.push(high);
                }
                _ => return false,
            }
        }
        for (held, end) in self.partitions.held.values_mut().zip(ends) {
            held.read_from.get_or_insert(end);
        }
        true
    }

    /// Follows the keeper's leases: new partitions are read from where Redis
    /// was last known to be written, kept ones from where reading stood.
    fn reassign(&mut self, leases: &Assignment) {
        let parts = &mut self.partitions;
        parts
            .lost
            .retain(|(tp, epoch)| leases.get(tp).is_some_and(|l| l.epoch == *epoch));
        let before: Vec<(TopicPartition, i64)> = parts
            .held
            .iter()
            .map(|(tp, h)| (tp.clone(), h.epoch))
            .collect();
        parts
            .held
            .retain(|tp, held| leases.get(tp).is_some_and(|l| l.epoch == held.epoch));
        for (tp, lease) in leases {
            if parts.held.contains_key(tp) || parts.lost.contains(&(tp.clone(), lease.epoch)) {
                continue;
            }
            let start = match (lease.synced_offset, lease.next_offset) {
                (Some(synced), Some(next)) => Some(synced.min(next)),
                (None, Some(_)) | (_, None) => None,
            };
            parts.held.insert(
                tp.clone(),
                Held {
                    epoch: lease.epoch,
                    applied_to: lease.next_offset,
                    synced_to: lease.synced_offset,
                    read_from: start,
                },
            );
        }
        let after: Vec<(TopicPartition, i64)> = parts
            .held
            .iter()
            .map(|(tp, h)| (tp.clone(), h.epoch))
            .collect();
        if before != after {
            self.assign();
        }
    }

    /// Points the consumer at the held partitions, each from its read
    /// position, and says so.
    fn assign(&self) {
        if self.point_consumer() {
            tracing::info!(
                partitions = ?self.partitions.held.keys().map(ToString::to_string).collect::<Vec<_>>(),
                "projector: reading"
            );
        }
    }

    /// Points the consumer at the held partitions, each from its read
    /// position. False if the consumer refused.
    fn point_consumer(&self) -> bool {
        let mut list = TopicPartitionList::new();
        for (tp, held) in &self.partitions.held {
            let offset = held.read_from.map_or(Offset::Beginning, Offset::Offset);
            if let Err(e) = list.add_partition_offset(&tp.topic, tp.partition, offset) {
                tracing::warn!(error = %e, partition = %tp, "projector: bad position");
            }
        }
        match self.consumer.assign(&list) {
            Ok(()) => true,
            Err(e) => {
                tracing::error!(error = %e, "projector: cannot assign partitions");
                false
            }
        }
    }

    /// A batch could not move these positions. Either the partition was
    /// taken (drop it), or this member still holds it under the same epoch
    /// and the position moved anyway — an earlier commit whose answer was
    /// lost did land. Then what it applied becomes re-sync only, and the rest
    /// of the batch goes on.
    async fn fenced(
        &mut self,
        fenced: &[TopicPartition],
        items: &mut [Item],
    ) -> Result<(), PipelineError> {
        let still = {
            let mut conn = self.app.pg.get().await?;
            partitions::held(
                &mut conn,
                &self.app.config.consumer_group,
                self.member,
                fenced,
            )
            .await?
        };
        let mut lost = Vec::new();
        for tp in fenced {
            let current = still.iter().find(|l| l.topic_partition() == *tp);
            match (current, self.partitions.held.get_mut(tp)) {
                (Some(lease), Some(held)) if lease.epoch == held.epoch => {
                    tracing::info!(partition = %tp, stored = ?lease.next_offset, "projector: a commit landed unseen; taking its position");
                    held.applied_to = lease.next_offset;
                    for item in items.iter_mut().filter(|i| i.partition == *tp) {
                        if lease.next_offset.is_some_and(|next| item.offset < next) {
                            item.action = Action::Resync(item.event().cloned());
                        }
                    }
                }
                _ => lost.push(tp.clone()),
            }
        }
        if !lost.is_empty() {
            self.lose(&lost);
        }
        Ok(())
    }

    /// Drops partitions a batch found taken by another member.
    fn lose(&mut self, lost: &[TopicPartition]) {
        for tp in lost {
            if let Some(held) = self.partitions.held.remove(tp) {
                tracing::warn!(partition = %tp, epoch = held.epoch, "projector: lease lost; leaving the partition");
                self.partitions.lost.insert((tp.clone(), held.epoch));
            }
        }
        self.assign();
    }

    /// Sorts the messages of a batch: not ours (dropped), already applied
    /// (re-sync only), to apply, or dead.
    fn plan(&mut self, batch: Vec<OwnedMessage>) -> Vec<Item> {
        let mut items = Vec::with_capacity(batch.len());
        for message in batch {
            let tp = TopicPartition {
                topic: message.topic().to_owned(),
                partition: message.partition(),
            };
            let Some(held) = self.partitions.held.get_mut(&tp) else {
                continue;
            };
            let offset = message.offset();
            held.read_from = Some(offset + 1);
            let decoded = batch::decode(&self.app.config, &message);
            let action = if held.applied_to.is_some_and(|next| offset < next) {
                Action::Resync(decoded.ok())
            } else {
                match decoded {
                    Ok(event) => Action::Apply(event),
                    Err(reason) => Action::DeadLetter(reason),
                }
            };
            items.push(Item {
                partition: tp,
                offset,
                message,
                action,
            });
        }
        items
    }

    /// The position changes that commit `items`.
    fn advances(&self, items: &[&Item]) -> Vec<Advance> {
        let mut next: BTreeMap<&TopicPartition, i64> = BTreeMap::new();
        for item in items {
            if matches!(item.action, Action::Resync(_)) {
                continue;
            }
            let slot = next.entry(&item.partition).or_insert(0);
            *slot = (*slot).max(item.offset + 1);
        }
        next.into_iter()
            .filter_map(|(tp, next_offset)| {
                let held = self.partitions.held.get(tp)?;
                Some(Advance {
                    partition: tp.clone(),
                    epoch: held.epoch,
                    expected: held.applied_to,
                    next_offset,
                    synced_offset: held.synced_to,
                })
            })
            .collect()
    }

    /// Applies one batch: PostgreSQL, then Redis. Returns false when shutdown
    /// interrupted it (what committed stays committed; the rest is replayed).
    async fn process(
        &mut self,
        batch: Vec<OwnedMessage>,
        shutdown: &mut Shutdown,
    ) -> Result<bool, PipelineError> {
        let mut items = self.plan(batch);
        let mut rejections = 0;
        let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(5));
        loop {
            let refs: Vec<&Item> = items.iter().collect();
            match self.commit(&refs).await {
                Ok(()) => break,
                Err(CommitError::Fenced(lost)) => match self.fenced(&lost, &mut items).await {
                    Ok(()) => continue,
                    Err(e) => {
                        tracing::warn!(error = %e, "projector: cannot check its leases; retrying")
                    }
                },
                Err(CommitError::Failed(e)) if e.is_permanent() => {
                    rejections += 1;
                    tracing::warn!(error = %e, messages = items.len(), rejections, "projector: batch rejected");
                    if rejections >= PERMANENT_ATTEMPTS {
                        if !self.one_by_one(&mut items, shutdown).await? {
                            return Ok(false);
                        }
                        break;
                    }
                }
                Err(CommitError::Failed(e)) => {
                    tracing::warn!(error = %e, "projector: PostgreSQL step failed; retrying");
                }
            }
            if !shutdown.sleep(backoff.next_delay()).await {
                return Ok(false);
            }
        }
        if self
            .hooks
            .crash_after_pg_commit
            .swap(false, Ordering::SeqCst)
        {
            return Err(PipelineError::SimulatedCrash);
        }
        self.sync_redis(&items, shutdown).await
    }

    /// One transaction for `items`; on success the held positions move on.
    async fn commit(&mut self, items: &[&Item]) -> Result<(), CommitError> {
        let advances = self.advances(items);
        if advances.is_empty() {
            return Ok(());
        }
        // Only messages of partitions this projector still holds.
        let items: Vec<&Item> = items
            .iter()
            .copied()
            .filter(|item| advances.iter().any(|a| a.partition == item.partition))
            .collect();
        let Committed {
            applied,
            dead_lettered,
        } = apply::commit(&self.app.pg, self.owner(), &items, &advances).await?;
        if self
            .hooks
            .lose_next_commit_answer
            .swap(false, Ordering::SeqCst)
        {
            return Err(CommitError::Failed(PipelineError::PostgresConnection(
                "simulated: the commit's answer was lost".into(),
            )));
        }
        for advance in &advances {
            if let Some(held) = self.partitions.held.get_mut(&advance.partition) {
                held.applied_to = Some(advance.next_offset);
            }
        }
        self.app.metrics.events_applied.inc_by(applied as u64);
        if dead_lettered > 0 {
            // The relay mirrors them to the dead-letter topic.
            crate::pipeline::wake::wake(&self.app).await;
            self.app
                .metrics
                .events_dead_lettered
                .inc_by(dead_lettered as u64);
            tracing::warn!(
                dead_lettered,
                "projector: messages recorded as dead letters"
            );
        }
        Ok(())
    }

    /// A batch a constraint rejects: each message in its own transaction, so
    /// only the offending ones become dead letters. Returns false on shutdown.
    async fn one_by_one(
        &mut self,
        items: &mut Vec<Item>,
        shutdown: &mut Shutdown,
    ) -> Result<bool, PipelineError> {
        let mut i = 0;
        while i < items.len() {
            if matches!(items[i].action, Action::Resync(_)) {
                i += 1;
                continue;
            }
            let mut rejections = 0;
            let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(5));
            loop {
                match self.commit(&[&items[i]]).await {
                    Ok(()) => break,
                    Err(CommitError::Fenced(lost)) => match self.fenced(&lost, items).await {
                        // Taken away (skipped below) or already applied (now a re-sync).
                        Ok(()) => break,
                        Err(e) => {
                            tracing::warn!(error = %e, "projector: cannot check its leases; retrying")
                        }
                    },
                    Err(CommitError::Failed(e)) if e.is_permanent() => {
                        rejections += 1;
                        if rejections >= PERMANENT_ATTEMPTS {
                            items[i].action = Action::DeadLetter(e.to_string());
                            continue;
                        }
                    }
                    Err(CommitError::Failed(e)) => {
                        tracing::warn!(error = %e, "projector: PostgreSQL step failed; retrying");
                    }
                }
                if !shutdown.sleep(backoff.next_delay()).await {
                    return Ok(false);
                }
            }
            i += 1;
        }
        let held = &self.partitions.held;
        items.retain(|item| held.contains_key(&item.partition));
        Ok(true)
    }

    /// Brings Redis to the truth of everything in `items`, retrying outages;
    /// then records how far Redis is written. Returns false on shutdown.
    async fn sync_redis(
        &mut self,
        items: &[Item],
        shutdown: &mut Shutdown,
    ) -> Result<bool, PipelineError> {
        let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(5));
        loop {
            match resync::resync(&self.app, items.iter().filter_map(Item::event)).await {
                Ok(()) => {
                    crate::live::publish(&self.app, &resync::live_batch(items)).await;
                    break;
                }
                Err(e) => tracing::warn!(error = %e, "projector: Redis step failed; retrying"),
            }
            if !shutdown.sleep(backoff.next_delay()).await {
                return Ok(false);
            }
        }
        for item in items {
            if let Some(held) = self.partitions.held.get_mut(&item.partition) {
                held.synced_to = Some(held.synced_to.unwrap_or(0).max(item.offset + 1));
            }
        }
        self.observe_lag(items);
        Ok(true)
    }

    fn observe_lag(&self, items: &[Item]) {
        let now_ms = Utc::now().timestamp_millis();
        let mut samples = self
            .hooks
            .lag_samples
            .as_ref()
            .map(|s| s.lock().expect("lag samples"));
        for item in items {
            let Action::Apply(event) = &item.action else {
                continue;
            };
            let occurred = match event {
                Event::Follow(e) => Some(e.occurred_at_ms),
                Event::Content(e) => e.occurred_at_ms,
            };
            if let Some(occurred) = occurred {
                self.app
                    .metrics
                    .observe_lag((now_ms - occurred) as f64 / 1000.0);
                if let (Some(samples), Event::Follow(_)) = (samples.as_mut(), event) {
                    samples.push(now_ms - occurred);
                }
            }
        }
    }

    /// A clean stop: hands every partition back at once (with how far Redis
    /// is written), so another projector need not wait for the leases to run out.
    async fn leave(&self) {
        let held: Vec<(TopicPartition, Option<i64>)> = self
            .partitions
            .held
            .iter()
            .map(|(tp, h)| (tp.clone(), h.synced_to))
            .collect();
        let group = &self.app.config.consumer_group;
        let result = async {
            let mut conn = self.app.pg.get().await?;
            partitions::release(&mut conn, group, self.member, &held).await?;
            partitions::leave(&mut conn, group, self.member).await?;
            Ok::<_, PipelineError>(())
        };
        if let Err(e) = result.await {
            tracing::warn!(error = %e, "projector: leases not released; they run out instead");
        }
    }
}

/// How long a look woken by a relay waits for the announced events before
/// the projector parks again.
const ANNOUNCED_WINDOW: Duration = Duration::from_millis(250);

/// How a park ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Parked {
    /// It did not park and fetches on (see [`Projector::park`]).
    Fetching,
    /// A relay announced events.
    Announced,
    /// The idle interval passed or the leases changed.
    Looked,
    /// Shutdown.
    Shutdown,
}

/// How long the projector waits for a first message before it parks: two
/// fetch waits, so that a look after waking sees at least one whole fetch
/// (a slower fetch is covered by [`Projector::caught_up`] and, after an
/// announced wake-up, by [`ANNOUNCED_WINDOW`]). Each fetch of an
/// idle look costs the broker a read of every partition.
fn park_after(config: &crate::config::Config) -> Duration {
    Duration::from_millis(u64::from(config.fetch_wait_ms).saturating_mul(2).max(20) + 5)
}

/// What the wait for a batch's first message gave.
enum First {
    /// Nothing within the window.
    Idle,
    /// A consume error (logged, waited out).
    Failed,
    /// A message.
    Message(OwnedMessage),
}

/// Waits up to `idle` for a first message.
async fn first_message(consumer: &StreamConsumer, idle: Duration) -> First {
    match tokio::time::timeout(idle, consumer.recv()).await {
        Err(_elapsed) => First::Idle,
        Ok(Ok(message)) => First::Message(message.detach()),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "projector: consume error");
            tokio::time::sleep(Duration::from_millis(200)).await;
            First::Failed
        }
    }
}

/// `first`, then whatever else is ready, up to `max`. librdkafka queues a
/// fetch answer's messages together, so what is ready is the rest of that
/// answer: waiting for more would only delay this batch (it used to wait
/// 2 ms after the last message, which every event's lag paid).
async fn rest_of_batch(
    consumer: &StreamConsumer,
    first: OwnedMessage,
    max: usize,
) -> Vec<OwnedMessage> {
    let mut batch = vec![first];
    while batch.len() < max {
        // One poll of the queue, no timer.
        match consumer.recv().now_or_never() {
            Some(Ok(message)) => batch.push(message.detach()),
            Some(Err(e)) => {
                tracing::warn!(error = %e, "projector: consume error");
                break;
            }
            None => break,
        }
    }
    batch
}
