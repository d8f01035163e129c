//! `user_stats`: exact counters per user, with a version bumped on every change.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::PgConn;
use super::schema::user_stats;
use crate::model::UserId;

/// One user's counters, as a snapshot with its version.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Queryable, Selectable)]
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
    ensure_row(conn, user).await?;
    diesel::update(user_stats::table.find(user.get()))
        .set((
            user_stats::followings.eq(user_stats::followings + delta),
            user_stats::version.eq(user_stats::version + 1),
        ))
        .returning(UserStats::as_returning())
        .get_result(conn)
        .await
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
