//! A read replica for what the caches miss (`DATABASE_REPLICA_URL`): list
//! pages past the cached windows, and user rows (with their boundaries)
//! the process does not hold. Everything else stays on the primary:
//! writes, and the reads that must see them; list fills above all, because
//! a fill marks its list complete in the cache, and a fill from a replica
//! that has not replayed an edge the projector already applied would leave
//! the cache without it until the list expires. Intersections and
//! suggestions stay there too: their results are kept under the counter
//! versions or generation read before them, so a result from a replica
//! that is behind those would be kept as current.
//!
//! How far behind the replica is, in time: every [`CHECK_EVERY`], a watcher
//! reads the primary's WAL position and notes the moment it asked. Once a
//! replica session has replayed past a position read at moment `t`, it
//! holds every commit acknowledged before `t`. Each read checks the replay
//! position of the session it was lent, in a statement before the read (a
//! URL of several hosts may lend sessions on different standbys). A read
//! goes to the replica only when
//! - the watcher's last check of the replica succeeded within
//!   [`STALE_AFTER`] (otherwise the replica is taken as down);
//! - its session has replayed what the primary had written
//!   `KITH_REPLICA_MAX_LAG_MS` ago; and
//! - it has replayed the reader's own last write in this process, so a
//!   viewer never reads a page older than what they were just told (a
//!   write through another process is bounded by the lag alone). A
//!   mutation's own reads stay on the primary; a read made outside a
//!   request's task (a batched load) waits for this process's last write,
//!   and while any mutation runs in this process it stays on the primary.
//!   User rows, which the process keeps, also wait for the moment the user
//!   cache last dropped a row: a row from before a change the process was
//!   notified of would be kept.
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
use crate::model::{IdHasher, UserId};
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
    /// (moment, the primary's WAL position asked for at that moment) of
    /// recent checks, oldest first.
    written: std::sync::Mutex<std::collections::VecDeque<(u64, i64)>>,
    /// When the watcher last found the replica replaying; 0: never.
    checked_ms: AtomicU64,
    /// This process's last acknowledged write.
    last_write_ms: AtomicU64,
    /// Mutations running in this process.
    writing: AtomicU64,
    /// Each viewer's last acknowledged write in this process.
    writes: moka::sync::Cache<UserId, u64, IdHasher>,
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
        let url = config.database.replica_url.as_deref()?;
        Some(Arc::new(Self {
            pool: crate::store::pool::connect_lazy(
                url,
                config.database.pool_size,
                // A replica that cannot lend a connection at once is skipped.
                Duration::from_millis(250),
                Duration::from_millis(config.database.statement_timeout_ms),
                statements,
            ),
            max_lag_ms: config.database.replica_max_lag_ms,
            written: std::sync::Mutex::default(),
            checked_ms: AtomicU64::new(0),
            last_write_ms: AtomicU64::new(0),
            writing: AtomicU64::new(0),
            writes: moka::sync::Cache::builder()
                .max_capacity(1_000_000)
                .time_to_live(WRITES_TTL)
                .build_with_hasher(IdHasher::default()),
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
            Err(_) if self.writing.load(Ordering::SeqCst) > 0 => u64::MAX,
            Err(_) => self.last_write_ms.load(Ordering::Relaxed),
        }
    }

    /// Counts a mutation running in this process until the guard drops.
    pub(crate) fn writing(self: &Arc<Self>) -> Writing {
        self.writing.fetch_add(1, Ordering::SeqCst);
        Writing(self.clone())
    }

    /// The WAL position a replica session must have replayed to answer a
    /// read that must not go back before `since` (a moment of [`now_ms`]),
    /// or why no session may.
    fn required(&self, since: u64) -> Result<i64, &'static str> {
        let now = now_ms();
        let checked = self.checked_ms.load(Ordering::Relaxed);
        if checked == 0 || now.saturating_sub(checked) > STALE_AFTER.as_millis() as u64 {
            return Err("down");
        }
        let bound = now.saturating_sub(self.max_lag_ms);
        let written = self.written.lock().expect("positions lock");
        // The first position asked for at or after the moment: every commit
        // acknowledged before that moment is at or below it.
        let at = |moment: u64| written.iter().find(|(m, _)| *m >= moment).map(|(_, p)| *p);
        match (at(since.max(bound)), since > bound) {
            (Some(position), _) => Ok(position),
            (None, true) => Err("own_write"),
            (None, false) => Err("lagging"),
        }
    }
}

/// A mutation running (see [`Replica::writing`]).
pub(crate) struct Writing(Arc<Replica>);

