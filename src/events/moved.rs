//! The wire format of account-move events: on the follow topic beside the
//! follow events, keyed by the account. An account that moves names the
//! account it moved to; a move back (the account it moved to moves to it)
//! gives it an event with none, as it takes follows again. The followers
//! the move brings along come as follow events of their own.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::model::UserId;

/// The one type of move event.
pub(crate) const ACCOUNT_MOVED: &str = "AccountMoved";

/// One account's move, or the end of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MoveEvent {
    /// Format version, [`super::follow::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Unique id of this event.
    pub event_id: Uuid,
    /// Always [`ACCOUNT_MOVED`].
    #[serde(rename = "type")]
    pub event_type: String,
    /// The account.
    pub from: UserId,
    /// The account's settings version after this change (the counter of
    /// `AccountSettingsChanged`); strictly increasing per account.
    pub version: i64,
    /// Where the account moved; `None`: it takes follows again.
    pub moved_to: Option<UserId>,
    /// When this change was committed (ms).
    pub occurred_at_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_format_is_stable() {
        let event = MoveEvent {
            schema_version: 1,
            event_id: Uuid::nil(),
            event_type: ACCOUNT_MOVED.to_owned(),
            from: UserId::new(7).unwrap(),
            version: 3,
            moved_to: UserId::new(9),
            occurred_at_ms: 1_700_000_000_123,
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "schemaVersion": 1,
                "eventId": "00000000-0000-0000-0000-000000000000",
                "type": "AccountMoved",
                "from": 7,
                "version": 3,
                "movedTo": 9,
                "occurredAtMs": 1_700_000_000_123_i64,
            })
        );
        assert_eq!(serde_json::from_value::<MoveEvent>(json).unwrap(), event);
        let back = serde_json::json!({
            "schemaVersion": 1, "eventId": "00000000-0000-0000-0000-000000000000",
            "type": "AccountMoved", "from": 7, "version": 4, "movedTo": null,
            "occurredAtMs": 1_700_000_000_124_i64,
        });
        assert_eq!(
            serde_json::from_value::<MoveEvent>(back).unwrap().moved_to,
            None
        );
    }
}
