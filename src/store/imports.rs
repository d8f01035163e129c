//! Import jobs and their rows (`import_job`, `import_row`): created whole,
//! claimed under a lease, advanced batch by batch inside the batch's own
//! transaction, read back by their owner.

use chrono::{DateTime, Utc};
use diesel::sql_types::{Array, BigInt, Int4, Nullable, Text, Timestamptz, Uuid};
use diesel_async::RunQueryDsl;

use super::PgConn;
use crate::model::UserId;

/// A job as stored.
#[derive(diesel::QueryableByName, Clone, Debug)]
pub(crate) struct JobRow {
    #[diesel(sql_type = BigInt)]
    pub id: i64,
    #[diesel(sql_type = BigInt)]
    pub owner_id: i64,
    #[diesel(sql_type = Text)]
    pub kind: String,
    #[diesel(sql_type = Text)]
    pub mode: String,
    #[diesel(sql_type = Text)]
    pub state: String,
    #[diesel(sql_type = Int4)]
    pub total: i32,
    #[diesel(sql_type = Int4)]
    pub applied: i32,
    #[diesel(sql_type = Int4)]
    pub skipped: i32,
    #[diesel(sql_type = Int4)]
    pub failed: i32,
    #[diesel(sql_type = Int4)]
    pub removed: i32,
    #[diesel(sql_type = Nullable<BigInt>)]
    pub removal_after: Option<i64>,
    #[diesel(sql_type = Nullable<Text>)]
    pub failure: Option<String>,
    #[diesel(sql_type = Timestamptz)]
    pub created_at: DateTime<Utc>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub finished_at: Option<DateTime<Utc>>,
    /// Rows waiting for the next day's follow budget.
    #[diesel(sql_type = Int4)]
    pub deferred: i32,
    /// When an open job's next turn is due (its pace, or its follow budget,
    /// may hold it back).
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub due_at: Option<DateTime<Utc>>,
}

const JOB_COLUMNS: &str = "id, owner_id, kind, mode, state, total, applied, skipped, failed, \
     removed, removal_after, failure, created_at, finished_at, \
     (SELECT count(*) FROM import_row r \
       WHERE r.job_id = import_job.id AND r.outcome = 'FOLLOW_BUDGET')::INT AS deferred, \
     (SELECT t.due_at FROM import_turn t WHERE t.job_id = import_job.id) AS due_at";

/// One row of a job's file.
#[derive(diesel::QueryableByName, Clone, Debug)]
pub(crate) struct RowRecord {
    #[diesel(sql_type = Int4)]
    pub ordinal: i32,
    #[diesel(sql_type = Int4)]
    pub line: i32,
    #[diesel(sql_type = Text)]
    pub address: String,
    #[diesel(sql_type = Nullable<Text>)]
    pub outcome: Option<String>,
    /// The options its file gave a follow (JSON of
    /// [`crate::model::FollowOptions`]), if any.
    #[diesel(sql_type = Nullable<Text>)]
    pub options: Option<String>,
}

/// A row of a new job: its line, the address, and the outcome it has from
/// the start (a malformed line's), if any.
pub(crate) struct NewRow {
    pub line: i32,
    pub address: String,
    pub outcome: Option<&'static str>,
    /// The options a follow's row gave, as JSON.
    pub options: Option<String>,
}

