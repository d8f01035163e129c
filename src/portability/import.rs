//! Import jobs. `start` reads a CSV file into a queued job's rows (one job
//! open per account); a runner then applies them in batches of up to
//! [`BATCH`] (as many as the pace allows in a few seconds, well inside the
//! lease), paced by the account's own token bucket
//! (`KITH_IMPORT_ROWS_PER_SEC`).
//! Each batch is one transaction: the job's lease is checked and extended,
//! the rows are written through the mutations' statements, and their
//! outcomes and the job's progress are recorded — so a runner that dies
//! mid-way leaves the job where its last commit put it, and the next runner
//! (any process serving the API, once the lease lapses) goes on from there
//! without applying anything twice. An overwrite then walks the account's
//! list and undoes what the file did not name.

use std::sync::Arc;
use std::time::Duration;

use super::{address, csv};
use crate::app::App;
use crate::error::ApiError;
use crate::model::{UserId, UserStatus};
use crate::shutdown::Shutdown;
use crate::store::export::ExportList;
use crate::store::import_budget;
use crate::store::imports::{self, JobRow, NewRow, Progress};
use crate::store::users;
use crate::write::import::{self as write, ImportKind, RowError, RowOutcome, Touched};
use crate::write::rate_limit::RateLimiter;

/// Most rows applied per transaction.
pub(crate) const BATCH: usize = 50;
/// The longest a runner waits for its pace between two batches: well
/// inside the lease, which each batch extends.
const MAX_PACE_WAIT_SECS: u32 = 4;
/// How long a runner's lease lasts without a batch committing.
pub(crate) const LEASE: Duration = Duration::from_secs(10);
/// How often every runner looks for a job whose lease lapsed.
const POLL: Duration = Duration::from_secs(2);

/// Merge the file into the list, or make the list what the file says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ImportMode {
    /// Add what the file names; keep the rest.
    Merge,
    /// Add what the file names; then undo the rest of the list.
    Overwrite,
}

impl ImportMode {
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::Merge => "merge",
            Self::Overwrite => "overwrite",
        }
    }
}

/// The stored name of a kind.
pub(crate) const fn kind_name(kind: ImportKind) -> &'static str {
    match kind {
        ImportKind::Following => "following",
        ImportKind::Blocks => "blocks",
        ImportKind::Mutes => "mutes",
    }
}

fn kind_of(name: &str) -> ImportKind {
    match name {
        "blocks" => ImportKind::Blocks,
        "mutes" => ImportKind::Mutes,
        _ => ImportKind::Following,
    }
}

/// Longest account address a row may hold (a handle, `@`, a domain name);
/// a longer one is a malformed row.
pub(crate) const MAX_ADDRESS_CHARS: usize = 320;

/// How much of a malformed row's text is kept for its report.
const REPORTED_CHARS: usize = 64;

/// At most `limit` characters of `text`, marked when cut.
fn clip(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}

/// The rows of a CSV file: the first column of each record is an account
/// address; a first record whose first column is `Account address` is the
/// header. A line that is no record, has no address, or one longer than
/// [`MAX_ADDRESS_CHARS`], is a malformed row, kept with the first
/// characters of its text only. Read as a stream: `INVALID_INPUT` as soon
/// as a row past `max` is met.
pub(crate) fn rows(text: &str, max: usize, kind: ImportKind) -> Result<Vec<NewRow>, ApiError> {
    let mut rows = Vec::new();
    for (i, (line, record)) in csv::records(text).enumerate() {
        let line = i32::try_from(line).unwrap_or(i32::MAX);
        let row = match record {
            Ok(fields) if i == 0 && fields[0].trim().eq_ignore_ascii_case("account address") => {
                continue;
            }
            Ok(fields)
                if !fields[0].trim().is_empty()
                    && fields[0].trim().chars().count() <= MAX_ADDRESS_CHARS =>
            {
                // A follow's option columns; other lists' columns are not
                // read (a mute's `Hide notifications`, say).
                let options = match kind {
                    ImportKind::Following => super::follow_columns::parse(&fields),
                    ImportKind::Blocks | ImportKind::Mutes => Ok(None),
                };
                match options {
                    Ok(options) => NewRow {
                        line,
                        address: fields[0].trim().to_owned(),
                        outcome: None,
                        options: options.map(|o| serde_json::to_string(&o).expect("plain data")),
                    },
                    Err(()) => malformed(&fields, line),
                }
            }
            Ok(fields) => malformed(&fields, line),
            Err(_) => NewRow {
                line,
                address: String::new(),
                outcome: Some(RowError::Malformed.as_str()),
                options: None,
            },
        };
        if rows.len() == max {
            return Err(too_many(max));
        }
        rows.push(row);
    }
    Ok(rows)
}

