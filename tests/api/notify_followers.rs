//! `notifyFollowers`: who asked to be told when an account posts, read by
//! a notification service only, paged like `followers`, and held in
//! process, kept right by PostgreSQL's notices as follows change.

use kith::model::UserId;
use kith::testing::auth::{Scopes, Viewer};
use serde_json::{Value, json};

use crate::helpers::{TestApp, assert_ok, error_code, eventually, spawn_app_with};

fn gid(user: UserId) -> String {
    kith::testing::graph::ids::user_id(user).to_string()
}

const NOTIFY: &str = "query($id: ID!, $first: Int, $after: String) {
    notifyFollowers(userId: $id, first: $first, after: $after) {
        totalCount edges { node { handle } } pageInfo { hasNextPage endCursor } } }";

const SERVICE: Viewer = Viewer::Service(Scopes::NOTIFY);

/// `follow` with options `input` (beside `userId`).
async fn follow(t: &TestApp, actor: UserId, target: UserId, mut input: Value) -> Value {
    input["userId"] = json!(gid(target));
    t.execute(
        Viewer::User(actor),
        "mutation($input: FollowInput!) { follow(input: $input) { changed } }",
        json!({ "input": input }),
    )
    .await
}

async fn notify(t: &TestApp, actor: UserId, target: UserId, on: bool) -> Value {
    t.execute(
        Viewer::User(actor),
        "mutation($id: ID!, $on: Boolean) { updateFollow(input: {userId: $id, notify: $on}) { changed } }",
        json!({ "id": gid(target), "on": on }),
    )
    .await
}

/// Every handle of `account`'s notify followers as the service pages
/// through them, `first` at a time, and the total it was told.
async fn all(t: &TestApp, account: UserId, first: i32) -> (Vec<String>, Value) {
    let (mut handles, mut after) = (Vec::new(), Value::Null);
    loop {
        let r = t
            .execute(
                SERVICE,
                NOTIFY,
                json!({ "id": gid(account), "first": first, "after": after }),
            )
            .await;
        assert_ok(&r);
        let page = &r["data"]["notifyFollowers"];
        for edge in page["edges"].as_array().unwrap() {
            handles.push(edge["node"]["handle"].as_str().unwrap().to_owned());
        }
        if page["pageInfo"]["hasNextPage"] != true {
            return (handles, page["totalCount"].clone());
        }
        after = page["pageInfo"]["endCursor"].clone();
    }
}

/// The handles of `account`'s notify followers in the truth, newest first.
async fn truth(t: &TestApp, account: UserId) -> Vec<String> {
    #[derive(diesel::QueryableByName)]
    struct Handle {
        #[diesel(sql_type = diesel::sql_types::Text)]
        handle: String,
    }
    let rows: Vec<Handle> = diesel_async::RunQueryDsl::load(
        diesel::sql_query(
            "SELECT u.handle FROM following f JOIN users u ON u.id = f.from_user_id
              WHERE f.to_user_id = $1 AND f.active AND f.notify AND f.options_at = f.followed_at
                AND u.status = 'active'
              ORDER BY f.followed_at DESC, f.from_user_id DESC",
        )
        .bind::<diesel::sql_types::BigInt, _>(account.get()),
        &mut *t.conn().await,
    )
    .await
    .unwrap();
    rows.into_iter().map(|r| r.handle).collect()
}

/// Pages through `account`'s list until a whole pass reads no PostgreSQL
/// statement (the list is held) and shows `expected`.
async fn held_as(t: &TestApp, account: UserId, expected: &[&str]) {
    eventually("the held list to show the change", 10, || async {
        let before = t.app.round_trips.snapshot().0;
        let (handles, total) = all(t, account, 2).await;
        let held = t.app.round_trips.snapshot().0 == before;
        (held && handles == expected && total == json!(expected.len())).then_some(())
    })
    .await;
    assert_eq!(truth(t, account).await, expected);
}

#[tokio::test]
async fn a_notification_service_pages_those_who_asked_and_nobody_else_may() {
    let t = spawn_app_with(|_| {}).await;
    t.users_cached().await;
    let star = t.user("star").await;
    let mut fans = Vec::new();
    for i in 0..6 {
        let f = t.user(&format!("f{i}")).await;
        // f4 follows without asking; f5 asks after following.
        let asks = i < 4;
        assert_ok(&follow(&t, f, star, json!({ "notify": asks })).await);
        fans.push(f);
    }
    assert_ok(&notify(&t, fans[5], star, true).await);
    let (handles, total) = all(&t, star, 2).await;
    assert_eq!(handles, ["f5", "f3", "f2", "f1", "f0"]);
    assert_eq!(total, 5);
    assert_eq!(truth(&t, star).await, handles);

    // Nobody else reads it: not the account, not a follower, not a
    // service without the scope, not an anonymous caller.
    let vars = json!({ "id": gid(star), "first": 5 });
    for viewer in [
        Viewer::User(star),
        Viewer::User(fans[0]),
        Viewer::Service(Scopes::CLOSE_FRIENDS),
    ] {
        let r = t.execute(viewer, NOTIFY, vars.clone()).await;
        assert_eq!(error_code(&r), Some("FORBIDDEN"), "{r}");
        assert_eq!(r["data"], Value::Null);
    }
    let r = t.execute(Viewer::Anonymous, NOTIFY, vars).await;
    assert_eq!(error_code(&r), Some("UNAUTHENTICATED"), "{r}");
    // An account nobody follows has an empty list; an id that is none is
    // refused.
    let r = t
        .execute(SERVICE, NOTIFY, json!({ "id": gid(fans[0]), "first": 5 }))
        .await;
    assert_ok(&r);
    assert_eq!(r["data"]["notifyFollowers"]["totalCount"], 0);
    let r = t
        .execute(SERVICE, NOTIFY, json!({ "id": "nope", "first": 5 }))
        .await;
    assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{r}");
}

