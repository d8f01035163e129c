//! `hidden_edge`: edges deactivated because an account at one end was
//! suspended or deleted, kept so that restoring it brings them back.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Timestamptz};
use diesel_async::RunQueryDsl;

use super::PgConn;
use super::following::Changed;
use crate::model::UserId;

/// One hidden edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, QueryableByName)]
pub(crate) struct HiddenEdge {
    /// The follower.
    #[diesel(sql_type = BigInt)]
    pub from_user_id: i64,
    /// The followed user.
    #[diesel(sql_type = BigInt)]
    pub to_user_id: i64,
    /// Its follow time when it was hidden.
    #[diesel(sql_type = Timestamptz)]
    pub followed_at: DateTime<Utc>,
}

/// Records `edges`, just deactivated, as hidden under `account`.
pub(crate) async fn insert(
    conn: &mut PgConn,
    account: UserId,
    edges: &[Changed],
) -> QueryResult<()> {
    if edges.is_empty() {
        return Ok(());
    }
    diesel::sql_query(
        "INSERT INTO hidden_edge (account_id, from_user_id, to_user_id, followed_at)
         SELECT $1, * FROM unnest($2::bigint[], $3::bigint[], $4::timestamptz[])
         ON CONFLICT DO NOTHING",
    )
    .bind::<BigInt, _>(account.get())
    .bind::<Array<BigInt>, _>(edges.iter().map(|e| e.from_user_id).collect::<Vec<_>>())
    .bind::<Array<BigInt>, _>(edges.iter().map(|e| e.to_user_id).collect::<Vec<_>>())
    .bind::<Array<Timestamptz>, _>(
        edges
            .iter()
            .map(|e| e.transition.followed_at)
            .collect::<Vec<_>>(),
    )
    .execute(conn)
    .await
    .map(drop)
}

/// Up to `limit` edges hidden under `account`, locked for this transaction.
pub(crate) async fn lock_batch(
    conn: &mut PgConn,
    account: UserId,
    limit: i64,
) -> QueryResult<Vec<HiddenEdge>> {
    diesel::sql_query(
        "SELECT from_user_id, to_user_id, followed_at FROM hidden_edge
          WHERE account_id = $1 ORDER BY from_user_id, to_user_id LIMIT $2 FOR UPDATE",
    )
    .bind::<BigInt, _>(account.get())
    .bind::<BigInt, _>(limit)
    .load(conn)
    .await
}

/// Forgets hidden edges of `account`.
pub(crate) async fn delete(
    conn: &mut PgConn,
    account: UserId,
    pairs: &[(i64, i64)],
) -> QueryResult<()> {
    let (from, to): (Vec<i64>, Vec<i64>) = pairs.iter().copied().unzip();
    diesel::sql_query(
        "DELETE FROM hidden_edge h USING unnest($2::bigint[], $3::bigint[]) AS p(from_id, to_id)
          WHERE h.account_id = $1 AND h.from_user_id = p.from_id AND h.to_user_id = p.to_id",
    )
    .bind::<BigInt, _>(account.get())
    .bind::<Array<BigInt>, _>(from)
    .bind::<Array<BigInt>, _>(to)
    .execute(conn)
    .await
    .map(drop)
}

/// Hands hidden edges over from `account` to the other end's account (which
/// is not active either), so that its restore brings them back.
pub(crate) async fn hand_over(
    conn: &mut PgConn,
    account: UserId,
    edges: &[(HiddenEdge, UserId)],
) -> QueryResult<()> {
    for (edge, other) in edges {
        diesel::sql_query(
            "WITH gone AS (
                 DELETE FROM hidden_edge
                  WHERE account_id = $1 AND from_user_id = $2 AND to_user_id = $3)
             INSERT INTO hidden_edge (account_id, from_user_id, to_user_id, followed_at)
             VALUES ($4, $2, $3, $5) ON CONFLICT DO NOTHING",
        )
        .bind::<BigInt, _>(account.get())
        .bind::<BigInt, _>(edge.from_user_id)
        .bind::<BigInt, _>(edge.to_user_id)
        .bind::<BigInt, _>(other.get())
        .bind::<Timestamptz, _>(edge.followed_at)
        .execute(conn)
        .await?;
    }
    Ok(())
}
