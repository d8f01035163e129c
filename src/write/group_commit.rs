//! Group commit for edge changes: follows and unfollows asked at the same
//! time, by any actors, go to PostgreSQL together — one call of
//! `kith_change_edges`, one transaction, one commit's wait for the WAL —
//! instead of one transaction each.
//!
//! A batch forms only while `KITH_WRITE_BATCHES_IN_FLIGHT` batches are in
//! flight: a lone change goes at once, and under load everything asked
//! while the previous batches ran goes in the next (at most
//! `KITH_WRITE_BATCH`). Nothing is acknowledged before its batch commits;
//! an item PostgreSQL refuses (blocked, past the follow cap, a locked
//! account's request) is refused by its own row, and its neighbours apply.
//! A batch PostgreSQL cannot run is retried when it was certainly rolled
//! back (a deadlock, a serialization failure), or run again item by item
//! when one item may be the cause, so that one bad item fails only itself.
//!
//! A batch takes one connection, for its retries and its one-by-one run
//! too (an item that loses it leaves the next to ask for one more, once),
//! and waits for it no longer than a request alone would
//! (`Config::connection_wait`), counted from when its oldest change was
//! asked, its time in the queue included (but at least a quarter of that
//! wait): while no primary takes sessions, each change is answered
//! `UNAVAILABLE` within about that wait, not `TIMEOUT` at its request's
//! deadline for having queued behind batches that waited too.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use prometheus_client::metrics::counter::Counter;
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::error::ApiError;
use crate::store::failure::{self, Failure};
use crate::store::following::{self, EdgeChangeRow, EdgeItem, FollowCap};
use crate::store::pool::{PgConn, PgPool};

/// The handle requests use; the batcher ends when the last one is dropped.
#[derive(Clone)]
pub(crate) struct GroupCommit {
    queue: mpsc::UnboundedSender<Asked>,
}

/// One change waiting for its batch, and where its answer goes.
struct Asked {
    item: EdgeItem,
    asked: Instant,
    answer: oneshot::Sender<Result<EdgeChangeRow, ApiError>>,
}

impl GroupCommit {
    /// Starts the batcher on the current runtime.
    pub(crate) fn start(
        pg: PgPool,
        cap: FollowCap,
        batch: usize,
        in_flight: usize,
        connection_wait: Duration,
        counted: Counted,
    ) -> Self {
        let (queue, asked) = mpsc::unbounded_channel();
        let batcher = Batcher {
            pg,
            cap,
            counted,
            batch: batch.max(1),
            connection_wait,
            in_flight: Arc::new(Semaphore::new(in_flight.max(1))),
        };
        tokio::spawn(batcher.run(asked));
        Self { queue }
    }

    /// Applies `item` in the next batch; answers once that batch committed
    /// (or failed).
    pub(crate) async fn change(&self, item: EdgeItem) -> Result<EdgeChangeRow, ApiError> {
        let (answer, answered) = oneshot::channel();
        self.queue
            .send(Asked {
                item,
                asked: Instant::now(),
                answer,
            })
            .map_err(|_| ApiError::Unavailable(anyhow::anyhow!("the process is stopping")))?;
        answered
            .await
            .map_err(|_| ApiError::internal(anyhow::anyhow!("the group commit dropped a change")))?
    }
}

/// The metrics the batcher counts into: transactions, and the changes they
/// carried.
pub(crate) struct Counted {
    pub(crate) batches: Counter,
    pub(crate) changes: Counter,
}

struct Batcher {
    pg: PgPool,
    cap: FollowCap,
    counted: Counted,
    batch: usize,
    connection_wait: Duration,
    in_flight: Arc<Semaphore>,
}

impl Batcher {
    async fn run(self, mut queue: mpsc::UnboundedReceiver<Asked>) {
        let this = Arc::new(self);
        // Changes of a pair already in the batch being formed wait for the
        // next one (a statement changes a row once), first in line.
        let mut held: VecDeque<Asked> = VecDeque::new();
        loop {
            let Ok(turn) = this.in_flight.clone().acquire_owned().await else {
                return;
            };
            let first = match held.pop_front() {
                Some(first) => first,
                None => match queue.recv().await {
                    Some(first) => first,
                    None => return,
                },
            };
            let mut pairs = HashSet::from([(first.item.actor, first.item.target)]);
            let mut batch = vec![first];
            let mut next_held = VecDeque::new();
            let mut waiting = std::mem::take(&mut held).into_iter();
            for asked in waiting
                .by_ref()
                .chain(std::iter::from_fn(|| queue.try_recv().ok()))
            {
                let full = batch.len() >= this.batch;
                if !full && pairs.insert((asked.item.actor, asked.item.target)) {
                    batch.push(asked);
                } else {
                    next_held.push_back(asked);
                    if full {
                        break;
                    }
                }
            }
            // A full batch leaves the rest of the held ones for the next.
            next_held.extend(waiting);

            held = next_held;
            let this = this.clone();
            tokio::spawn(async move {
                this.commit(batch).await;
                drop(turn);
            });
        }
    }