#[tokio::test]
async fn the_held_list_follows_every_change_as_it_commits() {
    use kith::model::UserStatus;
    use kith::testing::write::lifecycle;

    let t = spawn_app_with(|_| {}).await;
    t.users_cached().await;
    let star = t.user("star").await;
    let mut fans = Vec::new();
    for i in 0..6 {
        let f = t.user(&format!("f{i}")).await;
        assert_ok(&follow(&t, f, star, json!({ "notify": i != 4 })).await);
        fans.push(f);
    }
    held_as(&t, star, &["f5", "f3", "f2", "f1", "f0"]).await;

    // Turned off, unfollowed, blocked away, turned on, a new follower who
    // asks, a follower suspended: each shows without the list being read
    // again.
    assert_ok(&notify(&t, fans[0], star, false).await);
    assert_ok(&t.unfollow(fans[1], star).await);
    let r = t
        .execute(
            Viewer::User(star),
            "mutation($id: ID!) { block(input: {userId: $id}) { changed } }",
            json!({ "id": gid(fans[2]) }),
        )
        .await;
    assert_ok(&r);
    assert_ok(&notify(&t, fans[4], star, true).await);
    let g = t.user("g").await;
    assert_ok(&follow(&t, g, star, json!({ "notify": true })).await);
    lifecycle::set_status(&t.app, fans[3], UserStatus::Suspended)
        .await
        .unwrap();
    held_as(&t, star, &["g", "f5", "f4"]).await;

    // A follow made again starts from the default options: off.
    assert_ok(&t.unfollow(fans[5], star).await);
    assert_ok(&follow(&t, fans[5], star, json!({})).await);
    lifecycle::set_status(&t.app, fans[3], UserStatus::Active)
        .await
        .unwrap();
    held_as(&t, star, &["g", "f4", "f3"]).await;

    // The listening session is cut: the lists are read again once it is
    // back, and a change made meanwhile shows.
    let cut = diesel_async::RunQueryDsl::execute(
        diesel::sql_query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
        )
        .bind::<diesel::sql_types::Text, _>(t.app.read.notify().session_name()),
        &mut *t.conn().await,
    )
    .await
    .unwrap();
    assert_eq!(cut, 1, "one listening session");
    assert_ok(&notify(&t, g, star, false).await);
    held_as(&t, star, &["f4", "f3"]).await;
}

#[tokio::test]
async fn a_list_the_rooms_size_is_held_and_read_once_for_pages_that_race() {
    let t = spawn_app_with(|c| c.caches.notify_cache_members = 4).await;
    t.users_cached().await;
    let star = t.user("star").await;
    for i in 0..4 {
        let f = t.user(&format!("f{i}")).await;
        assert_ok(&follow(&t, f, star, json!({ "notify": true })).await);
    }
    eventually("the notify cache listens", 10, || async {
        t.app.read.notify().is_serving().then_some(())
    })
    .await;
    // Eight first pages at once: one reads the list whole, and no other
    // does (they wait for it).
    let reads = t.app.read.notify().lists_read();
    let vars = json!({ "id": gid(star), "first": 2 });
    let pages =
        futures::future::join_all((0..8).map(|_| t.execute(SERVICE, NOTIFY, vars.clone()))).await;
    for r in &pages {
        assert_ok(r);
        assert_eq!(r["data"]["notifyFollowers"]["totalCount"], 4, "{r}");
    }
    assert_eq!(t.app.read.notify().lists_read() - reads, 1, "one read");
    // A list of exactly the room's size is held: no page reads it again.
    held_as(&t, star, &["f3", "f2", "f1", "f0"]).await;
    // Grown past the room, it is paged from PostgreSQL.
    let g = t.user("g").await;
    assert_ok(&follow(&t, g, star, json!({ "notify": true })).await);
    eventually("the list to be paged", 10, || async {
        let before = t.app.round_trips.snapshot().0;
        let (handles, _) = all(&t, star, 5).await;
        (handles.len() == 5 && t.app.round_trips.snapshot().0 > before).then_some(())
    })
    .await;
}

/// Through a transaction pooler (the suite's pooler pass only): an
/// operator who points the sessions at the pooler too gets a notify cache
/// that never trusts its session, as notices sent meanwhile would be lost,
/// and pages that are still right, read from PostgreSQL.
#[tokio::test]
async fn a_listening_session_through_a_transaction_pooler_is_not_trusted() {
    if std::env::var("KITH_TEST_POOLER_URL").is_err() {
        return;
    }
    let t = spawn_app_with(|_| {}).await;
    let star = t.user("star").await;
    let f = t.user("f").await;
    assert_ok(&follow(&t, f, star, json!({ "notify": true })).await);
    let mut config = t.app.config.clone();
    config.database.session_url = Some(config.database.url.clone());
    config.database.auto_migrate = false;
    let app = kith::app::App::start(config).await.expect("app starts");
    let misled = TestApp {
        schema: kith::testing::graph::schema(app.clone()),
        app,
    };
    // Long enough for the session to listen and its probe to be answered
    // many times over, were notices delivered.
    for _ in 0..20 {
        let serving = misled.app.read.notify().is_serving();
        assert!(!serving, "a session through a pooler is trusted");
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let (handles, total) = all(&misled, star, 5).await;
    assert_eq!((handles, total), (vec!["f".to_owned()], json!(1)));
}
