//! The follow cap: past `KITH_MAX_FOLLOWINGS` followings, a follow is
//! allowed only while followings stay at most `KITH_FOLLOWINGS_RATIO` times
//! the followers; otherwise `FOLLOW_LIMIT`, and nothing is written — not
//! the edge, not the counters, not an event — even when follows race.

use kith::model::UserId;
use kith::testing::auth::Viewer;
use serde_json::json;

use crate::helpers::{TestApp, assert_ok, error_code, spawn_app_with};

/// An app whose cap is 3 followings (ratio 1.1), and `n` users.
async fn capped(n: usize) -> (TestApp, UserId, Vec<UserId>) {
    let t = spawn_app_with(|c| {
        c.max_followings = 3;
        c.followings_ratio = 1.1;
    })
    .await;
    let me = t.user("me").await;
    let mut users = Vec::new();
    for i in 0..n {
        users.push(t.user(&format!("u{i}")).await);
    }
    (t, me, users)
}

#[tokio::test]
async fn a_follow_past_the_cap_is_refused_and_writes_nothing() {
    let (t, me, u) = capped(6).await;
    for user in &u[..3] {
        assert_ok(&t.follow(me, *user).await);
    }
    let events = t.outbox().await.len();
    let refused = t.follow(me, u[3]).await;
    assert_eq!(error_code(&refused), Some("FOLLOW_LIMIT"), "{refused}");
    assert_eq!(t.edge(me, u[3]).await, None, "no edge");
    assert_eq!(t.stats(me).await.0, 3, "followings unchanged");
    assert_eq!(t.outbox().await.len(), events, "no event");

    // A follow that changes nothing is no follow past the cap; an unfollow
    // makes room.
    let again = t.follow(me, u[0]).await;
    assert_ok(&again);
    assert_eq!(again["data"]["follow"]["changed"], false);
    assert_ok(&t.unfollow(me, u[0]).await);
    assert_ok(&t.follow(me, u[3]).await);

    // Enough followers lift it: 4 followings ≤ 1.1 × 10 followers.
    t.sql(&format!(
        "UPDATE user_stats SET followers = 10 WHERE user_id = {me}"
    ))
    .await;
    assert_ok(&t.follow(me, u[4]).await);
    assert_eq!(t.stats(me).await.0, 4);
}

#[tokio::test]
async fn follow_many_past_the_cap_is_refused_whole() {
    let (t, me, u) = capped(5).await;
    assert_ok(&t.follow(me, u[0]).await);
    let events = t.outbox().await.len();
    let ids: Vec<String> = u[1..]
        .iter()
        .map(|u| kith::testing::graph::ids::user_id(*u).to_string())
        .collect();
    let r = t
        .execute(
            Viewer::User(me),
            "mutation($ids: [ID!]!) { followMany(input: {userIds: $ids}) { changedCount } }",
            json!({ "ids": ids }),
        )
        .await;
    assert_eq!(error_code(&r), Some("FOLLOW_LIMIT"), "{r}");
    assert_eq!(t.stats(me).await.0, 1);
    assert_eq!(t.outbox().await.len(), events);
    for user in &u[1..] {
        assert_eq!(t.edge(me, *user).await, None);
    }
}

#[tokio::test]
async fn racing_follows_never_pass_the_cap_together() {
    let (t, me, u) = capped(8).await;
    for user in &u[..2] {
        assert_ok(&t.follow(me, *user).await);
    }
    let answers = futures::future::join_all(u[2..].iter().map(|user| t.follow(me, *user))).await;
    let ok = answers.iter().filter(|a| error_code(a).is_none()).count();
    let limited = answers
        .iter()
        .filter(|a| error_code(a) == Some("FOLLOW_LIMIT"))
        .count();
    assert_eq!((ok, limited), (1, 5), "{answers:?}");
    assert_eq!(t.stats(me).await.0, 3);
    assert_eq!(t.outbox().await.len(), 3);
}
