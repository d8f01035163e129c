//! A read replica for what the caches miss (`DATABASE_REPLICA_URL`): list
//! pages past the cached windows, the PostgreSQL side of intersections
//! (the newest members of lists not cached, and pairs the caches could not
//! answer), and user rows on a miss. Everything else stays on the primary:
//! writes, and the reads that must see them; list fills above all, because
//! a fill marks its list complete in the cache, and a fill from a replica
//! that has not replayed an edge the projector already applied would leave
//! the cache without it until the list expires.
//!
//! How far behind the replica is, in time: every [`CHECK_EVERY`], a watcher
//! reads the primary's WAL position, then the replica's replay position.
//! Once the replica has replayed past a position read at moment `t`, it
//! holds every commit acknowledged before `t`: it is *caught up to* `t`.
//! A read goes to the replica only when
//! - the watcher's last check succeeded within [`STALE_AFTER`] (otherwise
//!   the replica is taken as down);
//! - it is caught up to within `KITH_REPLICA_MAX_LAG_MS` of now; and
//! - it is caught up to the reader's own last write in this process, so a
//!   viewer never reads a page older than what they were just told (a
//!   write through another process is bounded by the lag alone). A
//!   mutation's own reads stay on the primary; so do reads made outside a
//!   request's task unless the replica is caught up to this process's last
//!   write. User rows, which the process keeps, also wait for the moment
//!   the user cache last dropped a row: a row from before a change the
//!   process was notified of would be kept.
//!
//! Otherwise the primary answers; and when the replica fails a read, the
//! primary answers it again. `kith_replica_reads_total` counts who answered
//! and why. The replica is not waited for: a read that cannot go to it now
//! goes to the primary now.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Weak};
use std::time::{Duration, Instant};

use diesel::QueryableByName;
use diesel::sql_types::BigInt;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::config::Config;
use crate::error::ApiError;
use crate::metrics::ReplicaLabels;
use crate::model::UserId;
use crate::store::{PgConn, PgPool};

/// How often the watcher compares the two positions.
pub(crate) const CHECK_EVERY: Duration = Duration::from_millis(100);

/// A replica not checked successfully for this long is taken as down.
const STALE_AFTER: Duration = Duration::from_secs(1);

/// How long a viewer's last write is remembered (well past any lag bound
/// worth having).
const WRITES_TTL: Duration = Duration::from_secs(60);

/// The process's clock for the moments compared here, in milliseconds
/// (never 0: 0 means "never").
pub(crate) fn now_ms() -> u64 {
    static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);
    u64::try_from(EPOCH.elapsed().as_millis()).unwrap_or(u64::MAX) + 1
}

/// Who runs the request being served.
#[derive(Clone, Copy, Debug)]
struct Reader {
    /// The signed-in viewer, if any.
    viewer: Option<UserId>,
    /// A mutation: what it writes is read back before the watcher could
    /// know the replica has it, so its reads stay on the primary.
    writing: bool,
}

tokio::task_local! {
    static READER: Reader;
}

/// Runs `request` as `viewer`'s (a mutation when `writing`): the replica
/// answers its reads only once it has replayed `viewer`'s last write, and
/// never a mutation's.
pub(crate) async fn as_reader<F: Future>(
    viewer: Option<UserId>,
    writing: bool,
    request: F,
) -> F::Output {
    READER.scope(Reader { viewer, writing }, request).await
}

/// The replica, and how far it has replayed.
pub struct Replica {
    pool: PgPool,
    max_lag_ms: u64,
    /// The moment ([`now_ms`]) the replica is caught up to; 0: unknown.
    caught_up_ms: AtomicU64,
    /// When the watcher last checked it successfully; 0: never.
    checked_ms: AtomicU64,
    /// This process's last acknowledged write.
    last_write_ms: AtomicU64,
    /// Each viewer's last acknowledged write in this process.
    writes: moka::sync::Cache<UserId, u64>,
    /// `kith_replica_reads_total`.
    answers: Family<ReplicaLabels, Counter>,
}

#[derive(QueryableByName)]
struct Position {
    #[diesel(sql_type = diesel::sql_types::Nullable<BigInt>)]
    lsn: Option<i64>,
}

impl Replica {
    /// The replica `config` names, if any; its connections open when used.
    pub fn from_config(
        config: &Config,
        statements: Arc<AtomicU64>,
        answers: Family<ReplicaLabels, Counter>,
    ) -> Option<Arc<Self>> {
        let url = config.database_replica_url.as_deref()?;
        Some(Arc::new(Self {
            pool: crate::store::pool::connect_lazy(
                url,
                config.database_pool_size,
                // A replica that cannot lend a connection at once is skipped.
                Duration::from_millis(250),
                Duration::from_millis(config.statement_timeout_ms),
                statements,
            ),
            max_lag_ms: config.replica_max_lag_ms,
            caught_up_ms: AtomicU64::new(0),
            checked_ms: AtomicU64::new(0),
            last_write_ms: AtomicU64::new(0),
            writes: moka::sync::Cache::builder()
                .max_capacity(1_000_000)
                .time_to_live(WRITES_TTL)
                .build(),
            answers,
        }))
    }

