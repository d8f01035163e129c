//! What the pipeline holds in process: the wake-ups of this process's relay
//! and projector ([`crate::pipeline::wake`] rings them).

use tokio::sync::Notify;

/// Wakes this process's relay after a commit, its parked projector after
/// the relay published events, and its import runner after a job is queued.
#[derive(Default)]
pub struct Wakes {
    /// The outbox relay's.
    pub relay: Notify,
    /// The projector's.
    pub projector: Notify,
    /// This process's import runner's, when a job is queued here.
    pub imports: Notify,
    /// This process's move runner's, when an account moves here.
    pub moves: Notify,
}
