//! The rows of an import that were not applied, and why: `ImportJob.errors`.

use async_graphql::{Enum, SimpleObject};

use super::connection::PageInfo;
use crate::write::import::RowError;

/// Why one row of a file was not applied, in the names the first release
/// gave (`ImportError.code`, deprecated for `ImportError.reason`).
#[derive(Enum, Copy, Clone, Eq, PartialEq)]
pub(crate) enum ImportErrorCode {
    /// No account has that address (or it is of another domain).
    UnknownAccount,
    /// The row names the importing account itself.
    #[graphql(name = "SELF")]
    SelfAccount,
    /// One of the two accounts blocks the other.
    Blocked,
    /// The follow cap refuses the follow.
    FollowLimit,
    /// The block limit refuses the block.
    BlockLimit,
    /// The account cannot be followed now.
    Unfollowable,
    /// The line is not a CSV record with an address (or one too long).
    Malformed,
    /// The day's follow budget of imports (`KITH_IMPORT_FOLLOWS_PER_DAY`)
    /// is spent: the row waits, and the job resumes it at `resumesAt` (it
    /// stays so only if the job is canceled first).
    FollowBudget,
}

impl From<RowError> for ImportErrorCode {
    fn from(e: RowError) -> Self {
        match e {
            RowError::NotFound => Self::UnknownAccount,
            RowError::SelfTarget => Self::SelfAccount,
            RowError::Blocked => Self::Blocked,
            RowError::FollowLimit => Self::FollowLimit,
            RowError::BlockLimit => Self::BlockLimit,
            RowError::NotFollowable => Self::Unfollowable,
            RowError::Malformed => Self::Malformed,
            RowError::FollowBudget => Self::FollowBudget,
        }
    }
}

/// Why one row of a file was not applied, under the names of the API's
/// error codes (as `followMany`'s per-user errors are).
#[derive(Enum, Copy, Clone, Eq, PartialEq)]
pub(crate) enum RowErrorCode {
    /// No account has that address (or it is of another domain).
    NotFound,
    /// The row names the importing account itself.
    SelfTarget,
    /// One of the two accounts blocks the other.
    Blocked,
    /// The follow cap refuses the follow.
    FollowLimit,
    /// The block limit refuses the block.
    BlockLimit,
    /// The account cannot be followed now (suspended).
    NotFollowable,
    /// The line is not a CSV record with an address (or one too long).
    Malformed,
    /// The day's follow budget of imports (`KITH_IMPORT_FOLLOWS_PER_DAY`)
    /// is spent: the row waits, and the job resumes it at `resumesAt` (it
    /// stays so only if the job is canceled first).
    FollowBudget,
}

impl From<RowError> for RowErrorCode {
    fn from(e: RowError) -> Self {
        match e {
            RowError::NotFound => Self::NotFound,
            RowError::SelfTarget => Self::SelfTarget,
            RowError::Blocked => Self::Blocked,
            RowError::FollowLimit => Self::FollowLimit,
            RowError::BlockLimit => Self::BlockLimit,
            RowError::NotFollowable => Self::NotFollowable,
            RowError::Malformed => Self::Malformed,
            RowError::FollowBudget => Self::FollowBudget,
        }
    }
}

/// One row that was not applied.
#[derive(SimpleObject)]
pub(crate) struct ImportError {
    /// The line of the file it is on (from 1).
    pub row: i32,
    /// The address as the file wrote it.
    pub handle: String,
    /// Why, under the API's error-code names.
    pub reason: RowErrorCode,
    /// Why, in the names the first release gave.
    #[graphql(
        deprecation = "Use `reason`: the same refusals under the API's error-code names \
        (`NOT_FOUND` for `UNKNOWN_ACCOUNT`, `SELF_TARGET` for `SELF`, `NOT_FOLLOWABLE` for \
        `UNFOLLOWABLE`). Removed after 2027-03-04."
    )]
    pub code: ImportErrorCode,
}

/// One edge of `ImportJob.errors`.
#[derive(SimpleObject)]
#[graphql(shareable)]
pub(crate) struct ImportErrorEdge {
    /// Where the page may go on from.
    pub cursor: String,
    /// The row.
    pub node: ImportError,
}

/// The rows of a job that were not applied, in file order.
#[derive(SimpleObject)]
#[graphql(shareable)]
pub(crate) struct ImportErrorConnection {
    /// The rows of this page.
    pub edges: Vec<ImportErrorEdge>,
    /// Paging.
    pub page_info: PageInfo,
    /// Every row not applied so far.
    pub total_count: i32,
}

#[cfg(test)]
mod tests {
    use super::{RowError, RowErrorCode};

    #[test]
    fn row_reasons_are_named_after_the_api_codes() {
        for error in RowError::ALL {
            let reason = async_graphql::resolver_utils::enum_value(RowErrorCode::from(error));
            assert_eq!(reason.to_string(), error.code().as_str());
        }
    }
}
