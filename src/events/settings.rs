//! The wire format of account-settings events: on the follow topic beside
//! the follow events, keyed by the account, so one account's changes never
//! reorder. Whether an account is locked or hides its lists decides who may
//! follow it and who sees its lists; services downstream learn it here.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::model::UserId;

/// The one type of settings event: the settings after a real change.
pub(crate) const SETTINGS_CHANGED: &str = "AccountSettingsChanged";

/// One real change of one account's settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SettingsEvent {
    /// Format version, [`super::follow::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Unique id of this event.
    pub event_id: Uuid,
    /// Always [`SETTINGS_CHANGED`].
    #[serde(rename = "type")]
    pub event_type: String,
    /// The account.
    pub from: UserId,
    /// The settings' version after this change; strictly increasing per account.
    pub version: i64,
    /// Whether follows of the account wait for its consent.
    pub locked: bool,
    /// Whether only the account sees its followers and following lists.
    pub hides_collections: bool,
    /// When this change was committed (ms).
    pub occurred_at_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_format_is_stable() {
        let event = SettingsEvent {
            schema_version: 1,
            event_id: Uuid::nil(),
            event_type: SETTINGS_CHANGED.to_owned(),
            from: UserId::new(7).unwrap(),
            version: 2,
            locked: true,
            hides_collections: false,
            occurred_at_ms: 1_700_000_000_123,
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "schemaVersion": 1,
                "eventId": "00000000-0000-0000-0000-000000000000",
                "type": "AccountSettingsChanged",
                "from": 7,
                "version": 2,
                "locked": true,
                "hidesCollections": false,
                "occurredAtMs": 1_700_000_000_123_i64,
            })
        );
        assert_eq!(
            serde_json::from_value::<SettingsEvent>(json).unwrap(),
            event
        );
    }
}
