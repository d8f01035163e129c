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

/// The rows of a CSV file: the first column of each record is an account
/// address; a first record whose first column is `Account address` is the
/// header. A line that is no record, or has no address, is a malformed row.
pub(crate) fn rows(text: &str) -> Vec<NewRow> {
    let mut rows = Vec::new();
    for (i, (line, record)) in csv::records(text).into_iter().enumerate() {
        let line = i32::try_from(line).unwrap_or(i32::MAX);
        match record {
            Ok(fields) if i == 0 && fields[0].trim().eq_ignore_ascii_case("account address") => {}
            Ok(fields) if !fields[0].trim().is_empty() => rows.push(NewRow {
                line,
                address: fields[0].trim().to_owned(),
                outcome: None,
            }),
            Ok(fields) => rows.push(NewRow {
                line,
                address: fields.join(","),
                outcome: Some(RowError::Malformed.as_str()),
            }),
            Err(_) => rows.push(NewRow {
                line,
                address: String::new(),
                outcome: Some(RowError::Malformed.as_str()),
            }),
        }
    }
    rows
}

/// Queues `owner`'s import of `text` and wakes this process's runner. Refused: past `KITH_IMPORT_MAX_ROWS` or empty (`INVALID_INPUT`),
/// while another import of the account is open (`IMPORT_RUNNING`), for an
/// account that is not active (`FORBIDDEN`), or past the rate limit.
pub(crate) async fn start(
    app: &App,
    owner: UserId,
    kind: ImportKind,
    mode: ImportMode,
    text: &str,
) -> Result<JobRow, ApiError> {
    let rows = rows(text);
    let max = app.config.import_max_rows as usize;
    if rows.len() > max {
        return Err(ApiError::invalid(format!(
            "an import holds at most {max} rows; this file has {}",
            rows.len()
        )));
    }
    if rows.is_empty() {
        return Err(ApiError::invalid("the file names no account"));
    }
    crate::write::take_tokens(app, owner, 1).await?;
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

/// Runs queued jobs, and jobs whose lease lapsed (their runner died), until
/// `stop`: at once when a job is queued in this process, else every
/// [`POLL`]. A stop gives up the lease of the job running, for another
/// process to go on at once.
pub(crate) async fn run(app: Arc<App>, mut stop: Shutdown) {
    loop {
        tokio::select! {
            () = stop.wait() => return,
            () = app.wakes.imports.notified() => {}
            () = tokio::time::sleep(POLL) => {}
        }
        while !stop.requested() {
            match run_one(&app, &mut stop).await {
                Ok(true) => {}
                Ok(false) => break,
                Err(error) => {
                    tracing::warn!(%error, "import: a run stopped");
                    break;
                }
            }
        }
    }
}

/// What a batch left to do.
enum Next {
    /// More batches.
    More,
    /// Every row is applied (and, for an overwrite, the rest undone).
    Done,
    /// Another runner holds the job now.
    Lost,
}

/// Claims the oldest open job whose lease is free and runs it to its end,
/// or until `stop` (then its lease is given up, for another process to go
/// on at once). `Ok(false)`: there was none to claim.
async fn run_one(app: &Arc<App>, stop: &mut Shutdown) -> Result<bool, ApiError> {
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
    // A batch is as many rows as the pace allows in a few seconds, so that
    // waiting for it never outlasts the lease.
    let rate = app.config.import_rows_per_sec;
    let size = (rate.saturating_mul(MAX_PACE_WAIT_SECS) as usize).clamp(1, BATCH);
    let pace = RateLimiter::new(size as u32, f64::from(rate));
    let pace_key = app.keys.import_rate_limit(owner);
    loop {
        if stop.requested() {
            let mut conn = app.pg.get().await?;
            imports::release(&mut conn, job.id, token).await?;
            return Ok(true);
        }
        let decision = pace.check_key(&app.redis, pace_key.clone(), size).await?;
        if !decision.allowed {
            stop.sleep(Duration::from_millis(decision.retry_after_ms.max(10)))
                .await;
            continue;
        }
        let outcome = batch(app, job.id, owner, token, size).await;
        let failure = match outcome {
            Ok(Next::More) => continue,
            Ok(Next::Lost) => return Ok(true),
            Ok(Next::Done) => None,
            Err(e @ (ApiError::Unavailable(_) | ApiError::Timeout)) => return Err(e),
            Err(ApiError::Unauthenticated(why) | ApiError::Forbidden(why)) => Some(why),
            Err(e) => {
                tracing::error!(error = %e, job = job.id, "import: a batch failed");
                Some("an internal error stopped the import")
            }
        };
        let mut conn = app.pg.get().await?;
        let state = if failure.is_some() { "failed" } else { "done" };
        imports::finish(&mut conn, job.id, token, state, failure).await?;
        return Ok(true);
    }
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
            let rows = imports::pending_rows(conn, id, size as i64).await?;
            if !rows.is_empty() {
                let domain = &app.config.account_domain;
                let handles: Vec<String> = rows
                    .iter()
                    .filter_map(|r| address::parse(&r.address, domain).map(str::to_owned))
                    .collect();
                let found = users::find_by_handles(conn, &handles).await?;
                let mut progress = Progress::default();
                let mut recorded = Vec::with_capacity(rows.len());
                for row in &rows {
                    let user = address::parse(&row.address, domain).and_then(|handle| {
                        found
                            .iter()
                            .find(|u| u.handle == handle && u.status != UserStatus::Deleted)
                    });
                    let outcome = match user {
                        None => RowOutcome::Failed(RowError::UnknownAccount),
                        Some(user) => {
                            write::apply(app, conn, owner, kind, true, user.id, &mut touched)
                                .await?
                        }
                    };
                    match outcome {
                        RowOutcome::Applied => progress.applied += 1,
                        RowOutcome::Skipped => progress.skipped += 1,
                        RowOutcome::Failed(_) => progress.failed += 1,
                    }
                    recorded.push((row.ordinal, user.map(|u| u.id.get()), outcome.as_str()));
                }
                imports::record_rows(conn, id, &recorded).await?;
                imports::advance(conn, id, progress).await?;
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
                        let outcome =
                            write::apply(app, conn, owner, kind, false, member, &mut touched)
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
