//! The wire format of follow-option events: on the follow topic beside the
//! follow events, keyed by the follower, so they come after the follow
//! they belong to. A follow starts with the defaults (notify off, reposts
//! shown, every language); each change of its options is an event of its
//! own.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::model::UserId;

/// The event's `type`.
pub(crate) const FOLLOW_OPTIONS_CHANGED: &str = "FollowOptionsChanged";

/// The options of one follow after a change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FollowOptionsEvent {
    /// Format version, [`super::follow::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Unique id of this event.
    pub event_id: Uuid,
    /// Always `FollowOptionsChanged`.
    #[serde(rename = "type")]
    pub event_type: String,
    /// The follower.
    pub from: UserId,
    /// The account followed.
    pub to: UserId,
    /// The options' version after this change; strictly increasing per pair.
    pub version: i64,
    /// The follow time (ms) of the follow these options belong to: a later
    /// follow of the pair starts from the defaults again.
    pub followed_at_ms: i64,
    /// Be told when the account posts.
    pub notify: bool,
    /// See the account's reposts.
    pub show_reposts: bool,
    /// Only posts in these languages; null: all.
    pub languages: Option<Vec<String>>,
    /// When this change was committed (ms).
    pub occurred_at_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_format_is_stable() {
        let event = FollowOptionsEvent {
            schema_version: 1,
            event_id: Uuid::nil(),
            event_type: FOLLOW_OPTIONS_CHANGED.to_owned(),
            from: UserId::new(1).unwrap(),
            to: UserId::new(2).unwrap(),
            version: 3,
            followed_at_ms: 1_700_000_000_123,
            notify: true,
            show_reposts: false,
            languages: Some(vec!["en".to_owned(), "de".to_owned()]),
            occurred_at_ms: 1_700_000_000_124,
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "schemaVersion": 1,
                "eventId": "00000000-0000-0000-0000-000000000000",
                "type": "FollowOptionsChanged",
                "from": 1,
                "to": 2,
                "version": 3,
                "followedAtMs": 1_700_000_000_123_i64,
                "notify": true,
                "showReposts": false,
                "languages": ["en", "de"],
                "occurredAtMs": 1_700_000_000_124_i64,
            })
        );
        assert_eq!(
            serde_json::from_value::<FollowOptionsEvent>(json).unwrap(),
            event
        );
    }
}
