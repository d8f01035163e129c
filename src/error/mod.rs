//! The errors a client can see, each with a stable `extensions.code`.
//!
//! Internal failures keep their cause for the log and reach the client only as
//! an opaque `INTERNAL`. Nothing here implements `Display` with internal detail,
//! so even an accidental conversion through async-graphql's blanket
//! `From<Display>` cannot leak a database message.

use async_graphql::ErrorExtensions;

mod pipeline;
pub use pipeline::PipelineError;

/// Every code a client can receive — in `extensions.code`, and per item in
/// the results of a batch (`followMany`) or of an import's rows — the one
/// vocabulary, used by every place that refuses something. The per-item
/// GraphQL enums name their values after these (a test checks), and
/// `docs/api.md` documents each (another does).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ErrorCode {
    /// No valid bearer token where one is required.
    Unauthenticated,
    /// The signed-in account may not do this.
    Forbidden,
    /// Slow down: a token bucket is empty, or a connection has too much waiting.
    RateLimited,
    /// A follow past the follow cap (`KITH_MAX_FOLLOWINGS`, `KITH_FOLLOWINGS_RATIO`).
    FollowLimit,
    /// A follow between two accounts one of which blocks the other.
    Blocked,
    /// A block past `KITH_MAX_BLOCKS`.
    BlockLimit,
    /// A close friend past `KITH_MAX_CLOSE_FRIENDS`.
    CloseFriendsLimit,
    /// An import while the account's previous one runs.
    ImportRunning,
    /// A follow of an account that has moved (`User.movedTo`), or a move
    /// the accounts' moves refuse.
    Moved,
    /// A cursor this connection did not issue.
    BadCursor,
    /// The named object does not exist.
    NotFound,
    /// The request is not acceptable as sent.
    InvalidInput,
    /// Introspection is switched off (`KITH_INTROSPECTION=false`).
    IntrospectionDisabled,
    /// A persisted-query hash this process does not know yet.
    PersistedQueryNotFound,
    /// Automatic persisted queries are off.
    PersistedQueryNotSupported,
    /// Allow-list mode: a hash not in the manifest.
    PersistedQueryNotInList,
    /// Allow-list mode: a text not in the manifest.
    QueryNotInSafelist,
    /// A dependency cannot serve now; safe to retry.
    Unavailable,
    /// The request ran past its deadline.
    Timeout,
    /// Anything else; the cause is logged, never returned.
    Internal,
    // The codes below are answered per item only, through the GraphQL enums
    // of items (`EdgeErrorCode`, `RowErrorCode`) named after them; this
    // list holds their names, which tests compare with those enums'.
    /// Per item only: the viewer itself (a request alone answers
    /// `INVALID_INPUT`).
    #[cfg_attr(not(test), expect(dead_code, reason = "named by the item enums"))]
    SelfTarget,
    /// Per item only: named earlier in the same list.
    #[cfg_attr(not(test), expect(dead_code, reason = "named by the item enums"))]
    Duplicate,
    /// Per item only: an account that cannot be followed now (a request
    /// alone answers `INVALID_INPUT`).
    #[cfg_attr(not(test), expect(dead_code, reason = "named by the item enums"))]
    NotFollowable,
    /// Per item only: an import line that is no CSV record with an address.
    #[cfg_attr(not(test), expect(dead_code, reason = "named by the item enums"))]
    Malformed,
    /// Per item only: an import row waiting for the day's follow budget.
    #[cfg_attr(not(test), expect(dead_code, reason = "named by the item enums"))]
    FollowBudget,
}

impl ErrorCode {
    /// Every code (the documentation test walks them).
    #[cfg(test)]
    pub(crate) const ALL: [Self; 25] = [
        Self::Unauthenticated,
        Self::Forbidden,
        Self::RateLimited,
        Self::FollowLimit,
        Self::Blocked,
        Self::BlockLimit,
        Self::CloseFriendsLimit,
        Self::ImportRunning,
        Self::Moved,
        Self::BadCursor,
        Self::NotFound,
        Self::InvalidInput,
        Self::IntrospectionDisabled,
        Self::PersistedQueryNotFound,
        Self::PersistedQueryNotSupported,
        Self::PersistedQueryNotInList,
        Self::QueryNotInSafelist,
        Self::Unavailable,
        Self::Timeout,
        Self::Internal,
        Self::SelfTarget,
        Self::Duplicate,
        Self::NotFollowable,
        Self::Malformed,
        Self::FollowBudget,
    ];

