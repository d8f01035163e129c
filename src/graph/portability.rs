//! Import of the viewer's lists: `importGraph` queues a job, `importJob`
//! reads it, `importJobChanged` follows it live. (Exports are plain HTTP:
//! `GET /export/*.csv`.)

use std::time::Duration;

use async_graphql::{Context, Enum, ID, InputObject, Object, SimpleObject, Subscription};
use chrono::{DateTime, Utc};
use futures_util::Stream;

use super::connection::PageInfo;
use super::import_rows::{ImportError, ImportErrorConnection, ImportErrorEdge};
use super::{app, ids, page_args, viewer};
use crate::error::{ApiError, GraphqlResultExt};
use crate::portability::import::{self, ImportMode as Mode};
use crate::store::imports::{self, JobRow};
use crate::write::import::{ImportKind as Kind, RowError};

/// What an imported file names.
#[derive(Enum, Copy, Clone, Eq, PartialEq)]
pub(crate) enum ImportKind {
    /// Accounts to follow (Mastodon's `following_accounts.csv`).
    Following,
    /// Accounts to block (`blocked_accounts.csv`).
    Blocks,
    /// Accounts to mute, until unmuted (`muted_accounts.csv`).
    Mutes,
}

/// What happens to the viewer's list.
#[derive(Enum, Copy, Clone, Eq, PartialEq)]
pub(crate) enum ImportMode {
    /// The file's accounts are added; the rest of the list stays.
    Merge,
    /// The file's accounts are added, then the rest of the list is undone
    /// (unfollowed, unblocked, unmuted).
    Overwrite,
}

/// Where a job stands.
#[derive(Enum, Copy, Clone, Eq, PartialEq)]
pub(crate) enum ImportState {
    /// Waiting for a runner.
    Queued,
    /// Being applied.
    Running,
    /// Every row applied (or reported).
    Done,
    /// Stopped: `failure` says why (the account was suspended meanwhile).
    Failed,
    /// Stopped by its owner (`cancelImportJob`): what it applied stays.
    Canceled,
}

/// Input of `importGraph`.
#[derive(InputObject)]
pub(crate) struct ImportGraphInput {
    /// What the file names.
    pub kind: ImportKind,
    /// Merge (the default, also when null) or overwrite.
    #[graphql(default_with = "Some(ImportMode::Merge)")]
    pub mode: Option<ImportMode>,
    /// The file: CSV, the account address in the first column, an optional
    /// `Account address` header (Mastodon's export formats).
    pub csv: String,
    /// Echoed back in the payload (Relay).
    pub client_mutation_id: Option<String>,
}

/// Result of `importGraph`.
#[derive(SimpleObject)]
pub(crate) struct ImportGraphPayload {
    /// The queued job.
    pub job: ImportJob,
    /// The input's `clientMutationId`.
    pub client_mutation_id: Option<String>,
}

/// An import of a CSV file into the viewer's lists, applied in the
/// background: each row through the same writes as the mutations, at
/// `KITH_IMPORT_ROWS_PER_SEC`, resumed where it stood if its process dies.
pub(crate) struct ImportJob(JobRow);

/// An import of a CSV file into the viewer's lists, applied in the
/// background (see `importGraph`).
#[Object]
impl ImportJob {
    /// Global id (`importJob(id:)`, `importJobChanged(id:)`).
    async fn id(&self) -> ID {
        ids::import_job_id(self.0.id)
    }

    /// What the file names.
    async fn kind(&self) -> ImportKind {
        match self.0.kind.as_str() {
            "blocks" => ImportKind::Blocks,
            "mutes" => ImportKind::Mutes,
            _ => ImportKind::Following,
        }
    }

    /// Merge or overwrite.
    async fn mode(&self) -> ImportMode {
        if self.0.mode == Mode::Overwrite.as_str() {
            ImportMode::Overwrite
        } else {
            ImportMode::Merge
        }
    }

    /// Where it stands.
    async fn state(&self) -> ImportState {
        match self.0.state.as_str() {
            "running" => ImportState::Running,
            "done" => ImportState::Done,
            "failed" => ImportState::Failed,
            "canceled" => ImportState::Canceled,
            _ => ImportState::Queued,
        }
    }

    /// Rows in the file (the header left out).
    async fn total(&self) -> i32 {
        self.0.total
    }

    /// Rows that changed the list.
    async fn applied(&self) -> i32 {
        self.0.applied
    }

    /// Rows the list had already (or that repeat an earlier row).
    async fn skipped(&self) -> i32 {
        self.0.skipped
    }

    /// Rows not applied: see `errors`.
    async fn failed(&self) -> i32 {
        self.0.failed
    }

