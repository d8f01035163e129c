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
