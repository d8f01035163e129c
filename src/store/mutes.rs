//! `mute`: who mutes whom, and until when. `kith_mute` writes a mute and
//! its outbox event in one statement.

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Bool, Nullable};
use diesel_async::RunQueryDsl;

use super::PgConn;
use super::following::EdgeChangeRow;
use crate::model::UserId;

/// Mutes (`mute`, for `seconds` or until unmuted when `None`) or unmutes
/// `target` as `actor`, in one statement (`kith_mute`); the event, if any,
/// gets `event_id`.
pub(crate) async fn change(
    conn: &mut PgConn,
    actor: UserId,
    target: UserId,
    mute: bool,
    seconds: Option<i64>,
    event_id: uuid::Uuid,
) -> QueryResult<EdgeChangeRow> {
    let rows: Vec<EdgeChangeRow> = diesel::sql_query("SELECT * FROM kith_mute($1, $2, $3, $4, $5)")
        .bind::<BigInt, _>(actor.get())
        .bind::<BigInt, _>(target.get())
        .bind::<Bool, _>(mute)
        .bind::<Nullable<BigInt>, _>(seconds)
        .bind::<diesel::sql_types::Uuid, _>(event_id)
        .load(conn)
        .await?;
    super::committed(rows).ok_or(diesel::result::Error::NotFound)
}

/// One live mute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, QueryableByName)]
pub(crate) struct MuteRow {
    /// Who mutes.
    #[diesel(sql_type = BigInt)]
    pub from_user_id: i64,
    /// Who is muted.
    #[diesel(sql_type = BigInt)]
    pub to_user_id: i64,
    /// How long until it ends by itself (ms, by the database's clock), if it does.
    #[diesel(sql_type = Nullable<BigInt>)]
    pub remaining_ms: Option<i64>,
}

/// The live mutes made by any of `users`, in one statement.
pub(crate) async fn made_by(conn: &mut PgConn, users: &[UserId]) -> QueryResult<Vec<MuteRow>> {
    if users.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<i64> = users.iter().map(|u| u.get()).collect();
    diesel::sql_query(
        "SELECT from_user_id, to_user_id,
                (extract(epoch FROM expires_at - now()) * 1000)::BIGINT AS remaining_ms
           FROM mute
          WHERE active AND from_user_id = ANY($1) AND (expires_at IS NULL OR expires_at > now())",
    )
    .bind::<Array<BigInt>, _>(ids)
    .load(conn)
    .await
}
