//! Stopping long-running jobs, and backing off while a dependency fails:
//! what every job (relay, projector, listeners, the server) shares.

use std::time::Duration;

use tokio::sync::watch;

/// Asks long-running jobs to stop.
#[derive(Clone)]
pub struct Shutdown(watch::Receiver<bool>);

/// The sending side of [`Shutdown`].
pub struct ShutdownTrigger(watch::Sender<bool>);

impl Shutdown {
    /// A trigger and the signal it controls.
    pub fn new() -> (ShutdownTrigger, Self) {
        let (tx, rx) = watch::channel(false);
        (ShutdownTrigger(tx), Self(rx))
    }

    /// True once stopping was requested.
    pub fn requested(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves when stopping is requested (or the trigger is dropped).
    pub async fn wait(&mut self) {
        let _ = self.0.wait_for(|stop| *stop).await;
    }

    /// Sleeps for `duration`; returns false when stopping was requested first.
    pub async fn sleep(&mut self, duration: Duration) -> bool {
        tokio::select! {
            () = tokio::time::sleep(duration) => true,
            () = self.wait() => false,
        }
    }
}

impl ShutdownTrigger {
    /// Requests every holder of the signal to stop.
    pub fn trigger(&self) {
        let _ = self.0.send(true);
    }
}

/// Exponential back-off between retries of a failing dependency.
#[derive(Clone, Debug)]
pub(crate) struct Backoff {
    next: Duration,
    min: Duration,
    max: Duration,
}

impl Backoff {
    /// Starts at `min`, doubles up to `max`.
    pub(crate) fn new(min: Duration, max: Duration) -> Self {
        Self {
            next: min,
            min,
            max,
        }
    }

    /// The delay before the next retry.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(self.max);
        delay
    }

    /// Back to the shortest delay after a success.
    pub(crate) fn reset(&mut self) {
        self.next = self.min;
    }
}