impl Drop for Writing {
    fn drop(&mut self) {
        self.0.writing.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(QueryableByName)]
struct Replay {
    #[diesel(sql_type = diesel::sql_types::Nullable<BigInt>)]
    lsn: Option<i64>,
}

/// The replay position of a replica session (None: not a standby).
async fn replayed(conn: &mut PgConn) -> Result<Option<i64>, ApiError> {
    use diesel_async::RunQueryDsl as _;
    let replay: Replay = diesel::sql_query(
        "SELECT CASE WHEN pg_is_in_recovery()
                THEN (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint END AS lsn",
    )
    .get_result(conn)
    .await?;
    Ok(replay.lsn)
}

/// Runs `read` on the replica when it may answer (see the module's
/// documentation), else — or when the replica fails it — on the primary.
pub(crate) async fn read<T>(
    replica: Option<&Arc<Replica>>,
    primary: &PgPool,
    read: impl AsyncFnOnce(&mut PgConn) -> Result<T, ApiError> + Clone,
) -> Result<T, ApiError> {
    read_since(replica, primary, 0, read).await
}

/// [`read`] for a read that must not go back before `since` either (a
/// moment of [`now_ms`]), besides the reader's own last write.
pub(crate) async fn read_since<T>(
    replica: Option<&Arc<Replica>>,
    primary: &PgPool,
    since: u64,
    read: impl AsyncFnOnce(&mut PgConn) -> Result<T, ApiError> + Clone,
) -> Result<T, ApiError> {
    match replica {
        Some(replica) => {
            replica
                .read(primary, replica.since_ms().max(since), read)
                .await
        }
        None => on_primary(primary, read).await,
    }
}

/// Runs `read` on the primary. After a failover or a restart the pool may
/// still lend sessions of the server that went away, each failing as it is
/// found closed (and dropped): a read is safe to ask again, on the next
/// session the pool lends, each pooled session at most once. A pool that
/// cannot lend one (PostgreSQL away) answers as it is.
pub(crate) async fn on_primary<T>(
    primary: &PgPool,
    read: impl AsyncFnOnce(&mut PgConn) -> Result<T, ApiError> + Clone,
) -> Result<T, ApiError> {
    let mut retries = primary.state().connections;
    loop {
        let mut conn = primary.get().await?;
        match read.clone()(&mut conn).await {
            Err(ApiError::Unavailable(cause)) if retries > 0 => {
                retries -= 1;
                tracing::debug!(error = %cause, "PostgreSQL session failed a read; reading again");
            }
            answer => return answer,
        }
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
        let reason = match self.required(since) {
            Err(reason) => reason,
            Ok(required) => {
                let answer = async {
                    let mut conn = self.pool.get().await?;
                    match replayed(&mut conn).await? {
                        Some(position) if position >= required => {
                            Ok(Some(read.clone()(&mut conn).await?))
                        }
                        _ => Ok(None),
                    }
                }
                .await;
                match answer {
                    Ok(Some(answer)) => {
                        self.answered("replica", "caught_up");
                        return Ok(answer);
                    }
                    // This session has not replayed far enough.
                    Ok(None) if since >= now_ms().saturating_sub(self.max_lag_ms) => "own_write",
                    Ok(None) => "lagging",
                    Err(ApiError::Unavailable(cause)) => {
                        tracing::debug!(error = %cause, "read replica failed a read; asking the primary");
                        "failed"
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        self.answered("primary", reason);
        on_primary(primary, read).await
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

/// Notes the primary's WAL position, and checks that the replica is
/// replaying, every [`CHECK_EVERY`] while the replica lives.
async fn watch(replica: Weak<Replica>, primary: PgPool) {
    use diesel_async::RunQueryDsl as _;
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
            let replaying = replayed(&mut *replica.pool.get().await?).await?;
            Ok::<_, ApiError>((written.lsn, replaying))
        };
        match tokio::time::timeout(STALE_AFTER, checked).await {
            Ok(Ok((Some(written), replaying))) => {
                {
                    let mut positions = replica.written.lock().expect("positions lock");
                    positions.push_back((at, written));
                    // Older than any lag worth waiting for.
                    let horizon = at.saturating_sub(replica.max_lag_ms.max(1000) * 4);
                    while positions.front().is_some_and(|(m, _)| *m < horizon) {
                        positions.pop_front();
                    }
                }
                match replaying {
                    Some(_) => replica.checked_ms.store(now_ms(), Ordering::Relaxed),
                    // Once per change: a promoted replica, or a URL that
                    // names a primary.
                    None if replica.checked_ms.swap(0, Ordering::Relaxed) != 0 => tracing::warn!(
                        "DATABASE_REPLICA_URL names a server that is not a standby: reads stay on the primary"
                    ),
                    None => {}
                }
            }
            Ok(Ok((None, _))) => {}
            Ok(Err(error)) => tracing::debug!(%error, "read replica check failed"),
            Err(_) => tracing::debug!("read replica check timed out"),
        }
    }
}
