//! `dead_letter`: messages the projector could not decode or apply. Written
//! in the transaction that moves the consumed position past them; mirrored to
//! the dead-letter topic by the outbox relay; replayed by `kith dead-letters`.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Bytea, Integer, Nullable, Text, Timestamptz};
use diesel_async::RunQueryDsl;

use super::PgConn;

/// A message to record as dead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NewDeadLetter {
    /// Where it was read.
    pub source_topic: String,
    /// Its partition.
    pub source_partition: i32,
    /// Its offset.
    pub source_offset: i64,
    /// The message key, as received.
    pub key: Option<Vec<u8>>,
    /// The payload, as received.
    pub payload: Option<Vec<u8>>,
    /// Why it was not applied.
    pub error: String,
    /// The origin it carried (`kith-origin`), if any.
    pub origin: Option<uuid::Uuid>,
}

/// Records `letters`; a message already recorded (a replay) is left alone.
pub(crate) async fn insert(conn: &mut PgConn, letters: &[NewDeadLetter]) -> QueryResult<usize> {
    if letters.is_empty() {
        return Ok(0);
    }
    let column = |f: fn(&NewDeadLetter) -> Option<Vec<u8>>| -> Vec<Option<Vec<u8>>> {
        letters.iter().map(f).collect()
    };
    diesel::sql_query(
        "INSERT INTO dead_letter (source_topic, source_partition, source_offset, message_key, payload, error, origin)
         SELECT * FROM unnest($1::text[], $2::int[], $3::bigint[], $4::bytea[], $5::bytea[], $6::text[], $7::uuid[])
         ON CONFLICT (source_topic, source_partition, source_offset) DO NOTHING",
    )
    .bind::<Array<Text>, _>(letters.iter().map(|l| l.source_topic.as_str()).collect::<Vec<_>>())
    .bind::<Array<Integer>, _>(letters.iter().map(|l| l.source_partition).collect::<Vec<_>>())
    .bind::<Array<BigInt>, _>(letters.iter().map(|l| l.source_offset).collect::<Vec<_>>())
    .bind::<Array<Nullable<Bytea>>, _>(column(|l| l.key.clone()))
    .bind::<Array<Nullable<Bytea>>, _>(column(|l| l.payload.clone()))
    .bind::<Array<Text>, _>(letters.iter().map(|l| l.error.as_str()).collect::<Vec<_>>())
    .bind::<Array<Nullable<diesel::sql_types::Uuid>>, _>(
        letters.iter().map(|l| l.origin).collect::<Vec<_>>(),
    )
    .execute(conn)
    .await
}

/// One recorded dead letter.
#[derive(Clone, Debug, PartialEq, Eq, QueryableByName)]
pub struct DeadLetter {
    /// Row id.
    #[diesel(sql_type = BigInt)]
    pub id: i64,
    /// Where it was read.
    #[diesel(sql_type = Text)]
    pub source_topic: String,
    /// Its partition.
    #[diesel(sql_type = Integer)]
    pub source_partition: i32,
    /// Its offset.
    #[diesel(sql_type = BigInt)]
    pub source_offset: i64,
    /// The message key.
    #[diesel(sql_type = Nullable<Bytea>)]
    pub message_key: Option<Vec<u8>>,
    /// The payload.
    #[diesel(sql_type = Nullable<Bytea>)]
    pub payload: Option<Vec<u8>>,
    /// Why it was not applied.
    #[diesel(sql_type = Text)]
    pub error: String,
    /// When it was recorded.
    #[diesel(sql_type = Timestamptz)]
    pub created_at: DateTime<Utc>,
    /// When a replay applied it, if one did.
    #[diesel(sql_type = Nullable<Timestamptz>)]
    pub replayed_at: Option<DateTime<Utc>>,
    /// The origin it carried (`kith-origin`), if any.
    #[diesel(sql_type = Nullable<diesel::sql_types::Uuid>)]
    pub origin: Option<uuid::Uuid>,
}

const COLUMNS: &str = "id, source_topic, source_partition, source_offset, message_key, payload, \
                       error, created_at, replayed_at, origin";

/// Dead letters in id order from `after_id`, at most `limit`; `pending_only`
/// leaves out the ones a replay already applied.
pub async fn list(
    conn: &mut PgConn,
    after_id: i64,
    limit: i64,
    pending_only: bool,
) -> QueryResult<Vec<DeadLetter>> {
    diesel::sql_query(format!(
        "SELECT {COLUMNS} FROM dead_letter
          WHERE id > $1 AND (NOT $3 OR replayed_at IS NULL)
          ORDER BY id LIMIT $2"
    ))
    .bind::<BigInt, _>(after_id)
    .bind::<BigInt, _>(limit)
    .bind::<diesel::sql_types::Bool, _>(pending_only)
    .load(conn)
    .await
}

/// The oldest dead letters not yet mirrored to the topic.
pub(crate) async fn unpublished(conn: &mut PgConn, limit: i64) -> QueryResult<Vec<DeadLetter>> {
    diesel::sql_query(format!(
        "SELECT {COLUMNS} FROM dead_letter WHERE published_at IS NULL ORDER BY id LIMIT $1"
    ))
    .bind::<BigInt, _>(limit)
    .load(conn)
    .await
}

/// Marks rows as mirrored to the topic.
pub(crate) async fn mark_published(conn: &mut PgConn, ids: &[i64]) -> QueryResult<usize> {
    diesel::sql_query("UPDATE dead_letter SET published_at = now() WHERE id = ANY($1)")
        .bind::<Array<BigInt>, _>(ids)
        .execute(conn)
        .await
}

/// Marks one row as applied by a replay.
pub(crate) async fn mark_replayed(conn: &mut PgConn, id: i64) -> QueryResult<usize> {
    diesel::sql_query("UPDATE dead_letter SET replayed_at = now() WHERE id = $1")
        .bind::<BigInt, _>(id)
        .execute(conn)
        .await
}
