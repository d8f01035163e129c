//! The wire format of block events: published on the follow topic beside
//! the follow events, keyed by the blocker, so one blocker's blocks and
//! unblocks of one account never reorder. A block's follows ended in the
//! same statement come as ordinary `FollowCanceled` events.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::model::UserId;

/// What happened to a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BlockEventType {
    /// `from` blocked `to`.
    BlockCreated,
    /// `from` unblocked `to`.
    BlockRemoved,
}

impl BlockEventType {
    /// Whether `type` names a block event.
    pub(crate) fn is_block(event_type: &str) -> bool {
        matches!(event_type, "BlockCreated" | "BlockRemoved")
    }
}

/// One real transition of one block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockEvent {
    /// Format version, [`super::follow::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Unique id of this event.
    pub event_id: Uuid,
    /// The transition.
    #[serde(rename = "type")]
    pub event_type: BlockEventType,
    /// Who blocks (or unblocks).
    pub from: UserId,
    /// Who is blocked (or unblocked).
    pub to: UserId,
    /// The block's version after this transition; strictly increasing per pair.
    pub version: i64,
    /// When the latest block of this pair was made (ms).
    pub blocked_at_ms: i64,
    /// When this transition was committed (ms).
    pub occurred_at_ms: i64,
}

impl BlockEvent {
    /// Whether this event leaves the block in place.
    pub fn active(&self) -> bool {
        self.event_type == BlockEventType::BlockCreated
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_format_is_stable() {
        let event = BlockEvent {
            schema_version: 1,
            event_id: Uuid::nil(),
            event_type: BlockEventType::BlockCreated,
            from: UserId::new(1).unwrap(),
            to: UserId::new(2).unwrap(),
            version: 3,
            blocked_at_ms: 1_700_000_000_123,
            occurred_at_ms: 1_700_000_000_124,
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "schemaVersion": 1,
                "eventId": "00000000-0000-0000-0000-000000000000",
                "type": "BlockCreated",
                "from": 1,
                "to": 2,
                "version": 3,
                "blockedAtMs": 1_700_000_000_123_i64,
                "occurredAtMs": 1_700_000_000_124_i64,
            })
        );
        assert_eq!(serde_json::from_value::<BlockEvent>(json).unwrap(), event);
        assert!(BlockEventType::is_block("BlockRemoved"));
        assert!(!BlockEventType::is_block("FollowCreated"));
    }
}
