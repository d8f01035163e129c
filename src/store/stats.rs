//! `user_stats`: exact counters per user, with a version bumped on every change.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::PgConn;
use super::schema::user_stats;
use crate::model::UserId;

/// One user's counters, as a snapshot with its version.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Queryable, QueryableByName, Selectable)]
#[diesel(table_name = user_stats)]
pub struct UserStats {
    /// Users this user follows.
    pub followings: i64,
    /// Users following this user.
    pub followers: i64,
    /// Published posts.
    pub posts: i64,
    /// Likes received on this user's posts.
    pub likes_received: i64,
    /// Favourites received on this user's posts.
    pub favs_received: i64,
    /// Increases on every change of the row.
    pub version: i64,
}

/// Adds `delta` to `followings` of `user` and bumps the version; returns the new snapshot.
pub async fn add_followings(conn: &mut PgConn, user: UserId, delta: i64) -> QueryResult<UserStats> {
    let update = || {
        diesel::update(user_stats::table.find(user.get()))
            .set((
                user_stats::followings.eq(user_stats::followings + delta),
                user_stats::version.eq(user_stats::version + 1),
            ))
            .returning(UserStats::as_returning())
    };
    // One statement on the write path; the row is missing only for users
    // created outside Kith, and then it is created once.
    if let Some(stats) = update().get_result(conn).await.optional()? {
        return Ok(stats);
    }
    ensure_row(conn, user).await?;
    update().get_result(conn).await
}

/// Creates the zero row of `user` if it is missing (users created elsewhere).
/// A separate statement, because an upsert checks `CHECK (>= 0)` against the
/// row it would insert, before it finds the conflict.
async fn ensure_row(conn: &mut PgConn, user: UserId) -> QueryResult<()> {
    diesel::insert_into(user_stats::table)
        .values(user_stats::user_id.eq(user.get()))
        .on_conflict_do_nothing()
        .execute(conn)
        .await
        .map(drop)
}

/// The counters of `user`, if the row exists.
pub async fn find(conn: &mut PgConn, user: UserId) -> QueryResult<Option<UserStats>> {
    user_stats::table
        .find(user.get())
        .select(UserStats::as_select())
        .first(conn)
        .await
        .optional()
}

/// Changes to one user's counters accumulated over a projector batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatsDelta {
    /// Change of `followers`.
    pub followers: i64,
    /// Change of `posts`.
    pub posts: i64,
    /// Change of `likes_received`.
    pub likes_received: i64,
    /// Change of `favs_received`.
    pub favs_received: i64,
}

impl StatsDelta {
    /// True when applying it would change nothing.
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }
}

/// The counters of each of `users` that has a row.
pub async fn find_many(
    conn: &mut PgConn,
    users: &[UserId],
) -> QueryResult<Vec<(UserId, UserStats)>> {
    let ids: Vec<i64> = users.iter().map(|u| u.get()).collect();
    let rows: Vec<(i64, UserStats)> = user_stats::table
        .filter(user_stats::user_id.eq_any(ids))
        .select((user_stats::user_id, UserStats::as_select()))
        .load(conn)
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(id, stats)| Some((UserId::new(id)?, stats)))
        .collect())
}

/// Applies per-user deltas in the order given (sort by user id: concurrent
/// batches then lock rows in one order), one round trip; returns the new rows.
pub async fn apply_deltas(
    conn: &mut PgConn,
    deltas: &[(UserId, StatsDelta)],
) -> QueryResult<Vec<UserStats>> {
    use diesel::sql_types::{Array, BigInt};
    if deltas.is_empty() {
        return Ok(Vec::new());
    }
    let column = |f: fn(&StatsDelta) -> i64| deltas.iter().map(|(_, d)| f(d)).collect::<Vec<i64>>();
    diesel::sql_query(
        "SELECT followings, followers, posts, likes_received, favs_received, version
           FROM kith_add_stats($1, $2, $3, $4, $5)",
    )
    .bind::<Array<BigInt>, _>(deltas.iter().map(|(u, _)| u.get()).collect::<Vec<_>>())
    .bind::<Array<BigInt>, _>(column(|d| d.followers))
    .bind::<Array<BigInt>, _>(column(|d| d.posts))
    .bind::<Array<BigInt>, _>(column(|d| d.likes_received))
    .bind::<Array<BigInt>, _>(column(|d| d.favs_received))
    .load(conn)
    .await
}
