//! Close friends: a private list that only its owner reads, where each
//! listed account learns only its own place; a block ends listings both
//! ways; the cap holds under racing additions.

use kith::model::UserId;
use kith::testing::auth::Viewer;
use serde_json::{Value, json};

use crate::helpers::{TestApp, assert_ok, error_code, eventually, spawn_app, spawn_app_with};

fn gid(user: UserId) -> String {
    kith::testing::graph::ids::user_id(user).to_string()
}

async fn change(t: &TestApp, actor: UserId, target: UserId, add: bool) -> Value {
    let field = if add {
        "addCloseFriend"
    } else {
        "removeCloseFriend"
    };
    t.execute(
        Viewer::User(actor),
        &format!(
            "mutation($id: ID!) {{ {field}(input: {{userId: $id}}) {{
                changed user {{ handle }} viewerRelation {{ following closeFriend inTheirCloseFriends }} }} }}"
        ),
        json!({ "id": gid(target) }),
    )
    .await
}

/// `field` of `subject`'s relation to `other`, as `viewer` reads it.
async fn relation(
    t: &TestApp,
    viewer: Viewer,
    subject: UserId,
    other: UserId,
    field: &str,
) -> Value {
    let r = t
        .execute(
            viewer,
            &format!("query($a: ID!, $b: ID!) {{ user(id: $a) {{ relationTo(other: $b) {{ {field} }} }} }}"),
            json!({ "a": gid(subject), "b": gid(other) }),
        )
        .await;
    assert_ok(&r);
    r["data"]["user"]["relationTo"][field].clone()
}

/// The handles in `owner`'s close friends as `viewer` reads them, or the
/// error's code.
async fn listed(t: &TestApp, viewer: Viewer, owner: UserId) -> Result<Vec<String>, String> {
    let r = t
        .execute(
            viewer,
            "query($id: ID!) { user(id: $id) { closeFriends(first: 10) {
                totalCount edges { node { handle } } } } }",
            json!({ "id": gid(owner) }),
        )
        .await;
    if let Some(code) = error_code(&r) {
        return Err(code.to_owned());
    }
    let list = &r["data"]["user"]["closeFriends"];
    let handles: Vec<String> = list["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node"]["handle"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(list["totalCount"], handles.len(), "{r}");
    Ok(handles)
}

