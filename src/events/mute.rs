//! The wire format of mute events: on the follow topic beside the follow
//! and block events, keyed by the muter. Mutes change no follow and filter
//! no list in Kith; feed services downstream act on these events.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::model::UserId;

/// What happened to a mute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MuteEventType {
    /// `from` muted `to` (again: the end may have changed).
    MuteCreated,
    /// `from` unmuted `to`.
    MuteRemoved,
}

impl MuteEventType {
    /// Whether `type` names a mute event.
    pub(crate) fn is_mute(event_type: &str) -> bool {
        matches!(event_type, "MuteCreated" | "MuteRemoved")
    }
}

/// One real transition of one mute.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MuteEvent {
    /// Format version, [`super::follow::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Unique id of this event.
    pub event_id: Uuid,
    /// The transition.
    #[serde(rename = "type")]
    pub event_type: MuteEventType,
    /// Who mutes (or unmutes).
    pub from: UserId,
    /// Who is muted (or unmuted).
    pub to: UserId,
    /// The mute's version after this transition; strictly increasing per pair.
    pub version: i64,
    /// When the mute began (ms).
    pub muted_at_ms: i64,
    /// When a created mute ends by itself (ms); null: when unmuted.
    pub expires_at_ms: Option<i64>,
    /// When this transition was committed (ms).
    pub occurred_at_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_format_is_stable() {
        let event = MuteEvent {
            schema_version: 1,
            event_id: Uuid::nil(),
            event_type: MuteEventType::MuteCreated,
            from: UserId::new(1).unwrap(),
            to: UserId::new(2).unwrap(),
            version: 3,
            muted_at_ms: 1_700_000_000_123,
            expires_at_ms: Some(1_700_000_600_123),
            occurred_at_ms: 1_700_000_000_123,
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "schemaVersion": 1,
                "eventId": "00000000-0000-0000-0000-000000000000",
                "type": "MuteCreated",
                "from": 1,
                "to": 2,
                "version": 3,
                "mutedAtMs": 1_700_000_000_123_i64,
                "expiresAtMs": 1_700_000_600_123_i64,
                "occurredAtMs": 1_700_000_000_123_i64,
            })
        );
        assert_eq!(serde_json::from_value::<MuteEvent>(json).unwrap(), event);
        assert!(MuteEventType::is_mute("MuteRemoved"));
        assert!(!MuteEventType::is_mute("BlockCreated"));
    }
}
