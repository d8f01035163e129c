//! A move's progress: its counts, its followers left behind, and when
//! its job may call it done.

use diesel::QueryableByName;
use diesel::sql_types::{Array, BigInt, Bool, Int4, Nullable, Text};
use diesel_async::RunQueryDsl;

use super::PgConn;

/// A batch's effect on its move's counts and position.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Progress {
    pub moved: i32,
    pub requested: i32,
    pub skipped: i32,
    pub failed: i32,
    /// The last follower id handled (`None`: as it was).
    pub after_id: Option<i64>,
    /// How long from now (the database's clock) the move is due again
    /// (`None`: as it was).
    pub pace_ms: Option<i64>,
}

/// Adds a batch's `progress` and its followers left behind (`failures`:
/// follower id and code) to move `id`.
pub(crate) async fn advance(
    conn: &mut PgConn,
    id: i64,
    progress: Progress,
    failures: &[(i64, &'static str)],
) -> diesel::QueryResult<()> {
    if !failures.is_empty() {
        let followers: Vec<i64> = failures.iter().map(|f| f.0).collect();
        let outcomes: Vec<&str> = failures.iter().map(|f| f.1).collect();
        diesel::sql_query(
            "INSERT INTO account_move_row (move_id, follower_id, outcome)
             SELECT $1, u.f, u.o FROM unnest($2::BIGINT[], $3::TEXT[]) AS u(f, o)
             ON CONFLICT (move_id, follower_id) DO UPDATE SET outcome = EXCLUDED.outcome",
        )
        .bind::<BigInt, _>(id)
        .bind::<Array<BigInt>, _>(&followers)
        .bind::<Array<Text>, _>(&outcomes)
        .execute(conn)
        .await?;
    }
    diesel::sql_query(
        "WITH walk AS (INSERT INTO account_move_walk (move_id) VALUES ($1) ON CONFLICT DO NOTHING)
         UPDATE account_move
            SET moved = moved + $2, requested = requested + $3, skipped = skipped + $4,
                failed = failed + $5, after_id = coalesce($6, after_id),
                due_at = coalesce(now() + $7 * interval '1 millisecond', due_at)
          WHERE id = $1",
    )
    .bind::<BigInt, _>(id)
    .bind::<Int4, _>(progress.moved)
    .bind::<Int4, _>(progress.requested)
    .bind::<Int4, _>(progress.skipped)
    .bind::<Int4, _>(progress.failed)
    .bind::<Nullable<BigInt>, _>(progress.after_id)
    .bind::<Nullable<BigInt>, _>(progress.pace_ms)
    .execute(conn)
    .await?;
    Ok(())
}

/// Move `id` no longer leaves `followers` behind (brought along since):
/// their rows go, and its count of those left behind with them.
pub(crate) async fn forget_left_behind(
    conn: &mut PgConn,
    id: i64,
    followers: &[i64],
) -> diesel::QueryResult<()> {
    if followers.is_empty() {
        return Ok(());
    }
    diesel::sql_query(
        "WITH gone AS (DELETE FROM account_move_row
                        WHERE move_id = $1 AND follower_id = ANY ($2) RETURNING 1)
         UPDATE account_move SET failed = failed - (SELECT count(*) FROM gone)::INT
          WHERE id = $1",
    )
    .bind::<BigInt, _>(id)
    .bind::<Array<BigInt>, _>(followers)
    .execute(conn)
    .await?;
    Ok(())
}

/// Whether no transaction that began before move `id`'s first batch is
/// still open on this database (ten minutes on, it no longer waits). A
/// follow that read the account before it moved began before then: once
/// none is open, a sweep that finds no follower left finds all there are.
/// Asked before that sweep, in the batch's transaction.
pub(crate) async fn quiet(conn: &mut PgConn, id: i64) -> diesel::QueryResult<bool> {
    #[derive(QueryableByName)]
    struct Quiet {
        #[diesel(sql_type = Bool)]
        quiet: bool,
    }
    let row: Quiet = diesel::sql_query(
        "SELECT now() > m.since + interval '10 minutes'
                OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a
                                WHERE a.datname = current_database()
                                  AND a.backend_type = 'client backend'
                                  AND a.pid <> pg_backend_pid()
                                  AND a.xact_start < m.since) AS quiet
           FROM (SELECT coalesce((SELECT first_batch_at FROM account_move_walk
                                   WHERE move_id = $1), now()) AS since) m",
    )
    .bind::<BigInt, _>(id)
    .get_result(conn)
    .await?;
    Ok(row.quiet)
}