    /// Starts the watcher, for as long as the replica lives.
    pub(crate) fn watch(self: &Arc<Self>, primary: PgPool) {
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(watch(Arc::downgrade(self), primary));
        }
    }

    /// Notes a write acknowledged to `user`.
    pub(crate) fn wrote(&self, user: UserId) {
        let now = now_ms();
        self.last_write_ms.fetch_max(now, Ordering::Relaxed);
        self.writes.insert(user, now);
    }

    /// The moment the request's reads must not go back before: its
    /// viewer's last write (none for an anonymous viewer; this process's
    /// last write outside a request's task; `u64::MAX`, never the replica,
    /// for a mutation).
    pub(crate) fn since_ms(&self) -> u64 {
        match READER.try_with(|reader| *reader) {
            Ok(Reader { writing: true, .. }) => u64::MAX,
            Ok(Reader {
                viewer: Some(viewer),
                ..
            }) => self.writes.get(&viewer).unwrap_or(0),
            Ok(Reader { viewer: None, .. }) => 0,
            Err(_) => self.last_write_ms.load(Ordering::Relaxed),
        }
    }

    /// Why the replica may not answer a read that must not go back before
    /// `since` (a moment of [`now_ms`]), if it may not.
    fn refusal(&self, since: u64) -> Option<&'static str> {
        let now = now_ms();
        let checked = self.checked_ms.load(Ordering::Relaxed);
        if checked == 0 || now.saturating_sub(checked) > STALE_AFTER.as_millis() as u64 {
            return Some("down");
        }
        let caught_up = self.caught_up_ms.load(Ordering::Relaxed);
        if caught_up == 0 || now.saturating_sub(caught_up) > self.max_lag_ms {
            return Some("lagging");
        }
        (caught_up < since).then_some("own_write")
    }
}

/// Runs `read` on the replica when it may answer (see the module's
/// documentation), else — or when the replica fails it — on the primary.
pub(crate) async fn read<T>(
    replica: Option<&Arc<Replica>>,
    primary: &PgPool,
    read: impl AsyncFnOnce(&mut PgConn) -> Result<T, ApiError> + Clone,
) -> Result<T, ApiError> {
    match replica {
        Some(replica) => replica.read(primary, replica.since_ms(), read).await,
        None => read(&mut *primary.get().await?).await,
    }
}

impl Replica {
    /// [`read`] for a read that must not go back before `since` (a moment
    /// of [`now_ms`]).
    pub(crate) async fn read<T>(
        &self,
        primary: &PgPool,
        since: u64,
        read: impl AsyncFnOnce(&mut PgConn) -> Result<T, ApiError> + Clone,
    ) -> Result<T, ApiError> {
        let reason = match self.refusal(since) {
            Some(reason) => reason,
            None => {
                let answer = match self.pool.get().await {
                    Ok(mut conn) => read.clone()(&mut conn).await,
                    Err(e) => Err(e.into()),
                };
                match answer {
                    Ok(answer) => {
                        self.answered("replica", "caught_up");
                        return Ok(answer);
                    }
                    Err(ApiError::Unavailable(cause)) => {
                        tracing::debug!(error = %cause, "read replica failed a read; asking the primary");
                        "failed"
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        self.answered("primary", reason);
        read(&mut *primary.get().await?).await
    }

    fn answered(&self, answered_by: &'static str, reason: &'static str) {
        self.answers
            .get_or_create(&ReplicaLabels {
                answered_by,
                reason,
            })
            .inc();
    }
}

/// Compares the two positions every [`CHECK_EVERY`] while the replica lives.
async fn watch(replica: Weak<Replica>, primary: PgPool) {
    use diesel_async::RunQueryDsl as _;
    // (moment, primary position) of recent checks, oldest first.
    let mut seen: std::collections::VecDeque<(u64, i64)> = std::collections::VecDeque::new();
    let mut tick = tokio::time::interval(CHECK_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(replica) = replica.upgrade() else {
            return;
        };
        // Taken before the primary answers: every commit acknowledged
        // before this moment is at or below the position it reads.
        let at = now_ms();
        let checked = async {
            let written: Position =
                diesel::sql_query("SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint AS lsn")
                    .get_result(&mut *primary.get().await?)
                    .await?;
            let replayed: Position = diesel::sql_query(
                "SELECT (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint AS lsn",
            )
            .get_result(&mut *replica.pool.get().await?)
            .await?;
            Ok::<_, ApiError>((written.lsn, replayed.lsn))
        };
        match tokio::time::timeout(STALE_AFTER, checked).await {
            Ok(Ok((Some(written), Some(replayed)))) => {
                seen.push_back((at, written));
                // The newest check the replica has replayed past.
                let caught_up = seen
                    .iter()
                    .rev()
                    .find(|(_, position)| *position <= replayed)
                    .map(|(moment, _)| *moment);
                if let Some(moment) = caught_up {
                    replica.caught_up_ms.fetch_max(moment, Ordering::Relaxed);
                    seen.retain(|(m, _)| *m >= moment);
                }
                // Checks older than any lag worth waiting for are dropped.
                let horizon = at.saturating_sub(replica.max_lag_ms.max(1) * 4);
                seen.retain(|(m, _)| *m >= horizon);
                replica.checked_ms.store(now_ms(), Ordering::Relaxed);
            }
            // Not a replica (promoted, or the URL names a primary): it has
            // no replay position and answers nothing.
            Ok(Ok(_)) => {
                tracing::warn!(
                    "DATABASE_REPLICA_URL names a server that is not replaying: reads stay on the primary"
                );
            }
            Ok(Err(error)) => tracing::debug!(%error, "read replica check failed"),
            Err(_) => tracing::debug!("read replica check timed out"),
        }
    }
}
