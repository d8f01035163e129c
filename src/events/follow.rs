//! The wire format of follow-graph events, as stored in the outbox and
//! published to Kafka. JSON, camelCase, times in Unix milliseconds (the same
//! unit as the list-cache scores, so no consumer ever converts).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::model::UserId;

/// Version of this event format; bumped on any incompatible change.
pub(crate) const SCHEMA_VERSION: u32 = 1;

/// What happened to an edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FollowEventType {
    /// `from` started following `to`.
    FollowCreated,
    /// `from` stopped following `to`.
    FollowCanceled,
}

impl FollowEventType {
    /// The name stored in `outbox.event_type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FollowCreated => "FollowCreated",
            Self::FollowCanceled => "FollowCanceled",
        }
    }
}

/// One real transition of one edge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FollowEvent {
    /// Format version, [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Unique id of this event; consumers may use it to spot duplicates.
    pub event_id: Uuid,
    /// The transition.
    #[serde(rename = "type")]
    pub event_type: FollowEventType,
    /// The follower.
    pub from: UserId,
    /// The followed user.
    pub to: UserId,
    /// The edge's version after this transition; strictly increasing per edge.
    pub version: i64,
    /// When the latest follow of this edge happened (ms): the list-cache score.
    pub followed_at_ms: i64,
    /// When this transition was committed (ms).
    pub occurred_at_ms: i64,
}

impl FollowEvent {
    /// A new event with a fresh id.
    pub fn new(
        event_id: Uuid,
        event_type: FollowEventType,
        from: UserId,
        to: UserId,
        version: i64,
        followed_at: DateTime<Utc>,
        occurred_at: DateTime<Utc>,
    ) -> Self {
        Self {
            schema_version: SCHEMA_VERSION,
            event_id,
            event_type,
            from,
            to,
            version,
            followed_at_ms: followed_at.timestamp_millis(),
            occurred_at_ms: occurred_at.timestamp_millis(),
        }
    }

    /// The Kafka message key: all events of one follower's outgoing edges
    /// share a partition, so follow and unfollow of one pair never reorder.
    pub fn partition_key(&self) -> String {
        self.from.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_format_is_stable() {
        let event = FollowEvent {
            schema_version: 1,
            event_id: Uuid::nil(),
            event_type: FollowEventType::FollowCreated,
            from: UserId::new(1).unwrap(),
            to: UserId::new(2).unwrap(),
            version: 3,
            followed_at_ms: 1_700_000_000_123,
            occurred_at_ms: 1_700_000_000_123,
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "schemaVersion": 1,
                "eventId": "00000000-0000-0000-0000-000000000000",
                "type": "FollowCreated",
                "from": 1,
                "to": 2,
                "version": 3,
                "followedAtMs": 1_700_000_000_123_i64,
                "occurredAtMs": 1_700_000_000_123_i64,
            })
        );
        assert_eq!(serde_json::from_value::<FollowEvent>(json).unwrap(), event);
        assert_eq!(event.partition_key(), "1");
    }
}
