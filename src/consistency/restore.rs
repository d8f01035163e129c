//! `kith after-restore`, and `kith origin renew|adopt`: what an operator
//! runs once PostgreSQL holds an earlier point of its timeline than Redis
//! and the broker (a restored backup), or holds a copy of another
//! database's data.
//!
//! After a restore, the derived views are ahead of the truth, and the topic
//! holds events the truth no longer has (the lost timeline). With every
//! relay and projector stopped, [`after_restore`]:
//!
//! 1. gives the database a new event origin: whatever the lost timeline
//!    published is foreign from now on, so no projector applies it;
//! 2. moves every projector position on the follow topic to the broker's
//!    end, so none of it is even read again (the content topic's positions
//!    stay: other services' events are replayed from where the restored
//!    ledger stands, and count once);
//! 3. deletes what Redis derived from PostgreSQL (counter records, list
//!    caches and their versions, kept suggestions) — including the keys of
//!    users only the lost timeline had, whose ids the database will hand out
//!    again;
//! 4. reconciles the `follower` projection and `user_stats` with the truth
//!    in full.
//!
//! Outbox rows the restore brought back are published again under the new
//! origin: they are the restored truth's own events, and their versions
//! make them harmless where the projection has them already.

use std::time::Duration;

use diesel_async::AsyncConnection as _;
use diesel_async::RunQueryDsl as _;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use uuid::Uuid;

use super::reconcile::{self, Scope};
use crate::app::App;
use crate::error::PipelineError;
use crate::store::{PgConn, origin, partitions};

/// Why a restore step refused to run.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// A relay or projector of this schema is running.
    #[error(
        "refused: {0}. Stop every Kith process of this database (`kith run`, `relay`, \
         `project`), then run this again (a lease left by a killed projector lapses within \
         KITH_PROJECTOR_LEASE_MS)"
    )]
    Running(String),
    /// A step failed.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
}

impl From<diesel::result::Error> for RestoreError {
    fn from(e: diesel::result::Error) -> Self {
        Self::Pipeline(e.into())
    }
}

/// One partition's position moved to the broker's end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Moved {
    /// The consumer group the position is of.
    pub group: String,
    /// The partition.
    pub partition: i32,
    /// Where it stood (`None`: at the start).
    pub from: Option<i64>,
    /// The broker's end, where it stands now.
    pub to: i64,
}

/// What [`after_restore`] did.
#[derive(Clone, Debug)]
pub struct Summary {
    /// The origin retired.
    pub old_origin: Uuid,
    /// The origin events carry from now on.
    pub new_origin: Uuid,
    /// Follow-topic positions moved to the broker's end.
    pub moved: Vec<Moved>,
    /// Redis keys deleted.
    pub redis_keys_deleted: u64,
    /// What the full reconciliation repaired.
    pub reconciled: reconcile::Summary,
}

impl Summary {
    /// Follow-topic messages skipped, never to be applied.
    pub fn skipped(&self) -> i64 {
        self.moved
            .iter()
            .map(|m| m.to - m.from.unwrap_or(0).min(m.to))
            .sum()
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "event origin renewed: {} -> {} (events of the old origin are refused from now on)",
            self.old_origin, self.new_origin
        )?;
        writeln!(
            f,
            "follow-topic positions moved to the broker's end: {} partitions, {} messages skipped",
            self.moved.len(),
            self.skipped()
        )?;
        for m in &self.moved {
            let from = m.from.map_or_else(|| "start".to_owned(), |o| o.to_string());
            writeln!(
                f,
                "  {} partition {}: {from} -> {}",
                m.group, m.partition, m.to
            )?;
        }
        writeln!(
            f,
            "Redis keys derived from PostgreSQL deleted: {}",
            self.redis_keys_deleted
        )?;
        write!(f, "reconcile --full: {}", self.reconciled)
    }
}

/// Brings the derived views, the projectors' positions and the event origin
/// in line with a database restored to an earlier point (see the module).
/// Refuses while a relay or projector of this database runs.
pub async fn after_restore(app: &App, progress: bool) -> Result<Summary, RestoreError> {
    refuse_while_running(app).await?;
    let ends = follow_topic_ends(app).await?;
    let (old, new, moved) = {
        let mut conn = app.pg.get().await.map_err(PipelineError::from)?;
        conn.transaction::<_, RestoreError, _>(async |conn| {
            let old = origin::current(conn).await?.origin;
            let new = origin::renew(conn).await?.origin;
            let moved = move_to_ends(conn, app, &ends).await?;
            Ok((old, new, moved))
        })
        .await?
    };
    tracing::warn!(%old, %new, "after-restore: event origin renewed; positions moved");
    // Before the reconciliation: its writes to Redis go only where they are
    // newer, and what the lost timeline left there may look newer.
    let redis_keys_deleted = {
        let mut redis = app.redis.get().await.map_err(PipelineError::from)?;
        redis
            .sweep(&app.keys.derived_patterns())
            .await
            .map_err(PipelineError::from)?
    };
    let reconciled = reconcile::reconcile(app, Scope::Full, 1000, progress).await?;
    Ok(Summary {
        old_origin: old,
        new_origin: new,
        moved,
        redis_keys_deleted,
        reconciled,
    })
}