/// Creates a queued job of `rows` for `owner`, with the rows already
/// decided counted as failed. `None` when the account has an open job.
pub(crate) async fn create(
    conn: &mut PgConn,
    owner: UserId,
    kind: &str,
    mode: &str,
    rows: &[NewRow],
) -> diesel::QueryResult<Option<JobRow>> {
    use diesel_async::AsyncConnection as _;

    let failed = rows.iter().filter(|r| r.outcome.is_some()).count() as i32;
    let lines: Vec<i32> = rows.iter().map(|r| r.line).collect();
    let addresses: Vec<String> = rows.iter().map(|r| r.address.clone()).collect();
    let outcomes: Vec<Option<String>> = rows.iter().map(|r| r.outcome.map(str::to_owned)).collect();
    let options: Vec<Option<String>> = rows.iter().map(|r| r.options.clone()).collect();
    let (kind, mode) = (kind.to_owned(), mode.to_owned());
    conn.transaction::<_, diesel::result::Error, _>(async |conn| {
        let jobs: Vec<JobRow> = diesel::sql_query(format!(
            "INSERT INTO import_job (owner_id, kind, mode, state, total, failed)
                 VALUES ($1, $2, $3, 'queued', $4, $5)
                 ON CONFLICT (owner_id) WHERE state IN ('queued', 'running') DO NOTHING
                 RETURNING {JOB_COLUMNS}"
        ))
        .bind::<BigInt, _>(owner.get())
        .bind::<Text, _>(&kind)
        .bind::<Text, _>(&mode)
        .bind::<Int4, _>(lines.len() as i32)
        .bind::<Int4, _>(failed)
        .load(conn)
        .await?;
        let Some(job) = jobs.into_iter().next() else {
            return Ok(None);
        };
        diesel::sql_query("INSERT INTO import_turn (job_id, due_at) VALUES ($1, now())")
            .bind::<BigInt, _>(job.id)
            .execute(conn)
            .await?;
        diesel::sql_query(
            "INSERT INTO import_row (job_id, ordinal, line, address, outcome, options)
                 SELECT $1, r.n - 1, r.line, r.address, r.outcome, r.options::JSONB
                   FROM unnest($2::INT[], $3::TEXT[], $4::TEXT[], $5::TEXT[])
                        WITH ORDINALITY AS r(line, address, outcome, options, n)",
        )
        .bind::<BigInt, _>(job.id)
        .bind::<Array<Int4>, _>(&lines)
        .bind::<Array<Text>, _>(&addresses)
        .bind::<Array<Nullable<Text>>, _>(&outcomes)
        .bind::<Array<Nullable<Text>>, _>(&options)
        .execute(conn)
        .await?;
        Ok(Some(job))
    })
    .await
}

/// Takes the lease, for `lease_ms`, of the open job due first whose lease
/// is free or lapsed, naming the holder `token`. Every batch makes its job
/// due again behind the others ([`end_turn`]), so every account's import
/// gets a batch in turn.
pub(crate) async fn claim(
    conn: &mut PgConn,
    token: uuid::Uuid,
    lease_ms: i64,
) -> diesel::QueryResult<Option<JobRow>> {
    let rows: Vec<JobRow> = diesel::sql_query(format!(
        "UPDATE import_job
            SET lease_token = $1, lease_until = now() + $2 * interval '1 millisecond',
                state = 'running'
          WHERE id = (SELECT j.id FROM import_turn t JOIN import_job j ON j.id = t.job_id
                       WHERE t.due_at <= now()
                         AND j.state IN ('queued', 'running')
                         AND (j.lease_until IS NULL OR j.lease_until < now())
                       ORDER BY t.due_at, t.job_id LIMIT 1 FOR UPDATE OF j SKIP LOCKED)
         RETURNING {JOB_COLUMNS}"
    ))
    .bind::<Uuid, _>(token)
    .bind::<BigInt, _>(lease_ms)
    .load(conn)
    .await?;
    Ok(super::committed(rows))
}

/// Ends `token`'s turn of job `id`: its lease given up, and the job due
/// again at `due` (at once, behind every job due already, when `None`).
pub(crate) async fn end_turn(
    conn: &mut PgConn,
    id: i64,
    token: uuid::Uuid,
    due: Option<DateTime<Utc>>,
) -> diesel::QueryResult<()> {
    diesel::sql_query(
        "WITH released AS (
             UPDATE import_job SET lease_token = NULL, lease_until = NULL
              WHERE id = $1 AND lease_token = $2 RETURNING id)
         UPDATE import_turn SET due_at = coalesce($3, now())
          WHERE job_id IN (SELECT id FROM released)",
    )
    .bind::<BigInt, _>(id)
    .bind::<Uuid, _>(token)
    .bind::<Nullable<Timestamptz>, _>(due)
    .execute(conn)
    .await?;
    Ok(())
}

/// When the soonest open job comes due, if any is held back.
pub(crate) async fn next_due(conn: &mut PgConn) -> diesel::QueryResult<Option<DateTime<Utc>>> {
    #[derive(diesel::QueryableByName)]
    struct Due {
        #[diesel(sql_type = Nullable<Timestamptz>)]
        due: Option<DateTime<Utc>>,
    }
    let row: Due =
        diesel::sql_query("SELECT min(due_at) AS due FROM import_turn WHERE due_at > now()")
            .get_result(conn)
            .await?;
    Ok(row.due)
}

/// Inside a batch's transaction: the job, locked, if `token` still holds
/// its lease (and extends it by `lease_ms`); `None` when the lease was lost.
pub(crate) async fn fence(
    conn: &mut PgConn,
    id: i64,
    token: uuid::Uuid,
    lease_ms: i64,
) -> diesel::QueryResult<Option<JobRow>> {
    let rows: Vec<JobRow> = diesel::sql_query(format!(
        "UPDATE import_job
            SET lease_until = now() + $3 * interval '1 millisecond'
          WHERE id = $1 AND lease_token = $2 AND state = 'running'
         RETURNING {JOB_COLUMNS}"
    ))
    .bind::<BigInt, _>(id)
    .bind::<Uuid, _>(token)
    .bind::<BigInt, _>(lease_ms)
    .load(conn)
    .await?;
    Ok(rows.into_iter().next())
}

