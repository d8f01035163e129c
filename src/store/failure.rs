//! What a PostgreSQL error means for whoever asked: the one place that
//! reads diesel's error kinds and PostgreSQL's messages. The API maps it to
//! a client-visible code ([`crate::error::ApiError`]); the pipeline to
//! retry or dead-letter ([`crate::pipeline::PipelineError::is_permanent`]).

use diesel::result::{DatabaseErrorKind as Kind, Error};

/// The meaning of one PostgreSQL error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// A lost or closed connection, a server shutting down, or a
    /// transaction that must be retried (serialization, deadlock): asking
    /// again later may succeed.
    Unavailable,
    /// The statement was cancelled by `statement_timeout`.
    Timeout,
    /// A constraint rejects the input: asking again with the same input
    /// never succeeds.
    Rejected,
    /// A follow past the follow cap, as the edge functions before
    /// `kith_change_edges` raised it (the statement wrote nothing); that
    /// function answers it per item instead.
    FollowLimit,
    /// Anything else: a bug.
    Other,
}

/// Server messages of failures that pass — PostgreSQL's, and a pooler's
/// (PgBouncer) when its server is away or its pool is spent.
const PASSING: [&str; 9] = [
    "terminating connection",
    "the database system is",
    "server closed the connection",
    "connection closed",
    "deadlock detected",
    "server conn crashed",
    "cannot connect to server",
    "query_wait_timeout",
    "no more connections allowed",
];

/// The message of the error a follow past the follow cap raises.
const FOLLOW_LIMIT: &str = "kith: follow limit";

/// Whether `e` rolled its transaction back for a reason that asking again
/// at once cures (a deadlock, a serialization failure): the transaction
/// certainly did not commit.
pub(crate) fn rolled_back_to_retry(e: &Error) -> bool {
    match e {
        Error::DatabaseError(Kind::SerializationFailure, _) => true,
        Error::DatabaseError(_, info) => info.message().contains("deadlock detected"),
        _ => false,
    }
}

/// Classifies `e`.
pub(crate) fn classify(e: &Error) -> Failure {
    match e {
        Error::DatabaseError(_, info) if info.message() == FOLLOW_LIMIT => Failure::FollowLimit,
        Error::DatabaseError(Kind::ClosedConnection | Kind::UnableToSendCommand, _)
        | Error::DatabaseError(Kind::SerializationFailure, _)
        | Error::BrokenTransactionManager => Failure::Unavailable,
        Error::DatabaseError(
            Kind::CheckViolation
            | Kind::ForeignKeyViolation
            | Kind::NotNullViolation
            | Kind::UniqueViolation,
            _,
        ) => Failure::Rejected,
        Error::DatabaseError(Kind::Unknown, info) => {
            let message = info.message();
            if message.contains("statement timeout") {
                Failure::Timeout
            } else if PASSING.iter().any(|m| message.contains(m)) {
                Failure::Unavailable
            } else {
                Failure::Other
            }
        }
        _ => Failure::Other,
    }
}
