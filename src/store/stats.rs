//! `user_stats`: exact counters per user, with a version bumped on every change.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::PgConn;
use super::schema::user_stats;
use crate::model::UserId;

macro_rules! user_stats {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// One user's counters, as a snapshot with its version.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Queryable, QueryableByName, Selectable)]
        #[diesel(table_name = user_stats)]
        pub struct UserStats {
            $($(#[$doc])* pub $name: i64,)*
            /// Increases on every change of the row.
            pub version: i64,
        }

        /// The counters an edge write answers, absent when the edge did not
        /// change (`kith_edge_result`'s counter columns).
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, QueryableByName)]
        pub(crate) struct ChangedStats {
            $(
                #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
                $name: Option<i64>,
            )*
            #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
            version: Option<i64>,
        }

        impl ChangedStats {
            /// The counters, when the edge changed.
            pub(crate) fn get(&self) -> Option<UserStats> {
                Some(UserStats {
                    $($name: self.$name?,)*
                    version: self.version?,
                })
            }
        }
    };
}
crate::model::with_counters!(user_stats);

/// The counters of `user`, if the row exists.
pub async fn find(conn: &mut PgConn, user: UserId) -> QueryResult<Option<UserStats>> {
    user_stats::table
        .find(user.get())
        .select(UserStats::as_select())
        .first(conn)
        .await
        .optional()
}

/// The counters of each of `users` that has a row.
pub(crate) async fn find_many(
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

/// One content event as the counters see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContentChange {
    /// The event id, counted once.
    pub event_id: uuid::Uuid,
    /// Whose counters change.
    pub author: UserId,
    /// Change of `posts`.
    pub posts: i64,
    /// Change of `likes_received`.
    pub likes_received: i64,
    /// Change of `favs_received`.
    pub favs_received: i64,
}

/// What became of one content event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ContentOutcome {
    /// Counted.
    Applied,
    /// Counted before (same event id).
    Duplicate,
    /// It would take a counter below zero: not counted, not claimed.
    BelowZero,
    /// No such user: not counted, not claimed.
    UnknownAuthor,
}

/// A batch's counter changes in one round trip (`kith_apply_counters`): the
/// `followers` deltas per user, then each content event on its own, in order,
/// checked against zero. Rows are locked in user-id order first, so
/// concurrent batches never deadlock. Returns one outcome per content event.
pub(crate) async fn apply_counters(
    conn: &mut PgConn,
    followers: &[(UserId, i64)],
    contents: &[ContentChange],
) -> QueryResult<Vec<ContentOutcome>> {
    use diesel::sql_types::{Array, BigInt, Integer, Text, Uuid as SqlUuid};
    #[derive(QueryableByName)]
    struct Row {
        #[diesel(sql_type = Integer)]
        ord: i32,
        #[diesel(sql_type = Text)]
        outcome: String,
    }
    if followers.is_empty() && contents.is_empty() {
        return Ok(Vec::new());
    }
    let column = |f: fn(&ContentChange) -> i64| contents.iter().map(f).collect::<Vec<i64>>();
    let mut rows: Vec<Row> = diesel::sql_query(
        "SELECT ord, outcome FROM kith_apply_counters($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind::<Array<BigInt>, _>(followers.iter().map(|(u, _)| u.get()).collect::<Vec<_>>())
    .bind::<Array<BigInt>, _>(followers.iter().map(|(_, d)| *d).collect::<Vec<_>>())
    .bind::<Array<SqlUuid>, _>(contents.iter().map(|c| c.event_id).collect::<Vec<_>>())
    .bind::<Array<BigInt>, _>(column(|c| c.author.get()))
    .bind::<Array<BigInt>, _>(column(|c| c.posts))
    .bind::<Array<BigInt>, _>(column(|c| c.likes_received))
    .bind::<Array<BigInt>, _>(column(|c| c.favs_received))
    .load(conn)
    .await?;
    rows.sort_by_key(|r| r.ord);
    Ok(rows
        .iter()
        .map(|r| match r.outcome.as_str() {
            "applied" => ContentOutcome::Applied,
            "duplicate" => ContentOutcome::Duplicate,
            "below_zero" => ContentOutcome::BelowZero,
            _ => ContentOutcome::UnknownAuthor,
        })
        .collect())
}

/// One user's counters set from the tables that maintain them, as a repair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, QueryableByName)]
pub(crate) struct CounterFix {
    /// The user.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub user_id: i64,
    /// `followings` before.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub old_followings: i64,
    /// `followers` before.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub old_followers: i64,
    /// `followings` now: active truth edges from the user.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub followings: i64,
    /// `followers` now: active projection edges to the user.
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    pub followers: i64,
}

/// Sets `followings` from the truth and `followers` from the projection for
/// `users` whose counters differ, without racing the writers that maintain
/// them: the rows are locked first (in user-id order), and only then counted,
/// in a later statement. A write whose edge change is not committed yet waits
/// for the lock and adds its delta afterwards; one committed before is
/// counted and its delta is already in the row. Run inside a transaction.
/// Missing rows are created from the same counts. Returns the rows changed.
pub(crate) async fn repair_counts(
    conn: &mut PgConn,
    users: &[UserId],
) -> QueryResult<Vec<CounterFix>> {
    use diesel::sql_types::{Array, BigInt};
    ensure_rows(conn, users).await?;
    let ids: Vec<i64> = users.iter().map(|u| u.get()).collect();
    diesel::sql_query(
        "WITH counted AS (
             SELECT s.user_id, s.followings AS old_followings, s.followers AS old_followers,
                    (SELECT count(*) FROM following f WHERE f.from_user_id = s.user_id AND f.active) AS followings,
                    (SELECT count(*) FROM follower p WHERE p.to_user_id = s.user_id AND p.active) AS followers
               FROM user_stats s WHERE s.user_id = ANY($1))
         UPDATE user_stats s
            SET followings = c.followings, followers = c.followers,
                version = kith_next_version(s.version)
           FROM counted c
          WHERE s.user_id = c.user_id
            AND (c.followings <> c.old_followings OR c.followers <> c.old_followers)
         RETURNING c.user_id, c.old_followings, c.old_followers, c.followings, c.followers",
    )
    .bind::<Array<BigInt>, _>(&ids)
    .load(conn)
    .await
}

