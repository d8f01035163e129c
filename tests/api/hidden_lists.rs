//! Hidden lists: an account that hides its collections shows its
//! followers and following only to itself, and nothing derived from them
//! reveals their members to anyone else; the counts stay public.

use std::sync::Arc;

use kith::model::{UserId, UserStatus};
use kith::testing::auth::Viewer;
use kith::testing::pipeline::projector::ProjectorHooks;
use serde_json::{Value, json};

use crate::helpers::{TestApp, assert_ok, error_code, settled, spawn_app};

fn gid(user: UserId) -> String {
    kith::testing::graph::ids::user_id(user).to_string()
}

async fn hide(t: &TestApp, user: UserId, hides: bool) -> Value {
    t.execute(
        Viewer::User(user),
        "mutation($h: Boolean) { updateAccountSettings(input: {hidesCollections: $h, clientMutationId: \"s\"}) {
            clientMutationId user { handle hidesCollections } } }",
        json!({ "h": hides }),
    )
    .await
}

/// `followers` and `following` of `owner` as `viewer` sees them.
async fn lists(t: &TestApp, viewer: Viewer, owner: UserId) -> Value {
    let r = t
        .execute(
            viewer,
            "query($id: ID!) { user(id: $id) { hidesCollections
                followers(first: 5) { hidden totalCount edges { node { handle } } pageInfo { hasNextPage } }
                following(first: 5) { hidden totalCount edges { node { handle } } } } }",
            json!({ "id": gid(owner) }),
        )
        .await;
    assert_ok(&r);
    r["data"]["user"].clone()
}

#[tokio::test]
async fn only_the_owner_sees_hidden_lists_and_counts_stay_public() {
    let t = spawn_app().await;
    let (owner, fan, idol, other) = (
        t.user("owner").await,
        t.user("fan").await,
        t.user("idol").await,
        t.user("other").await,
    );
    assert_ok(&t.follow(fan, owner).await);
    assert_ok(&t.follow(owner, idol).await);
    let _relay = t.start_relay();
    let _projector = t.start_projector(Arc::new(ProjectorHooks::default()));
    settled(&t, &[owner], 60).await;

    let r = hide(&t, owner, true).await;
    assert_ok(&r);
    assert_eq!(
        r["data"]["updateAccountSettings"],
        json!({ "clientMutationId": "s", "user": { "handle": "owner", "hidesCollections": true } })
    );
    for viewer in [Viewer::User(other), Viewer::User(fan), Viewer::Anonymous] {
        let seen = lists(&t, viewer, owner).await;
        assert_eq!(seen["hidesCollections"], true);
        assert_eq!(
            seen["followers"],
            json!({ "hidden": true, "totalCount": 1, "edges": [], "pageInfo": { "hasNextPage": false } })
        );
        assert_eq!(
            seen["following"],
            json!({ "hidden": true, "totalCount": 1, "edges": [] })
        );
    }
    // A hidden list checks its paging arguments as any list does.
    for args in [
        "followers(first: -1)",
        "following(first: 1, last: 1)",
        "followers(offset: 1000000)",
        "knownFollowers(first: 101)",
    ] {
        let r = t
            .execute(
                Viewer::User(other),
                &format!("query($id: ID!) {{ user(id: $id) {{ {args} {{ totalCount }} }} }}"),
                json!({ "id": gid(owner) }),
            )
            .await;
        assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{args}: {r}");
    }
    let own = lists(&t, Viewer::User(owner), owner).await;
    assert_eq!(own["followers"]["hidden"], false);
    assert_eq!(own["followers"]["edges"][0]["node"]["handle"], "fan");
    assert_eq!(own["following"]["edges"][0]["node"]["handle"], "idol");

    // The owner still shows in other users' public lists.
    let fans = lists(&t, Viewer::User(other), idol).await;
    assert_eq!(fans["followers"]["edges"][0]["node"]["handle"], "owner");

    // Shown again once the setting is off.
    assert_ok(&hide(&t, owner, false).await);
    let seen = lists(&t, Viewer::User(other), owner).await;
    assert_eq!(seen["followers"]["hidden"], false);
    assert_eq!(seen["followers"]["edges"][0]["node"]["handle"], "fan");
}

#[tokio::test]
async fn nothing_derived_from_a_hidden_list_shows_its_members() {
    let t = spawn_app().await;
    let (a, b, viewer, s) = (
        t.user("a").await,
        t.user("b").await,
        t.user("viewer").await,
        t.user("s").await,
    );
    // a and b both follow s; the viewer follows s, and s follows a.
    for (x, y) in [(a, s), (b, s), (viewer, s), (s, a)] {
        assert_ok(&t.follow(x, y).await);
    }
    let _relay = t.start_relay();
    let _projector = t.start_projector(Arc::new(ProjectorHooks::default()));
    settled(&t, &[a, s], 60).await;
    assert_ok(&hide(&t, b, true).await);
    assert_ok(&hide(&t, a, true).await);
    let query = "query($a: ID!, $b: ID!) {
        a: user(id: $a) {
            commonFollowing(with: $b, first: 5) { hidden totalCount edges { node { handle } } }
            knownFollowers(first: 5) { hidden edges { node { handle } } }
            viewerRelation { knownFollowersCount { count exact } }
            relationTo(other: $b) { following }
        }
    }";
    let vars = json!({ "a": gid(a), "b": gid(b) });
    let r = t.execute(Viewer::User(viewer), query, vars.clone()).await;
    assert_ok(&r);
    let seen = &r["data"]["a"];
    assert_eq!(
        seen["commonFollowing"],
        json!({ "hidden": true, "totalCount": 0, "edges": [] })
    );
    assert_eq!(
        seen["knownFollowers"],
        json!({ "hidden": true, "edges": [] })
    );
    assert_eq!(
        seen["viewerRelation"]["knownFollowersCount"],
        json!({ "count": 0, "exact": false })
    );
    assert_eq!(seen["relationTo"], Value::Null);

    // To a itself, its own lists are no secret (b's still are).
    let r = t.execute(Viewer::User(a), query, vars.clone()).await;
    assert_ok(&r);
    assert_eq!(r["data"]["a"]["commonFollowing"]["hidden"], true, "b hides");
    assert_eq!(
        r["data"]["a"]["relationTo"],
        json!({ "following": false }),
        "a party to the relation sees it"
    );
    assert_ok(&hide(&t, b, false).await);
    let r = t.execute(Viewer::User(a), query, vars).await;
    assert_ok(&r);
    assert_eq!(
        r["data"]["a"]["commonFollowing"],
        json!({ "hidden": false, "totalCount": 1, "edges": [{ "node": { "handle": "s" } }] })
    );
}

#[tokio::test]
async fn settings_are_the_viewers_own_and_null_leaves_them() {
    let t = spawn_app().await;
    let me = t.user("me").await;
    let anonymous = t
        .execute(
            Viewer::Anonymous,
            "mutation { updateAccountSettings(input: {hidesCollections: true}) { user { handle } } }",
            json!({}),
        )
        .await;
    assert_eq!(error_code(&anonymous), Some("UNAUTHENTICATED"));
    let suspended = t.user_with_status("gone", UserStatus::Suspended).await;
    let r = hide(&t, suspended, true).await;
    assert_eq!(error_code(&r), Some("FORBIDDEN"), "{r}");
    // Null leaves a setting as it is.
    assert_ok(&hide(&t, me, true).await);
    let r = t
        .execute(
            Viewer::User(me),
            "mutation { updateAccountSettings(input: {}) { user { hidesCollections } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        r["data"]["updateAccountSettings"]["user"]["hidesCollections"],
        true
    );
}
