//! `follower`: the projection "B is followed by A", written only by the
//! projector, guarded by the edge version carried in each event.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Bool, Timestamptz};
use diesel_async::RunQueryDsl;

use super::PgConn;
use crate::model::UserId;

/// What applying one event did to the projection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// The event was not newer than the row: a duplicate or a stale reorder.
    Stale,
    /// The row now holds the event's state; `was_active` is the state before.
    Changed {
        /// Whether the edge was active before the event.
        was_active: bool,
        /// Whether it is active now.
        active: bool,
    },
}

/// Applies one edge state if its `version` is newer than the row's.
pub async fn apply(
    conn: &mut PgConn,
    from: UserId,
    to: UserId,
    active: bool,
    followed_at: DateTime<Utc>,
    version: i64,
) -> QueryResult<Applied> {
    #[derive(QueryableByName)]
    struct Row {
        #[diesel(sql_type = Bool)]
        was_active: bool,
        #[diesel(sql_type = Bool)]
        applied: bool,
    }
    // See migrations/…_pipeline: locks the row, compares versions, reports
    // the state it replaced — one round trip, safe against a concurrent applier.
    let row: Row = diesel::sql_query(
        "SELECT was_active, applied FROM kith_apply_follower($1, $2, $3, $4, $5)",
    )
    .bind::<BigInt, _>(to.get())
    .bind::<BigInt, _>(from.get())
    .bind::<Bool, _>(active)
    .bind::<Timestamptz, _>(followed_at)
    .bind::<BigInt, _>(version)
    .get_result(conn)
    .await?;
    Ok(if row.applied {
        Applied::Changed {
            was_active: row.was_active,
            active,
        }
    } else {
        Applied::Stale
    })
}

/// One follow event as the projection applies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EdgeEvent {
    /// The follower.
    pub from: UserId,
    /// The followed user.
    pub to: UserId,
    /// The state the event carries.
    pub active: bool,
    /// Follow time.
    pub followed_at: DateTime<Utc>,
    /// Edge version after the event.
    pub version: i64,
}

/// Applies `events` in order, each like [`apply`], in one round trip.
pub async fn apply_many(conn: &mut PgConn, events: &[EdgeEvent]) -> QueryResult<Vec<Applied>> {
    #[derive(QueryableByName)]
    struct Row {
        #[diesel(sql_type = diesel::sql_types::Integer)]
        ord: i32,
        #[diesel(sql_type = Bool)]
        was_active: bool,
        #[diesel(sql_type = Bool)]
        applied: bool,
    }
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let mut rows: Vec<Row> = diesel::sql_query(
        "SELECT ord, was_active, applied FROM kith_apply_followers($1, $2, $3, $4, $5)",
    )
    .bind::<Array<BigInt>, _>(events.iter().map(|e| e.to.get()).collect::<Vec<_>>())
    .bind::<Array<BigInt>, _>(events.iter().map(|e| e.from.get()).collect::<Vec<_>>())
    .bind::<Array<Bool>, _>(events.iter().map(|e| e.active).collect::<Vec<_>>())
    .bind::<Array<Timestamptz>, _>(events.iter().map(|e| e.followed_at).collect::<Vec<_>>())
    .bind::<Array<BigInt>, _>(events.iter().map(|e| e.version).collect::<Vec<_>>())
    .load(conn)
    .await?;
    rows.sort_by_key(|r| r.ord);
    Ok(rows
        .iter()
        .zip(events)
        .map(|(row, event)| {
            if row.applied {
                Applied::Changed {
                    was_active: row.was_active,
                    active: event.active,
                }
            } else {
                Applied::Stale
            }
        })
        .collect())
}

/// The current state of one edge in a table, for re-syncing caches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, QueryableByName)]
pub struct EdgeRow {
    /// The follower.
    #[diesel(sql_type = BigInt)]
    pub from_user_id: i64,
    /// The followed user.
    #[diesel(sql_type = BigInt)]
    pub to_user_id: i64,
    /// Whether the edge is active.
    #[diesel(sql_type = Bool)]
    pub active: bool,
    /// Latest follow time.
    #[diesel(sql_type = Timestamptz)]
    pub followed_at: DateTime<Utc>,
    /// Edge version.
    #[diesel(sql_type = BigInt)]
    pub version: i64,
}

