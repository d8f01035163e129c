//! `following`: the truth. Each function is one statement that is safe under
//! concurrency on its own: the row lock taken by `INSERT … ON CONFLICT` or
//! `UPDATE` makes the "was it active?" guard and the transition atomic.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Nullable, Text, Timestamptz};
use diesel_async::RunQueryDsl;

use super::PgConn;
use super::follower::EdgeRow;
use crate::model::UserId;

/// The state of one edge right after a transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, QueryableByName)]
pub(crate) struct Transition {
    /// The edge's new version.
    #[diesel(sql_type = BigInt)]
    pub version: i64,
    /// When the (latest) follow happened, in whole milliseconds.
    #[diesel(sql_type = Timestamptz)]
    pub followed_at: DateTime<Utc>,
    /// When this transition happened, in whole milliseconds.
    #[diesel(sql_type = Timestamptz)]
    pub occurred_at: DateTime<Utc>,
}

/// What `kith_change_edges` answers for each item: the outcome, the target, the edge's
/// transition (absent when it was in the asked state already), the actor's
/// counters after it, and the pair's state in both directions.
#[derive(Debug, QueryableByName)]
pub(crate) struct EdgeChangeRow {
    /// `ok`, or why nothing was done (see the migration).
    #[diesel(sql_type = Text)]
    pub outcome: String,
    /// The target's handle (absent when the target is unknown).
    #[diesel(sql_type = Nullable<Text>)]
    pub target_handle: Option<String>,
    /// The target's display name.
    #[diesel(sql_type = Nullable<Text>)]
    pub target_display_name: Option<String>,
    /// The target's status.
    #[diesel(sql_type = Nullable<Text>)]
    pub target_status: Option<String>,
    /// The edge's new version, when it changed.
    #[diesel(sql_type = Nullable<BigInt>)]
    pub edge_version: Option<i64>,
    /// The edge's follow time, when it changed.
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub edge_followed_at: Option<DateTime<Utc>>,
    /// When the change happened (ms precision), when it changed.
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub occurred_at: Option<DateTime<Utc>>,
    /// The actor's counters after the change, when it changed.
    #[diesel(embed)]
    changed: crate::store::stats::ChangedStats,
    /// When the actor followed the target, if it does now.
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub a_follows_b: Option<DateTime<Utc>>,
    /// When the target followed the actor, if it does now.
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub b_follows_a: Option<DateTime<Utc>>,
    /// Whether the target's account is locked.
    #[diesel(sql_type = Nullable<Bool>)]
    pub target_locked: Option<bool>,
    /// Whether the target hides its lists.
    #[diesel(sql_type = Nullable<Bool>)]
    pub target_hides_collections: Option<bool>,
}

impl EdgeChangeRow {
    /// The actor's counters after the change, when it changed.
    pub(crate) fn stats(&self) -> Option<crate::store::stats::UserStats> {
        self.changed.get()
    }
}

/// The follow cap (`KITH_MAX_FOLLOWINGS`, `KITH_FOLLOWINGS_RATIO`): past
/// `max` followings, a follow needs followings ≤ `ratio` × followers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct FollowCap {
    /// Followings past which the ratio applies; 0: no cap.
    pub(crate) max: u32,
    /// Most followings per follower past `max`.
    pub(crate) ratio: f64,
}

impl FollowCap {
    /// The cap the configuration sets.
    pub(crate) fn of(config: &crate::config::Config) -> Self {
        Self {
            max: config.writes.max_followings,
            ratio: config.writes.followings_ratio,
        }
    }
}

/// One edge change asked of [`change_set`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EdgeItem {
    /// The follower.
    pub actor: UserId,
    /// The followed user.
    pub target: UserId,
    /// A follow (else an unfollow).
    pub follow: bool,
    /// The id its outbox event gets, if it writes one.
    pub event_id: uuid::Uuid,
}