/// What `kith origin renew` and `adopt` do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OriginChange {
    /// A new origin: the database is a copy that is to live beside the
    /// original, and must neither apply the original's events nor have its
    /// own applied by the original's projectors.
    Renew,
    /// The same origin, recorded as living here: the database moved or was
    /// upgraded with everything it wrote.
    Adopt,
}

/// Changes the origin as `change` says; returns (before, after). Refuses
/// while a relay or projector of this database runs.
pub async fn change_origin(
    app: &App,
    change: OriginChange,
) -> Result<(origin::Origin, origin::Origin), RestoreError> {
    refuse_while_running(app).await?;
    let mut conn = app.pg.get().await.map_err(PipelineError::from)?;
    conn.transaction::<_, RestoreError, _>(async |conn| {
        let before = origin::current(conn).await?;
        let after = match change {
            OriginChange::Renew => origin::renew(conn).await?,
            OriginChange::Adopt => origin::adopt(conn).await?,
        };
        Ok((before, after))
    })
    .await
}

/// The event origin as it stands (`kith origin show`).
pub(crate) async fn show_origin(app: &App) -> Result<origin::Origin, PipelineError> {
    let mut conn = app.pg.get().await?;
    Ok(origin::current(&mut conn).await?)
}

async fn refuse_while_running(app: &App) -> Result<(), RestoreError> {
    let mut conn = app.pg.get().await.map_err(PipelineError::from)?;
    match origin::pipeline_running(&mut conn).await? {
        Some(why) => Err(RestoreError::Running(why)),
        None => Ok(()),
    }
}

/// The high watermark of every partition of the follow topic.
async fn follow_topic_ends(app: &App) -> Result<Vec<(i32, i64)>, PipelineError> {
    crate::pipeline::kafka::ensure_topics(&app.config).await?;
    let config = app.config.clone();
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = crate::pipeline::kafka::consumer_config(&config).create()?;
        let timeout = Duration::from_secs(10);
        let metadata = consumer.fetch_metadata(Some(&config.pipeline.follow_topic), timeout)?;
        let mut ends = Vec::new();
        for topic in metadata.topics() {
            for partition in topic.partitions() {
                let (_, high) = consumer.fetch_watermarks(
                    &config.pipeline.follow_topic,
                    partition.id(),
                    timeout,
                )?;
                ends.push((partition.id(), high));
            }
        }
        ends.sort_unstable();
        Ok(ends)
    })
    .await
    .map_err(|_panicked| rdkafka::error::KafkaError::Canceled)?
}

/// Moves every follow-topic position (of every consumer group in this
/// database, and the configured group's whether it had rows or not) to
/// `ends`.
async fn move_to_ends(
    conn: &mut PgConn,
    app: &App,
    ends: &[(i32, i64)],
) -> Result<Vec<Moved>, RestoreError> {
    #[derive(diesel::QueryableByName)]
    struct Row {
        #[diesel(sql_type = diesel::sql_types::Text)]
        consumer_group: String,
        #[diesel(sql_type = diesel::sql_types::Integer)]
        partition: i32,
        #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
        old_offset: Option<i64>,
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        next_offset: i64,
    }
    let count = ends.iter().map(|(p, _)| p + 1).max().unwrap_or(0);
    partitions::ensure(
        conn,
        &app.config.pipeline.consumer_group,
        &app.config.pipeline.follow_topic,
        count,
    )
    .await?;
    let (ids, highs): (Vec<i32>, Vec<i64>) = ends.iter().copied().unzip();
    let rows: Vec<Row> = diesel::sql_query(
        "WITH old AS (
             SELECT consumer_group, partition, next_offset AS old_offset
               FROM projector_partition WHERE topic = $1 FOR UPDATE)
         UPDATE projector_partition p
            SET next_offset = e.high, synced_offset = e.high
           FROM unnest($2::int[], $3::bigint[]) AS e(partition, high), old o
          WHERE p.topic = $1 AND p.partition = e.partition
            AND o.consumer_group = p.consumer_group AND o.partition = p.partition
         RETURNING p.consumer_group, p.partition, o.old_offset, p.next_offset",
    )
    .bind::<diesel::sql_types::Text, _>(&app.config.pipeline.follow_topic)
    .bind::<diesel::sql_types::Array<diesel::sql_types::Integer>, _>(ids)
    .bind::<diesel::sql_types::Array<diesel::sql_types::BigInt>, _>(highs)
    .load(conn)
    .await?;
    let mut moved: Vec<Moved> = rows
        .into_iter()
        .map(|r| Moved {
            group: r.consumer_group,
            partition: r.partition,
            from: r.old_offset,
            to: r.next_offset,
        })
        .collect();
    moved.sort_by(|a, b| (&a.group, a.partition).cmp(&(&b.group, b.partition)));
    Ok(moved)
}
