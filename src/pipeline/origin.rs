//! Where events come from. The relay stamps every event it publishes with
//! its database's origin (the [`HEADER`] header, from `event_origin`); a
//! projector applies only events of its own database's origin, so another
//! database on the same topics (staging sharing a Kafka cluster, a restored
//! backup, a new region) can never change this one's views.
//!
//! Relays and projectors start only on the database the origin was made
//! on ([`check`]): a logical copy or restore carries the original's origin,
//! and would take its events for its own.

use rdkafka::message::Headers as _;
use uuid::Uuid;

use crate::error::PipelineError;
use crate::store::PgConn;
use crate::store::origin::{self, Origin};

/// The Kafka header that names the database that wrote an event.
pub const HEADER: &str = "kith-origin";

/// Who wrote a follow-topic message, as a projector sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Writer {
    /// This database, as it is now.
    Own,
    /// This database under an origin it has retired: a timeline a restore
    /// left behind.
    Retired(Uuid),
    /// Another database.
    Other(Uuid),
    /// Nobody says: the message carries no origin.
    Unstamped,
}

impl Writer {
    /// Who wrote `message`, for a projector of `origin`.
    pub(crate) fn of(message: &impl rdkafka::Message, origin: &Origin) -> Self {
        Self::from_stamp(stamp(message), origin)
    }

    /// Who wrote a message stamped `stamp`, for a projector of `origin`.
    pub(crate) fn from_stamp(stamp: Option<Uuid>, origin: &Origin) -> Self {
        match stamp {
            Some(o) if o == origin.origin => Self::Own,
            Some(o) if origin.retired.contains(&o) => Self::Retired(o),
            Some(o) => Self::Other(o),
            None => Self::Unstamped,
        }
    }

    /// The reason recorded with a refused message (`None`: it is our own).
    pub(crate) fn refusal(self) -> Option<String> {
        match self {
            Self::Own => None,
            Self::Retired(o) => Some(format!(
                "written under this database's retired origin {o} (a timeline a restore left behind)"
            )),
            Self::Other(o) => Some(format!("written by another database (origin {o})")),
            Self::Unstamped => Some(format!(
                "carries no {HEADER} header (not written by a Kith relay)"
            )),
        }
    }
}

/// The origin a message carries, if any.
pub(crate) fn stamp(message: &impl rdkafka::Message) -> Option<Uuid> {
    let headers = message.headers()?;
    headers
        .iter()
        .find(|h| h.key == HEADER)
        .and_then(|h| h.value)
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| Uuid::parse_str(v).ok())
}

/// This database's origin, or why a relay or projector must not start on
/// it: the database is not where its origin was made.
pub(crate) async fn check(conn: &mut PgConn) -> Result<Origin, PipelineError> {
    let origin = origin::current(conn).await?;
    if origin.in_place() {
        Ok(origin)
    } else {
        Err(PipelineError::Relocated {
            made: origin.identity,
            now: origin.live_identity,
        })
    }
}
