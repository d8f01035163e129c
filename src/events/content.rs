//! Content events: posts, likes and favourites published by other services on
//! the content topic, from which the projector maintains `posts`,
//! `likesReceived` and `favsReceived`.
//!
//! ```json
//! {"eventId": "6f1c…", "type": "PostLiked", "authorId": 42, "occurredAtMs": 1764460800000}
//! ```
//!
//! `authorId` is the user whose counter changes (the post's author, also for
//! likes and favourites given by someone else). Producers should key messages
//! by `authorId`, so one author's events keep their order. A duplicate
//! `eventId` counts once.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::model::UserId;
use crate::store::stats::ContentChange;

/// What happened to a piece of content.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[allow(clippy::enum_variant_names)] // the names are the wire format's
pub enum ContentEventType {
    /// The author published a post.
    PostPublished,
    /// The author deleted a post.
    PostDeleted,
    /// Someone liked one of the author's posts.
    PostLiked,
    /// Someone withdrew a like.
    PostUnliked,
    /// Someone favourited one of the author's posts.
    PostFavorited,
    /// Someone withdrew a favourite.
    PostUnfavorited,
}

/// One content event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentEvent {
    /// Unique id; the projector counts each id once.
    pub event_id: Uuid,
    /// What happened.
    #[serde(rename = "type")]
    pub event_type: ContentEventType,
    /// The user whose counter changes.
    pub author_id: UserId,
    /// When it happened (ms), for lag metrics.
    #[serde(default)]
    pub occurred_at_ms: Option<i64>,
}

impl ContentEvent {
    /// The change this event makes to its author's counters.
    pub fn change(&self) -> ContentChange {
        let mut change = ContentChange {
            event_id: self.event_id,
            author: self.author_id,
            posts: 0,
            likes_received: 0,
            favs_received: 0,
        };
        match self.event_type {
            ContentEventType::PostPublished => change.posts = 1,
            ContentEventType::PostDeleted => change.posts = -1,
            ContentEventType::PostLiked => change.likes_received = 1,
            ContentEventType::PostUnliked => change.likes_received = -1,
            ContentEventType::PostFavorited => change.favs_received = 1,
            ContentEventType::PostUnfavorited => change.favs_received = -1,
        }
        change
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_documented_format_and_rejects_unknown_types() {
        let event: ContentEvent = serde_json::from_str(
            r#"{"eventId":"00000000-0000-0000-0000-000000000001","type":"PostLiked","authorId":42,"occurredAtMs":1}"#,
        )
        .unwrap();
        assert_eq!(event.author_id.get(), 42);
        assert_eq!(event.change().likes_received, 1);
        assert!(
            serde_json::from_str::<ContentEvent>(
                r#"{"eventId":"00000000-0000-0000-0000-000000000001","type":"PostShared","authorId":42}"#
            )
            .is_err()
        );
    }
}
