//! Follow suggestions: friends of friends first, each with its reason;
//! every exclusion; kept and dropped; popular accounts for a cold start.

use kith::model::{UserId, UserStatus};
use kith::testing::auth::Viewer;
use serde_json::{Value, json};

use std::sync::Arc;

use kith::testing::pipeline::projector::ProjectorHooks;

use crate::helpers::{TestApp, assert_ok, error_code, settled, spawn_app_with};

fn gid(user: UserId) -> String {
    kith::testing::graph::ids::user_id(user).to_string()
}

const SUGGESTIONS: &str = "query($id: ID!) { user(id: $id) { suggestedFollows(first: 50) {
    totalCount
    edges { node { handle } score reason { kind followedBy { handle } followedByCount { count exact } } } } } }";

async fn suggestions(t: &TestApp, viewer: UserId) -> Vec<Value> {
    let r = t
        .execute(
            Viewer::User(viewer),
            SUGGESTIONS,
            json!({ "id": gid(viewer) }),
        )
        .await;
    assert_ok(&r);
    r["data"]["user"]["suggestedFollows"]["edges"]
        .as_array()
        .unwrap()
        .clone()
}

fn handles(edges: &[Value]) -> Vec<String> {
    edges
        .iter()
        .map(|e| e["node"]["handle"].as_str().unwrap().to_owned())
        .collect()
}

async fn act(t: &TestApp, actor: UserId, mutation: &str, target: UserId) {
    let r = t
        .execute(
            Viewer::User(actor),
            &format!(
                "mutation($id: ID!) {{ {mutation}(input: {{userId: $id}}) {{ clientMutationId }} }}"
            ),
            json!({ "id": gid(target) }),
        )
        .await;
    assert_ok(&r);
}

async fn app() -> TestApp {
    spawn_app_with(|c| c.writes.rate_limit_capacity = 1000).await
}

#[tokio::test]
async fn friends_of_friends_come_first_with_their_reasons() {
    let t = app().await;
    let me = t.user("me").await;
    let (a, b, c) = (t.user("a").await, t.user("b").await, t.user("c").await);
    let (x, y, fan) = (t.user("x").await, t.user("y").await, t.user("fan").await);
    for followee in [a, b, c] {
        assert_ok(&t.follow(me, followee).await);
    }
    for followee in [a, b, c] {
        assert_ok(&t.follow(followee, x).await);
    }
    assert_ok(&t.follow(a, y).await);
    assert_ok(&t.follow(fan, me).await);
    // Whom the viewer follows already is no suggestion.
    assert_ok(&t.follow(a, b).await);
    // Followers lists are the projection's: the pipeline carries them.
    let _relay = t.start_relay();
    let _projector = t.start_projector(Arc::new(ProjectorHooks::default()));
    settled(&t, &[me], 60).await;

    let edges = suggestions(&t, me).await;
    assert_eq!(handles(&edges)[..3], ["x", "fan", "y"], "{edges:#?}");
    let mut named: Vec<&str> = edges[0]["reason"]["followedBy"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["handle"].as_str().unwrap())
        .collect();
    named.sort_unstable();
    assert_eq!(named, ["a", "b", "c"]);
    assert_eq!(edges[0]["reason"]["kind"], "FOLLOWED_BY_PEOPLE_YOU_FOLLOW");
    assert_eq!(
        edges[0]["reason"]["followedByCount"],
        json!({ "count": 3, "exact": true })
    );
    assert_eq!(edges[1]["reason"]["kind"], "FOLLOWS_YOU");
    assert!(!handles(&edges).contains(&"b".to_owned()));
    assert!(!handles(&edges).contains(&"me".to_owned()));

    // Only the account itself reads them.
    let r = t
        .execute(Viewer::User(a), SUGGESTIONS, json!({ "id": gid(me) }))
        .await;
    assert_eq!(error_code(&r), Some("FORBIDDEN"));
    let r = t
        .execute(Viewer::Anonymous, SUGGESTIONS, json!({ "id": gid(me) }))
        .await;
    assert_eq!(error_code(&r), Some("UNAUTHENTICATED"));
}

