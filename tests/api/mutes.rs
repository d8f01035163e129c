//! Mutes: no follow changes and no list is filtered; the viewer's relation
//! says `muting`, the events say it to feeds, and a mute with an end is
//! over when due — with no sweep.

use kith::model::UserId;
use kith::testing::auth::Viewer;
use serde_json::{Value, json};

use crate::helpers::{TestApp, assert_ok, error_code, spawn_app};

fn gid(user: UserId) -> String {
    kith::testing::graph::ids::user_id(user).to_string()
}

async fn mute(t: &TestApp, actor: UserId, target: UserId, secs: Option<i64>) -> Value {
    t.execute(
        Viewer::User(actor),
        "mutation($id: ID!, $secs: Int) { mute(input: {userId: $id, durationSecs: $secs}) {
                changed expiresAt user { handle } viewerRelation { following muting blocking } } }",
        json!({ "id": gid(target), "secs": secs }),
    )
    .await
}

async fn unmute(t: &TestApp, actor: UserId, target: UserId) -> Value {
    t.execute(
        Viewer::User(actor),
        "mutation($id: ID!) { unmute(input: {userId: $id}) { changed expiresAt viewerRelation { muting } } }",
        json!({ "id": gid(target) }),
    )
    .await
}

async fn muting(t: &TestApp, viewer: Viewer, subject: UserId, other: UserId) -> Value {
    let r = t
        .execute(
            viewer,
            "query($a: ID!, $b: ID!) { user(id: $a) { relationTo(other: $b) { muting } } }",
            json!({ "a": gid(subject), "b": gid(other) }),
        )
        .await;
    assert_ok(&r);
    r["data"]["user"]["relationTo"]["muting"].clone()
}

#[tokio::test]
async fn a_mute_changes_no_follow_and_shows_only_to_the_viewer() {
    let t = spawn_app().await;
    let (a, b, c) = (t.user("a").await, t.user("b").await, t.user("c").await);
    assert_ok(&t.follow(a, b).await);
    assert_ok(&t.follow(b, c).await);
    let r = mute(&t, a, b, None).await;
    assert_ok(&r);
    assert_eq!(
        r["data"]["mute"],
        json!({ "changed": true, "expiresAt": null, "user": { "handle": "b" },
                "viewerRelation": { "following": true, "muting": true, "blocking": false } })
    );
    assert_eq!(
        t.edge(a, b).await.map(|e| e.0),
        Some(true),
        "the follow stays"
    );
    let events = t.outbox_payloads().await;
    let created = events.last().unwrap();
    assert_eq!(created["type"], "MuteCreated");
    assert_eq!(created["expiresAtMs"], Value::Null);
    assert_eq!(created["from"], a.get());

    // Only the viewer learns of its mutes.
    assert_eq!(muting(&t, Viewer::User(a), a, b).await, true);
    assert_eq!(muting(&t, Viewer::User(b), a, b).await, Value::Null);
    assert_eq!(muting(&t, Viewer::Anonymous, a, b).await, Value::Null);
    // No list is filtered by a mute.
    let r = t
        .execute(
            Viewer::User(a),
            "query($id: ID!) { user(id: $id) { following(first: 5) { edges { node { handle } } } } }",
            json!({ "id": gid(b) }),
        )
        .await;
    assert_ok(&r);
    assert_eq!(
        r["data"]["user"]["following"]["edges"][0]["node"]["handle"],
        "c"
    );

    // A repeat without end changes nothing; with an end, it sets one.
    let again = mute(&t, a, b, None).await;
    assert_eq!(again["data"]["mute"]["changed"], false, "{again}");
    let timed = mute(&t, a, b, Some(3600)).await;
    assert_eq!(timed["data"]["mute"]["changed"], true, "{timed}");
    assert!(timed["data"]["mute"]["expiresAt"].is_string(), "{timed}");
    let lifted = unmute(&t, a, b).await;
    assert_eq!(
        lifted["data"]["unmute"],
        json!({ "changed": true, "expiresAt": null, "viewerRelation": { "muting": false } })
    );
    assert_eq!(unmute(&t, a, b).await["data"]["unmute"]["changed"], false);
    assert_eq!(
        t.outbox_payloads().await.last().unwrap()["type"],
        "MuteRemoved"
    );
}

#[tokio::test]
async fn a_mute_ends_when_due_with_no_sweep() {
    let t = spawn_app().await;
    t.users_cached().await;
    let (a, b) = (t.user("a").await, t.user("b").await);
    assert_ok(&mute(&t, a, b, Some(1)).await);
    assert_eq!(muting(&t, Viewer::User(a), a, b).await, true);
    tokio::time::sleep(std::time::Duration::from_millis(1300)).await;
    // Held in process, and over all the same.
    assert_eq!(muting(&t, Viewer::User(a), a, b).await, false);
    // An ended mute is no mute: nothing to unmute.
    assert_eq!(unmute(&t, a, b).await["data"]["unmute"]["changed"], false);
    assert_eq!(mute(&t, a, b, None).await["data"]["mute"]["changed"], true);
}

#[tokio::test]
async fn mute_refusals_have_their_codes() {
    let t = spawn_app().await;
    let (a, b) = (t.user("a").await, t.user("b").await);
    for secs in [0, -5, 10 * 365 * 24 * 3600 + 1] {
        let r = mute(&t, a, b, Some(secs)).await;
        assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{secs}: {r}");
    }
    assert_eq!(
        error_code(&mute(&t, a, a, None).await),
        Some("INVALID_INPUT")
    );
    let unknown = mute(&t, a, UserId::new(987_654_321).unwrap(), None).await;
    assert_eq!(error_code(&unknown), Some("NOT_FOUND"));
    let anonymous = t
        .execute(
            Viewer::Anonymous,
            "mutation($id: ID!) { mute(input: {userId: $id}) { changed } }",
            json!({ "id": gid(b) }),
        )
        .await;
    assert_eq!(error_code(&anonymous), Some("UNAUTHENTICATED"));
}
