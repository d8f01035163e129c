//! Finding users: by global id, by handle, through `node`, as the viewer.

use kith::model::UserStatus;
use kith::testing::auth::Viewer;
use serde_json::json;

use crate::helpers::{assert_ok, error_code, spawn_app};

#[tokio::test]
async fn users_by_id_handle_node_and_viewer() {
    let t = spawn_app().await;
    let alice = t.user("alice").await;
    let id = kith::testing::graph::ids::user_id(alice).to_string();
    let r = t
        .execute(
            Viewer::User(alice),
            "query($id: ID!) {
                user(id: $id) { id handle displayName }
                userByHandle(handle: \"alice\") { id }
                node(id: $id) { id ... on User { handle } }
                viewer { handle }
            }",
            json!({ "id": id }),
        )
        .await;
    assert_ok(&r);
    assert_eq!(
        r["data"]["user"],
        json!({ "id": id, "handle": "alice", "displayName": "alice display" })
    );
    assert_eq!(r["data"]["userByHandle"]["id"], id);
    assert_eq!(r["data"]["node"], json!({ "id": id, "handle": "alice" }));
    assert_eq!(r["data"]["viewer"]["handle"], "alice");
}

#[tokio::test]
async fn unknown_and_deleted_users_are_null_and_bad_ids_are_errors() {
    let t = spawn_app().await;
    let deleted = t.user_with_status("gone", UserStatus::Deleted).await;
    let unknown = kith::model::UserId::new(deleted.get() + 1000).unwrap();
    for user in [deleted, unknown] {
        let r = t
            .execute(
                Viewer::Anonymous,
                "query($id: ID!) { user(id: $id) { id } node(id: $id) { id } }",
                json!({ "id": kith::testing::graph::ids::user_id(user).to_string() }),
            )
            .await;
        assert_ok(&r);
        assert!(
            r["data"]["user"].is_null() && r["data"]["node"].is_null(),
            "{r}"
        );
    }
    let r = t
        .execute(
            Viewer::Anonymous,
            "{ userByHandle(handle: \"gone\") { id } }",
            json!({}),
        )
        .await;
    assert!(r["data"]["userByHandle"].is_null());

    let r = t
        .execute(
            Viewer::Anonymous,
            "{ user(id: \"garbage\") { id } }",
            json!({}),
        )
        .await;
    assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{r}");
}

#[tokio::test]
async fn a_rejected_token_is_an_error_not_anonymous() {
    let t = spawn_app().await;
    let r = t
        .execute(
            Viewer::Rejected(kith::testing::auth::TokenError::Expired),
            "{ viewer { id } }",
            json!({}),
        )
        .await;
    assert_eq!(error_code(&r), Some("UNAUTHENTICATED"), "{r}");
}
