//! The settings of accounts' limits, suggestions, and import and export (a part of
//! `settings::SECTIONS`).

use super::catalog::{Section, value};

/// Rate limits and caps on what one account does.
pub(super) const RATE_LIMITS: Section = Section {
    title: "Rate limits",
    settings: &[
        value(
            "KITH_RATE_LIMIT_CAPACITY",
            "100",
            "follow/unfollow token bucket size, per user",
        )
        .at_least(1.0),
        value(
            "KITH_RATE_LIMIT_PER_SEC",
            "1",
            "bucket refill rate, tokens per second (may be fractional)",
        )
        .rule("a positive number"),
        value(
            "KITH_MAX_FOLLOWINGS",
            "7500",
            "followings past which a follow needs enough followers (`KITH_FOLLOWINGS_RATIO`); 0: no cap",
        ),
        value(
            "KITH_FOLLOWINGS_RATIO",
            "1.1",
            "past `KITH_MAX_FOLLOWINGS`, a follow is allowed while followings stay at most this many times the followers (else `FOLLOW_LIMIT`)",
        )
        .at_least(0.0),
        value(
            "KITH_MAX_BLOCKS",
            "10000",
            "most accounts one account may block (a block past it: `BLOCK_LIMIT`); 0: no limit",
        ),
        value(
            "KITH_MAX_CLOSE_FRIENDS",
            "1000",
            "most accounts one account may list among its close friends (an addition past it: `CLOSE_FRIENDS_LIMIT`); 0: no limit",
        ),
    ],
};

/// Accounts' addresses, imports and exports.
pub(super) const PORTABILITY: Section = Section {
    title: "Import and export",
    settings: &[
        value(
            "KITH_ACCOUNT_DOMAIN",
            "localhost",
            "the domain of account addresses in exported and imported CSV files: the account with handle `alice` is `alice@<domain>`; an import names accounts as `alice`, `@alice` or `alice@<domain>`, and an address of any other domain is reported as an unknown account",
        )
        .rule("a domain name: not empty, no `@`, `,` or spaces"),
        value(
            "KITH_IMPORT_MAX_ROWS",
            "20000",
            "most rows in one imported CSV file (a longer one is refused with `INVALID_INPUT`; its size is bounded by `KITH_MAX_BODY_BYTES` too)",
        )
        .at_least(1.0),
        value(
            "KITH_IMPORT_ROWS_PER_SEC",
            "50",
            "rows an account's import applies per second, on a token bucket of its own (apart from the follow bucket); the runner takes the open imports of all accounts in turn, a batch each",
        )
        .at_least(1.0),
        value(
            "KITH_IMPORT_FOLLOWS_PER_DAY",
            "400",
            "follows an account's imports may make in one day (Mastodon's and X's daily follow limit); rows past it wait, reported as `FOLLOW_BUDGET`, and the import resumes when the day is over (`ImportJob.resumesAt`). Unfollows, blocks, mutes and new options of a follow that stands spend none",
        ),
        value(
            "KITH_MOVE_FOLLOWERS_PER_SEC",
            "200",
            "followers an account's move brings to its new account per second (each a follow of the new account and an unfollow of the old, two events); the moves of all accounts are run in turn, a batch each",
        )
        .at_least(1.0),
        value(
            "KITH_MOVE_COOLDOWN_SECS",
            "2592000",
            "how long after an account's move it may move again (`RATE_LIMITED`, with `retryAfterMs`, before): Mastodon's 30 days, so that followers are not moved back and forth. A move back is the other account's move; 0: no wait",
        ),
        value(
            "KITH_IMPORT_RETENTION_SECS",
            "604800",
            "how long a finished import (done, failed or canceled) is kept for its report; then it and its rows are deleted. Only the rows a report needs outlive their import: those not applied",
        ),
    ],
};

/// Follow suggestions.
pub(super) const SUGGESTIONS: Section = Section {
    title: "Suggestions",
    settings: &[
        value(
            "KITH_SUGGESTIONS_SAMPLE",
            "100",
            "followees of the viewer whose follows a computation of suggestions reads: half the newest, half drawn from the rest (those that hide their lists are not read)",
        ),
        value(
            "KITH_SUGGESTIONS_PER_FOLLOWEE",
            "100",
            "newest follows read from each sampled followee's list; with the sample, a computation reads at most `SAMPLE × PER_FOLLOWEE` + 1,200 list entries in three Redis round trips (two of them at once)",
        ),
        value(
            "KITH_SUGGESTIONS_TTL_SECS",
            "900",
            "how long a viewer's computed suggestions are kept (in Redis); a follow, unfollow, block, mute or dismissal by the viewer drops them at once",
        ),
        value(
            "KITH_SUGGESTION_DISMISS_SECS",
            "7776000",
            "how long a dismissed suggestion stays out of the viewer's suggestions (90 days)",
        ),
    ],
};