    /// The code as clients read it.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::Unauthenticated => "UNAUTHENTICATED",
            Self::Forbidden => "FORBIDDEN",
            Self::RateLimited => "RATE_LIMITED",
            Self::FollowLimit => "FOLLOW_LIMIT",
            Self::Blocked => "BLOCKED",
            Self::BlockLimit => "BLOCK_LIMIT",
            Self::CloseFriendsLimit => "CLOSE_FRIENDS_LIMIT",
            Self::ImportRunning => "IMPORT_RUNNING",
            Self::Moved => "MOVED",
            Self::BadCursor => "BAD_CURSOR",
            Self::NotFound => "NOT_FOUND",
            Self::InvalidInput => "INVALID_INPUT",
            Self::IntrospectionDisabled => "INTROSPECTION_DISABLED",
            Self::PersistedQueryNotFound => "PERSISTED_QUERY_NOT_FOUND",
            Self::PersistedQueryNotSupported => "PERSISTED_QUERY_NOT_SUPPORTED",
            Self::PersistedQueryNotInList => "PERSISTED_QUERY_NOT_IN_LIST",
            Self::QueryNotInSafelist => "QUERY_NOT_IN_SAFELIST",
            Self::Unavailable => "UNAVAILABLE",
            Self::Timeout => "TIMEOUT",
            Self::Internal => "INTERNAL",
            Self::SelfTarget => "SELF_TARGET",
            Self::Duplicate => "DUPLICATE",
            Self::NotFollowable => "NOT_FOLLOWABLE",
            Self::Malformed => "MALFORMED",
            Self::FollowBudget => "FOLLOW_BUDGET",
        }
    }
}

/// A failure of an API operation, as the client is allowed to see it.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No valid bearer token where one is required.
    #[error("authentication required: {0}")]
    Unauthenticated(&'static str),
    /// The signed-in account may not do this.
    #[error("forbidden: {0}")]
    Forbidden(&'static str),
    /// The actor's token bucket is empty.
    #[error("rate limit exceeded; retry after {retry_after_ms} ms")]
    RateLimited {
        /// Milliseconds until one token is available again.
        retry_after_ms: u64,
    },
    /// A follow past the follow cap: the account follows many, and too few
    /// follow it back in proportion.
    #[error(
        "follow limit reached: past the cap, an account may follow only as many as its followers allow"
    )]
    FollowLimit,
    /// A follow between two accounts one of which blocks the other.
    #[error("blocked: one of these accounts blocks the other")]
    Blocked,
    /// A new block past `KITH_MAX_BLOCKS`.
    #[error("block limit reached: unblock someone first")]
    BlockLimit,
    /// A new close friend past `KITH_MAX_CLOSE_FRIENDS`.
    #[error("close friends limit reached: remove someone first")]
    CloseFriendsLimit,
    /// An import while the account's previous one is queued or running.
    #[error("an import of this account is running: wait for it to end")]
    ImportRunning,
    /// A follow of a moved account, or a move that the accounts' own moves
    /// refuse; says which.
    #[error("{0}")]
    Moved(&'static str),
    /// A paging cursor that this list did not issue.
    #[error("invalid cursor")]
    BadCursor,
    /// The named object does not exist.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The request is well-formed GraphQL but its values are not acceptable.
    #[error("{0}")]
    InvalidInput(String),
    /// A dependency (database, cache) is unreachable; safe to retry.
    #[error("service temporarily unavailable")]
    Unavailable(#[source] anyhow::Error),
    /// The request ran past its deadline (`KITH_REQUEST_TIMEOUT_MS`) or a
    /// statement past PostgreSQL's `statement_timeout`. Nothing is left
    /// half-written (a transaction commits whole or not at all), but a
    /// mutation stopped at the deadline may or may not have committed, as
    /// with a dropped connection; follow and unfollow are safe to repeat.
    #[error("the request took too long and was stopped")]
    Timeout,
    /// A bug or an unexpected failure; the cause is logged, never returned.
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

impl ApiError {
    /// The stable machine-readable code placed in `extensions.code`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unauthenticated(_) => ErrorCode::Unauthenticated,
            Self::Forbidden(_) => ErrorCode::Forbidden,
            Self::RateLimited { .. } => ErrorCode::RateLimited,
            Self::FollowLimit => ErrorCode::FollowLimit,
            Self::Blocked => ErrorCode::Blocked,
            Self::BlockLimit => ErrorCode::BlockLimit,
            Self::CloseFriendsLimit => ErrorCode::CloseFriendsLimit,
            Self::ImportRunning => ErrorCode::ImportRunning,
            Self::Moved(_) => ErrorCode::Moved,
            Self::BadCursor => ErrorCode::BadCursor,
            Self::NotFound(_) => ErrorCode::NotFound,
            Self::InvalidInput(_) => ErrorCode::InvalidInput,
            Self::Unavailable(_) => ErrorCode::Unavailable,
            Self::Timeout => ErrorCode::Timeout,
            Self::Internal(_) => ErrorCode::Internal,
        }
        .as_str()
    }

    /// Shorthand for an `INVALID_INPUT` error.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::InvalidInput(message.into())
    }

    /// Wraps an unexpected failure.
    pub fn internal(cause: impl Into<anyhow::Error>) -> Self {
        Self::Internal(cause.into())
    }

    /// The same error again, for one shared by several waiters (a DataLoader
    /// batch, a cache loader): the code is kept, the cause is summarised.
    pub fn shared(e: &Self) -> Self {
        match e {
            Self::Unauthenticated(m) => Self::Unauthenticated(m),
            Self::Forbidden(m) => Self::Forbidden(m),
            Self::RateLimited { retry_after_ms } => Self::RateLimited {
                retry_after_ms: *retry_after_ms,
            },
            Self::FollowLimit => Self::FollowLimit,
            Self::Blocked => Self::Blocked,
            Self::BlockLimit => Self::BlockLimit,
            Self::CloseFriendsLimit => Self::CloseFriendsLimit,
            Self::ImportRunning => Self::ImportRunning,
            Self::Moved(m) => Self::Moved(m),
            Self::BadCursor => Self::BadCursor,
            Self::NotFound(m) => Self::NotFound(m),
            Self::InvalidInput(m) => Self::InvalidInput(m.clone()),
            Self::Unavailable(cause) => Self::Unavailable(anyhow::anyhow!("{cause:#}")),
            Self::Timeout => Self::Timeout,
            Self::Internal(cause) => Self::Internal(anyhow::anyhow!("{cause:#}")),
        }
    }
}

