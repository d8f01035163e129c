//! The wire format of follow-request events: on the follow topic beside
//! the follow events, keyed by the requester, so one requester's events
//! for one account never reorder. An accepted request's follow comes as an
//! ordinary `FollowCreated` event of the same transaction.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::model::UserId;

/// What happened to a follow request. (The names are the wire format's.)
#[allow(clippy::enum_variant_names)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RequestEventType {
    /// `from` asked to follow the locked account `to`.
    FollowRequested,
    /// The request ended unanswered: `from` unfollowed, or a block dropped it.
    FollowRequestCanceled,
    /// `to` accepted it (or unlocked): `from` follows `to` now.
    FollowRequestAccepted,
    /// `to` rejected it.
    FollowRequestRejected,
}

impl RequestEventType {
    /// Whether `type` names a follow-request event.
    pub(crate) fn is_request(event_type: &str) -> bool {
        matches!(
            event_type,
            "FollowRequested"
                | "FollowRequestCanceled"
                | "FollowRequestAccepted"
                | "FollowRequestRejected"
        )
    }
}

/// One real transition of one follow request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestEvent {
    /// Format version, [`super::follow::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Unique id of this event.
    pub event_id: Uuid,
    /// The transition.
    #[serde(rename = "type")]
    pub event_type: RequestEventType,
    /// The requester.
    pub from: UserId,
    /// The locked account asked.
    pub to: UserId,
    /// The request's version after this transition; strictly increasing per pair.
    pub version: i64,
    /// When the request was made (ms).
    pub requested_at_ms: i64,
    /// When this transition was committed (ms).
    pub occurred_at_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_format_is_stable() {
        let event = RequestEvent {
            schema_version: 1,
            event_id: Uuid::nil(),
            event_type: RequestEventType::FollowRequestAccepted,
            from: UserId::new(1).unwrap(),
            to: UserId::new(2).unwrap(),
            version: 2,
            requested_at_ms: 1_700_000_000_123,
            occurred_at_ms: 1_700_000_000_456,
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "schemaVersion": 1,
                "eventId": "00000000-0000-0000-0000-000000000000",
                "type": "FollowRequestAccepted",
                "from": 1,
                "to": 2,
                "version": 2,
                "requestedAtMs": 1_700_000_000_123_i64,
                "occurredAtMs": 1_700_000_000_456_i64,
            })
        );
        assert_eq!(serde_json::from_value::<RequestEvent>(json).unwrap(), event);
        assert!(RequestEventType::is_request("FollowRequested"));
        assert!(!RequestEventType::is_request("FollowCreated"));
    }
}