/// A record that is no row: kept with the first characters of its text.
fn malformed(fields: &[String], line: i32) -> NewRow {
    NewRow {
        line,
        address: clip(&fields.join(","), REPORTED_CHARS),
        outcome: Some(RowError::Malformed.as_str()),
        options: None,
    }
}

fn too_many(max: usize) -> ApiError {
    ApiError::invalid(format!("an import holds at most {max} rows"))
}

/// Queues `owner`'s import of `text` and wakes this process's runner. The
/// rate-limit token is taken first, then the file is bounded before it is
/// read: at most `KITH_MAX_BODY_BYTES` bytes and `KITH_IMPORT_MAX_ROWS`
/// lines (`INVALID_INPUT`), counted without parsing. Refused as well: a file
/// that names no account (`INVALID_INPUT`), while another import of the
/// account is open (`IMPORT_RUNNING`), for an account that is not active
/// (`FORBIDDEN`).
pub(crate) async fn start(
    app: &App,
    owner: UserId,
    kind: ImportKind,
    mode: ImportMode,
    text: &str,
) -> Result<JobRow, ApiError> {
    crate::write::take_tokens(app, owner, 1).await?;
    let max = app.config.portability.import_max_rows as usize;
    if text.len() > app.config.limits.max_body_bytes {
        return Err(ApiError::invalid(format!(
            "an import file holds at most {} bytes",
            app.config.limits.max_body_bytes
        )));
    }
    // Lines counted, not parsed: a file of too many is refused for the
    // price of one pass over its bytes (the header may be one more).
    let lines = text
        .split('\n')
        .filter(|l| !l.trim_ascii().is_empty())
        .count();
    if lines > max + 1 {
        return Err(too_many(max));
    }
    let rows = rows(text, max, kind)?;
    if rows.iter().all(|r| r.outcome.is_some()) {
        return Err(ApiError::invalid(
            "the file names no account: each row needs an account address in its first column",
        ));
    }
    let job = {
        let mut conn = app.pg.get().await?;
        match users::status_of(&mut conn, owner).await? {
            Some(UserStatus::Active) => {}
            None | Some(UserStatus::Deleted) => {
                return Err(ApiError::Unauthenticated("the token's user does not exist"));
            }
            Some(UserStatus::Suspended) => {
                return Err(ApiError::Forbidden("this account is suspended"));
            }
        }
        imports::create(&mut conn, owner, kind_name(kind), mode.as_str(), &rows)
            .await?
            .ok_or(ApiError::ImportRunning)?
    };
    // This process's runner takes it at once; the others look every POLL.
    app.wakes.imports.notify_one();
    Ok(job)
}

/// How often a runner deletes finished jobs past their retention.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// Finished jobs one sweep deletes at most.
const SWEEP_BATCH: i64 = 1000;

/// Runs the open jobs of all accounts in turn, a batch each, until `stop`:
/// at once when a job is queued in this process, else every [`POLL`] (or
/// when the soonest job held out of turn comes due, if sooner). A stop
/// gives up the lease of the job whose batch runs, for another process to
/// go on at once. Every [`SWEEP_EVERY`], deletes the jobs finished longer
/// than `KITH_IMPORT_RETENTION_SECS` ago.
pub(crate) async fn run(app: Arc<App>, mut stop: Shutdown) {
    let mut swept: Option<std::time::Instant> = None;
    let mut wait = Duration::ZERO;
    loop {
        tokio::select! {
            () = stop.wait() => return,
            () = app.wakes.imports.notified() => {}
            () = tokio::time::sleep(wait) => {}
        }
        if swept.is_none_or(|at| at.elapsed() >= SWEEP_EVERY) {
            swept = Some(std::time::Instant::now());
            if let Err(error) = sweep(&app).await {
                tracing::warn!(%error, "import: finished jobs not swept");
            }
        }
        while !stop.requested() {
            match turn(&app).await {
                Ok(true) => {}
                Ok(false) => break,
                Err(error) => {
                    tracing::warn!(%error, "import: a turn stopped");
                    break;
                }
            }
        }
        wait = match next_due(&app).await {
            Ok(Some(due)) => (due - chrono::Utc::now())
                .to_std()
                .unwrap_or_default()
                .clamp(Duration::from_millis(10), POLL),
            _ => POLL,
        };
    }
}