/// The first `limit` rows of job `id` still to apply, in file order.
pub(crate) async fn pending_rows(
    conn: &mut PgConn,
    id: i64,
    limit: i64,
) -> diesel::QueryResult<Vec<RowRecord>> {
    diesel::sql_query(
        "SELECT ordinal, line, address, outcome, options::TEXT AS options FROM import_row
          WHERE job_id = $1 AND outcome IS NULL
          ORDER BY ordinal LIMIT $2",
    )
    .bind::<BigInt, _>(id)
    .bind::<BigInt, _>(limit)
    .load(conn)
    .await
}

/// How rows of job `id` ended: `(ordinal, account named, outcome)`.
pub(crate) async fn record_rows(
    conn: &mut PgConn,
    id: i64,
    rows: &[(i32, Option<i64>, &'static str)],
) -> diesel::QueryResult<()> {
    let ordinals: Vec<i32> = rows.iter().map(|r| r.0).collect();
    let targets: Vec<Option<i64>> = rows.iter().map(|r| r.1).collect();
    let outcomes: Vec<&str> = rows.iter().map(|r| r.2).collect();
    diesel::sql_query(
        "UPDATE import_row r SET target_id = u.target, outcome = u.outcome
           FROM unnest($2::INT[], $3::BIGINT[], $4::TEXT[]) AS u(ordinal, target, outcome)
          WHERE r.job_id = $1 AND r.ordinal = u.ordinal",
    )
    .bind::<BigInt, _>(id)
    .bind::<Array<Int4>, _>(&ordinals)
    .bind::<Array<Nullable<BigInt>>, _>(&targets)
    .bind::<Array<Text>, _>(&outcomes)
    .execute(conn)
    .await?;
    Ok(())
}

/// A batch's effect on its job's counts and position.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Progress {
    pub applied: i32,
    pub skipped: i32,
    pub failed: i32,
    pub removed: i32,
    /// An overwrite's removal walk: the last member id looked at.
    pub removal_after: Option<i64>,
}

/// Adds a batch's `progress` to job `id`.
pub(crate) async fn advance(
    conn: &mut PgConn,
    id: i64,
    progress: Progress,
) -> diesel::QueryResult<()> {
    diesel::sql_query(
        "UPDATE import_job
            SET applied = applied + $2, skipped = skipped + $3, failed = failed + $4,
                removed = removed + $5, removal_after = coalesce($6, removal_after)
          WHERE id = $1",
    )
    .bind::<BigInt, _>(id)
    .bind::<Int4, _>(progress.applied)
    .bind::<Int4, _>(progress.skipped)
    .bind::<Int4, _>(progress.failed)
    .bind::<Int4, _>(progress.removed)
    .bind::<Nullable<BigInt>, _>(progress.removal_after)
    .execute(conn)
    .await?;
    Ok(())
}

/// Ends job `id` as `state` ('done' or 'failed', with why), if `token`
/// still holds it; then keeps only the rows its report needs.
pub(crate) async fn finish(
    conn: &mut PgConn,
    id: i64,
    token: uuid::Uuid,
    state: &str,
    failure: Option<&str>,
) -> diesel::QueryResult<bool> {
    let n = diesel::sql_query(
        "UPDATE import_job
            SET state = $3, failure = $4, finished_at = now(),
                lease_token = NULL, lease_until = NULL
          WHERE id = $1 AND lease_token = $2 AND state = 'running'",
    )
    .bind::<BigInt, _>(id)
    .bind::<Uuid, _>(token)
    .bind::<Text, _>(state)
    .bind::<Nullable<Text>, _>(failure)
    .execute(conn)
    .await?;
    if n == 1 {
        keep_report(conn, id).await?;
    }
    Ok(n == 1)
}

/// Of a finished job's rows, keeps only those its report lists (the ones
/// not applied): what was applied, skipped or never reached goes, and so
/// does its turn.
async fn keep_report(conn: &mut PgConn, id: i64) -> diesel::QueryResult<()> {
    diesel::sql_query("DELETE FROM import_turn WHERE job_id = $1")
        .bind::<BigInt, _>(id)
        .execute(conn)
        .await?;
    diesel::sql_query(
        "DELETE FROM import_row
          WHERE job_id = $1 AND (outcome IS NULL OR outcome IN ('applied', 'skipped'))",
    )
    .bind::<BigInt, _>(id)
    .execute(conn)
    .await?;
    Ok(())
}

/// Cancels `owner`'s job `id` if it is open (queued, running or waiting):
/// what it applied stays, the rest is not applied, and a runner holding
/// it loses it at its next batch. The job as it now stands; `None` when
/// `owner` has no such job.
pub(crate) async fn cancel(
    conn: &mut PgConn,
    owner: UserId,
    id: i64,
) -> diesel::QueryResult<Option<(JobRow, bool)>> {
    use diesel_async::AsyncConnection as _;
    conn.transaction::<_, diesel::result::Error, _>(async |conn| {
        let canceled: Vec<JobRow> = diesel::sql_query(format!(
            "UPDATE import_job
                SET state = 'canceled', finished_at = now(), lease_token = NULL,
                    lease_until = NULL
              WHERE id = $1 AND owner_id = $2 AND state IN ('queued', 'running')
             RETURNING {JOB_COLUMNS}"
        ))
        .bind::<BigInt, _>(id)
        .bind::<BigInt, _>(owner.get())
        .load(conn)
        .await?;
        if let Some(job) = canceled.into_iter().next() {
            keep_report(conn, id).await?;
            return Ok(Some((job, true)));
        }
        Ok(get(conn, id)
            .await?
            .filter(|job| job.owner_id == owner.get())
            .map(|job| (job, false)))
    })
    .await
}

/// Deletes up to `limit` jobs finished more than `retention_secs` ago,
/// with their rows; returns how many.
pub(crate) async fn sweep(
    conn: &mut PgConn,
    retention_secs: i64,
    limit: i64,
) -> diesel::QueryResult<usize> {
    diesel::sql_query(
        "DELETE FROM import_job
          WHERE id IN (SELECT id FROM import_job
                        WHERE finished_at < now() - $1 * interval '1 second'
                        ORDER BY finished_at LIMIT $2)",
    )
    .bind::<BigInt, _>(retention_secs)
    .bind::<BigInt, _>(limit)
    .execute(conn)
    .await
}

/// Gives up `token`'s lease of job `id` (its runner stops): the next runner
/// may claim it at once.
pub(crate) async fn release(
    conn: &mut PgConn,
    id: i64,
    token: uuid::Uuid,
) -> diesel::QueryResult<()> {
    diesel::sql_query(
        "UPDATE import_job SET lease_token = NULL, lease_until = NULL
          WHERE id = $1 AND lease_token = $2",
    )
    .bind::<BigInt, _>(id)
    .bind::<Uuid, _>(token)
    .execute(conn)
    .await?;
    Ok(())
}

/// Job `id`, if it exists.
pub(crate) async fn get(conn: &mut PgConn, id: i64) -> diesel::QueryResult<Option<JobRow>> {
    let rows: Vec<JobRow> = diesel::sql_query(format!(
        "SELECT {JOB_COLUMNS} FROM import_job WHERE id = $1"
    ))
    .bind::<BigInt, _>(id)
    .load(conn)
    .await?;
    Ok(rows.into_iter().next())
}

/// Up to `limit` rows of job `id` that ended in an error, after `after`
/// (an ordinal), in file order.
pub(crate) async fn errors(
    conn: &mut PgConn,
    id: i64,
    after: i32,
    limit: i64,
) -> diesel::QueryResult<Vec<RowRecord>> {
    diesel::sql_query(
        "SELECT ordinal, line, address, outcome, options::TEXT AS options FROM import_row
          WHERE job_id = $1 AND ordinal > $2 AND outcome NOT IN ('applied', 'skipped')
          ORDER BY ordinal LIMIT $3",
    )
    .bind::<BigInt, _>(id)
    .bind::<Int4, _>(after)
    .bind::<BigInt, _>(limit)
    .load(conn)
    .await
}

/// Which of `members` the rows of job `id` named.
pub(crate) async fn named(
    conn: &mut PgConn,
    id: i64,
    members: &[i64],
) -> diesel::QueryResult<Vec<i64>> {
    #[derive(diesel::QueryableByName)]
    struct Named {
        #[diesel(sql_type = BigInt)]
        target_id: i64,
    }
    let rows: Vec<Named> = diesel::sql_query(
        "SELECT DISTINCT target_id FROM import_row WHERE job_id = $1 AND target_id = ANY($2)",
    )
    .bind::<BigInt, _>(id)
    .bind::<Array<BigInt>, _>(members)
    .load(conn)
    .await?;
    Ok(rows.into_iter().map(|r| r.target_id).collect())
}
