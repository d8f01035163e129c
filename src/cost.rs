//! What one API request spent waiting on PostgreSQL and Redis, for its
//! answer's `Server-Timing` (`KITH_SERVER_TIMING`): each statement and each
//! Redis round trip made on the request's behalf adds its count and its
//! time to the request's [`Tally`] — in the request's own task, and in the
//! tasks its loaders spawn ([`carry`]). What the process does for no
//! request in particular (the pipeline, the live updates, a fill or a
//! reload in the background) counts for none.
//!
//! A write gathered with others' into one transaction (a group commit)
//! counts its statement for each request it carries, with the time each
//! waited for it.
//!
//! Times are summed: a request whose loaders wait on two round trips at
//! once counts both, so a part can exceed the request's own time. Waiting
//! for a pooled connection is in neither part, nor is waiting for another
//! request's load of the same thing.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A request's statements and round trips so far.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    statements: AtomicU64,
    statements_us: AtomicU64,
    round_trips: AtomicU64,
    round_trips_us: AtomicU64,
}

tokio::task_local! {
    static TALLY: Arc<Tally>;
}

impl Tally {
    /// `(statements, their time)` in PostgreSQL.
    pub(crate) fn postgres(&self) -> (u64, Duration) {
        (
            self.statements.load(Ordering::Relaxed),
            Duration::from_micros(self.statements_us.load(Ordering::Relaxed)),
        )
    }

    /// `(round trips, their time)` to Redis.
    pub(crate) fn redis(&self) -> (u64, Duration) {
        (
            self.round_trips.load(Ordering::Relaxed),
            Duration::from_micros(self.round_trips_us.load(Ordering::Relaxed)),
        )
    }

    /// The `Server-Timing` metrics after `kith` (the whole request):
    /// `pg` and `redis`, each with its count in `desc`.
    pub(crate) fn server_timing(&self, total: Duration) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let (statements, in_postgres) = self.postgres();
        let (trips, in_redis) = self.redis();
        format!(
            "kith;dur={:.3}, pg;dur={:.3};desc=\"{}\", redis;dur={:.3};desc=\"{}\"",
            ms(total),
            ms(in_postgres),
            counted(statements, "statement"),
            ms(in_redis),
            counted(trips, "round trip"),
        )
    }
}

/// Runs `request` with `tally` as its tally.
pub(crate) async fn tallied<F: Future>(tally: Arc<Tally>, request: F) -> F::Output {
    TALLY.scope(tally, request).await
}

/// `task`, carrying the current task's tally (if any) to wherever it is
/// spawned, so that what it waits for counts for the same request.
pub(crate) fn carry<F: Future>(task: F) -> impl Future<Output = F::Output> {
    let tally = TALLY.try_with(Arc::clone).ok();
    async move {
        match tally {
            Some(tally) => TALLY.scope(tally, task).await,
            None => task.await,
        }
    }
}

/// Whether the current task works for a request that keeps a tally (so
/// that what would only feed it is not measured otherwise).
pub(crate) fn counting() -> bool {
    TALLY.try_with(|_| ()).is_ok()
}

/// Counts one PostgreSQL statement that took `took`, for the current
/// request, if any.
pub(crate) fn statement(took: Duration) {
    let _ = TALLY.try_with(|t| {
        t.statements.fetch_add(1, Ordering::Relaxed);
        t.statements_us.fetch_add(micros(took), Ordering::Relaxed);
    });
}

/// Awaits `trip`, one Redis round trip, and counts it and its time for
/// the current request, if any.
pub(crate) async fn round_trip<F: Future>(trip: F) -> F::Output {
    if !counting() {
        return trip.await;
    }
    let started = Instant::now();
    let answer = trip.await;
    let _ = TALLY.try_with(|t| {
        t.round_trips.fetch_add(1, Ordering::Relaxed);
        t.round_trips_us
            .fetch_add(micros(started.elapsed()), Ordering::Relaxed);
    });
    answer
}

/// Awaits `commit`, a statement run for this request and others together
/// (a group commit), and counts it for the current request, if any, with
/// the time the request waited for it.
pub(crate) async fn shared_statement<F: Future>(commit: F) -> F::Output {
    if !counting() {
        return commit.await;
    }
    let started = Instant::now();
    let answer = commit.await;
    statement(started.elapsed());
    answer
}

fn counted(n: u64, what: &str) -> String {
    match n {
        1 => format!("1 {what}"),
        n => format!("{n} {what}s"),
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn spawned_work_counts_for_the_request_that_spawned_it() {
        let tally = Arc::new(Tally::default());
        tallied(tally.clone(), async {
            round_trip(async {}).await;
            statement(Duration::from_millis(2));
            tokio::spawn(carry(async { round_trip(async {}).await }))
                .await
                .unwrap();
            // Spawned without carrying: counts for nobody.
            tokio::spawn(async { statement(Duration::from_millis(1)) })
                .await
                .unwrap();
        })
        .await;
        // Outside any request: counts for nobody either.
        statement(Duration::from_millis(1));
        assert_eq!(tally.redis().0, 2);
        assert_eq!(tally.postgres(), (1, Duration::from_millis(2)));
        let header = tally.server_timing(Duration::from_micros(1500));
        assert!(
            header.starts_with("kith;dur=1.500, pg;dur=2.000;desc=\"1 statement\", redis;dur="),
            "{header}"
        );
        assert!(header.ends_with(";desc=\"2 round trips\""), "{header}");
    }
}
