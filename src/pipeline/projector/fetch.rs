//! Reading a batch from the broker: the first message within a window, then
//! whatever else is ready; and how an idle projector's park ends.

use std::time::Duration;

use futures_util::FutureExt as _;
use rdkafka::consumer::StreamConsumer;
use rdkafka::message::OwnedMessage;

/// How long a look woken by a relay waits for the announced events before
/// the projector parks again.
pub(super) const ANNOUNCED_WINDOW: Duration = Duration::from_millis(250);

/// How a park ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Parked {
    /// It did not park and fetches on (see [`super::Projector::park`]).
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
/// (a slower fetch is covered by [`super::Projector::caught_up`] and, after an
/// announced wake-up, by [`ANNOUNCED_WINDOW`]). Each fetch of an
/// idle look costs the broker a read of every partition.
pub(super) fn park_after(config: &crate::config::Config) -> Duration {
    Duration::from_millis(
        u64::from(config.pipeline.fetch_wait_ms)
            .saturating_mul(2)
            .max(20)
            + 5,
    )
}

/// What the wait for a batch's first message gave.
pub(super) enum First {
    /// Nothing within the window.
    Idle,
    /// A consume error (logged, waited out).
    Failed,
    /// A message.
    Message(OwnedMessage),
}

/// Waits up to `idle` for a first message.
pub(super) async fn first_message(consumer: &StreamConsumer, idle: Duration) -> First {
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
pub(super) async fn rest_of_batch(
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