async fn sweep(app: &App) -> Result<(), ApiError> {
    let retention = i64::try_from(app.config.portability.import_retention_secs).unwrap_or(i64::MAX);
    let mut conn = app.pg.get().await?;
    let deleted = imports::sweep(&mut conn, retention, SWEEP_BATCH).await?;
    if deleted > 0 {
        tracing::info!(
            deleted,
            "import: finished jobs past their retention deleted"
        );
    }
    Ok(())
}

async fn next_due(app: &App) -> Result<Option<chrono::DateTime<chrono::Utc>>, ApiError> {
    let mut conn = app.pg.get().await?;
    Ok(imports::next_due(&mut conn).await?)
}

/// What a batch left to do.
enum Next {
    /// More batches.
    More,
    /// Nothing before this time: the account's pace, or its follow budget.
    Wait(chrono::DateTime<chrono::Utc>),
    /// Every row is applied (and, for an overwrite, the rest undone).
    Done,
    /// Another runner holds the job now, or it was canceled.
    Lost,
}

/// One turn: claims the open job whose turn is oldest and runs one batch of
/// it — as many rows as the account's pace allows, paced by its own token
/// bucket (`KITH_IMPORT_ROWS_PER_SEC`); a job whose bucket is empty waits
/// out of turn instead, and the next account's goes. `Ok(false)`: there was
/// none to claim.
async fn turn(app: &Arc<App>) -> Result<bool, ApiError> {
    let token = uuid::Uuid::new_v4();
    let lease_ms = LEASE.as_millis() as i64;
    let job = {
        let mut conn = app.pg.get().await?;
        imports::claim(&mut conn, token, lease_ms).await?
    };
    let Some(job) = job else {
        return Ok(false);
    };
    let Some(owner) = UserId::new(job.owner_id) else {
        return Ok(false);
    };
    // A batch is as many rows as the pace allows in a few seconds.
    let rate = app.config.portability.import_rows_per_sec;
    let size = (rate.saturating_mul(MAX_PACE_WAIT_SECS) as usize).clamp(1, BATCH);
    let pace = RateLimiter::new(size as u32, f64::from(rate));
    let decision = pace
        .check_key(&app.redis, app.keys.import_rate_limit(owner), size)
        .await;
    let outcome = match decision {
        Ok(d) if !d.allowed => {
            let wait = chrono::Duration::milliseconds(d.retry_after_ms.max(10) as i64);
            Ok(Next::Wait(chrono::Utc::now() + wait))
        }
        Ok(_) => batch(app, job.id, owner, token, size).await,
        Err(e) => Err(e),
    };
    let failure = match outcome {
        Ok(Next::More) => {
            let mut conn = app.pg.get().await?;
            imports::end_turn(&mut conn, job.id, token, None).await?;
            return Ok(true);
        }
        Ok(Next::Wait(until)) => {
            let mut conn = app.pg.get().await?;
            imports::end_turn(&mut conn, job.id, token, Some(until)).await?;
            return Ok(true);
        }
        Ok(Next::Lost) => return Ok(true),
        Ok(Next::Done) => None,
        Err(e @ (ApiError::Unavailable(_) | ApiError::Timeout)) => {
            // Given back: this or another runner goes on once it passes.
            let mut conn = app.pg.get().await?;
            imports::release(&mut conn, job.id, token).await?;
            return Err(e);
        }
        Err(ApiError::Unauthenticated(why) | ApiError::Forbidden(why)) => Some(why),
        Err(e) => {
            tracing::error!(error = %e.detail(), job = job.id, "import: a batch failed");
            Some("an internal error stopped the import")
        }
    };
    let mut conn = app.pg.get().await?;
    let state = if failure.is_some() { "failed" } else { "done" };
    imports::finish(&mut conn, job.id, token, state, failure).await?;
    Ok(true)
}

/// Cancels `owner`'s import `id`, if open; the job as it now stands and
/// whether this call ended it. `NOT_FOUND` when `owner` has no such job.
pub(crate) async fn cancel(app: &App, owner: UserId, id: i64) -> Result<(JobRow, bool), ApiError> {
    let mut conn = app.pg.get().await?;
    imports::cancel(&mut conn, owner, id)
        .await?
        .ok_or(ApiError::NotFound("import job"))
}

