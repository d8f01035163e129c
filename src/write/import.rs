//! The writes of an import job: each row's follow, block or mute — and an
//! overwrite's removals — through the same statements as the mutations,
//! inside the caller's transaction (which also records the job's
//! progress), then the caches as the mutations keep them. A follow past the
//! cap comes back as a `follow_limit` item, never raised, so a refused row
//! leaves the rest of its batch.

use crate::app::App;
use crate::error::ApiError;
use crate::model::UserId;
use crate::store::following::{self, EdgeChangeRow};
use crate::store::{PgConn, blocks, mutes};

use super::follow::{EdgeChange, FollowOutcome, Refusal};

/// What an import names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ImportKind {
    /// Accounts to follow.
    Following,
    /// Accounts to block.
    Blocks,
    /// Accounts to mute (until unmuted).
    Mutes,
}

/// Why a row was not applied, named after the API's codes
/// ([`crate::error::ErrorCode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RowError {
    /// No account of Kith has that address.
    NotFound,
    /// The row names the importing account itself.
    SelfTarget,
    /// One of the two accounts blocks the other.
    Blocked,
    /// The follow cap refuses the follow.
    FollowLimit,
    /// `KITH_MAX_BLOCKS` refuses the block.
    BlockLimit,
    /// The account cannot be followed now (suspended).
    NotFollowable,
    /// The line is not a CSV record with an address.
    Malformed,
    /// The day's follow budget of imports is spent: the row waits for the
    /// next day (not a failure; the job resumes it).
    FollowBudget,
}

impl RowError {
    /// Every row error.
    pub(crate) const ALL: [Self; 8] = [
        Self::NotFound,
        Self::SelfTarget,
        Self::Blocked,
        Self::FollowLimit,
        Self::BlockLimit,
        Self::NotFollowable,
        Self::Malformed,
        Self::FollowBudget,
    ];

    /// The code as stored. The rows of jobs keep the names the first
    /// release wrote, which the deprecated `ImportError.code` answers;
    /// its API code (`ErrorCode`) is the name `ImportError.reason` answers.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::NotFound => "UNKNOWN_ACCOUNT",
            Self::SelfTarget => "SELF",
            Self::Blocked => "BLOCKED",
            Self::FollowLimit => "FOLLOW_LIMIT",
            Self::BlockLimit => "BLOCK_LIMIT",
            Self::NotFollowable => "UNFOLLOWABLE",
            Self::Malformed => "MALFORMED",
            Self::FollowBudget => "FOLLOW_BUDGET",
        }
    }

    #[cfg(test)]
    /// The code of the API's vocabulary this error is named after.
    pub(crate) const fn code(self) -> crate::error::ErrorCode {
        use crate::error::ErrorCode;
        match self {
            Self::NotFound => ErrorCode::NotFound,
            Self::SelfTarget => ErrorCode::SelfTarget,
            Self::Blocked => ErrorCode::Blocked,
            Self::FollowLimit => ErrorCode::FollowLimit,
            Self::BlockLimit => ErrorCode::BlockLimit,
            Self::NotFollowable => ErrorCode::NotFollowable,
            Self::Malformed => ErrorCode::Malformed,
            Self::FollowBudget => ErrorCode::FollowBudget,
        }
    }

    /// The error a stored code names.
    pub(crate) fn from_code(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == code)
    }
}

/// How one row (or one removal) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RowOutcome {
    /// It changed something.
    Applied,
    /// It was so already.
    Skipped,
    /// It could not apply.
    Failed(RowError),
}

impl RowOutcome {
    /// The outcome as stored.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::Applied => "applied",
            Self::Skipped => "skipped",
            Self::Failed(e) => e.as_str(),
        }
    }
}

/// What a batch changed, for the caches once it commits.
#[derive(Default)]
pub(crate) struct Touched {
    follows: Vec<FollowOutcome>,
    ended: Vec<(UserId, UserId, Vec<EdgeChangeRow>)>,
    users: Vec<UserId>,
    made: i32,
}

impl Touched {
    /// Follows (and follow requests) the batch made so far: a row that
    /// only changed the options of a follow that stood made none.
    pub(crate) fn follows_made(&self) -> i32 {
        self.made
    }
}

/// The account a row names, and the options its file gave a follow.
pub(crate) struct Target<'a> {
    /// The account.
    pub user: UserId,
    /// A follow's options, set in the same transaction.
    pub options: Option<&'a crate::model::FollowOptions>,
}

