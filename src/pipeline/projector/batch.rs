//! A batch as the projector sees it: each message with its partition and
//! offset, decoded and checked, and what is left to do with it — apply it,
//! only re-sync Redis (PostgreSQL already has it), or dead-letter it.

use rdkafka::message::{Message as _, OwnedMessage};

use crate::config::Config;
use crate::events::block::{BlockEvent, BlockEventType};
use crate::events::close_friend::{CloseFriendEvent, CloseFriendEventType};
use crate::events::content::ContentEvent;
use crate::events::follow::{FollowEvent, SCHEMA_VERSION};
use crate::events::follow_options::{FOLLOW_OPTIONS_CHANGED, FollowOptionsEvent};
use crate::events::moved::{ACCOUNT_MOVED, MoveEvent};
use crate::events::mute::{MuteEvent, MuteEventType};
use crate::events::request::{RequestEvent, RequestEventType};
use crate::events::settings::{SETTINGS_CHANGED, SettingsEvent};
use crate::store::partitions::TopicPartition;

/// One decoded event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A follow-graph transition from Kith's outbox.
    Follow(FollowEvent),
    /// A block or unblock from Kith's outbox.
    Block(BlockEvent),
    /// A mute or unmute from Kith's outbox.
    Mute(MuteEvent),
    /// A follow request's transition from Kith's outbox.
    Request(RequestEvent),
    /// A close-friend listing's transition from Kith's outbox.
    CloseFriend(CloseFriendEvent),
    /// A follow's options after a change, from Kith's outbox.
    FollowOptions(FollowOptionsEvent),
    /// An account's settings after a change, from Kith's outbox.
    Settings(SettingsEvent),
    /// An account's move, or its end, from Kith's outbox.
    Moved(MoveEvent),
    /// A content counter change from another service.
    Content(ContentEvent),
}

/// What is left to do with one message.
#[derive(Clone, Debug)]
pub enum Action {
    /// Its PostgreSQL effects are committed (by this or an earlier owner);
    /// only its Redis effects may be missing. `None` if it never decoded.
    Resync(Option<Event>),
    /// Apply it.
    Apply(Event),
    /// Record it as a dead letter, with the reason.
    DeadLetter(String),
}

/// One message of a batch.
#[derive(Clone, Debug)]
pub struct Item {
    /// Where it was read.
    pub partition: TopicPartition,
    /// Its offset there.
    pub offset: i64,
    /// The message as received, for dead letters.
    pub message: OwnedMessage,
    /// What to do with it.
    pub action: Action,
}

impl Item {
    /// The event it carries, if it decoded.
    pub fn event(&self) -> Option<&Event> {
        match &self.action {
            Action::Apply(event) | Action::Resync(Some(event)) => Some(event),
            Action::Resync(None) | Action::DeadLetter(_) => None,
        }
    }
}

/// Earliest follow time accepted (2000-01-01): older is a corrupt event.
const EARLIEST_FOLLOW_MS: i64 = 946_684_800_000;
/// How far a follow time may be past its transition's time: a database
/// clock that stepped back (a resync, a failover to a server behind) must
/// not make a later transition's event unappliable.
const CLOCK_STEP_SLACK_MS: i64 = 24 * 3600 * 1000;

/// Decodes and checks one message. `Err` says why it can never be applied.
/// A follow time is checked against the event's own transition time (both
/// from PostgreSQL's clock: a follow happens at or before its transition,
/// give or take a step of that clock), never against this host's clock.
pub(crate) fn decode(config: &Config, message: &OwnedMessage) -> Result<Event, String> {
    let payload = message.payload().ok_or("empty payload")?;
    if message.topic() == config.pipeline.follow_topic {
        /// The one field that tells the follow topic's events apart.
        #[derive(serde::Deserialize)]
        struct Kind<'a> {
            #[serde(rename = "type", borrow)]
            event_type: std::borrow::Cow<'a, str>,
        }
        let kind: Kind<'_> = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
        if BlockEventType::is_block(&kind.event_type) {
            let event: BlockEvent = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
            check_edge(event.schema_version, event.from, event.to, event.version)?;
            return Ok(Event::Block(event));
        }
        if MuteEventType::is_mute(&kind.event_type) {
            let event: MuteEvent = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
            check_edge(event.schema_version, event.from, event.to, event.version)?;
            return Ok(Event::Mute(event));
        }
        if kind.event_type == FOLLOW_OPTIONS_CHANGED {
            let event: FollowOptionsEvent =
                serde_json::from_slice(payload).map_err(|e| e.to_string())?;
            check_edge(event.schema_version, event.from, event.to, event.version)?;
            return Ok(Event::FollowOptions(event));
        }
        if CloseFriendEventType::is_close_friend(&kind.event_type) {
            let event: CloseFriendEvent =
                serde_json::from_slice(payload).map_err(|e| e.to_string())?;
            check_edge(event.schema_version, event.from, event.to, event.version)?;
            return Ok(Event::CloseFriend(event));
        }
        if RequestEventType::is_request(&kind.event_type) {
            let event: RequestEvent = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
            check_edge(event.schema_version, event.from, event.to, event.version)?;
            return Ok(Event::Request(event));
        }
        if kind.event_type == SETTINGS_CHANGED {
            let event: SettingsEvent =
                serde_json::from_slice(payload).map_err(|e| e.to_string())?;
            if event.schema_version > SCHEMA_VERSION {
                return Err(format!(
                    "unsupported schemaVersion {}",
                    event.schema_version
                ));
            }
            if event.version < 1 {
                return Err(format!("version {} is not positive", event.version));
            }
            return Ok(Event::Settings(event));
        }
        if kind.event_type == ACCOUNT_MOVED {
            let event: MoveEvent = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
            if event.schema_version > SCHEMA_VERSION {
                return Err(format!(
                    "unsupported schemaVersion {}",
                    event.schema_version
                ));
            }
            if event.version < 1 || event.moved_to == Some(event.from) {
                return Err("a move to itself, or of no version".into());
            }
            return Ok(Event::Moved(event));
        }
        let event: FollowEvent = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
        check_edge(event.schema_version, event.from, event.to, event.version)?;
        let latest = event.occurred_at_ms.saturating_add(CLOCK_STEP_SLACK_MS);
        if !(EARLIEST_FOLLOW_MS..=latest).contains(&event.followed_at_ms) {
            return Err(format!(
                "followedAtMs {} is out of range",
                event.followed_at_ms
            ));
        }
        Ok(Event::Follow(event))
    } else if message.topic() == config.pipeline.content_topic {
        serde_json::from_slice(payload)
            .map(Event::Content)
            .map_err(|e| e.to_string())
    } else {
        Err(format!("unexpected topic {}", message.topic()))
    }
}