#[tokio::test]
async fn only_the_owner_reads_the_list_and_each_learns_only_its_own_place() {
    let t = spawn_app().await;
    t.users_cached().await;
    let (a, b, c) = (t.user("a").await, t.user("b").await, t.user("c").await);
    let r = change(&t, a, b, true).await;
    assert_ok(&r);
    assert_eq!(
        r["data"]["addCloseFriend"],
        json!({ "changed": true, "user": { "handle": "b" },
                "viewerRelation": { "following": false, "closeFriend": true, "inTheirCloseFriends": false } })
    );
    assert_eq!(t.edge(a, b).await, None, "a listing makes no follow");
    let event = t.outbox_payloads().await.last().unwrap().clone();
    assert_eq!(event["type"], "CloseFriendAdded");
    assert_eq!(
        (event["from"].clone(), event["to"].clone()),
        (json!(a.get()), json!(b.get()))
    );

    assert_eq!(
        listed(&t, Viewer::User(a), a).await,
        Ok(vec!["b".to_owned()])
    );
    for outsider in [Viewer::User(b), Viewer::User(c), Viewer::Anonymous] {
        let refused = listed(&t, outsider, a).await.unwrap_err();
        assert!(
            ["FORBIDDEN", "UNAUTHENTICATED"].contains(&refused.as_str()),
            "{refused}"
        );
    }
    // b learns its own place, from its own relation to a; nobody else does.
    assert_eq!(
        relation(&t, Viewer::User(b), b, a, "inTheirCloseFriends").await,
        true
    );
    assert_eq!(
        relation(&t, Viewer::User(a), a, b, "closeFriend").await,
        true
    );
    assert_eq!(
        relation(&t, Viewer::User(c), a, b, "closeFriend").await,
        Value::Null
    );
    assert_eq!(
        relation(&t, Viewer::User(c), b, a, "inTheirCloseFriends").await,
        Value::Null
    );
    assert_eq!(
        relation(&t, Viewer::User(c), c, a, "inTheirCloseFriends").await,
        false
    );

    // Repeats change nothing; a removal is an event of its own.
    assert_eq!(
        change(&t, a, b, true).await["data"]["addCloseFriend"]["changed"],
        false
    );
    let removed = change(&t, a, b, false).await;
    assert_eq!(
        removed["data"]["removeCloseFriend"]["viewerRelation"],
        json!({ "following": false, "closeFriend": false, "inTheirCloseFriends": false })
    );
    assert_eq!(removed["data"]["removeCloseFriend"]["changed"], true);
    assert_eq!(
        change(&t, a, b, false).await["data"]["removeCloseFriend"]["changed"],
        false
    );
    assert_eq!(
        t.outbox_payloads().await.last().unwrap()["type"],
        "CloseFriendRemoved"
    );
    assert_eq!(
        relation(&t, Viewer::User(b), b, a, "inTheirCloseFriends").await,
        false
    );

    // A listing written by another process reaches this one's held
    // boundaries through the database's notice.
    t.sql(&format!(
        "INSERT INTO close_friend (from_user_id, to_user_id, active, added_at, version)
         VALUES ({c}, {b}, TRUE, date_trunc('milliseconds', now()), 1)"
    ))
    .await;
    eventually("the notice drops b's held boundaries", 10, || async {
        (relation(&t, Viewer::User(b), b, c, "inTheirCloseFriends").await == true).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_block_ends_listings_both_ways_and_refuses_new_ones() {
    let t = spawn_app().await;
    let (a, b) = (t.user("a").await, t.user("b").await);
    assert_ok(&change(&t, a, b, true).await);
    assert_ok(&change(&t, b, a, true).await);
    let before = t.outbox_payloads().await.len();
    let r = t
        .execute(
            Viewer::User(a),
            "mutation($id: ID!) { block(input: {userId: $id}) { changed } }",
            json!({ "id": gid(b) }),
        )
        .await;
    assert_ok(&r);
    assert_eq!(listed(&t, Viewer::User(a), a).await, Ok(vec![]));
    assert_eq!(listed(&t, Viewer::User(b), b).await, Ok(vec![]));
    let removed: Vec<(Value, Value)> = t.outbox_payloads().await[before..]
        .iter()
        .filter(|e| e["type"] == "CloseFriendRemoved")
        .map(|e| (e["from"].clone(), e["to"].clone()))
        .collect();
    assert_eq!(
        removed,
        vec![
            (json!(a.get()), json!(b.get())),
            (json!(b.get()), json!(a.get()))
        ]
    );
    for (actor, target) in [(a, b), (b, a)] {
        assert_eq!(
            error_code(&change(&t, actor, target, true).await),
            Some("BLOCKED")
        );
    }
    // A removal across the block is no refusal: there is nothing to remove.
    assert_eq!(
        change(&t, b, a, false).await["data"]["removeCloseFriend"]["changed"],
        false
    );
    let r = t
        .execute(
            Viewer::User(a),
            "mutation($id: ID!) { unblock(input: {userId: $id}) { changed } }",
            json!({ "id": gid(b) }),
        )
        .await;
    assert_ok(&r);
    assert_eq!(
        listed(&t, Viewer::User(a), a).await,
        Ok(vec![]),
        "an unblock restores nothing"
    );
    assert_eq!(
        change(&t, a, b, true).await["data"]["addCloseFriend"]["changed"],
        true
    );
}

#[tokio::test]
async fn refusals_have_their_codes_and_racing_additions_keep_the_cap() {
    let t = spawn_app_with(|c| {
        c.writes.max_close_friends = 3;
        c.writes.rate_limit_capacity = 1000;
    })
    .await;
    let owner = t.user("owner").await;
    assert_eq!(
        error_code(&change(&t, owner, owner, true).await),
        Some("INVALID_INPUT")
    );
    let unknown = UserId::new(987_654_321).unwrap();
    assert_eq!(
        error_code(&change(&t, owner, unknown, true).await),
        Some("NOT_FOUND")
    );
    let anonymous = t
        .execute(
            Viewer::Anonymous,
            "mutation($id: ID!) { addCloseFriend(input: {userId: $id}) { changed } }",
            json!({ "id": gid(owner) }),
        )
        .await;
    assert_eq!(error_code(&anonymous), Some("UNAUTHENTICATED"));

    let mut friends = Vec::new();
    for i in 0..8 {
        friends.push(t.user(&format!("friend{i}")).await);
    }
    let answers =
        futures::future::join_all(friends.iter().map(|f| change(&t, owner, *f, true))).await;
    let added = answers
        .iter()
        .filter(|r| r["data"]["addCloseFriend"]["changed"] == true)
        .count();
    let capped = answers
        .iter()
        .filter(|r| error_code(r) == Some("CLOSE_FRIENDS_LIMIT"))
        .count();
    assert_eq!((added, capped), (3, 5), "{answers:?}");
    let listed_now = listed(&t, Viewer::User(owner), owner).await.unwrap();
    assert_eq!(listed_now.len(), 3);
    // A removal makes room for one more.
    let id_of = |handle: &str| friends[handle["friend".len()..].parse::<usize>().unwrap()];
    assert_ok(&change(&t, owner, id_of(&listed_now[0]), false).await);
    let spare = (0..friends.len())
        .map(|i| format!("friend{i}"))
        .find(|h| !listed_now.contains(h))
        .unwrap();
    assert_eq!(
        change(&t, owner, id_of(&spare), true).await["data"]["addCloseFriend"]["changed"],
        true
    );
    assert_eq!(
        error_code(&change(&t, owner, id_of(&listed_now[0]), true).await),
        Some("CLOSE_FRIENDS_LIMIT")
    );
}

#[tokio::test]
async fn verify_reports_listings_across_a_block_and_reconcile_removes_them() {
    use kith::testing::consistency::reconcile::{Scope, reconcile};
    use kith::testing::consistency::verify::Kind;

    let t = spawn_app().await;
    let (a, b, c) = (t.user("a").await, t.user("b").await, t.user("c").await);
    assert_ok(&change(&t, a, c, true).await);
    // Written past every guard: a block beside a listing, the other way round.
    t.sql(&format!(
        "INSERT INTO close_friend (from_user_id, to_user_id, active, added_at, version)
         VALUES ({a}, {b}, TRUE, date_trunc('milliseconds', now()), 1)"
    ))
    .await;
    t.sql(&format!(
        "INSERT INTO block (from_user_id, to_user_id, active, blocked_at, version)
         VALUES ({b}, {a}, TRUE, date_trunc('milliseconds', now()), 1)"
    ))
    .await;
    let report = t.verify(0).await;
    assert_eq!(
        report.counts.get(&Kind::CloseFriendAcrossBlock),
        Some(&1),
        "{report}"
    );
    let summary = reconcile(&t.app, Scope::Full, 100, false).await.unwrap();
    assert_eq!(summary.close_friends_removed, 1, "{summary}");
    assert_eq!(summary.repairs(), 1, "{summary}");
    let report = t.verify(0).await;
    assert_eq!(
        report.counts.get(&Kind::CloseFriendAcrossBlock),
        None,
        "{report}"
    );
    assert_eq!(
        t.outbox_payloads().await.last().unwrap()["type"],
        "CloseFriendRemoved"
    );
    assert_eq!(
        listed(&t, Viewer::User(a), a).await,
        Ok(vec!["c".to_owned()])
    );
    // A second run finds nothing: it reports no repair it did not make.
    let again = reconcile(&t.app, Scope::Full, 100, false).await.unwrap();
    assert_eq!(again.repairs(), 0, "{again}");
}

/// `query` with `token` through the service's router: its JSON answer.
async fn with_token(t: &TestApp, token: &str, query: &str, variables: Value) -> Value {
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;
    let request = axum::http::Request::post("/graphql")
        .header(axum::http::header::CONTENT_TYPE, "application/json")
        .header(axum::http::header::AUTHORIZATION, format!("Bearer {token}"))
        .body(axum::body::Body::from(
            json!({ "query": query, "variables": variables }).to_string(),
        ))
        .unwrap();
    let response = kith::testing::http::router(t.app.clone())
        .oneshot(request)
        .await
        .unwrap();
    serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap()
}

#[tokio::test]
async fn a_service_granted_the_scope_asks_for_many_authors_at_once() {
    use kith::testing::auth::Scopes;

    let t = spawn_app_with(|c| c.auth.service_clients = vec!["posts".into()]).await;
    t.users_cached().await;
    let (v, a, b, c) = (
        t.user("v").await,
        t.user("a").await,
        t.user("b").await,
        t.user("c").await,
    );
    assert_ok(&change(&t, a, v, true).await);
    assert_ok(&change(&t, c, v, true).await);
    assert_ok(&change(&t, c, a, true).await);
    let now = chrono::Utc::now().timestamp();
    let keys = &t.app.auth.tokens;
    let service = keys.issue_service("posts", Scopes::CLOSE_FRIENDS, now, 60);
    const AMONG: &str =
        "query($u: ID!, $a: [ID!]!) { inCloseFriendsOf(userId: $u, authorIds: $a) }";
    let authors = json!([
        gid(a),
        gid(b),
        gid(c),
        gid(UserId::new(987_654_321).unwrap())
    ]);
    let vars = json!({ "u": gid(v), "a": authors });
    let r = with_token(&t, &service, AMONG, vars.clone()).await;
    assert_ok(&r);
    assert_eq!(
        r["data"]["inCloseFriendsOf"],
        json!([true, false, true, false])
    );
    // The service reads any account's list (whom a post shared with close
    // friends goes to), and acts for no account.
    let r = with_token(
        &t,
        &service,
        "query($id: ID!) { user(id: $id) { closeFriends(first: 5) { edges { node { handle } } } } }",
        json!({ "id": gid(c) }),
    )
    .await;
    assert_ok(&r);
    assert_eq!(
        r["data"]["user"]["closeFriends"]["edges"],
        json!([{ "node": { "handle": "a" } }, { "node": { "handle": "v" } }])
    );
    let r = with_token(&t, &service, "{ viewer { handle } }", json!({})).await;
    assert_ok(&r);
    assert_eq!(r["data"]["viewer"], Value::Null);
    let r = with_token(
        &t,
        &service,
        "mutation($id: ID!) { addCloseFriend(input: {userId: $id}) { changed } }",
        json!({ "id": gid(a) }),
    )
    .await;
    assert_eq!(error_code(&r), Some("FORBIDDEN"), "{r}");
    // Nobody else may ask: a user (even about itself), a service without
    // the scope, an anonymous caller; nor more than 100 authors at once.
    let user = with_token(&t, &t.token(v), AMONG, vars.clone()).await;
    assert_eq!(error_code(&user), Some("FORBIDDEN"), "{user}");
    // A token with the scope from a subject not listed as a service is
    // refused, not taken for a service's nor a user's.
    let stranger = keys.issue_service("stranger", Scopes::CLOSE_FRIENDS, now, 60);
    let r = with_token(&t, &stranger, AMONG, vars.clone()).await;
    assert_eq!(error_code(&r), Some("UNAUTHENTICATED"), "{r}");
    let r = with_token(&t, &stranger, "{ viewer { handle } }", json!({})).await;
    assert_eq!(error_code(&r), Some("UNAUTHENTICATED"), "{r}");
    let unscoped = keys.issue_service("posts", Scopes::default(), now, 60);
    let r = with_token(&t, &unscoped, AMONG, vars.clone()).await;
    assert_eq!(
        error_code(&r),
        Some("UNAUTHENTICATED"),
        "a token of no scope names a user: {r}"
    );
    let anonymous = t.execute(Viewer::Anonymous, AMONG, vars).await;
    assert_eq!(error_code(&anonymous), Some("UNAUTHENTICATED"));
    let many: Vec<String> = (0..101).map(|_| gid(a)).collect();
    let r = with_token(&t, &service, AMONG, json!({ "u": gid(v), "a": many })).await;
    assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{r}");
}
