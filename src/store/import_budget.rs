//! The daily follow budget of an account's imports
//! (`import_follow_budget`), and the rows of a job held back for it.

use chrono::{DateTime, Utc};
use diesel::sql_types::{BigInt, Int4, Timestamptz};
use diesel_async::RunQueryDsl;

use super::PgConn;
use crate::model::UserId;

/// Holds back every row of job `id` still to apply, as waiting for the next
/// day's follow budget; returns how many.
pub(crate) async fn defer_rest(conn: &mut PgConn, id: i64) -> diesel::QueryResult<usize> {
    diesel::sql_query(
        "UPDATE import_row SET outcome = 'FOLLOW_BUDGET' WHERE job_id = $1 AND outcome IS NULL",
    )
    .bind::<BigInt, _>(id)
    .execute(conn)
    .await
}

/// Makes job `id`'s rows that waited for the follow budget pending again.
pub(crate) async fn resume_deferred(conn: &mut PgConn, id: i64) -> diesel::QueryResult<()> {
    diesel::sql_query(
        "UPDATE import_row SET outcome = NULL WHERE job_id = $1 AND outcome = 'FOLLOW_BUDGET'",
    )
    .bind::<BigInt, _>(id)
    .execute(conn)
    .await?;
    Ok(())
}

/// An account's follow budget of the day, locked for the transaction.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Budget {
    /// Follows the account's imports may still make in this window.
    pub left: i32,
    /// When this window ends (and the budget is whole again).
    pub renews_at: DateTime<Utc>,
}

/// `owner`'s follow budget (`per_day` a day), a new window opened where the
/// last one ended, locked until the transaction ends.
pub(crate) async fn budget(
    conn: &mut PgConn,
    owner: UserId,
    per_day: i32,
) -> diesel::QueryResult<Budget> {
    #[derive(diesel::QueryableByName)]
    struct Row {
        #[diesel(sql_type = Int4)]
        follows: i32,
        #[diesel(sql_type = Timestamptz)]
        renews_at: DateTime<Utc>,
    }
    let row: Row = diesel::sql_query(
        "INSERT INTO import_follow_budget AS b (owner_id, window_start, follows)
         VALUES ($1, now(), 0)
         ON CONFLICT (owner_id) DO UPDATE
            SET window_start = CASE WHEN b.window_start + interval '1 day' <= now()
                                    THEN now() ELSE b.window_start END,
                follows = CASE WHEN b.window_start + interval '1 day' <= now()
                               THEN 0 ELSE b.follows END
         RETURNING follows, window_start + interval '1 day' AS renews_at",
    )
    .bind::<BigInt, _>(owner.get())
    .get_result(conn)
    .await?;
    Ok(Budget {
        left: (per_day - row.follows).max(0),
        renews_at: row.renews_at,
    })
}

/// Counts `follows` against `owner`'s budget of the day.
pub(crate) async fn spend(
    conn: &mut PgConn,
    owner: UserId,
    follows: i32,
) -> diesel::QueryResult<()> {
    diesel::sql_query("UPDATE import_follow_budget SET follows = follows + $2 WHERE owner_id = $1")
        .bind::<BigInt, _>(owner.get())
        .bind::<Int4, _>(follows)
        .execute(conn)
        .await?;
    Ok(())
}
