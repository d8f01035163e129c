//! Which partitions this projector holds and where it stands in each: its
//! leases turned into the consumer's assignment, the positions a batch
//! moves, a lease lost under a batch, and the clean hand-back on stop.

use std::collections::BTreeMap;

use rdkafka::consumer::Consumer as _;
use rdkafka::{Offset, TopicPartitionList};

use super::batch::{Action, Item};
use super::leases::Assignment;
use super::{Held, Projector};
use crate::error::PipelineError;
use crate::store::partitions::{self, Advance, TopicPartition};

impl Projector {
    /// Follows the keeper's leases: new partitions are read from where Redis
    /// was last known to be written, kept ones from where reading stood.
    pub(super) fn reassign(&mut self, leases: &Assignment) {
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
    pub(super) fn assign(&self) {
        if self.point_consumer() {
            tracing::info!(
                partitions = ?self.partitions.held.keys().map(ToString::to_string).collect::<Vec<_>>(),
                "projector: reading"
            );
        }
    }

    /// Points the consumer at the held partitions, each from its read
    /// position. False if the consumer refused.
    pub(super) fn point_consumer(&self) -> bool {
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
    pub(super) async fn fenced(
        &mut self,
        fenced: &[TopicPartition],
        items: &mut [Item],
    ) -> Result<(), PipelineError> {
        let still = {
            let mut conn = self.app.pg.get().await?;
            partitions::held(
                &mut conn,
                &self.app.config.pipeline.consumer_group,
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
    pub(super) fn lose(&mut self, lost: &[TopicPartition]) {
        for tp in lost {
            if let Some(held) = self.partitions.held.remove(tp) {
                tracing::warn!(partition = %tp, epoch = held.epoch, "projector: lease lost; leaving the partition");
                self.partitions.lost.insert((tp.clone(), held.epoch));
            }
        }
        self.assign();
    }

    /// The position changes that commit `items`.
    pub(super) fn advances(&self, items: &[&Item]) -> Vec<Advance> {
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

    /// A clean stop: hands every partition back at once (with how far Redis
    /// is written), so another projector need not wait for the leases to run out.
    pub(super) async fn leave(&self) {
        let held: Vec<(TopicPartition, Option<i64>)> = self
            .partitions
            .held
            .iter()
            .map(|(tp, h)| (tp.clone(), h.synced_to))
            .collect();
        let group = &self.app.config.pipeline.consumer_group;
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
