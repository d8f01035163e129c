//! `type Relationship`: how one user relates to another.

use async_graphql::SimpleObject;
use chrono::{DateTime, Utc};

use crate::store::following::PairState;

/// How a user (the subject) relates to another user (the other).
#[derive(Clone, Copy, Debug, SimpleObject)]
pub struct Relationship {
    /// The subject follows the other user.
    pub following: bool,
    /// The other user follows the subject.
    pub followed_by: bool,
    /// Both follow each other.
    pub mutual: bool,
    /// When the subject followed the other user, if it does.
    pub followed_at: Option<DateTime<Utc>>,
    /// When the other user followed the subject, if it does.
    pub followed_by_at: Option<DateTime<Utc>>,
}

impl From<PairState> for Relationship {
    fn from(state: PairState) -> Self {
        // Follow times are shown to the millisecond wherever they are read
        // from (the list caches keep milliseconds, PostgreSQL microseconds).
        let ms = |t: Option<DateTime<Utc>>| {
            t.and_then(|t| DateTime::from_timestamp_millis(t.timestamp_millis()))
        };
        let state = PairState {
            a_follows_b: ms(state.a_follows_b),
            b_follows_a: ms(state.b_follows_a),
        };
        Self {
            following: state.a_follows_b.is_some(),
            followed_by: state.b_follows_a.is_some(),
            mutual: state.a_follows_b.is_some() && state.b_follows_a.is_some(),
            followed_at: state.a_follows_b,
            followed_by_at: state.b_follows_a,
        }
    }
}
