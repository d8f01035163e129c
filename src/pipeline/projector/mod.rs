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
//! Follow events another database wrote (their origin header is not this
//! database's, [`super::origin`]) are never applied: each is recorded as a
//! dead letter and counted, and the first of each writer is logged.
//!
//! Messages that never decode, and content events that would take a counter
//! below zero, are recorded as dead letters in the same transaction (the
//! relay mirrors them to the dead-letter topic). A batch a constraint rejects
//! is retried, then applied one message at a time so that only the offending
//! message is dead-lettered. Outages are retried until they pass.

pub(crate) mod apply;
pub(crate) mod batch;
mod fetch;
mod holdings;
pub(crate) mod leases;
mod process;
pub(crate) mod resync;

use fetch::{ANNOUNCED_WINDOW, First, Parked, first_message, park_after, rest_of_batch};

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use rdkafka::consumer::{Consumer as _, StreamConsumer};
use rdkafka::message::{Message as _, OwnedMessage};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::watch;
use uuid::Uuid;

use self::apply::Owner;
use self::batch::{Action, Item};
use self::leases::Assignment;
use super::kafka;
use super::origin::Writer;
use super::wake::{Signal, Wakeups, Woken};
use crate::app::App;
use crate::error::PipelineError;
use crate::shutdown::{Backoff, Shutdown};
use crate::store::origin::Origin;
use crate::store::partitions::TopicPartition;

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
    // Only this database's events are applied: what another database
    // wrote to the same topics is refused.
    let origin = loop {
        let checked = async {
            let mut conn = app.pg.get().await?;
            super::origin::check(&mut conn).await
        };
        match checked.await {
            Ok(origin) => break origin,
            Err(e @ PipelineError::Relocated { .. }) => return Err(e),
            Err(e) => {
                tracing::warn!(error = %e, "projector: cannot read the event origin; retrying");
                if !shutdown.sleep(backoff.next_delay()).await {
                    return Ok(());
                }
            }
        }
    };
    let member = Uuid::new_v4();
    let topics = vec![
        app.config.pipeline.follow_topic.clone(),
        app.config.pipeline.content_topic.clone(),
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
    tracing::info!(group = %app.config.pipeline.consumer_group, %member, "projector running");

    let mut projector = Projector {
        app,
        consumer,
        member,
        partitions: Partitions::default(),
        hooks,
        origin,
        foreign_seen: HashSet::new(),
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
    /// This database's event origin: follow events of any other are refused.
    origin: Origin,
    /// Writers whose events were refused already (each is logged once).
    foreign_seen: HashSet<Writer>,
}

impl Projector {
    fn owner(&self) -> Owner<'_> {
        Owner {
            group: &self.app.config.pipeline.consumer_group,
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
            let batch = rest_of_batch(
                &self.consumer,
                first,
                self.app.config.pipeline.projector_batch,
            )
            .await;
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
        let poll_ms = self.app.config.pipeline.projector_idle_poll_ms;
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
            let refused = (tp.topic == self.app.config.pipeline.follow_topic)
                .then(|| Writer::of(&message, &self.origin))
                .and_then(|writer| Some((writer, writer.refusal()?)));
            let decoded = match &refused {
                Some((_, reason)) => Err(reason.clone()),
                None => batch::decode(&self.app.config, &message),
            };
            let action = if held.applied_to.is_some_and(|next| offset < next) {
                Action::Resync(decoded.ok())
            } else {
                if let Some((writer, reason)) = refused {
                    self.app.metrics.events_foreign.inc();
                    if self.foreign_seen.insert(writer) {
                        tracing::error!(
                            topic = %tp.topic,
                            partition = tp.partition,
                            offset,
                            "projector: refusing events {reason}; each becomes a dead letter. \
                             Give each database topics of its own (KITH_FOLLOW_TOPIC), or if this \
                             database was restored from a backup, stop Kith and run `kith after-restore`"
                        );
                    }
                }
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
}
