//! Per-follow options: set with the follow or after it, on a pending
//! request for the follow its acceptance makes; read only by the follower;
//! each change an event; a new follow starts from the defaults, a restore
//! keeps them.

use kith::model::{UserId, UserStatus};
use kith::testing::auth::Viewer;
use serde_json::{Value, json};

use crate::helpers::{TestApp, assert_ok, error_code, spawn_app, spawn_app_with};

fn gid(user: UserId) -> String {
    kith::testing::graph::ids::user_id(user).to_string()
}

const OPTIONS: &str = "followOptions { notify showReposts languages }";

/// `follow` with `options` (the input's other fields) as `actor`.
async fn follow(t: &TestApp, actor: UserId, target: UserId, options: Value) -> Value {
    let mut input = options;
    input["userId"] = json!(gid(target));
    t.execute(
        Viewer::User(actor),
        &format!(
            "mutation($input: FollowInput!) {{ follow(input: $input) {{
                changed viewerRelation {{ following requested {OPTIONS} }} }} }}"
        ),
        json!({ "input": input }),
    )
    .await
}

async fn update(t: &TestApp, actor: UserId, target: UserId, options: Value) -> Value {
    let mut input = options;
    input["userId"] = json!(gid(target));
    t.execute(
        Viewer::User(actor),
        &format!(
            "mutation($input: UpdateFollowInput!) {{ updateFollow(input: $input) {{
                changed requested {OPTIONS} viewerRelation {{ {OPTIONS} }} }} }}"
        ),
        json!({ "input": input }),
    )
    .await
}

/// The options on `subject`'s relation to `other`, as `viewer` reads them.
async fn on_relation(t: &TestApp, viewer: Viewer, subject: UserId, other: UserId) -> Value {
    let r = t
        .execute(
            viewer,
            &format!("query($a: ID!, $b: ID!) {{ user(id: $a) {{ relationTo(other: $b) {{ {OPTIONS} }} }} }}"),
            json!({ "a": gid(subject), "b": gid(other) }),
        )
        .await;
    assert_ok(&r);
    r["data"]["user"]["relationTo"]["followOptions"].clone()
}

/// The options on the first edge of `owner`'s `list`, as `viewer` reads them.
async fn on_list(t: &TestApp, viewer: Viewer, owner: UserId, list: &str) -> Value {
    let r = t
        .execute(
            viewer,
            &format!("query($id: ID!) {{ user(id: $id) {{ {list}(first: 5) {{ edges {{ {OPTIONS} }} }} }} }}"),
            json!({ "id": gid(owner) }),
        )
        .await;
    assert_ok(&r);
    r["data"]["user"][list]["edges"][0]["followOptions"].clone()
}

fn options(notify: bool, show_reposts: bool, languages: Value) -> Value {
    json!({ "notify": notify, "showReposts": show_reposts, "languages": languages })
}

