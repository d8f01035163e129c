//! Large lists written straight to PostgreSQL, fast.

use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use kith::model::UserId;

use super::*;

/// Gives `target` `n` followers, `per_ms` of them in each millisecond, directly
/// in the truth and the projection (as a settled pipeline would leave them).
/// Returns them in list order: newest first, ties by id descending.
pub async fn seed_followers(
    t: &TestApp,
    target: UserId,
    prefix: &str,
    n: i64,
    per_ms: i64,
) -> Vec<kith::testing::paging::Position> {
    use diesel_async::AsyncConnection as _;
    use diesel_async::RunQueryDsl as _;
    // Its own session: a bulk load is not bound by the API's statement_timeout.
    let mut conn = AsyncPgConnection::establish(t.app.config.session_url())
        .await
        .unwrap();
    kith::testing::store::users::seed(&mut conn, prefix, n)
        .await
        .unwrap();
    let base_ms: i64 = 1_700_000_000_000;
    for table in ["following", "follower"] {
        diesel::sql_query(format!(
            "INSERT INTO {table} (from_user_id, to_user_id, active, followed_at, version)
             SELECT id, $1, TRUE,
                    'epoch'::timestamptz
                      + ($2 + (row_number() OVER (ORDER BY id) - 1) / $3) * interval '1 millisecond', 1
               FROM users WHERE handle LIKE $4 || '%'"
        ))
        .bind::<BigInt, _>(target.get())
        .bind::<BigInt, _>(base_ms)
        .bind::<BigInt, _>(per_ms)
        .bind::<Text, _>(prefix)
        .execute(&mut conn)
        .await
        .unwrap();
    }
    diesel::sql_query(
        "UPDATE user_stats SET followers = followers + $2, version = version + 1 WHERE user_id = $1",
    )
    .bind::<BigInt, _>(target.get())
    .bind::<BigInt, _>(n)
    .execute(&mut conn)
    .await
    .unwrap();
    diesel::sql_query(
        "UPDATE user_stats SET followings = followings + 1, version = kith_next_version(version)
          WHERE user_id IN (SELECT id FROM users WHERE handle LIKE $1 || '%')",
    )
    .bind::<Text, _>(prefix)
    .execute(&mut conn)
    .await
    .unwrap();
    let rows = kith::testing::store::lists::newest(
        &mut conn,
        kith::testing::paging::ListKey::Followers(target),
        n as usize + 1,
    )
    .await
    .unwrap();
    assert_eq!(rows.len() as i64, n);
    rows.iter()
        .map(|r| kith::testing::paging::Position {
            followed_at_ms: r.followed_at.timestamp_millis(),
            user: UserId::new(r.member).unwrap(),
        })
        .collect()
}
