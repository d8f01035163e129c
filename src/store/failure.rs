//! What a PostgreSQL error means for whoever asked: the one place that
//! reads diesel's error kinds and PostgreSQL's messages. The API maps it to
//! a client-visible code ([`crate::error::ApiError`]); the pipeline to
//! retry or dead-letter ([`crate::error::PipelineError::is_permanent`]);
//! the group commit, the writes outside it and reconcile ([`rerun`])
//! run a transaction again when PostgreSQL rolled it back to break a
//! deadlock ([`Failure::RolledBack`]).

use diesel::result::{DatabaseErrorKind as Kind, Error};

/// The meaning of one PostgreSQL error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// A lost or closed connection, or a server shutting down: asking
    /// again later may succeed.
    Unavailable,
    /// PostgreSQL rolled the transaction back to break a deadlock, or for a
    /// serialization failure: it certainly did not commit, and running it
    /// again at once may succeed.
    RolledBack,
    /// The statement was cancelled by `statement_timeout`.
    Timeout,
    /// A constraint rejects the input: asking again with the same input
    /// never succeeds.
    Rejected,
    /// Anything else: a bug.
    Other,
}

/// Server messages of failures that pass — PostgreSQL's, and a pooler's
/// (PgBouncer) when its server is away or its pool is spent.
const PASSING: [&str; 8] = [
    "terminating connection",
    "the database system is",
    "server closed the connection",
    "connection closed",
    "server conn crashed",
    "cannot connect to server",
    "query_wait_timeout",
    "no more connections allowed",
];

/// Whether `e` rolled its transaction back for a reason that asking again
/// at once cures (a deadlock, a serialization failure): the transaction
/// certainly did not commit.
pub(crate) fn rolled_back_to_retry(e: &Error) -> bool {
    classify(e) == Failure::RolledBack
}

/// Times a transaction PostgreSQL rolled back is run again ([`rerun`]).
pub(crate) const RETRIES: u32 = 3;

/// Whether a transaction that failed with `e` is to run again, its
/// `tries` so far counted: while PostgreSQL rolls it back to break a
/// deadlock or for a serialization failure, up to [`RETRIES`] times (such a
/// rollback is not the caller's to see). Called by [`rerun`].
pub(crate) fn run_again(e: &Error, tries: &mut u32) -> bool {
    if !rolled_back_to_retry(e) || *tries >= RETRIES {
        return false;
    }
    *tries += 1;
    tracing::debug!(error = %e, tries = *tries, "a transaction is run again");
    true
}

/// An error that may be PostgreSQL's, for [`rerun`] to look at.
pub(crate) trait FromPostgres {
    /// PostgreSQL's error, if this is one.
    fn postgres(&self) -> Option<&Error>;
}

impl FromPostgres for Error {
    fn postgres(&self) -> Option<&Error> {
        Some(self)
    }
}

/// Runs `$transaction` — an expression for one statement, or a
/// transaction of its own, evaluated anew for each run — and runs it again
/// while PostgreSQL rolls it back to break a deadlock or for a
/// serialization failure, up to [`RETRIES`] times: such a rollback
/// committed nothing, and is not the caller's to see. Its value is the
/// last run's result. What the expression takes from outside (event ids,
/// tokens) stands for every run. (A macro, not a function taking an async
/// closure: the futures of those are not yet known to be `Send`.)
macro_rules! rerun {
    ($transaction:expr) => {{
        let mut tries = 0;
        loop {
            match $transaction {
                Err(e)
                    if $crate::store::failure::FromPostgres::postgres(&e)
                        .is_some_and(|pg| $crate::store::failure::run_again(pg, &mut tries)) => {}
                done => break done,
            }
        }
    }};
}
pub(crate) use rerun;

/// Classifies `e`.
pub(crate) fn classify(e: &Error) -> Failure {
    match e {
        Error::DatabaseError(Kind::SerializationFailure, _) => Failure::RolledBack,
        Error::DatabaseError(_, info) if info.message().contains("deadlock detected") => {
            Failure::RolledBack
        }
        Error::DatabaseError(Kind::ClosedConnection | Kind::UnableToSendCommand, _)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn db(kind: Kind, message: &str) -> Error {
        Error::DatabaseError(kind, Box::new(message.to_owned()))
    }

    #[test]
    fn a_rolled_back_transaction_runs_again_a_few_times() {
        let deadlock = db(Kind::Unknown, "deadlock detected");
        let mut tries = 0;
        let again = std::iter::from_fn(|| Some(run_again(&deadlock, &mut tries)));
        let runs: Vec<bool> = again.take(RETRIES as usize + 2).collect();
        assert_eq!(runs.iter().filter(|r| **r).count(), RETRIES as usize);
        assert!(!runs[RETRIES as usize], "then the error is the caller's");
        let mut tries = 0;
        assert!(!run_again(&db(Kind::UniqueViolation, "dup"), &mut tries));
        assert_eq!(tries, 0);
    }

    #[test]
    fn rerun_runs_a_rolled_back_transaction_again_then_gives_up() {
        let mut runs = 0;
        let done = rerun!({
            runs += 1;
            if runs < 3 {
                Err(db(Kind::SerializationFailure, "could not serialize access"))
            } else {
                Ok(runs)
            }
        });
        assert_eq!(done.ok(), Some(3));
        let mut runs = 0;
        let failed: Result<(), Error> = rerun!({
            runs += 1;
            Err(db(Kind::Unknown, "deadlock detected"))
        });
        assert!(failed.is_err());
        assert_eq!(runs, RETRIES + 1, "the first run and its retries");
        let mut runs = 0;
        let rejected: Result<(), Error> = rerun!({
            runs += 1;
            Err(db(Kind::UniqueViolation, "duplicate key"))
        });
        assert!(rejected.is_err());
        assert_eq!(runs, 1, "a rejection is not run again");
    }

    #[test]
    fn only_a_transaction_postgres_rolled_back_is_run_again_at_once() {
        for rolled_back in [
            db(Kind::Unknown, "deadlock detected"),
            db(Kind::SerializationFailure, "could not serialize access"),
        ] {
            assert_eq!(classify(&rolled_back), Failure::RolledBack);
            assert!(rolled_back_to_retry(&rolled_back));
        }
        // The commit of a lost connection may have landed: not run again.
        for other in [
            db(Kind::ClosedConnection, "closed"),
            db(
                Kind::Unknown,
                "terminating connection due to administrator command",
            ),
            db(
                Kind::Unknown,
                "canceling statement due to statement timeout",
            ),
            db(Kind::UniqueViolation, "duplicate key"),
        ] {
            assert!(!rolled_back_to_retry(&other), "{other}");
        }
    }
}
