//! The in-process user cache: changes made anywhere (another process, an
//! operator's psql) show within the time PostgreSQL's notice takes. (A
//! process that cannot hear notices stops serving from the cache:
//! `tests/resilience/postgres_outage.rs`.)

use kith::testing::auth::Viewer;
use kith::testing::graph::ids;
use serde_json::json;

use crate::helpers::{
    assert_ok, eventually, read_user, replica, seed_followers, spawn_app, user_row_cached,
};

#[tokio::test]
async fn a_change_made_in_another_session_shows_within_its_notice() {
    let t = spawn_app().await;
    let alice = t.user("alice").await;
    user_row_cached(&t, alice).await;

    t.sql_elsewhere(&format!(
        "UPDATE users SET handle = 'alice2', display_name = 'Alice' WHERE id = {alice}"
    ))
    .await;
    eventually("the rename shows", 5, || async {
        (read_user(&t, alice).await["handle"] == "alice2").then_some(())
    })
    .await;
    let by_old_handle = t
        .execute(
            Viewer::Anonymous,
            r#"{ userByHandle(handle: "alice") { handle } }"#,
            json!({}),
        )
        .await;
    assert!(
        by_old_handle["data"]["userByHandle"].is_null(),
        "{by_old_handle}"
    );

    user_row_cached(&t, alice).await;
    t.sql_elsewhere(&format!(
        "UPDATE users SET status = 'deleted' WHERE id = {alice}"
    ))
    .await;
    eventually("the deletion shows", 5, || async {
        read_user(&t, alice).await.is_null().then_some(())
    })
    .await;
}

/// A newcomer to a list whose first page was read here is held before any
/// read asks for it: its row is loaded as the projector's batch is told, so
/// a list taking many new followers a second (a move's new account) does
/// not send the first read after each batch to PostgreSQL for them.
#[tokio::test]
async fn a_newcomer_to_a_head_read_here_is_held_before_it_is_read() {
    let t = spawn_app().await;
    let star = t.user("star").await;
    seed_followers(&t, star, "fan", 3, 1).await;
    t.users_cached().await;
    let page = t
        .execute(
            Viewer::Anonymous,
            "query($id: ID!) { user(id: $id) { followers(first: 2) { edges { node { handle } } } } }",
            json!({ "id": ids::user_id(star).to_string() }),
        )
        .await;
    assert_ok(&page);
    let late = t.user("late").await;
    assert_ok(&t.follow(late, star).await);
    // Whatever the follow left of the newcomer here is dropped: only the
    // batch may bring it back. The pipeline and the live listener start
    // now, so the batch comes after.
    t.app.read.forget_users(&[late]);
    assert!(t.app.read.users().get(late).is_none());
    let _replica = replica(&t, t.app.clone(), true).await;
    eventually("the newcomer's row is held", 60, || async {
        t.app.read.users().get(late).map(|_| ())
    })
    .await;
}
