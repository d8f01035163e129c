//! The in-process user cache: changes made anywhere (another process, an
//! operator's psql) show within the time PostgreSQL's notice takes. (A
//! process that cannot hear notices stops serving from the cache:
//! `tests/resilience/postgres_outage.rs`.)

use kith::testing::auth::Viewer;
use serde_json::json;

use crate::helpers::{eventually, read_user, spawn_app, user_row_cached};

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