    /// An overwrite's undoings of what the file did not name.
    async fn removed(&self) -> i32 {
        self.0.removed
    }

    /// Rows waiting for the next day's follow budget (`FOLLOW_BUDGET` in
    /// `errors`), which the job applies from `resumesAt`.
    async fn deferred(&self) -> i32 {
        self.0.deferred
    }

    /// While the job waits for its account's follow budget of the next day
    /// (`KITH_IMPORT_FOLLOWS_PER_DAY`): when it goes on. Null otherwise.
    async fn resumes_at(&self) -> Option<DateTime<Utc>> {
        (self.0.deferred > 0 && matches!(self.0.state.as_str(), "queued" | "running"))
            .then_some(self.0.due_at)
            .flatten()
    }

    /// Why a failed job stopped.
    async fn failure(&self) -> Option<&str> {
        self.0.failure.as_deref()
    }

    /// When it was queued.
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }

    /// When it ended.
    async fn finished_at(&self) -> Option<DateTime<Utc>> {
        self.0.finished_at
    }

    /// The rows not applied, in file order, each with its line and reason
    /// (and, while the job waits for its follow budget, the rows waiting).
    #[graphql(complexity = "page_args::page_cost(first, None, None, child_complexity)")]
    async fn errors(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "Page size from the start of the list (or after `after`), at most 100; 20 when no size is given."
        )]
        first: Option<i32>,
        #[graphql(desc = "A cursor this list issued: the page starts after it.")] after: Option<
            String,
        >,
    ) -> async_graphql::Result<ImportErrorConnection> {
        let n = page_args::first_size(first).gql()?;
        let after = match after {
            None => -1,
            Some(cursor) => cursor
                .strip_prefix("row:")
                .and_then(|n| n.parse::<i32>().ok())
                .ok_or(ApiError::BadCursor)
                .gql()?,
        };
        let mut rows = {
            let mut conn = app(ctx).pg.get().await.map_err(ApiError::from).gql()?;
            imports::errors(&mut conn, self.0.id, after, n as i64 + 1)
                .await
                .map_err(ApiError::from)
                .gql()?
        };
        let has_next_page = rows.len() > n;
        rows.truncate(n);
        let edges: Vec<ImportErrorEdge> = rows
            .into_iter()
            .map(|r| ImportErrorEdge {
                cursor: format!("row:{}", r.ordinal),
                node: {
                    let error = r
                        .outcome
                        .as_deref()
                        .and_then(RowError::from_code)
                        .unwrap_or(RowError::Malformed);
                    ImportError {
                        row: r.line,
                        handle: r.address,
                        reason: error.into(),
                        code: error.into(),
                    }
                },
            })
            .collect();
        Ok(ImportErrorConnection {
            page_info: PageInfo {
                has_next_page,
                has_previous_page: after >= 0,
                start_cursor: edges.first().map(|e| e.cursor.clone()),
                end_cursor: edges.last().map(|e| e.cursor.clone()),
            },
            edges,
            total_count: self.0.failed + self.0.deferred,
        })
    }
}

/// `importGraph`.
#[derive(Default)]
pub(crate) struct ImportMutation;

#[Object]
impl ImportMutation {
    /// Queues an import of a CSV file into the viewer's own following list,
    /// blocks or mutes, and answers at once with the job; follow it with
    /// `importJob(id:)` or `importJobChanged(id:)`. Takes a rate-limit
    /// token first. One import per account at a time (`IMPORT_RUNNING`),
    /// one `importGraph` per operation, at most `KITH_IMPORT_MAX_ROWS`
    /// rows, and a file that names no account is refused (`INVALID_INPUT`).
    /// Each bad row is reported in `errors` without stopping the rest. The
    /// imports of all accounts are applied in turn, a batch each; follows
    /// spend a daily budget of their own (`KITH_IMPORT_FOLLOWS_PER_DAY`).
    async fn import_graph(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The mutation's input.")] input: ImportGraphInput,
    ) -> async_graphql::Result<ImportGraphPayload> {
        let owner = viewer(ctx).require().gql()?;
        let kind = match input.kind {
            ImportKind::Following => Kind::Following,
            ImportKind::Blocks => Kind::Blocks,
            ImportKind::Mutes => Kind::Mutes,
        };
        let mode = match input.mode {
            None | Some(ImportMode::Merge) => Mode::Merge,
            Some(ImportMode::Overwrite) => Mode::Overwrite,
        };
        let job = import::start(app(ctx), owner, kind, mode, &input.csv)
            .await
            .gql()?;
        Ok(ImportGraphPayload {
            job: ImportJob(job),
            client_mutation_id: input.client_mutation_id,
        })
    }