/// Applies every item (their `(actor, target)` pairs distinct) in one
/// statement (`kith_change_edges`) and so one transaction, whatever the
/// actors: the group commit's call, `followMany`'s and imports'. One row
/// per item, in order; an item that cannot apply is refused by its row's
/// outcome (`follow_limit` for a follow past `cap`) and its neighbours
/// apply. PostgreSQL locks what the items touch in one order, so two calls
/// never deadlock each other.
pub(crate) async fn change_set(
    conn: &mut PgConn,
    items: &[EdgeItem],
    cap: FollowCap,
) -> QueryResult<Vec<EdgeChangeRow>> {
    let actors: Vec<i64> = items.iter().map(|i| i.actor.get()).collect();
    let targets: Vec<i64> = items.iter().map(|i| i.target.get()).collect();
    let follows: Vec<bool> = items.iter().map(|i| i.follow).collect();
    let events: Vec<uuid::Uuid> = items.iter().map(|i| i.event_id).collect();
    let rows: Vec<EdgeChangeRow> =
        diesel::sql_query("SELECT * FROM kith_change_edges($1, $2, $3, $4, $5, $6)")
            .bind::<diesel::sql_types::Array<BigInt>, _>(actors)
            .bind::<diesel::sql_types::Array<BigInt>, _>(targets)
            .bind::<diesel::sql_types::Array<Bool>, _>(follows)
            .bind::<diesel::sql_types::Array<diesel::sql_types::Uuid>, _>(events)
            .bind::<BigInt, _>(i64::from(cap.max))
            .bind::<diesel::sql_types::Double, _>(cap.ratio)
            .load(conn)
            .await?;
    // Answered only once committed (see `committed`), one row per item.
    if rows.len() != items.len() {
        return Err(diesel::result::Error::NotFound);
    }
    Ok(rows)
}

/// `owner` makes `follower` stop following them, in one statement
/// (`kith_remove_follower`): the same transition as the follower's unfollow.
/// The row's target is the follower; its pair columns are from the
/// follower's side.
pub(crate) async fn remove_follower(
    conn: &mut PgConn,
    owner: UserId,
    follower: UserId,
    event_id: uuid::Uuid,
) -> QueryResult<EdgeChangeRow> {
    let rows: Vec<EdgeChangeRow> =
        diesel::sql_query("SELECT * FROM kith_remove_follower($1, $2, $3)")
            .bind::<BigInt, _>(owner.get())
            .bind::<BigInt, _>(follower.get())
            .bind::<diesel::sql_types::Uuid, _>(event_id)
            .load(conn)
            .await?;
    super::committed(rows).ok_or(diesel::result::Error::NotFound)
}

/// How two users relate, read from the truth in both directions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PairState {
    /// When `a` followed `b`, if `a` follows `b` now.
    pub a_follows_b: Option<DateTime<Utc>>,
    /// When `b` followed `a`, if `b` follows `a` now.
    pub b_follows_a: Option<DateTime<Utc>>,
}

/// The truth rows of the given `(from, to)` pairs (missing pairs are absent).
pub(crate) async fn rows(
    conn: &mut PgConn,
    pairs: &[(UserId, UserId)],
) -> QueryResult<Vec<EdgeRow>> {
    super::follower::edge_rows(conn, "following", pairs).await
}

/// An edge right after a bulk transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, QueryableByName)]
pub(crate) struct Changed {
    /// The follower.
    #[diesel(sql_type = BigInt)]
    pub from_user_id: i64,
    /// The followed user.
    #[diesel(sql_type = BigInt)]
    pub to_user_id: i64,
    /// The edge right after the transition.
    #[diesel(embed)]
    pub transition: Transition,
}

/// Up to `limit` active edges from or to `user`, locked for this
/// transaction. Found outgoing first, then incoming — each an index scan
/// that stops at `limit` (deactivated edges drop out of the outgoing index,
/// so every batch starts where the last one ended) — then locked in `(from,
/// to)` order, the order every bulk change locks edges in, so two of them
/// never deadlock.
pub(crate) async fn lock_active_edges_of(
    conn: &mut PgConn,
    user: UserId,
    limit: i64,
) -> QueryResult<Vec<(UserId, UserId)>> {
    let mut found: Vec<(UserId, UserId)> = Vec::new();
    for column in ["from_user_id", "to_user_id"] {
        let room = limit - found.len() as i64;
        if room <= 0 {
            break;
        }
        // One of two fixed column names: each direction has its own index.
        let rows: Vec<PairRow> = diesel::sql_query(format!(
            "SELECT from_user_id, to_user_id FROM following
              WHERE {column} = $1 AND active
              LIMIT $2"
        ))
        .bind::<BigInt, _>(user.get())
        .bind::<BigInt, _>(room)
        .load(conn)
        .await?;
        found.extend(rows.iter().filter_map(PairRow::pair));
    }
    lock_pairs(conn, &found, true).await
}

