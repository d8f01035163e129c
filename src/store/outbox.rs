//! `outbox`: events written in the same transaction as the change they describe.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use super::PgConn;
use super::schema::outbox;
use crate::pipeline::events::FollowEvent;

/// Appends `event` to the outbox. Must run inside the transaction that made the
/// change; its error must abort that transaction (never swallowed).
pub async fn append(conn: &mut PgConn, event: &FollowEvent) -> QueryResult<()> {
    let payload = serde_json::to_value(event).expect("events serialize");
    diesel::insert_into(outbox::table)
        .values((
            outbox::event_id.eq(event.event_id),
            outbox::event_type.eq(event.event_type.as_str()),
            outbox::partition_key.eq(event.partition_key()),
            outbox::payload.eq(payload),
        ))
        .execute(conn)
        .await
        .map(drop)
}