impl ErrorExtensions for ApiError {
    fn extend(&self) -> async_graphql::Error {
        match self {
            Self::Internal(cause) => tracing::error!(error = ?cause, "internal error"),
            // The cause's chain without its backtrace: a store going away
            // fails many requests at once, and resolving a backtrace for
            // each (with `RUST_BACKTRACE` set) stalls the runtime's threads
            // for seconds — long enough to fail requests that never needed
            // the missing store.
            Self::Unavailable(cause) => {
                tracing::warn!(error = %format_args!("{cause:#}"), "dependency unavailable")
            }
            _ => {}
        }
        async_graphql::Error::new(self.to_string()).extend_with(|_, ext| {
            ext.set("code", self.code());
            if let Self::RateLimited { retry_after_ms } = self {
                ext.set("retryAfterMs", *retry_after_ms);
            }
        })
    }
}

/// Converts domain results into GraphQL results with the right extensions.
pub(crate) trait GraphqlResultExt<T> {
    /// Maps the error through [`ErrorExtensions::extend`].
    fn gql(self) -> async_graphql::Result<T>;
}

impl<T> GraphqlResultExt<T> for Result<T, ApiError> {
    fn gql(self) -> async_graphql::Result<T> {
        self.map_err(|e| e.extend())
    }
}

impl ApiError {
    /// What a client hears of PostgreSQL error `e`
    /// ([`crate::store::failure::classify`]): a lost or closed connection, a
    /// server shutting down or a transaction rolled back to break a deadlock
    /// is `UNAVAILABLE`; a statement cancelled by `statement_timeout` is
    /// `TIMEOUT`; anything else is a bug (`INTERNAL`).
    pub(crate) fn of_postgres(e: &diesel::result::Error) -> Self {
        use crate::store::failure::{Failure, classify};
        match classify(e) {
            Failure::Unavailable | Failure::RolledBack => {
                Self::Unavailable(anyhow::anyhow!("postgres: {e}"))
            }
            Failure::Timeout => Self::Timeout,
            Failure::Rejected | Failure::Other => Self::internal(anyhow::anyhow!("postgres: {e}")),
        }
    }
}

impl From<diesel::result::Error> for ApiError {
    /// See [`ApiError::of_postgres`].
    fn from(e: diesel::result::Error) -> Self {
        Self::of_postgres(&e)
    }
}

impl From<bb8::RunError<diesel_async::pooled_connection::PoolError>> for ApiError {
    fn from(e: bb8::RunError<diesel_async::pooled_connection::PoolError>) -> Self {
        Self::Unavailable(anyhow::anyhow!("postgres pool: {e}"))
    }
}

impl From<bb8::RunError<redis::RedisError>> for ApiError {
    /// A pool that cannot lend a connection means Redis is away (or the
    /// breaker is open): `UNAVAILABLE`.
    fn from(e: bb8::RunError<redis::RedisError>) -> Self {
        Self::Unavailable(anyhow::anyhow!("redis pool: {e}"))
    }
}

impl From<redis::RedisError> for ApiError {
    /// Redis away or unable to serve now is `UNAVAILABLE`; so is a Redis
    /// that refuses a write for lack of memory (`OOM`, under `noeviction`):
    /// the service cannot take the write now, and says so on purpose.
    fn from(e: redis::RedisError) -> Self {
        if crate::cache::pool::is_unavailable(&e) || crate::cache::out_of_memory(&e) {
            Self::Unavailable(e.into())
        } else {
            Self::Internal(e.into())
        }
    }
}

