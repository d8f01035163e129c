//! The wire format of close-friend events: on the follow topic beside the
//! follow, block and mute events, keyed by the owner of the list. A
//! listing changes no follow; content services downstream learn from these
//! events whom an author shares with.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::model::UserId;

/// What happened to a listing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CloseFriendEventType {
    /// `from` added `to` to its close friends.
    CloseFriendAdded,
    /// `from` removed `to` from its close friends (or a block between them did).
    CloseFriendRemoved,
}

impl CloseFriendEventType {
    /// Whether `type` names a close-friend event.
    pub(crate) fn is_close_friend(event_type: &str) -> bool {
        matches!(event_type, "CloseFriendAdded" | "CloseFriendRemoved")
    }
}

/// One real transition of one listing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CloseFriendEvent {
    /// Format version, [`super::follow::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Unique id of this event.
    pub event_id: Uuid,
    /// The transition.
    #[serde(rename = "type")]
    pub event_type: CloseFriendEventType,
    /// The owner of the list.
    pub from: UserId,
    /// The account added or removed.
    pub to: UserId,
    /// The listing's version after this transition; strictly increasing per pair.
    pub version: i64,
    /// When the latest addition of this pair was made (ms).
    pub added_at_ms: i64,
    /// When this transition was committed (ms).
    pub occurred_at_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_format_is_stable() {
        let event = CloseFriendEvent {
            schema_version: 1,
            event_id: Uuid::nil(),
            event_type: CloseFriendEventType::CloseFriendAdded,
            from: UserId::new(1).unwrap(),
            to: UserId::new(2).unwrap(),
            version: 3,
            added_at_ms: 1_700_000_000_123,
            occurred_at_ms: 1_700_000_000_124,
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "schemaVersion": 1,
                "eventId": "00000000-0000-0000-0000-000000000000",
                "type": "CloseFriendAdded",
                "from": 1,
                "to": 2,
                "version": 3,
                "addedAtMs": 1_700_000_000_123_i64,
                "occurredAtMs": 1_700_000_000_124_i64,
            })
        );
        assert_eq!(
            serde_json::from_value::<CloseFriendEvent>(json).unwrap(),
            event
        );
        assert!(CloseFriendEventType::is_close_friend("CloseFriendRemoved"));
        assert!(!CloseFriendEventType::is_close_friend("MuteRemoved"));
    }
}
