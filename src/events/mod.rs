//! The wire formats of Kith's events: what the outbox stores and the
//! follow topic carries ([`follow`], [`block`], [`mute`], [`request`],
//! [`settings`], [`close_friend`], [`follow_options`], [`moved`]), and what other services publish on the
//! content topic ([`content`]). `docs/events.md` describes both for consumers.

pub(crate) mod block;
pub(crate) mod close_friend;
pub(crate) mod content;
pub(crate) mod follow;
pub(crate) mod follow_options;
pub(crate) mod moved;
pub(crate) mod mute;
pub(crate) mod request;
pub(crate) mod settings;