#[derive(QueryableByName)]
struct PairRow {
    #[diesel(sql_type = BigInt)]
    from_user_id: i64,
    #[diesel(sql_type = BigInt)]
    to_user_id: i64,
}

impl PairRow {
    fn pair(&self) -> Option<(UserId, UserId)> {
        Some((
            UserId::new(self.from_user_id)?,
            UserId::new(self.to_user_id)?,
        ))
    }
}

/// Locks the edges of `pairs` that exist (only the active ones when
/// `active_only`), in `(from, to)` order; returns them.
pub(crate) async fn lock_pairs(
    conn: &mut PgConn,
    pairs: &[(UserId, UserId)],
    active_only: bool,
) -> QueryResult<Vec<(UserId, UserId)>> {
    if pairs.is_empty() {
        return Ok(Vec::new());
    }
    let (from, to): (Vec<i64>, Vec<i64>) = pairs.iter().map(|(a, b)| (a.get(), b.get())).unzip();
    let rows: Vec<PairRow> = diesel::sql_query(
        "SELECT f.from_user_id, f.to_user_id FROM following f
           JOIN unnest($1::bigint[], $2::bigint[]) AS p(from_id, to_id)
             ON f.from_user_id = p.from_id AND f.to_user_id = p.to_id
          WHERE f.active OR NOT $3
          ORDER BY f.from_user_id, f.to_user_id
            FOR UPDATE OF f",
    )
    .bind::<diesel::sql_types::Array<BigInt>, _>(from)
    .bind::<diesel::sql_types::Array<BigInt>, _>(to)
    .bind::<Bool, _>(active_only)
    .load(conn)
    .await?;
    Ok(rows.iter().filter_map(PairRow::pair).collect())
}

/// Makes the given edges inactive where they are active; returns the ones it changed.
pub(crate) async fn deactivate_many(
    conn: &mut PgConn,
    pairs: &[(UserId, UserId)],
) -> QueryResult<Vec<Changed>> {
    let (from, to): (Vec<i64>, Vec<i64>) = pairs.iter().map(|(a, b)| (a.get(), b.get())).unzip();
    diesel::sql_query(
        "UPDATE following f
            SET active = FALSE, version = f.version + 1, updated_at = now()
           FROM unnest($1::bigint[], $2::bigint[]) AS p(from_id, to_id)
          WHERE f.from_user_id = p.from_id AND f.to_user_id = p.to_id AND f.active
         RETURNING f.from_user_id, f.to_user_id, f.version, f.followed_at,
                   date_trunc('milliseconds', now()) AS occurred_at",
    )
    .bind::<diesel::sql_types::Array<BigInt>, _>(from)
    .bind::<diesel::sql_types::Array<BigInt>, _>(to)
    .load(conn)
    .await
}

/// Makes the given edges active again with their old follow times, where
/// they are inactive; returns the ones it changed.
pub(crate) async fn reactivate_many(
    conn: &mut PgConn,
    edges: &[(UserId, UserId, DateTime<Utc>)],
) -> QueryResult<Vec<Changed>> {
    let from: Vec<i64> = edges.iter().map(|e| e.0.get()).collect();
    let to: Vec<i64> = edges.iter().map(|e| e.1.get()).collect();
    let at: Vec<DateTime<Utc>> = edges.iter().map(|e| e.2).collect();
    diesel::sql_query(
        "UPDATE following f
            SET active = TRUE, followed_at = p.followed_at, version = f.version + 1, updated_at = now()
           FROM unnest($1::bigint[], $2::bigint[], $3::timestamptz[]) AS p(from_id, to_id, followed_at)
          WHERE f.from_user_id = p.from_id AND f.to_user_id = p.to_id AND NOT f.active
         RETURNING f.from_user_id, f.to_user_id, f.version, f.followed_at,
                   date_trunc('milliseconds', now()) AS occurred_at",
    )
    .bind::<diesel::sql_types::Array<BigInt>, _>(from)
    .bind::<diesel::sql_types::Array<BigInt>, _>(to)
    .bind::<diesel::sql_types::Array<Timestamptz>, _>(at)
    .load(conn)
    .await
}