#[tokio::test]
async fn options_ride_on_the_follow_and_only_the_follower_reads_them() {
    let t = spawn_app_with(|c| c.writes.rate_limit_capacity = 1000).await;
    t.users_cached().await;
    let (a, b) = (t.user("a").await, t.user("b").await);
    let r = follow(
        &t,
        a,
        b,
        json!({ "notify": true, "languages": ["en", "de"] }),
    )
    .await;
    assert_ok(&r);
    assert_eq!(
        r["data"]["follow"],
        json!({ "changed": true, "viewerRelation": { "following": true, "requested": false,
                "followOptions": options(true, true, json!(["en", "de"])) } })
    );
    let events = t.outbox_payloads().await;
    let (created, changed) = (&events[events.len() - 2], &events[events.len() - 1]);
    assert_eq!(created["type"], "FollowCreated");
    assert_eq!(changed["type"], "FollowOptionsChanged");
    assert_eq!(changed["followedAtMs"], created["followedAtMs"]);
    assert_eq!(
        (
            changed["version"].clone(),
            changed["notify"].clone(),
            changed["languages"].clone()
        ),
        (json!(1), json!(true), json!(["en", "de"]))
    );

    // The follower reads them on its relation and its following list;
    // nobody else does, on any list.
    let set = options(true, true, json!(["en", "de"]));
    assert_eq!(on_relation(&t, Viewer::User(a), a, b).await, set);
    assert_eq!(on_list(&t, Viewer::User(a), a, "following").await, set);
    assert_eq!(on_relation(&t, Viewer::User(b), a, b).await, Value::Null);
    assert_eq!(
        on_list(&t, Viewer::User(b), a, "following").await,
        Value::Null
    );
    assert_eq!(
        on_list(&t, Viewer::User(b), b, "followers").await,
        Value::Null
    );
    assert_eq!(
        on_list(&t, Viewer::Anonymous, a, "following").await,
        Value::Null
    );

    // updateFollow changes what it names; a repeat changes nothing.
    let r = update(&t, a, b, json!({ "showReposts": false, "languages": null })).await;
    assert_ok(&r);
    let now = options(true, false, Value::Null);
    assert_eq!(
        r["data"]["updateFollow"],
        json!({ "changed": true, "requested": false, "followOptions": now,
                "viewerRelation": { "followOptions": now } })
    );
    let again = update(&t, a, b, json!({ "showReposts": false })).await;
    assert_eq!(again["data"]["updateFollow"]["changed"], false, "{again}");
    assert_eq!(t.outbox_payloads().await.last().unwrap()["version"], 2);

    // A follow that stands takes options too; a plain repeat changes nothing.
    let r = follow(&t, a, b, json!({ "notify": false })).await;
    assert_eq!(r["data"]["follow"]["changed"], true, "{r}");
    assert_eq!(
        follow(&t, a, b, json!({})).await["data"]["follow"]["changed"],
        false
    );

    // An unfollow, then a follow: the new follow starts from the defaults.
    assert_ok(&t.unfollow(a, b).await);
    assert_eq!(on_relation(&t, Viewer::User(a), a, b).await, Value::Null);
    assert_ok(&t.follow(a, b).await);
    assert_eq!(
        on_relation(&t, Viewer::User(a), a, b).await,
        options(false, true, Value::Null)
    );
}

#[tokio::test]
async fn a_request_keeps_its_options_for_the_follow_its_acceptance_makes() {
    let t = spawn_app().await;
    let (a, b) = (t.user("a").await, t.user("b").await);
    let r = t
        .execute(
            Viewer::User(b),
            "mutation { updateAccountSettings(input: {locked: true}) { user { locked } } }",
            json!({}),
        )
        .await;
    assert_ok(&r);
    let r = follow(&t, a, b, json!({ "notify": true })).await;
    assert_eq!(
        r["data"]["follow"]["viewerRelation"]["requested"], true,
        "{r}"
    );
    let r = update(&t, a, b, json!({ "languages": ["fr"] })).await;
    assert_eq!(r["data"]["updateFollow"]["requested"], true, "{r}");
    assert_eq!(
        r["data"]["updateFollow"]["followOptions"],
        options(true, true, json!(["fr"]))
    );
    let r = t
        .execute(
            Viewer::User(b),
            "mutation($id: ID!) { acceptFollowRequest(input: {userId: $id}) { changed } }",
            json!({ "id": gid(a) }),
        )
        .await;
    assert_ok(&r);
    assert_eq!(
        on_relation(&t, Viewer::User(a), a, b).await,
        options(true, true, json!(["fr"]))
    );
    let types: Vec<Value> = t
        .outbox_payloads()
        .await
        .iter()
        .map(|e| e["type"].clone())
        .collect();
    assert_eq!(
        types[types.len() - 3..],
        [
            json!("FollowRequestAccepted"),
            json!("FollowCreated"),
            json!("FollowOptionsChanged")
        ]
    );
}

