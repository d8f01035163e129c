//! `following`: the truth. Each function is one statement that is safe under
//! concurrency on its own: the row lock taken by `INSERT … ON CONFLICT` or
//! `UPDATE` makes the "was it active?" guard and the transition atomic.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Timestamptz};
use diesel_async::RunQueryDsl;

use super::PgConn;
use super::follower::EdgeRow;
use crate::model::UserId;

/// The state of one edge right after a transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, QueryableByName)]
pub struct Transition {
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

/// Makes `from → to` active. `None` when it already was (nothing changed).
///
/// A re-follow sets `followed_at` again: the list shows the latest follow.
pub async fn activate(
    conn: &mut PgConn,
    from: UserId,
    to: UserId,
) -> QueryResult<Option<Transition>> {
    diesel::sql_query(
        "INSERT INTO following AS f (from_user_id, to_user_id, active, followed_at, version, updated_at)
         VALUES ($1, $2, TRUE, date_trunc('milliseconds', now()), 1, now())
         ON CONFLICT (from_user_id, to_user_id) DO UPDATE
            SET active = TRUE,
                followed_at = EXCLUDED.followed_at,
                version = f.version + 1,
                updated_at = now()
          WHERE NOT f.active
         RETURNING f.version, f.followed_at, date_trunc('milliseconds', now()) AS occurred_at",
    )
    .bind::<BigInt, _>(from.get())
    .bind::<BigInt, _>(to.get())
    .get_result(conn)
    .await
    .optional()
}

/// Makes `from → to` inactive. `None` when it was not active (nothing changed).
pub async fn deactivate(
    conn: &mut PgConn,
    from: UserId,
    to: UserId,
) -> QueryResult<Option<Transition>> {
    diesel::sql_query(
        "UPDATE following
            SET active = FALSE, version = version + 1, updated_at = now()
          WHERE from_user_id = $1 AND to_user_id = $2 AND active
         RETURNING version, followed_at, date_trunc('milliseconds', now()) AS occurred_at",
    )
    .bind::<BigInt, _>(from.get())
    .bind::<BigInt, _>(to.get())
    .get_result(conn)
    .await
    .optional()
}

/// How two users relate, read from the truth in both directions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PairState {
    /// When `a` followed `b`, if `a` follows `b` now.
    pub a_follows_b: Option<DateTime<Utc>>,
    /// When `b` followed `a`, if `b` follows `a` now.
    pub b_follows_a: Option<DateTime<Utc>>,
}

/// Reads both directions of the pair in one statement.
pub async fn pair_state(conn: &mut PgConn, a: UserId, b: UserId) -> QueryResult<PairState> {
    #[derive(QueryableByName)]
    struct Row {
        #[diesel(sql_type = Bool)]
        forward: bool,
        #[diesel(sql_type = Timestamptz)]
        followed_at: DateTime<Utc>,
    }
    let rows: Vec<Row> = diesel::sql_query(
        "SELECT from_user_id = $1 AS forward, followed_at FROM following
          WHERE active
            AND ((from_user_id = $1 AND to_user_id = $2) OR (from_user_id = $2 AND to_user_id = $1))",
    )
    .bind::<BigInt, _>(a.get())
    .bind::<BigInt, _>(b.get())
    .load(conn)
    .await?;
    let mut state = PairState::default();
    for row in rows {
        if row.forward {
            state.a_follows_b = Some(row.followed_at);
        } else {
            state.b_follows_a = Some(row.followed_at);
        }
    }
    Ok(state)
}

/// The truth rows of the given `(from, to)` pairs (missing pairs are absent).
pub async fn rows(conn: &mut PgConn, pairs: &[(UserId, UserId)]) -> QueryResult<Vec<EdgeRow>> {
    super::follower::edge_rows(conn, "following", pairs).await
}

/// An edge right after a bulk transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, QueryableByName)]
pub struct Changed {
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
pub async fn lock_active_edges_of(
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
pub async fn lock_pairs(
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
pub async fn deactivate_many(
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
pub async fn reactivate_many(
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
