//! The event pipeline: the wire format of follow events. The outbox relay and
//! the projector that carry them to the derived views build on this.

pub mod events;