impl Target<'_> {
    /// `user`, with no options.
    pub(crate) fn plain(user: UserId) -> Self {
        Self {
            user,
            options: None,
        }
    }
}

/// Applies `kind` from `owner` to `target` (`add`: follow, block, mute;
/// else their undoing) in `conn`'s transaction; a follow gets the row's
/// options with it (a follow that stands is applied when they change it).
/// `Err` stops the whole batch: the owner cannot act (suspended, gone) or
/// PostgreSQL failed.
pub(crate) async fn apply(
    app: &App,
    conn: &mut PgConn,
    owner: UserId,
    kind: ImportKind,
    add: bool,
    target: Target<'_>,
    touched: &mut Touched,
) -> Result<RowOutcome, ApiError> {
    let (target, options) = (target.user, target.options);
    if owner == target {
        return Ok(RowOutcome::Failed(RowError::SelfTarget));
    }
    let event_id = uuid::Uuid::new_v4();
    let row = match kind {
        ImportKind::Following => {
            let item = following::EdgeItem {
                actor: owner,
                target,
                follow: add,
                event_id,
            };
            let mut rows = following::change_set(
                conn,
                &[item],
                crate::store::following::FollowCap::of(&app.config),
            )
            .await?;
            rows.remove(0)
        }
        ImportKind::Blocks => {
            let events = [uuid::Uuid::new_v4(), uuid::Uuid::new_v4()];
            let mut rows = blocks::change(
                conn,
                owner,
                target,
                add,
                event_id,
                events,
                app.config.writes.max_blocks,
            )
            .await?
            .into_iter();
            let first = rows.next().ok_or_else(|| {
                ApiError::internal(anyhow::anyhow!("the block statement answered no row"))
            })?;
            let ended: Vec<EdgeChangeRow> = rows.collect();
            if !ended.is_empty() {
                touched.ended.push((owner, target, ended));
            }
            first
        }
        ImportKind::Mutes => mutes::change(conn, owner, target, add, None, event_id).await?,
    };
    let options_changed = match (kind, add, options) {
        (ImportKind::Following, true, Some(options)) if Refusal::check(&row.outcome).is_ok() => {
            let change = crate::store::follow_options::OptionsChange::from(options);
            let set = crate::store::follow_options::set(
                conn,
                owner,
                target,
                &change,
                uuid::Uuid::new_v4(),
            )
            .await?;
            set.changed == Some(true)
        }
        _ => false,
    };
    let outcome = match Refusal::check(&row.outcome) {
        Ok(_) if row.edge_version.is_some() || options_changed => RowOutcome::Applied,
        Ok(_) => RowOutcome::Skipped,
        Err(refusal) => RowOutcome::Failed(match refusal {
            Refusal::TargetUnknown => RowError::NotFound,
            Refusal::TargetUnfollowable | Refusal::TargetMoved => RowError::NotFollowable,
            Refusal::Blocked => RowError::Blocked,
            Refusal::FollowLimit => RowError::FollowLimit,
            Refusal::BlockLimit => RowError::BlockLimit,
            // The importing account's own refusal, or a bug: the job's.
            other => return Err(other.into()),
        }),
    };
    if outcome == RowOutcome::Applied {
        touched.users.push(target);
        // A follow or a request made; not a stray request the follow that
        // stood had beside it, cancelled.
        let made = row.edge_version.is_some() && row.outcome != "request_canceled";
        if kind == ImportKind::Following && add && made {
            touched.made += 1;
        }
        if kind == ImportKind::Following {
            let change = if add {
                EdgeChange::Follow
            } else {
                EdgeChange::Unfollow
            };
            if let Ok(follow) = super::follow::outcome_of(row, owner, target, change, event_id) {
                touched.follows.push(follow);
            }
        }
    }
    Ok(outcome)
}

/// After a batch committed: the caches show its changes as the mutations'
/// would, both users' boundaries are dropped, and the relays are woken.
pub(crate) async fn after_batch(app: &App, owner: UserId, touched: Touched) {
    if touched.users.is_empty() {
        return;
    }
    let mut users = touched.users;
    users.push(owner);
    app.read.forget_users(&users);
    for (actor, target, ended) in &touched.ended {
        super::block::write_through(app, *actor, *target, ended, &[]).await;
    }
    super::follow::write_through(app, &touched.follows, &[]).await;
    super::after_commit_for(app, &[], &[], &[owner]).await;
}
