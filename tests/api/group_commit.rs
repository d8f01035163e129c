//! Group commit: follows and unfollows asked while a batch is in flight go
//! to PostgreSQL together, in one transaction, and each is still answered
//! as if alone — an item refused (blocked, past the follow cap, rate
//! limited) or turned into a request (a locked account) never changes what
//! its neighbours do.

use kith::model::UserId;

use crate::helpers::{TestApp, assert_ok, error_code, spawn_app_with};

/// How many transactions wrote the outbox events of `actors`.
async fn transactions_of(t: &TestApp, actors: &[UserId]) -> i64 {
    let keys: Vec<String> = actors.iter().map(|a| format!("'{a}'")).collect();
    t.count(&format!(
        "SELECT count(DISTINCT xmin::text)::BIGINT AS n FROM outbox
          WHERE partition_key IN ({})",
        keys.join(", ")
    ))
    .await
}

#[tokio::test]
async fn one_batch_refuses_its_items_alone_and_applies_the_rest() {
    let t = spawn_app_with(|c| {
        c.database.write_batches_in_flight = 1;
        c.writes.max_followings = 2;
        c.writes.followings_ratio = 1.0;
        c.writes.rate_limit_capacity = 3;
        c.writes.rate_limit_per_sec = 0.001;
    })
    .await;
    let mut users = Vec::new();
    for handle in [
        "holder",
        "first",
        "blocked",
        "capped",
        "requester",
        "limited",
        "second",
    ] {
        users.push(t.user(handle).await);
    }
    let [holder, first, blocked, capped, requester, limited, second] = users[..] else {
        unreachable!()
    };
    let star = t.user("star").await;
    let shy = t.user("shy").await;
    let others = [t.user("o1").await, t.user("o2").await];
    // `capped` is at the cap; `limited` has spent its tokens; `star`
    // blocks `blocked`; `shy` is locked.
    for other in &others[..2] {
        assert_ok(&t.follow(capped, *other).await);
    }
    for other in &others[..2] {
        assert_ok(&t.follow(limited, *other).await);
    }
    assert_ok(&t.unfollow(limited, others[0]).await);
    t.sql(&format!(
        "INSERT INTO block (from_user_id, to_user_id, active, version, blocked_at, updated_at)
         VALUES ({star}, {blocked}, TRUE, 1, date_trunc('milliseconds', now()), now())"
    ))
    .await;
    t.sql(&format!("UPDATE users SET locked = TRUE WHERE id = {shy}"))
        .await;

    // The one batch in flight holds its commit for a while; everything
    // asked meanwhile waits for it and goes in the next batch.
    t.delay_edge_commits(0.4).await;
    let before = t.app.metrics.write_batches.get();
    let held = {
        let t = &t;
        async move { t.follow(holder, star).await }
    };
    let rest = async {
        // Once the held follow's batch is in flight (its commit takes
        // 0.4 s), the rest is asked.
        crate::helpers::eventually("the first batch to be in flight", 10, || async {
            (t.app.metrics.write_batches.get() > before).then_some(())
        })
        .await;
        futures::future::join_all([
            t.follow(first, star),
            t.follow(blocked, star),
            t.follow(capped, star),
            t.follow(requester, shy),
            t.follow(limited, star),
            t.follow(second, star),
        ])
        .await
    };
    let (held, answers) = futures::future::join(held, rest).await;
    assert_ok(&held);
    let [
        first_r,
        blocked_r,
        capped_r,
        requested_r,
        limited_r,
        second_r,
    ] = &answers[..]
    else {
        unreachable!()
    };
    assert_ok(first_r);
    assert_eq!(first_r["data"]["follow"]["changed"], true);
    assert_eq!(error_code(blocked_r), Some("BLOCKED"), "{blocked_r}");
    assert_eq!(error_code(capped_r), Some("FOLLOW_LIMIT"), "{capped_r}");
    assert_ok(requested_r);
    assert_eq!(error_code(limited_r), Some("RATE_LIMITED"), "{limited_r}");
    assert_ok(second_r);
    assert_eq!(second_r["data"]["follow"]["changed"], true);

    // The truth: the two follows and the request, nothing for the others.
    assert_eq!(t.edge(first, star).await, Some((true, 1)));
    assert_eq!(t.edge(second, star).await, Some((true, 1)));
    assert_eq!(t.edge(blocked, star).await, None);
    assert_eq!(t.edge(capped, star).await, None);
    assert_eq!(t.edge(limited, star).await, None);
    assert_eq!(t.edge(requester, shy).await, None);
    assert_eq!(
        t.count(&format!(
            "SELECT count(*) AS n FROM follow_request
              WHERE from_user_id = {requester} AND to_user_id = {shy} AND active"
        ))
        .await,
        1
    );
    assert_eq!(t.stats(first).await.0, 1);
    assert_eq!(t.stats(second).await.0, 1);
    assert_eq!(
        t.stats(capped).await.0,
        2,
        "the capped follow counted nothing"
    );
    // And they were one transaction, apart from the held one.
    assert_eq!(transactions_of(&t, &[first, second, requester]).await, 1);
    assert_eq!(transactions_of(&t, &[holder, first]).await, 2);
    assert_eq!(
        transactions_of(&t, &[blocked]).await,
        0,
        "no event of a refusal"
    );
    assert_eq!(
        transactions_of(&t, &[capped]).await,
        2,
        "its two follows before"
    );
}
