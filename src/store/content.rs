//! `content_event_ledger`: content events already counted, so a redelivered
//! event counts once.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Uuid as SqlUuid};
use diesel_async::RunQueryDsl;
use uuid::Uuid;

use super::PgConn;
use crate::model::UserId;

/// Records `event_id` as counted; false when it already was.
pub async fn claim(conn: &mut PgConn, event_id: Uuid, author: UserId) -> QueryResult<bool> {
    diesel::sql_query(
        "INSERT INTO content_event_ledger (event_id, author_id) VALUES ($1, $2)
         ON CONFLICT (event_id) DO NOTHING",
    )
    .bind::<SqlUuid, _>(event_id)
    .bind::<BigInt, _>(author.get())
    .execute(conn)
    .await
    .map(|inserted| inserted == 1)
}