    /// Runs `batch` on one connection and answers each of its changes.
    async fn commit(&self, batch: Vec<Asked>) {
        let items: Vec<EdgeItem> = batch.iter().map(|a| a.item).collect();
        let first_asked = batch
            .iter()
            .map(|a| a.asked)
            .min()
            .expect("a batch has a change");
        let Some(mut conn) = self.connection(first_asked).await else {
            for asked in batch {
                let _ = asked.answer.send(Err(answer_of(None)));
            }
            return;
        };
        match self.call(&mut conn, &items).await {
            Ok(rows) => {
                for (asked, row) in batch.into_iter().zip(rows) {
                    let _ = asked.answer.send(Ok(row));
                }
            }
            // PostgreSQL refused the statement, which rolled it back, and
            // possibly for one item's sake (a statement timeout, a bug):
            // each item alone, on the same connection, so that it fails
            // only itself.
            Err(e) if batch.len() > 1 && refused_by_the_server(&e) => {
                tracing::warn!(error = %e, changes = batch.len(), "a group-commit batch failed; applying its changes one by one");
                let mut held = Some(conn);
                let mut asked_again = false;
                for asked in batch {
                    // An item that lost the connection takes it with it;
                    // the next one asks for another, within its own wait,
                    // and only once: if the pool has none, the rest are
                    // answered at once.
                    if held.is_none() && !asked_again {
                        asked_again = true;
                        held = self.connection(asked.asked).await;
                    }
                    let Some(conn) = held.as_mut() else {
                        let _ = asked.answer.send(Err(answer_of(None)));
                        continue;
                    };
                    let answer = match self.call(conn, &[asked.item]).await {
                        Ok(mut rows) => Ok(rows.remove(0)),
                        Err(e) => {
                            // Only a lost connection is let go: one that
                            // answered an error (a deadlock past its retries
                            // among them) serves the next item.
                            if failure::classify(&e) == Failure::Unavailable {
                                held = None;
                            }
                            Err(answer_of(Some(&e)))
                        }
                    };
                    let _ = asked.answer.send(answer);
                }
            }
            Err(e) => {
                for asked in batch {
                    let _ = asked.answer.send(Err(answer_of(Some(&e))));
                }
            }
        }
    }

    /// A connection for a batch whose oldest change was asked at `asked`:
    /// within the connection wait counted from then, as a request alone
    /// would wait, but never less than a quarter of it from now (a change
    /// that queued behind slow batches still gets a fair try). `None`: the
    /// pool had none.
    async fn connection(
        &self,
        asked: Instant,
    ) -> Option<diesel_async::pooled_connection::bb8::PooledConnection<'_, PgConn>> {
        let until = connection_deadline(asked, Instant::now(), self.connection_wait);
        match tokio::time::timeout_at(until, self.pg.get()).await {
            Ok(Ok(conn)) => Some(conn),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "the group commit has no PostgreSQL connection");
                None
            }
            Err(_) => {
                tracing::warn!(
                    "the group commit had no PostgreSQL connection within the connection wait"
                );
                None
            }
        }
    }

    /// One call of `kith_change_edges`, again while PostgreSQL rolled it back
    /// for a deadlock or a serialization failure.
    async fn call(
        &self,
        conn: &mut PgConn,
        items: &[EdgeItem],
    ) -> Result<Vec<EdgeChangeRow>, diesel::result::Error> {
        failure::rerun!({
            self.counted.batches.inc();
            self.counted.changes.inc_by(items.len() as u64);
            following::change_set(conn, items, self.cap).await
        })
    }
}

/// Until when a batch whose oldest change was asked at `asked` waits for a
/// connection, at `now`: the connection `wait` counted from `asked`, but
/// never less than a quarter of it from `now`.
fn connection_deadline(asked: Instant, now: Instant, wait: Duration) -> Instant {
    (asked + wait).max(now + wait / 4)
}

/// Whether PostgreSQL raised `e` while running the statement, so that the
/// statement's transaction was rolled back: not a lost connection (the
/// commit may have landed), and not an answer this process could not read
/// (it did land).
fn refused_by_the_server(e: &diesel::result::Error) -> bool {
    matches!(e, diesel::result::Error::DatabaseError(..))
        && matches!(
            failure::classify(e),
            Failure::Timeout | Failure::Other | Failure::Rejected
        )
}

/// What each change of a batch that failed with `e` hears (`None`: no
/// connection): what one change failing alone would.
fn answer_of(e: Option<&diesel::result::Error>) -> ApiError {
    let Some(e) = e else {
        return ApiError::Unavailable(anyhow::anyhow!("no PostgreSQL connection for the change"));
    };
    ApiError::of_postgres(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_waits_the_connection_wait_from_its_oldest_change() {
        let wait = Duration::from_millis(2_400);
        let asked = Instant::now();
        // Formed at once: the whole wait.
        assert_eq!(connection_deadline(asked, asked, wait), asked + wait);
        // Formed after a second in the queue: what is left of it.
        let later = asked + Duration::from_secs(1);
        assert_eq!(connection_deadline(asked, later, wait), asked + wait);
    }

    #[test]
    fn a_batch_that_queued_past_the_wait_still_gets_a_quarter_of_it() {
        let wait = Duration::from_millis(2_400);
        let asked = Instant::now();
        let late = asked + Duration::from_secs(5);
        assert_eq!(
            connection_deadline(asked, late, wait),
            late + Duration::from_millis(600)
        );
    }
}
