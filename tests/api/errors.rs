//! Every client-visible error code of the write path, each leaving the
//! database exactly as it was.

use kith::model::{UserId, UserStatus};
use kith::testing::auth::{TokenError, Viewer};
use serde_json::json;

use crate::helpers::{error_code, spawn_app};

const FOLLOW: &str = "mutation($id: ID!) { follow(input: {userId: $id}) { changed } }";

#[tokio::test]
async fn self_follow_is_invalid_input() {
    let t = spawn_app().await;
    let alice = t.user("alice").await;
    let before = t.snapshot().await;
    for r in [t.follow(alice, alice).await, t.unfollow(alice, alice).await] {
        assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{r}");
    }
    assert_eq!(t.snapshot().await, before);
}

#[tokio::test]
async fn unknown_target_is_not_found() {
    let t = spawn_app().await;
    let alice = t.user("alice").await;
    let ghost = UserId::new(alice.get() + 1000).unwrap();
    let before = t.snapshot().await;
    for r in [t.follow(alice, ghost).await, t.unfollow(alice, ghost).await] {
        assert_eq!(error_code(&r), Some("NOT_FOUND"), "{r}");
    }
    assert_eq!(t.snapshot().await, before);
}

#[tokio::test]
async fn malformed_target_id_is_invalid_input() {
    let t = spawn_app().await;
    let alice = t.user("alice").await;
    let before = t.snapshot().await;
    for id in ["", "not-base64!", "VXNlcjphYmM", "VXNlcjow"] {
        let r = t
            .execute(Viewer::User(alice), FOLLOW, json!({ "id": id }))
            .await;
        assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{id}: {r}");
    }
    assert_eq!(t.snapshot().await, before);
}

#[tokio::test]
async fn suspended_or_deleted_targets_cannot_be_followed() {
    let t = spawn_app().await;
    let alice = t.user("alice").await;
    let suspended = t.user_with_status("sus", UserStatus::Suspended).await;
    let deleted = t.user_with_status("del", UserStatus::Deleted).await;
    let before = t.snapshot().await;
    for target in [suspended, deleted] {
        let r = t.follow(alice, target).await;
        assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{r}");
    }
    assert_eq!(t.snapshot().await, before);
}

#[tokio::test]
async fn unfollowing_a_suspended_user_still_works() {
    let t = spawn_app().await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    assert_eq!(
        t.follow(alice, bob).await["data"]["follow"]["changed"],
        true
    );
    let mut conn = t.conn().await;
    diesel_async::RunQueryDsl::execute(
        diesel::sql_query(format!(
            "UPDATE users SET status = 'suspended' WHERE id = {bob}"
        )),
        &mut conn,
    )
    .await
    .unwrap();
    let r = t.unfollow(alice, bob).await;
    assert_eq!(r["data"]["unfollow"]["changed"], true, "{r}");
}

#[tokio::test]
async fn suspended_actor_is_forbidden_and_missing_actor_unauthenticated() {
    let t = spawn_app().await;
    let bob = t.user("bob").await;
    let suspended = t.user_with_status("sus", UserStatus::Suspended).await;
    let ghost = UserId::new(bob.get() + 1000).unwrap();
    let before = t.snapshot().await;
    assert_eq!(
        error_code(&t.follow(suspended, bob).await),
        Some("FORBIDDEN")
    );
    assert_eq!(
        error_code(&t.follow(ghost, bob).await),
        Some("UNAUTHENTICATED")
    );
    assert_eq!(t.snapshot().await, before);
}

#[tokio::test]
async fn anonymous_and_rejected_viewers_cannot_act() {
    let t = spawn_app().await;
    let bob = t.user("bob").await;
    let id = kith::testing::graph::ids::user_id(bob).to_string();
    let before = t.snapshot().await;
    for viewer in [
        Viewer::Anonymous,
        Viewer::Rejected(TokenError::Expired),
        Viewer::Rejected(TokenError::Signature),
        Viewer::Rejected(TokenError::Algorithm),
    ] {
        let r = t.execute(viewer, FOLLOW, json!({ "id": id })).await;
        assert_eq!(error_code(&r), Some("UNAUTHENTICATED"), "{viewer:?}: {r}");
        assert!(r["data"].is_null());
    }
    assert_eq!(t.snapshot().await, before);
}

#[tokio::test]
async fn rate_limited_carries_retry_after_and_writes_nothing() {
    let t = crate::helpers::spawn_app_with(|c| {
        c.writes.rate_limit_capacity = 1;
        c.writes.rate_limit_per_sec = 0.01;
    })
    .await;
    let (alice, bob, carol) = (
        t.user("alice").await,
        t.user("bob").await,
        t.user("carol").await,
    );
    assert_eq!(
        t.follow(alice, bob).await["data"]["follow"]["changed"],
        true
    );
    let before = t.snapshot().await;
    let r = t.follow(alice, carol).await;
    assert_eq!(error_code(&r), Some("RATE_LIMITED"), "{r}");
    let retry = r["errors"][0]["extensions"]["retryAfterMs"]
        .as_u64()
        .unwrap();
    assert!(retry > 90_000 && retry <= 100_000, "retryAfterMs {retry}");
    assert_eq!(t.snapshot().await, before);
}
