//! A batch, once read: one PostgreSQL transaction (positions, projection,
//! counters, dead letters), retried through outages and lease changes —
//! message by message when a constraint rejects the batch, so that only the
//! offending message becomes a dead letter — then Redis set to the truth of
//! everything it touched, and its live updates published.

use std::sync::atomic::Ordering;
use std::time::Duration;

use chrono::Utc;
use rdkafka::message::OwnedMessage;

use super::apply::{self, CommitError, Committed};
use super::batch::{Action, Event, Item};
use super::{PERMANENT_ATTEMPTS, Projector, resync};
use crate::error::PipelineError;
use crate::shutdown::{Backoff, Shutdown};

/// How one commit ended, retries aside.
enum Attempt {
    /// It committed.
    Committed,
    /// A partition was no longer this projector's: the leases were checked,
    /// and the items brought in line with them.
    Fenced,
    /// A constraint rejected it, every time.
    Rejected(PipelineError),
    /// Shutdown came first.
    Stopped,
}

impl Projector {
    /// Applies one batch: PostgreSQL, then Redis. Returns false when shutdown
    /// interrupted it (what committed stays committed; the rest is replayed).
    pub(super) async fn process(
        &mut self,
        batch: Vec<OwnedMessage>,
        shutdown: &mut Shutdown,
    ) -> Result<bool, PipelineError> {
        let mut items = self.plan(batch);
        loop {
            match self.commit_retrying(&mut items, None, shutdown).await? {
                Attempt::Committed => break,
                // What is left of the batch after the leases were checked.
                Attempt::Fenced => continue,
                Attempt::Rejected(_) => {
                    if !self.one_by_one(&mut items, shutdown).await? {
                        return Ok(false);
                    }
                    break;
                }
                Attempt::Stopped => return Ok(false),
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

    /// Commits `items` (or only `items[one]`) until it commits, is fenced
    /// (the leases are checked then, and `items` brought in line with them),
    /// or a constraint rejects it [`PERMANENT_ATTEMPTS`] times; outages and
    /// failed lease checks are retried with back-off.
    async fn commit_retrying(
        &mut self,
        items: &mut [Item],
        one: Option<usize>,
        shutdown: &mut Shutdown,
    ) -> Result<Attempt, PipelineError> {
        let mut rejections = 0;
        let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(5));
        loop {
            let refs: Vec<&Item> = match one {
                Some(i) => vec![&items[i]],
                None => items.iter().collect(),
            };
            match self.commit(&refs).await {
                Ok(()) => return Ok(Attempt::Committed),
                Err(CommitError::Fenced(lost)) => match self.fenced(&lost, items).await {
                    Ok(()) => return Ok(Attempt::Fenced),
                    Err(e) => {
                        tracing::warn!(error = %e, "projector: cannot check its leases; retrying")
                    }
                },
                Err(CommitError::Failed(e)) if e.is_permanent() => {
                    rejections += 1;
                    tracing::warn!(error = %e, messages = refs.len(), rejections, "projector: batch rejected");
                    if rejections >= PERMANENT_ATTEMPTS {
                        return Ok(Attempt::Rejected(e));
                    }
                }
                Err(CommitError::Failed(e)) => {
                    tracing::warn!(error = %e, "projector: PostgreSQL step failed; retrying");
                }
            }
            if !shutdown.sleep(backoff.next_delay()).await {
                return Ok(Attempt::Stopped);
            }
        }
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
            if !matches!(items[i].action, Action::Resync(_)) {
                match self.commit_retrying(items, Some(i), shutdown).await? {
                    // Taken away (skipped below) or already applied (now a re-sync).
                    Attempt::Committed | Attempt::Fenced => {}
                    Attempt::Rejected(e) => {
                        items[i].action = Action::DeadLetter(e.to_string());
                        continue;
                    }
                    Attempt::Stopped => return Ok(false),
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
                Event::Block(e) => Some(e.occurred_at_ms),
                Event::Mute(e) => Some(e.occurred_at_ms),
                Event::Request(e) => Some(e.occurred_at_ms),
                Event::CloseFriend(e) => Some(e.occurred_at_ms),
                Event::FollowOptions(e) => Some(e.occurred_at_ms),
                Event::Settings(e) => Some(e.occurred_at_ms),
                Event::Moved(e) => Some(e.occurred_at_ms),
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
}
