//! The token bucket: exact under concurrency, millisecond refill, and an
//! expiry that can never hand out tokens early.

use kith::model::UserId;
use redis::AsyncCommands;

use crate::helpers::{error_code, spawn_app_with};

#[tokio::test]
async fn concurrent_follows_allow_exactly_capacity() {
    const CAPACITY: u32 = 10;
    const ATTEMPTS: usize = 40;
    let t = std::sync::Arc::new(
        spawn_app_with(|c| {
            c.writes.rate_limit_capacity = CAPACITY;
            c.writes.rate_limit_per_sec = 0.001;
        })
        .await,
    );
    let alice = t.user("alice").await;
    let mut targets = Vec::new();
    for i in 0..ATTEMPTS {
        targets.push(t.user(&format!("target{i}")).await);
    }

    let mut tasks = tokio::task::JoinSet::new();
    for target in targets {
        let t = t.clone();
        tasks.spawn(async move { t.follow(alice, target).await });
    }
    let (mut allowed, mut limited) = (0, 0);
    while let Some(r) = tasks.join_next().await {
        let r = r.unwrap();
        match error_code(&r) {
            None => {
                assert_eq!(r["data"]["follow"]["changed"], true);
                allowed += 1;
            }
            Some("RATE_LIMITED") => {
                assert!(
                    r["errors"][0]["extensions"]["retryAfterMs"]
                        .as_u64()
                        .unwrap()
                        > 0
                );
                limited += 1;
            }
            Some(other) => panic!("unexpected {other}: {r}"),
        }
    }
    assert_eq!(allowed, CAPACITY);
    assert_eq!(limited, ATTEMPTS as u32 - CAPACITY);
    let snapshot = t.snapshot().await;
    assert_eq!(snapshot.following.len(), CAPACITY as usize);
    assert_eq!(snapshot.outbox.len(), CAPACITY as usize);
}

#[tokio::test]
async fn bucket_refills_at_the_configured_rate() {
    let t = spawn_app_with(|c| {
        c.writes.rate_limit_capacity = 2;
        c.writes.rate_limit_per_sec = 2.0; // one token per 500 ms
    })
    .await;
    let alice = UserId::new(1).unwrap();
    let limiter = &t.app.rate_limiter;
    let take = || limiter.check(&t.app.redis, &t.app.keys, alice);
    assert!(take().await.unwrap().allowed);
    assert!(take().await.unwrap().allowed);
    let refused = take().await.unwrap();
    assert!(!refused.allowed);
    assert!(
        refused.retry_after_ms > 0 && refused.retry_after_ms <= 500,
        "{refused:?}"
    );
    // Waiting exactly the advertised time is enough for one token.
    tokio::time::sleep(std::time::Duration::from_millis(refused.retry_after_ms)).await;
    let again = take().await.unwrap();
    assert!(again.allowed, "{again:?}");
    assert!(!take().await.unwrap().allowed, "only one token came back");
}

#[tokio::test]
async fn bucket_key_outlives_the_refill() {
    let t = spawn_app_with(|c| {
        c.writes.rate_limit_capacity = 5;
        c.writes.rate_limit_per_sec = 1.0;
    })
    .await;
    let alice = UserId::new(7).unwrap();
    for _ in 0..3 {
        assert!(
            t.app
                .rate_limiter
                .check(&t.app.redis, &t.app.keys, alice)
                .await
                .unwrap()
                .allowed
        );
    }
    let mut conn = t.app.redis.get().await.unwrap();
    let ttl: i64 = conn
        .pttl(t.app.keys.follow_rate_limit(alice))
        .await
        .unwrap();
    // Three tokens short at one per second: the key must live at least 3 s,
    // or its expiry would refill the bucket early.
    assert!(ttl >= 3_000, "ttl {ttl} ms would refill early");
}