impl ApiError {
    /// The error with its cause's chain, for a log or an operator's
    /// message: never the backtrace, which `{:?}` would resolve (slow, and
    /// on a failure that comes many at once, a stall).
    pub(crate) fn detail(&self) -> String {
        match self {
            Self::Unavailable(cause) | Self::Internal(cause) => {
                format!("{}: {cause:#}", self.code())
            }
            other => other.to_string(),
        }
    }

    /// True when Redis refused a write for lack of memory (for the metric
    /// that counts it).
    pub fn is_redis_out_of_memory(&self) -> bool {
        match self {
            Self::Unavailable(cause) | Self::Internal(cause) => cause
                .downcast_ref::<redis::RedisError>()
                .is_some_and(crate::cache::out_of_memory),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_documented() {
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/api.md")).unwrap();
        for code in ErrorCode::ALL {
            let code = code.as_str();
            assert!(
                doc.contains(&format!("`{code}`")),
                "docs/api.md's error table does not list {code}"
            );
        }
    }

    #[test]
    fn internal_errors_do_not_leak_their_cause() {
        let err = ApiError::internal(anyhow::anyhow!("relation \"users\" does not exist")).extend();
        assert_eq!(err.message, "internal error");
        let json = serde_json::to_value(err.extensions.unwrap()).unwrap();
        assert_eq!(json["code"], "INTERNAL");
    }

    #[test]
    fn redis_that_cannot_serve_is_unavailable() {
        let reply = |line: &str| {
            redis::parse_redis_value(format!("-{line}\r\n").as_bytes())
                .unwrap()
                .extract_error()
                .unwrap_err()
        };
        assert_eq!(ApiError::from(reply("ERR wrong type")).code(), "INTERNAL");
        for code in ["LOADING", "BUSY", "READONLY", "TRYAGAIN", "MASTERDOWN"] {
            assert_eq!(
                ApiError::from(reply(&format!("{code} not now"))).code(),
                "UNAVAILABLE",
                "{code}"
            );
        }
        let timeout = redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut));
        assert_eq!(ApiError::from(timeout).code(), "UNAVAILABLE");
        let full = ApiError::from(reply(
            "OOM command not allowed when used memory > 'maxmemory'.",
        ));
        assert_eq!(full.code(), "UNAVAILABLE");
        assert!(full.is_redis_out_of_memory());
    }

    #[test]
    fn a_shared_error_keeps_its_code() {
        // A hot-list or DataLoader failure reaches every waiter with its own code.
        for e in [
            ApiError::Unavailable(anyhow::anyhow!("pool timed out")),
            ApiError::Timeout,
            ApiError::NotFound("user"),
            ApiError::internal(anyhow::anyhow!("bug")),
        ] {
            assert_eq!(ApiError::shared(&e).code(), e.code());
        }
    }

    #[test]
    fn postgres_failures_map_to_codes() {
        use diesel::result::{DatabaseErrorKind as Kind, Error};
        let db = |kind, message: &str| Error::DatabaseError(kind, Box::new(message.to_owned()));
        let cases = [
            (db(Kind::ClosedConnection, "closed"), "UNAVAILABLE"),
            (
                db(Kind::UnableToSendCommand, "connection closed"),
                "UNAVAILABLE",
            ),
            (
                db(
                    Kind::Unknown,
                    "terminating connection due to administrator command",
                ),
                "UNAVAILABLE",
            ),
            (
                db(Kind::Unknown, "the database system is shutting down"),
                "UNAVAILABLE",
            ),
            (
                db(
                    Kind::Unknown,
                    "canceling statement due to statement timeout",
                ),
                "TIMEOUT",
            ),
            (
                db(Kind::Unknown, "relation \"users\" does not exist"),
                "INTERNAL",
            ),
            (db(Kind::UniqueViolation, "duplicate key"), "INTERNAL"),
            (db(Kind::Unknown, "deadlock detected"), "UNAVAILABLE"),
            (
                db(Kind::SerializationFailure, "could not serialize access"),
                "UNAVAILABLE",
            ),
        ];
        for (error, code) in cases {
            assert_eq!(ApiError::from(error).code(), code);
        }
    }

    #[test]
    fn rate_limited_carries_retry_after() {
        let err = ApiError::RateLimited {
            retry_after_ms: 250,
        }
        .extend();
        let json = serde_json::to_value(err.extensions.unwrap()).unwrap();
        assert_eq!(json["code"], "RATE_LIMITED");
        assert_eq!(json["retryAfterMs"], 250);
    }
}
