//! The follower projection under concurrent appliers of one edge (a consumer
//! and a zombie during a rebalance): every transition is counted once, from
//! the state it really replaced.

use std::sync::Arc;

use diesel_async::AsyncConnection as _;
use kith::testing::store::follower::{self, Applied};

use crate::helpers::spawn_app_with;

#[tokio::test]
async fn concurrent_appliers_of_one_edge_count_each_transition_once() {
    const VERSIONS: i64 = 40;
    let t = Arc::new(spawn_app_with(|c| c.database.pool_size = 16).await);
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    let at =
        chrono::DateTime::from_timestamp_millis(chrono::Utc::now().timestamp_millis()).unwrap();

    // Every version twice (duplicates), all at once, in no particular order.
    let mut tasks = tokio::task::JoinSet::new();
    for round in 0..2 {
        for version in 1..=VERSIONS {
            let t = t.clone();
            tasks.spawn(async move {
                let _ = round;
                let mut conn = t.app.pg.get().await.unwrap();
                conn.transaction::<_, diesel::result::Error, _>(async |conn| {
                    follower::apply(conn, alice, bob, version % 2 == 1, at, version).await
                })
                .await
                .unwrap()
            });
        }
    }
    let mut followers = 0;
    while let Some(applied) = tasks.join_next().await {
        if let Applied::Changed { was_active, active } = applied.unwrap() {
            followers += i64::from(active) - i64::from(was_active);
        }
    }
    assert_eq!(t.projected(alice, bob).await, Some((false, VERSIONS)));
    assert_eq!(
        followers, 0,
        "the counted changes add up to the final state"
    );
}