/// Creates the rows of `users` that are missing (from the truth and the
/// projection as they stand), then locks them all in user-id order, for the
/// rest of the transaction. Before a change of edges that adds deltas, call
/// it *before* the change, or a created row counts the change twice.
pub(crate) async fn ensure_rows(conn: &mut PgConn, users: &[UserId]) -> QueryResult<()> {
    use diesel::sql_types::{Array, BigInt};
    let mut ids: Vec<i64> = users.iter().map(|u| u.get()).collect();
    ids.sort_unstable();
    ids.dedup();
    diesel::sql_query(
        "SELECT kith_ensure_stats(u) FROM unnest($1::bigint[]) AS u
          WHERE EXISTS (SELECT 1 FROM users WHERE id = u)",
    )
    .bind::<Array<BigInt>, _>(&ids)
    .execute(conn)
    .await?;
    diesel::sql_query(
        "SELECT user_id FROM user_stats WHERE user_id = ANY($1) ORDER BY user_id FOR UPDATE",
    )
    .bind::<Array<BigInt>, _>(&ids)
    .execute(conn)
    .await
    .map(drop)
}

/// Adds `followings` deltas (rows must exist and be locked: [`ensure_rows`]);
/// returns the new rows.
pub(crate) async fn add_followings_many(
    conn: &mut PgConn,
    deltas: &[(UserId, i64)],
) -> QueryResult<Vec<(UserId, UserStats)>> {
    use diesel::sql_types::{Array, BigInt};
    #[derive(QueryableByName)]
    struct Row {
        #[diesel(sql_type = BigInt)]
        user_id: i64,
        #[diesel(embed)]
        stats: UserStats,
    }
    if deltas.is_empty() {
        return Ok(Vec::new());
    }
    let rows: Vec<Row> = diesel::sql_query(
        "UPDATE user_stats s
            SET followings = s.followings + d.delta, version = kith_next_version(s.version)
           FROM unnest($1::bigint[], $2::bigint[]) AS d(user_id, delta)
          WHERE s.user_id = d.user_id
         RETURNING s.*",
    )
    .bind::<Array<BigInt>, _>(deltas.iter().map(|(u, _)| u.get()).collect::<Vec<_>>())
    .bind::<Array<BigInt>, _>(deltas.iter().map(|(_, d)| *d).collect::<Vec<_>>())
    .load(conn)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| Some((UserId::new(r.user_id)?, r.stats)))
        .collect())
}
