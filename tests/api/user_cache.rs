//! The in-process user cache: changes made anywhere (another process, an
//! operator's psql) show within the time PostgreSQL's notice takes, and a
//! process that cannot hear notices stops serving from the cache.

use diesel_async::{AsyncConnection as _, AsyncPgConnection};
use kith::model::UserId;
use kith::testing::auth::Viewer;
use serde_json::{Value, json};

use crate::helpers::{TestApp, assert_ok, eventually, spawn_app};

const USER: &str = "query($id: ID!) { user(id: $id) { handle displayName } }";

async fn read(t: &TestApp, id: UserId) -> Value {
    let id = kith::testing::graph::ids::user_id(id).to_string();
    let r = t
        .execute(Viewer::Anonymous, USER, json!({ "id": id }))
        .await;
    assert_ok(&r);
    r["data"]["user"].clone()
}

/// Reads `id` until a read costs no statement: the row is cached.
async fn cached(t: &TestApp, id: UserId) {
    t.users_cached().await;
    eventually("the row is cached", 5, || async {
        let before = t.app.round_trips.snapshot().0;
        read(t, id).await;
        (t.app.round_trips.snapshot().0 == before).then_some(())
    })
    .await;
}

/// Another session on the test's schema: as another process would change it.
async fn elsewhere(t: &TestApp, statement: &str) {
    let mut conn = AsyncPgConnection::establish(&t.app.config.database_url)
        .await
        .unwrap();
    diesel_async::RunQueryDsl::execute(diesel::sql_query(statement), &mut conn)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_change_made_in_another_session_shows_within_its_notice() {
    let t = spawn_app().await;
    let alice = t.user("alice").await;
    cached(&t, alice).await;

    elsewhere(
        &t,
        &format!("UPDATE users SET handle = 'alice2', display_name = 'Alice' WHERE id = {alice}"),
    )
    .await;
    eventually("the rename shows", 5, || async {
        (read(&t, alice).await["handle"] == "alice2").then_some(())
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

    cached(&t, alice).await;
    elsewhere(
        &t,
        &format!("UPDATE users SET status = 'deleted' WHERE id = {alice}"),
    )
    .await;
    eventually("the deletion shows", 5, || async {
        read(&t, alice).await.is_null().then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_lost_listening_session_empties_the_cache_until_it_is_back() {
    let t = spawn_app().await;
    let bob = t.user("bob").await;
    cached(&t, bob).await;

    // Cut the listening session: the cache must stop serving before it is
    // back (a notice sent meanwhile would be lost), so a change made then
    // shows on the very next read.
    let name = t.app.read.users.session_name().to_owned();
    elsewhere(
        &t,
        &format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '{name}'"
        ),
    )
    .await;
    eventually("the cache stops serving", 5, || async {
        (!t.app.read.users.is_serving()).then_some(())
    })
    .await;
    elsewhere(
        &t,
        &format!("UPDATE users SET handle = 'bob2' WHERE id = {bob}"),
    )
    .await;
    assert_eq!(read(&t, bob).await["handle"], "bob2");
    // It listens again by itself and serves from the cache again.
    cached(&t, bob).await;
    elsewhere(
        &t,
        &format!("UPDATE users SET handle = 'bob3' WHERE id = {bob}"),
    )
    .await;
    eventually("a change after the reconnection shows", 5, || async {
        (read(&t, bob).await["handle"] == "bob3").then_some(())
    })
    .await;
}
