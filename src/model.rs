//! Domain types shared by every layer.

use std::fmt;
use std::str::FromStr;

/// The hasher of in-process maps and caches keyed by ids (users, lists,
/// intersections): foldhash, seeded per process, several times faster than
/// the standard library's SipHash on such small keys, which a profile
/// request hashes some hundred times. Maps keyed by client-chosen text
/// (query texts, handles) keep SipHash.
pub(crate) type IdHasher = foldhash::fast::RandomState;

/// A user's numeric id, as stored in PostgreSQL. Always positive.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(into = "i64", try_from = "i64")]
pub struct UserId(i64);

impl From<UserId> for i64 {
    fn from(id: UserId) -> Self {
        id.0
    }
}

impl TryFrom<i64> for UserId {
    type Error = String;

    /// Positive ids only: events from other services are checked on decode.
    fn try_from(raw: i64) -> Result<Self, String> {
        Self::new(raw).ok_or_else(|| format!("user id {raw} is not positive"))
    }
}

impl UserId {
    /// Wraps a raw id; `None` unless it is positive.
    pub fn new(raw: i64) -> Option<Self> {
        (raw > 0).then_some(Self(raw))
    }

    /// The raw id, for queries.
    pub fn get(self) -> i64 {
        self.0
    }
}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for UserId {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        // Only canonical decimal: no sign, no leading zeros, no whitespace.
        if s.is_empty() || s.starts_with('0') || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(());
        }
        s.parse::<i64>().ok().and_then(Self::new).ok_or(())
    }
}

/// Lifecycle of an account.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UserStatus {
    /// A normal account.
    Active,
    /// Temporarily barred: cannot act, cannot be newly followed.
    Suspended,
    /// Gone: invisible, cannot be newly followed.
    Deleted,
}

impl UserStatus {
    /// The value stored in `users.status`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Suspended => "suspended",
            Self::Deleted => "deleted",
        }
    }

    /// Parses `users.status`; unknown values read as deleted, the safest state.
    pub fn from_db(s: &str) -> Self {
        match s {
            "active" => Self::Active,
            "suspended" => Self::Suspended,
            _ => Self::Deleted,
        }
    }
}

/// A user's public profile. Deliberately holds no private fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// The user's id.
    pub id: UserId,
    /// Unique public handle.
    pub handle: String,
    /// Name shown in the UI.
    pub display_name: String,
    /// Lifecycle state.
    pub status: UserStatus,
    /// Follows of this account wait for its consent (follow requests).
    pub locked: bool,
    /// Only this account sees its followers and following lists.
    pub hides_collections: bool,
    /// The account this one moved to (it takes no follows then).
    pub moved_to: Option<UserId>,
}

/// The lines drawn between one user and others: whom they block, who
/// blocks them, whom they mute (and until when), and the follow requests
/// waiting at them, both ways.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Boundaries {
    /// Accounts this user blocks.
    pub blocking: std::collections::HashSet<UserId>,
    /// Accounts that block this user.
    pub blocked_by: std::collections::HashSet<UserId>,
    /// Accounts this user mutes, each with the moment its mute ends, if it
    /// does (this host's monotonic clock, set from the database's own count
    /// of the time left, so no two clocks are compared).
    pub muting: std::collections::HashMap<UserId, Option<std::time::Instant>>,
    /// Locked accounts this user asked to follow (pending requests).
    pub requested: std::collections::HashSet<UserId>,
    /// Accounts that asked to follow this user (pending requests).
    pub requested_by: std::collections::HashSet<UserId>,
    /// Accounts this user lists among its close friends.
    pub close_friends: std::collections::HashSet<UserId>,
    /// Accounts that list this user among their close friends.
    pub close_friend_of: std::collections::HashSet<UserId>,
    /// The options of this user's follows that are not the defaults, each
    /// with the follow time (ms) of the follow they were set on: they
    /// count only while that follow stands.
    pub follow_options: std::collections::HashMap<UserId, (i64, FollowOptions)>,
}

/// What a follower asks of one follow (Mastodon's `notify`, `reblogs` and
/// `languages`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FollowOptions {
    /// Be told when the account posts.
    pub notify: bool,
    /// See the account's reposts.
    pub show_reposts: bool,
    /// Only posts in these languages (ISO 639 codes); `None`: all.
    pub languages: Option<Vec<String>>,
}

impl Default for FollowOptions {
    fn default() -> Self {
        Self {
            notify: false,
            show_reposts: true,
            languages: None,
        }
    }
}

impl Boundaries {
    /// Whether a block stands between this user and `other`, either way.
    pub fn separates(&self, other: UserId) -> bool {
        self.blocking.contains(&other) || self.blocked_by.contains(&other)
    }

    /// Whether this user mutes `other` now.
    pub fn mutes(&self, other: UserId) -> bool {
        match self.muting.get(&other) {
            Some(None) => true,
            Some(Some(ends)) => *ends > std::time::Instant::now(),
            None => false,
        }
    }

    /// This user's options for its follow of `other` made at
    /// `followed_at_ms`: the defaults unless set on that very follow.
    pub fn options_for(&self, other: UserId, followed_at_ms: i64) -> FollowOptions {
        match self.follow_options.get(&other) {
            Some((at, options)) if *at == followed_at_ms => options.clone(),
            _ => FollowOptions::default(),
        }
    }

    /// Whether this user is party to no block.
    pub fn blocks_none(&self) -> bool {
        self.blocking.is_empty() && self.blocked_by.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_id_parses_only_canonical_positive_decimals() {
        assert_eq!("42".parse::<UserId>().unwrap().get(), 42);
        for bad in [
            "",
            "0",
            "042",
            "-1",
            "+1",
            " 1",
            "1e3",
            "9223372036854775808",
        ] {
            assert!(bad.parse::<UserId>().is_err(), "{bad:?} accepted");
        }
        assert_eq!(serde_json::from_str::<UserId>("7").unwrap().get(), 7);
        assert_eq!(
            serde_json::to_string(&UserId::new(7).unwrap()).unwrap(),
            "7"
        );
        for bad in ["0", "-5"] {
            assert!(
                serde_json::from_str::<UserId>(bad).is_err(),
                "{bad} accepted"
            );
        }
    }
}

/// Every counter a user has, in the order of the cached record: calls
/// `$then!` with each counter's doc comment and name. The counter records,
/// `user_stats` rows, the edge writes' answers and the GraphQL `Counters`
/// type are each built from this list, so a counter is added here once —
/// plus a migration giving `user_stats` and `kith_edge_result` its column
/// and the functions that copy it (`docs/architecture.md`; a test checks
/// the list against the database).
macro_rules! with_counters {
    ($then:ident) => {
        $then! {
            /// Users this user follows.
            followings,
            /// Users following this user.
            followers,
            /// Published posts.
            posts,
            /// Likes received on this user's posts.
            likes_received,
            /// Favourites received on this user's posts.
            favs_received,
        }
    };
}
pub(crate) use with_counters;

macro_rules! counter_names {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// The counters' names, in record order (the `user_stats` columns).
        pub const COUNTER_NAMES: &[&str] = &[$(stringify!($name)),*];
    };
}
with_counters!(counter_names);
