//! The runner of account moves: every process serving the API runs one.
//! It takes the open moves of all accounts in turn, a batch each, under a
//! lease: a process that dies leaves its move to the next runner once the
//! lease lapses, which resumes after the last follower a committed batch
//! handled, so no follower is handled twice.

use std::sync::Arc;
use std::time::Duration;

use crate::app::App;
use crate::error::ApiError;
use crate::shutdown::Shutdown;
use crate::store::moves;

use super::moves::{Stopped, after_batch, batch};

/// Followers one batch handles at most. A batch is a second of the
/// move's pace, up to this many (a faster pace runs batches of this size
/// more often): spread over ten batches a second, a move of 100,000
/// followers cost the broker four times the CPU (a produce request per
/// small batch) and Kith half as much again, for a p99 of the reads
/// served meanwhile 1.54× instead of 1.82× their own.
const BATCH: i64 = 200;

/// How long a runner holds a move without a batch committing.
const LEASE: Duration = Duration::from_secs(10);

/// How often a runner looks for moves other processes opened.
const POLL: Duration = Duration::from_secs(2);

/// Runs the open moves until `stop`: at once when one opens in this
/// process, else every [`POLL`] (or when the soonest move held back by its
/// pace comes due, if sooner).
pub(crate) async fn run(app: Arc<App>, mut stop: Shutdown) {
    let mut wait = Duration::ZERO;
    loop {
        tokio::select! {
            () = stop.wait() => return,
            () = app.wakes.moves.notified() => {}
            () = tokio::time::sleep(wait) => {}
        }
        while !stop.requested() {
            match turn(&app).await {
                Ok(true) => {}
                Ok(false) => break,
                Err(error) => {
                    tracing::warn!(%error, "move: a turn stopped");
                    break;
                }
            }
        }
        wait = match next_due(&app).await {
            Ok(Some(due)) => (due - chrono::Utc::now())
                .to_std()
                .unwrap_or_default()
                .clamp(Duration::from_millis(10), POLL),
            _ => POLL,
        };
    }
}

async fn next_due(app: &App) -> Result<Option<chrono::DateTime<chrono::Utc>>, ApiError> {
    let mut conn = app.pg.get().await?;
    Ok(moves::next_due(&mut conn).await?)
}

/// One turn: claims the open move due first and runs one batch of it.
/// `Ok(false)`: there was none to claim.
async fn turn(app: &Arc<App>) -> Result<bool, ApiError> {
    use diesel_async::AsyncConnection as _;

    let token = uuid::Uuid::new_v4();
    let lease_ms = LEASE.as_millis() as i64;
    let job = {
        let mut conn = app.pg.get().await?;
        moves::claim(&mut conn, token, lease_ms).await?
    };
    let Some(job) = job else {
        return Ok(false);
    };
    let size = i64::from(app.config.portability.move_followers_per_sec).clamp(1, BATCH);
    let outcome = {
        let mut conn = app.pg.get().await?;
        conn.transaction::<_, ApiError, _>(async |conn| {
            match moves::fence(conn, job.id, token, lease_ms).await? {
                Some(job) => batch(app, conn, &job, size).await.map(Some),
                None => Ok(None),
            }
        })
        .await
    };
    let failure = match outcome {
        // Superseded by a move back, or another runner's now.
        Ok(None) => return Ok(true),
        Ok(Some(Ok(done))) => {
            after_batch(app, &done.follows).await;
            if !done.done {
                let mut conn = app.pg.get().await?;
                moves::release(&mut conn, job.id, token).await?;
                return Ok(true);
            }
            None
        }
        Ok(Some(Err(Stopped(why)))) => Some(why),
        Err(e @ (ApiError::Unavailable(_) | ApiError::Timeout)) => {
            let mut conn = app.pg.get().await?;
            moves::release(&mut conn, job.id, token).await?;
            return Err(e);
        }
        Err(e) => {
            tracing::error!(error = %e.detail(), job = job.id, "move: a batch failed");
            Some("an internal error stopped the move")
        }
    };
    let mut conn = app.pg.get().await?;
    let state = if failure.is_some() { "failed" } else { "done" };
    moves::finish(&mut conn, job.id, token, state, failure).await?;
    Ok(true)
}