/// The projection rows of the given `(from, to)` pairs (missing pairs are absent).
pub async fn rows(conn: &mut PgConn, pairs: &[(UserId, UserId)]) -> QueryResult<Vec<EdgeRow>> {
    edge_rows(conn, "follower", pairs).await
}

/// The rows of `table` (`following` or `follower`, both keyed by the pair)
/// for the given `(from, to)` pairs, in one statement.
pub(crate) async fn edge_rows(
    conn: &mut PgConn,
    table: &'static str,
    pairs: &[(UserId, UserId)],
) -> QueryResult<Vec<EdgeRow>> {
    let (from, to): (Vec<i64>, Vec<i64>) = pairs.iter().map(|(a, b)| (a.get(), b.get())).unzip();
    // The table's distribution column compared to the ids themselves too, so
    // a sharded PostgreSQL reads only their shards (docs/scale-out.md).
    let shards = if table == "follower" {
        "f.to_user_id = ANY($2)"
    } else {
        "f.from_user_id = ANY($1)"
    };
    diesel::sql_query(format!(
        "SELECT f.from_user_id, f.to_user_id, f.active, f.followed_at, f.version
           FROM {table} f
           JOIN unnest($1::bigint[], $2::bigint[]) AS p(from_id, to_id)
             ON f.from_user_id = p.from_id AND f.to_user_id = p.to_id
          WHERE {shards}"
    ))
    .bind::<Array<BigInt>, _>(from)
    .bind::<Array<BigInt>, _>(to)
    .load(conn)
    .await
}

/// Repair: sets a projection row to `truth` even when the versions are equal
/// (a row that holds another state under the truth's version). Returns the
/// `active` it replaced, or `None` if the row is gone or already newer.
pub(crate) async fn overwrite(conn: &mut PgConn, truth: &EdgeRow) -> QueryResult<Option<bool>> {
    #[derive(QueryableByName)]
    struct Row {
        #[diesel(sql_type = Bool)]
        was_active: bool,
    }
    let row: Option<Row> = diesel::sql_query(
        "WITH old AS (
             SELECT active FROM follower
              WHERE to_user_id = $1 AND from_user_id = $2 AND version <= $5
                FOR UPDATE)
         UPDATE follower f
            SET active = $3, followed_at = $4, version = $5, updated_at = now()
           FROM old
          WHERE f.to_user_id = $1 AND f.from_user_id = $2
         RETURNING old.active AS was_active",
    )
    .bind::<BigInt, _>(truth.to_user_id)
    .bind::<BigInt, _>(truth.from_user_id)
    .bind::<Bool, _>(truth.active)
    .bind::<Timestamptz, _>(truth.followed_at)
    .bind::<BigInt, _>(truth.version)
    .get_result(conn)
    .await
    .optional()?;
    Ok(row.map(|r| r.was_active))
}

/// Repair: deletes a projection row that has no truth row. Returns whether
/// it was active, or `None` if it was gone.
pub(crate) async fn delete_orphan(
    conn: &mut PgConn,
    from: UserId,
    to: UserId,
) -> QueryResult<Option<bool>> {
    #[derive(QueryableByName)]
    struct Row {
        #[diesel(sql_type = Bool)]
        active: bool,
    }
    let row: Option<Row> = diesel::sql_query(
        "DELETE FROM follower p
          WHERE p.to_user_id = $1 AND p.from_user_id = $2
            AND NOT EXISTS (SELECT 1 FROM following f
                             WHERE f.from_user_id = $2 AND f.to_user_id = $1)
         RETURNING p.active",
    )
    .bind::<BigInt, _>(to.get())
    .bind::<BigInt, _>(from.get())
    .get_result(conn)
    .await
    .optional()?;
    Ok(row.map(|r| r.active))
}