    /// Cancels one of the viewer's imports while it is open (queued,
    /// running, or waiting for its follow budget): what it applied stays,
    /// the rest is not applied. A finished job is answered as it is
    /// (`changed: false`); another account's, as a missing one
    /// (`NOT_FOUND`).
    async fn cancel_import_job(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The mutation's input.")] input: CancelImportJobInput,
    ) -> async_graphql::Result<CancelImportJobPayload> {
        let owner = viewer(ctx).require().gql()?;
        let id = ids::decode_import_job(&input.id).gql()?;
        let (job, changed) = import::cancel(app(ctx), owner, id).await.gql()?;
        Ok(CancelImportJobPayload {
            changed,
            job: ImportJob(job),
            client_mutation_id: input.client_mutation_id,
        })
    }
}

/// Input of `cancelImportJob`.
#[derive(InputObject)]
pub(crate) struct CancelImportJobInput {
    /// The job's global id.
    pub id: ID,
    /// Echoed back in the payload (Relay).
    pub client_mutation_id: Option<String>,
}

/// Result of `cancelImportJob`.
#[derive(SimpleObject)]
pub(crate) struct CancelImportJobPayload {
    /// True when this call ended the job; false when it had ended already.
    pub changed: bool,
    /// The job as it now stands.
    pub job: ImportJob,
    /// The input's `clientMutationId`.
    pub client_mutation_id: Option<String>,
}

/// `importJob`.
#[derive(Default)]
pub(crate) struct ImportQuery;

#[Object]
impl ImportQuery {
    /// One of the viewer's imports; null when there is no such job, and
    /// when it is another account's (which no one else learns exists).
    async fn import_job(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Global id of the import job (`importGraph` answers it).")] id: ID,
    ) -> async_graphql::Result<Option<ImportJob>> {
        load(ctx, &id).await.map(|job| job.map(ImportJob))
    }
}

/// The viewer's job `id`: null when there is none, or it is another
/// account's (answered alike, so an id tells nothing of others' jobs).
async fn load(ctx: &Context<'_>, id: &ID) -> async_graphql::Result<Option<JobRow>> {
    let me = viewer(ctx).require().gql()?;
    let id = ids::decode_import_job(id).gql()?;
    let job = {
        let mut conn = app(ctx).pg.get().await.map_err(ApiError::from).gql()?;
        imports::get(&mut conn, id)
            .await
            .map_err(ApiError::from)
            .gql()?
    };
    Ok(job.filter(|job| job.owner_id == me.get()))
}

/// How often a live job is read again.
const LIVE_POLL: Duration = Duration::from_millis(500);

/// `importJobChanged`.
#[derive(Default)]
pub(crate) struct ImportSubscription;

#[Subscription]
impl ImportSubscription {
    /// One of the viewer's imports, live: as it is now, then each time its
    /// counts or state change, ending once it is `DONE` or `FAILED`.
    async fn import_job_changed(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Global id of the import job (`importGraph` answers it).")] id: ID,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<ImportJob>> + use<>> {
        let job = load(ctx, &id)
            .await?
            .ok_or(ApiError::NotFound("import job"))
            .gql()?;
        let slot = super::subscription::slot(ctx)?;
        let app = app(ctx).clone();
        Ok(futures_util::stream::unfold(
            (Some(job), None::<JobRow>, slot),
            move |(next, last, slot)| {
                let app = app.clone();
                async move {
                    let mut next = next?;
                    // Wait for a change of what a client sees.
                    while let Some(last) = &last {
                        if (
                            next.state.as_str(),
                            next.applied,
                            next.skipped,
                            next.failed,
                            next.removed,
                            next.deferred,
                        ) != (
                            last.state.as_str(),
                            last.applied,
                            last.skipped,
                            last.failed,
                            last.removed,
                            last.deferred,
                        ) {
                            break;
                        }
                        tokio::time::sleep(LIVE_POLL).await;
                        let read = async {
                            let mut conn = app.pg.get().await?;
                            Ok::<_, ApiError>(imports::get(&mut conn, next.id).await?)
                        };
                        next = match read.await {
                            Ok(Some(job)) => job,
                            Ok(None) => return None,
                            Err(e) => {
                                return Some((
                                    Err(async_graphql::ErrorExtensions::extend(&e)),
                                    (None, None, slot),
                                ));
                            }
                        };
                    }
                    let ended = matches!(next.state.as_str(), "done" | "failed" | "canceled");
                    let following = (!ended).then(|| next.clone());
                    Some((Ok(ImportJob(next.clone())), (following, Some(next), slot)))
                }
            },
        ))
    }
}