/// The checks every event of a directed pair passes.
fn check_edge(
    schema_version: u32,
    from: crate::model::UserId,
    to: crate::model::UserId,
    version: i64,
) -> Result<(), String> {
    if schema_version > SCHEMA_VERSION {
        return Err(format!("unsupported schemaVersion {schema_version}"));
    }
    if from == to {
        return Err("a user cannot follow or block themselves".into());
    }
    if version < 1 {
        return Err(format!("version {version} is not positive"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::Timestamp;

    fn message(topic: &str, payload: &str) -> OwnedMessage {
        OwnedMessage::new(
            Some(payload.as_bytes().to_vec()),
            None,
            topic.to_owned(),
            Timestamp::NotAvailable,
            0,
            0,
            None,
        )
    }

    #[test]
    fn follow_events_out_of_range_never_decode() {
        let config = Config::from_lookup(|_| None).unwrap();
        let now = 1_764_460_800_000;
        let event = |from: i64, to: i64, version: i64, at: i64| {
            format!(
                r#"{{"schemaVersion":1,"eventId":"00000000-0000-0000-0000-000000000001","type":"FollowCreated","from":{from},"to":{to},"version":{version},"followedAtMs":{at},"occurredAtMs":{now}}}"#
            )
        };
        let topic = config.pipeline.follow_topic.clone();
        assert!(decode(&config, &message(&topic, &event(1, 2, 1, now))).is_ok());
        for (bad, why) in [
            (event(1, 1, 1, now), "themselves"),
            (event(1, 2, 0, now), "version"),
            (event(1, 2, 1, 0), "out of range"),
            (
                event(1, 2, 1, now + 2 * CLOCK_STEP_SLACK_MS),
                "out of range",
            ),
            (event(0, 2, 1, now), "not positive"),
            (event(1, -5, 1, now), "not positive"),
        ] {
            let err = decode(&config, &message(&topic, &bad)).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
        let block = |from: i64, to: i64| {
            format!(
                r#"{{"schemaVersion":1,"eventId":"00000000-0000-0000-0000-000000000002","type":"BlockCreated","from":{from},"to":{to},"version":1,"blockedAtMs":{now},"occurredAtMs":{now}}}"#
            )
        };
        assert!(matches!(
            decode(&config, &message(&topic, &block(1, 2))),
            Ok(Event::Block(_))
        ));
        assert!(decode(&config, &message(&topic, &block(2, 2))).is_err());
        let settings = |version: i64| {
            format!(
                r#"{{"schemaVersion":1,"eventId":"00000000-0000-0000-0000-000000000003","type":"AccountSettingsChanged","from":4,"version":{version},"locked":true,"hidesCollections":false,"occurredAtMs":{now}}}"#
            )
        };
        assert!(matches!(
            decode(&config, &message(&topic, &settings(1))),
            Ok(Event::Settings(_))
        ));
        assert!(decode(&config, &message(&topic, &settings(0))).is_err());
        let moved = |to: &str| {
            format!(
                r#"{{"schemaVersion":1,"eventId":"00000000-0000-0000-0000-000000000004","type":"AccountMoved","from":4,"version":2,"movedTo":{to},"occurredAtMs":{now}}}"#
            )
        };
        assert!(matches!(
            decode(&config, &message(&topic, &moved("5"))),
            Ok(Event::Moved(_))
        ));
        assert!(matches!(
            decode(&config, &message(&topic, &moved("null"))),
            Ok(Event::Moved(_))
        ));
        assert!(decode(&config, &message(&topic, &moved("4"))).is_err());
        let unknown = r#"{"type":"SomethingNew","from":1,"to":2}"#;
        assert!(decode(&config, &message(&topic, unknown)).is_err());
        let content =
            r#"{"eventId":"00000000-0000-0000-0000-000000000001","type":"PostLiked","authorId":0}"#;
        assert!(decode(&config, &message(&config.pipeline.content_topic, content)).is_err());
    }
}