/// One batch of job `id`, under the lease `token`.
async fn batch(
    app: &App,
    id: i64,
    owner: UserId,
    token: uuid::Uuid,
    size: usize,
) -> Result<Next, ApiError> {
    use diesel_async::AsyncConnection as _;

    let lease_ms = LEASE.as_millis() as i64;
    let mut touched = Touched::default();
    let next = {
        let mut conn = app.pg.get().await?;
        conn.transaction::<_, ApiError, _>(async |conn| {
            let Some(job) = imports::fence(conn, id, token, lease_ms).await? else {
                return Ok(Next::Lost);
            };
            let kind = kind_of(&job.kind);
            // Follows spend the account's budget of the day; rows that
            // waited for a new day are pending again once it has come.
            let budget = if kind == ImportKind::Following {
                let per_day = i32::try_from(app.config.portability.import_follows_per_day)
                    .unwrap_or(i32::MAX);
                let budget = import_budget::budget(conn, owner, per_day).await?;
                if job.deferred > 0 {
                    if budget.left == 0 {
                        return Ok(Next::Wait(budget.renews_at));
                    }
                    import_budget::resume_deferred(conn, id).await?;
                }
                Some(budget)
            } else {
                None
            };
            let rows = imports::pending_rows(conn, id, size as i64).await?;
            if !rows.is_empty() {
                let domain = &app.config.portability.account_domain;
                let handles: Vec<String> = rows
                    .iter()
                    .filter_map(|r| address::parse(&r.address, domain).map(str::to_owned))
                    .collect();
                let found = users::find_by_handles(conn, &handles).await?;
                let mut progress = Progress::default();
                let mut recorded = Vec::with_capacity(rows.len());
                let mut left = budget.map(|b| b.left);
                let mut made = touched.follows_made();
                let made_before = made;
                for row in &rows {
                    if left == Some(0) {
                        break;
                    }
                    let user = address::parse(&row.address, domain).and_then(|handle| {
                        found
                            .iter()
                            .find(|u| u.handle == handle && u.status != UserStatus::Deleted)
                    });
                    let outcome = match user {
                        None => RowOutcome::Failed(RowError::NotFound),
                        Some(user) => {
                            let options = row
                                .options
                                .as_deref()
                                .and_then(|o| serde_json::from_str(o).ok());
                            let target = write::Target {
                                user: user.id,
                                options: options.as_ref(),
                            };
                            write::apply(app, conn, owner, kind, true, target, &mut touched).await?
                        }
                    };
                    match outcome {
                        RowOutcome::Applied => {
                            progress.applied += 1;
                            // A follow made spends it; new options do not.
                            let spent = touched.follows_made() - made;
                            made = touched.follows_made();
                            left = left.map(|l| l - spent);
                        }
                        RowOutcome::Skipped => progress.skipped += 1,
                        RowOutcome::Failed(_) => progress.failed += 1,
                    }
                    recorded.push((row.ordinal, user.map(|u| u.id.get()), outcome.as_str()));
                }
                imports::record_rows(conn, id, &recorded).await?;
                imports::advance(conn, id, progress).await?;
                if let Some(budget) = budget {
                    import_budget::spend(conn, owner, made - made_before).await?;
                    if left == Some(0) && recorded.len() < rows.len() {
                        // The day's budget is spent: what is left waits.
                        import_budget::defer_rest(conn, id).await?;
                        return Ok(Next::Wait(budget.renews_at));
                    }
                }
                return Ok(Next::More);
            }
            // An overwrite whose rows named no account at all (a file of
            // another domain, say) removes nothing: it would empty the list.
            if job.mode == ImportMode::Overwrite.as_str() && job.applied + job.skipped > 0 {
                let list = match kind {
                    ImportKind::Following => ExportList::Following,
                    ImportKind::Blocks => ExportList::Blocks,
                    ImportKind::Mutes => ExportList::Mutes,
                };
                let after = job.removal_after.unwrap_or(0);
                let members =
                    crate::store::export::batch(conn, list, owner, after, size as i64).await?;
                if let Some(last) = members.last() {
                    let ids: Vec<i64> = members.iter().map(|m| m.id).collect();
                    let named = imports::named(conn, id, &ids).await?;
                    let mut progress = Progress {
                        removal_after: Some(last.id),
                        ..Progress::default()
                    };
                    for member in ids.iter().filter(|m| !named.contains(m)) {
                        let Some(member) = UserId::new(*member) else {
                            continue;
                        };
                        let outcome = write::apply(
                            app,
                            conn,
                            owner,
                            kind,
                            false,
                            write::Target::plain(member),
                            &mut touched,
                        )
                        .await?;
                        progress.removed += i32::from(outcome == RowOutcome::Applied);
                    }
                    imports::advance(conn, id, progress).await?;
                    return Ok(Next::More);
                }
            }
            Ok(Next::Done)
        })
        .await?
    };
    write::after_batch(app, owner, touched).await;
    Ok(next)
}