#[tokio::test]
async fn options_survive_a_restore_and_bad_ones_write_nothing() {
    use kith::testing::write::lifecycle;

    let t = spawn_app_with(|c| c.writes.rate_limit_capacity = 1000).await;
    t.users_cached().await;
    let (a, b, c) = (t.user("a").await, t.user("b").await, t.user("c").await);
    assert_ok(&follow(&t, a, b, json!({ "notify": true })).await);
    lifecycle::set_status(&t.app, b, UserStatus::Suspended)
        .await
        .unwrap();
    // Read while the follow is hidden: the process holds a's boundaries
    // without it; the restore's notice drops them.
    assert_eq!(on_relation(&t, Viewer::User(a), a, b).await, Value::Null);
    lifecycle::set_status(&t.app, b, UserStatus::Active)
        .await
        .unwrap();
    crate::helpers::eventually("the restored follow shows its options", 10, || async {
        (on_relation(&t, Viewer::User(a), a, b).await == options(true, true, Value::Null))
            .then_some(())
    })
    .await;

    let bad = [
        json!({ "languages": [] }),
        json!({ "languages": ["EN"] }),
        json!({ "languages": ["english"] }),
        json!({ "languages": ["en", "en"] }),
        json!({ "languages": (0..17).map(|i| format!("a{}", (b'a' + i) as char)).collect::<Vec<_>>() }),
    ];
    let before = t.outbox_payloads().await.len();
    for input in bad {
        let r = follow(&t, a, c, input.clone()).await;
        assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{input}: {r}");
        let r = update(&t, a, b, input.clone()).await;
        assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{input}: {r}");
    }
    assert_eq!(t.edge(a, c).await, None, "a refused follow is not made");
    assert_eq!(t.outbox_payloads().await.len(), before);
    assert_eq!(
        error_code(&update(&t, a, c, json!({ "notify": true })).await),
        Some("NOT_FOUND")
    );
    assert_eq!(
        error_code(&update(&t, a, a, json!({ "notify": true })).await),
        Some("INVALID_INPUT")
    );
    let r = t
        .execute(
            Viewer::Anonymous,
            "mutation($id: ID!) { updateFollow(input: {userId: $id, notify: true}) { changed } }",
            json!({ "id": gid(b) }),
        )
        .await;
    assert_eq!(error_code(&r), Some("UNAUTHENTICATED"));
    // Across a block: refused, nothing written.
    let r = t
        .execute(
            Viewer::User(c),
            "mutation($id: ID!) { block(input: {userId: $id}) { changed } }",
            json!({ "id": gid(a) }),
        )
        .await;
    assert_ok(&r);
    let r = follow(&t, a, c, json!({ "notify": true })).await;
    assert_eq!(error_code(&r), Some("BLOCKED"), "{r}");
    assert_eq!(t.edge(a, c).await, None);
}

/// A request made again after it ended starts without options, even in
/// the millisecond of the one before (one transaction: one `now()`).
#[tokio::test]
async fn a_request_made_again_does_not_keep_the_options_of_the_one_before() {
    use diesel_async::{AsyncConnection as _, RunQueryDsl as _};
    let t = spawn_app().await;
    let (a, b) = (t.user("a").await, t.user("b").await);
    let step = |request: bool, kind: &str| {
        format!("SELECT kith_request_step({a}, {b}, {request}, gen_random_uuid(), '{kind}')")
    };
    let calls = [
        step(true, "FollowRequested"),
        format!(
            "SELECT kith_set_follow_options({a}, {b}, TRUE, NULL, NULL, FALSE, gen_random_uuid())"
        ),
        step(false, "FollowRequestCanceled"),
        step(true, "FollowRequested"),
    ];
    let mut conn = t.conn().await;
    conn.transaction::<_, diesel::result::Error, _>(async |conn| {
        for call in &calls {
            diesel::sql_query(call.as_str()).execute(conn).await?;
        }
        Ok(())
    })
    .await
    .unwrap();
    #[derive(diesel::QueryableByName)]
    struct Row {
        #[diesel(sql_type = diesel::sql_types::Bool)]
        kept: bool,
    }
    let row: Row = diesel::sql_query(format!(
        "SELECT options_at IS NOT DISTINCT FROM requested_at AS kept
           FROM follow_request WHERE from_user_id = {a} AND to_user_id = {b} AND active"
    ))
    .get_result(&mut *conn)
    .await
    .unwrap();
    assert!(!row.kept, "the options of the request before are dropped");
}