#[tokio::test]
async fn every_exclusion_holds_and_each_change_computes_them_again() {
    let t = app().await;
    let me = t.user("me").await;
    let friend = t.user("friend").await;
    assert_ok(&t.follow(me, friend).await);
    let names = [
        "keep",
        "blocked",
        "blocker",
        "muted",
        "locked",
        "dismissed",
        "gone",
        "later",
    ];
    let mut users = std::collections::HashMap::new();
    for name in names {
        let user = t.user(name).await;
        assert_ok(&t.follow(friend, user).await);
        users.insert(name, user);
    }
    // A followee that hides its lists is not read, nor named.
    let secret = t.user("secret").await;
    let hidden_pick = t.user("hidden_pick").await;
    assert_ok(&t.follow(me, secret).await);
    assert_ok(&t.follow(secret, hidden_pick).await);
    t.sql(&format!(
        "UPDATE users SET hides_collections = TRUE WHERE id = {secret}"
    ))
    .await;
    t.app.read.forget_users(&[secret]);

    // Computed and kept before any of the changes below: each change must
    // outdate what was kept, or be checked again as it is read.
    let before = handles(&suggestions(&t, me).await);
    for name in ["blocked", "blocker", "muted", "locked", "dismissed", "gone"] {
        assert!(before.contains(&name.to_owned()), "{name} in {before:?}");
    }
    act(&t, me, "block", users["blocked"]).await;
    act(&t, users["blocker"], "block", me).await;
    act(&t, me, "mute", users["muted"]).await;
    t.sql(&format!(
        "UPDATE users SET locked = TRUE WHERE id = {}",
        users["locked"]
    ))
    .await;
    t.app.read.forget_users(&[users["locked"]]);
    assert_ok(&t.follow(me, users["locked"]).await);
    act(&t, me, "dismissSuggestion", users["dismissed"]).await;
    kith::testing::write::lifecycle::set_status(&t.app, users["gone"], UserStatus::Suspended)
        .await
        .unwrap();

    let shown = handles(&suggestions(&t, me).await);
    let mut first_two = shown[..2].to_vec();
    first_two.sort();
    assert_eq!(first_two, ["keep", "later"], "{shown:?}");
    for left_out in [
        "blocked",
        "blocker",
        "muted",
        "locked",
        "dismissed",
        "gone",
        "hidden_pick",
        "friend",
        "secret",
    ] {
        assert!(
            !shown.contains(&left_out.to_owned()),
            "{left_out} in {shown:?}"
        );
    }
    // A dismissal of an account that does not exist, and a cursor of no page.
    let r = t
        .execute(
            Viewer::User(me),
            "mutation($id: ID!) { dismissSuggestion(input: {userId: $id}) { userId } }",
            json!({ "id": gid(UserId::new(987_654_321).unwrap()) }),
        )
        .await;
    assert_eq!(error_code(&r), Some("NOT_FOUND"), "{r}");
    let r = t
        .execute(
            Viewer::User(me),
            "query($id: ID!) { user(id: $id) { suggestedFollows(after: \"s:18446744073709551615\") { totalCount } } }",
            json!({ "id": gid(me) }),
        )
        .await;
    assert_eq!(error_code(&r), Some("BAD_CURSOR"), "{r}");
    // Kept now: an account suspended since is left out as it is read.
    kith::testing::write::lifecycle::set_status(&t.app, users["later"], UserStatus::Suspended)
        .await
        .unwrap();
    let shown = handles(&suggestions(&t, me).await);
    assert!(!shown.contains(&"later".to_owned()), "{shown:?}");
    assert!(shown.contains(&"keep".to_owned()), "{shown:?}");
    // Kept: a change elsewhere is not seen...
    let fresh = t.user("fresh").await;
    assert_ok(&t.follow(friend, fresh).await);
    assert!(!handles(&suggestions(&t, me).await).contains(&"fresh".to_owned()));
    // ...until the viewer's own follow drops them.
    assert_ok(&t.follow(me, users["keep"]).await);
    let shown = handles(&suggestions(&t, me).await);
    assert!(!shown.contains(&"keep".to_owned()), "{shown:?}");
    assert!(shown.contains(&"fresh".to_owned()), "{shown:?}");
}

#[tokio::test]
async fn a_viewer_who_follows_no_one_gets_popular_accounts() {
    let t = app().await;
    let me = t.user("me").await;
    let star = t.user("star").await;
    let rising = t.user("rising").await;
    for i in 0..3 {
        let fan = t.user(&format!("fan{i}")).await;
        assert_ok(&t.follow(fan, star).await);
        if i == 0 {
            assert_ok(&t.follow(fan, rising).await);
        }
    }
    assert_ok(&t.follow(star, me).await);
    // Followers and their counts are the projection's.
    let _relay = t.start_relay();
    let _projector = t.start_projector(Arc::new(ProjectorHooks::default()));
    settled(&t, &[me, star, rising], 60).await;
    let edges = suggestions(&t, me).await;
    let shown = handles(&edges);
    // The star follows the viewer: that is its reason; then the most followed.
    assert_eq!(shown[..2], ["star", "rising"], "{shown:?}");
    assert_eq!(edges[0]["reason"]["kind"], "FOLLOWS_YOU");
    assert_eq!(edges[1]["reason"]["kind"], "POPULAR");
    assert!(!shown.contains(&"me".to_owned()));
}

#[tokio::test]
async fn a_request_made_by_follow_many_outdates_the_kept_suggestions() {
    let t = app().await;
    let me = t.user("me").await;
    let locked = t.user("locked").await;
    t.sql(&format!(
        "UPDATE users SET locked = TRUE WHERE id = {locked}"
    ))
    .await;
    t.app.read.forget_users(&[locked]);
    suggestions(&t, me).await;
    let generation = || async {
        let [_, key] = t.app.keys.suggestions(me);
        let mut redis = t.app.redis.get().await.unwrap();
        let value: Option<i64> = redis::cmd("GET")
            .arg(&key)
            .query_async(&mut *redis)
            .await
            .unwrap();
        value.unwrap_or(0)
    };
    let before = generation().await;
    let r = t
        .execute(
            Viewer::User(me),
            "mutation($ids: [ID!]!) { followMany(input: {userIds: $ids}) { changedCount } }",
            json!({ "ids": [gid(locked)] }),
        )
        .await;
    assert_ok(&r);
    assert!(
        generation().await > before,
        "a request moves the generation on"
    );
}
