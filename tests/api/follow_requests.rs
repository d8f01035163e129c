//! Locked accounts: a follow is a request the account accepts or rejects;
//! an unfollow cancels it; a block drops it; an unlock accepts every
//! pending request. Requests are counted nowhere public.

use kith::model::UserId;
use kith::testing::auth::Viewer;
use kith::testing::pipeline::projector::ProjectorHooks;
use serde_json::{Value, json};
use std::sync::Arc;

use crate::helpers::{
    TestApp, assert_ok, error_code, eventually, settled, spawn_app, spawn_app_with,
};

fn gid(user: UserId) -> String {
    kith::testing::graph::ids::user_id(user).to_string()
}

async fn settings(t: &TestApp, user: UserId, locked: bool) -> Value {
    let r = t
        .execute(
            Viewer::User(user),
            "mutation($l: Boolean) { updateAccountSettings(input: {locked: $l}) { user { locked } } }",
            json!({ "l": locked }),
        )
        .await;
    assert_ok(&r);
    r
}

async fn follow(t: &TestApp, actor: UserId, target: UserId, op: &str) -> Value {
    t.execute(
        Viewer::User(actor),
        &format!(
            "mutation($id: ID!) {{ {op}(input: {{userId: $id}}) {{ changed
                user {{ handle locked }}
                viewerRelation {{ following followedBy requested requestedBy }} }} }}"
        ),
        json!({ "id": gid(target) }),
    )
    .await
}

async fn relation(t: &TestApp, viewer: Viewer, subject: UserId, other: UserId) -> Value {
    let r = t
        .execute(
            viewer,
            "query($a: ID!, $b: ID!) { user(id: $a) { relationTo(other: $b) { following requested requestedBy } } }",
            json!({ "a": gid(subject), "b": gid(other) }),
        )
        .await;
    assert_ok(&r);
    r["data"]["user"]["relationTo"].clone()
}

fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_follow_of_a_locked_account_waits_for_its_answer() {
    let t = spawn_app().await;
    let (a, b, c) = (t.user("a").await, t.user("b").await, t.user("c").await);
    assert_eq!(
        settings(&t, b, true).await["data"]["updateAccountSettings"]["user"]["locked"],
        true
    );
    let before = t.outbox_payloads().await.len();
    let r = follow(&t, a, b, "follow").await;
    assert_ok(&r);
    assert_eq!(
        r["data"]["follow"],
        json!({ "changed": true, "user": { "handle": "b", "locked": true },
                "viewerRelation": { "following": false, "followedBy": false,
                                    "requested": true, "requestedBy": false } })
    );
    assert_eq!(t.edge(a, b).await, None, "no edge");
    assert_eq!(t.stats(a).await.0, 0, "counted nowhere");
    let repeat = follow(&t, a, b, "follow").await;
    assert_eq!(repeat["data"]["follow"]["changed"], false);
    assert_eq!(
        repeat["data"]["follow"]["viewerRelation"]["requested"],
        true
    );
    assert_eq!(
        types(&t.outbox_payloads().await[before..]),
        ["FollowRequested"]
    );
    // Each side sees its own; a third party nothing.
    assert_eq!(
        relation(&t, Viewer::User(b), b, a).await,
        json!({ "following": false, "requested": false, "requestedBy": true })
    );
    assert_eq!(
        relation(&t, Viewer::User(c), a, b).await,
        json!({ "following": false, "requested": null, "requestedBy": null })
    );

    // Accepted: the follow is made as any follow.
    let accepted = follow(&t, b, a, "acceptFollowRequest").await;
    assert_ok(&accepted);
    assert_eq!(accepted["data"]["acceptFollowRequest"]["changed"], true);
    assert_eq!(
        accepted["data"]["acceptFollowRequest"]["viewerRelation"],
        json!({ "following": false, "followedBy": true, "requested": false, "requestedBy": false })
    );
    assert_eq!(t.edge(a, b).await.map(|e| e.0), Some(true));
    assert_eq!(t.stats(a).await.0, 1);
    assert_eq!(
        types(&t.outbox_payloads().await[before..]),
        ["FollowRequested", "FollowRequestAccepted", "FollowCreated"]
    );
    let again = follow(&t, b, a, "acceptFollowRequest").await;
    assert_eq!(again["data"]["acceptFollowRequest"]["changed"], false);
    // Following already, a follow of the locked account is no request.
    let r = follow(&t, a, b, "follow").await;
    assert_eq!(r["data"]["follow"]["changed"], false);
    assert_eq!(
        r["data"]["follow"]["viewerRelation"]["requested"], false,
        "{r}"
    );
}

#[tokio::test]
async fn requests_are_cancelled_rejected_and_dropped_by_blocks() {
    let t = spawn_app().await;
    let (a, b, c) = (t.user("a").await, t.user("b").await, t.user("c").await);
    settings(&t, b, true).await;
    settings(&t, a, true).await;
    // Cancelled by the requester's unfollow.
    assert_ok(&follow(&t, a, b, "follow").await);
    let r = follow(&t, a, b, "unfollow").await;
    assert_eq!(
        r["data"]["unfollow"]["changed"], true,
        "the request was cancelled: {r}"
    );
    assert_eq!(r["data"]["unfollow"]["viewerRelation"]["requested"], false);
    // Rejected.
    assert_ok(&follow(&t, c, b, "follow").await);
    let r = follow(&t, b, c, "rejectFollowRequest").await;
    assert_eq!(r["data"]["rejectFollowRequest"]["changed"], true);
    assert_eq!(t.edge(c, b).await, None);
    // Dropped both ways by a block.
    assert_ok(&follow(&t, a, b, "follow").await);
    assert_ok(&follow(&t, b, a, "follow").await);
    let r = t
        .execute(
            Viewer::User(a),
            "mutation($id: ID!) { block(input: {userId: $id}) { viewerRelation { requested requestedBy } } }",
            json!({ "id": gid(b) }),
        )
        .await;
    assert_eq!(
        r["data"]["block"]["viewerRelation"],
        json!({ "requested": false, "requestedBy": false })
    );
    let events = t.outbox_payloads().await;
    let types = types(&events);
    assert_eq!(
        types
            .iter()
            .filter(|t| *t == "FollowRequestCanceled")
            .count(),
        3,
        "{types:?}"
    );
    assert!(types.contains(&"FollowRequestRejected".to_owned()));
    let accept = follow(&t, b, a, "acceptFollowRequest").await;
    assert_eq!(accept["data"]["acceptFollowRequest"]["changed"], false);

    // Answers need a signed-in viewer and a known user.
    let unknown = follow(
        &t,
        b,
        UserId::new(987_654_321).unwrap(),
        "acceptFollowRequest",
    )
    .await;
    assert_eq!(error_code(&unknown), Some("NOT_FOUND"));
    let anonymous = t
        .execute(
            Viewer::Anonymous,
            "mutation($id: ID!) { acceptFollowRequest(input: {userId: $id}) { changed } }",
            json!({ "id": gid(a) }),
        )
        .await;
    assert_eq!(error_code(&anonymous), Some("UNAUTHENTICATED"));
}

#[tokio::test]
async fn follow_many_of_locked_accounts_makes_requests() {
    let t = spawn_app().await;
    let (me, open, locked) = (
        t.user("me").await,
        t.user("open").await,
        t.user("locked").await,
    );
    settings(&t, locked, true).await;
    let r = t
        .execute(
            Viewer::User(me),
            "mutation($ids: [ID!]!) { followMany(input: {userIds: $ids}) {
                changedCount results { changed requested viewerRelation { following requested } } } }",
            json!({ "ids": [gid(open), gid(locked)] }),
        )
        .await;
    assert_ok(&r);
    assert_eq!(
        r["data"]["followMany"],
        json!({ "changedCount": 2, "results": [
            { "changed": true, "requested": false, "viewerRelation": { "following": true, "requested": false } },
            { "changed": true, "requested": true, "viewerRelation": { "following": false, "requested": true } },
        ] })
    );
    assert_eq!(t.stats(me).await.0, 1, "only the follow counts");
}

#[tokio::test]
async fn an_unlock_accepts_every_pending_request() {
    let t = spawn_app_with(|c| c.writes.rate_limit_capacity = 1000).await;
    let owner = t.user("owner").await;
    settings(&t, owner, true).await;
    let mut fans = Vec::new();
    for i in 0..7 {
        let fan = t.user(&format!("fan{i}")).await;
        assert_ok(&follow(&t, fan, owner, "follow").await);
        fans.push(fan);
    }
    // One blocks the owner meanwhile: its request is dropped, not accepted.
    let r = t
        .execute(
            Viewer::User(owner),
            "mutation($id: ID!) { block(input: {userId: $id}) { changed } }",
            json!({ "id": gid(fans[6]) }),
        )
        .await;
    assert_ok(&r);
    settings(&t, owner, false).await;
    eventually("every request is accepted", 10, || async {
        for fan in &fans[..6] {
            if t.edge(*fan, owner).await.map(|e| e.0) != Some(true) {
                return None;
            }
        }
        Some(())
    })
    .await;
    assert_eq!(t.edge(fans[6], owner).await, None);
    // A request left pending at an unlocked account (as if its unlocking
    // process had died) is found by the sweeper. Another account than
    // `owner`, whose unlock may still be asking for a last empty batch.
    let (other, late) = (t.user("other").await, t.user("late").await);
    t.sql(&format!(
        "INSERT INTO follow_request (from_user_id, to_user_id, active, requested_at, version)
         VALUES ({late}, {other}, TRUE, date_trunc('milliseconds', now()), 1)"
    ))
    .await;
    let swept = kith::testing::write::lifecycle::sweep(&t.app)
        .await
        .unwrap();
    assert_eq!(swept, 1);
    assert_eq!(t.edge(late, other).await.map(|e| e.0), Some(true));
}

#[tokio::test]
async fn verify_reports_stray_requests_and_reconcile_cancels_them() {
    use kith::testing::consistency::reconcile::{Scope, reconcile};
    use kith::testing::consistency::verify::Kind;

    let t = spawn_app().await;
    let (a, b, c) = (t.user("a").await, t.user("b").await, t.user("c").await);
    assert_ok(&follow(&t, a, b, "follow").await);
    assert_ok(&follow(&t, c, b, "block").await);
    // Written past every guard: a request beside a follow, one across a block.
    for (from, to) in [(a, b), (b, c)] {
        t.sql(&format!(
            "INSERT INTO follow_request (from_user_id, to_user_id, active, requested_at, version)
             VALUES ({from}, {to}, TRUE, date_trunc('milliseconds', now()), 1)"
        ))
        .await;
    }
    let report = t.verify(0).await;
    assert_eq!(report.counts.get(&Kind::StrayRequest), Some(&2), "{report}");
    let summary = reconcile(&t.app, Scope::Full, 100, false).await.unwrap();
    assert_eq!(summary.stray_requests_cancelled, 2, "{summary}");
    let report = t.verify(0).await;
    assert_eq!(report.counts.get(&Kind::StrayRequest), None, "{report}");
    assert_eq!(
        t.edge(a, b).await.map(|e| e.0),
        Some(true),
        "the follow stays"
    );
}

/// An account unlocked before its requests were accepted: the requester's
/// own follow supersedes its request, and an unfollow ends both.
#[tokio::test]
async fn a_follow_after_an_unlock_supersedes_the_request() {
    use kith::testing::consistency::verify::Kind;

    let t = spawn_app().await;
    let (fan, owner) = (t.user("fan").await, t.user("owner").await);
    settings(&t, owner, true).await;
    assert_ok(&follow(&t, fan, owner, "follow").await);
    // Unlocked behind the background acceptance's back.
    t.sql(&format!(
        "UPDATE users SET locked = FALSE WHERE id = {owner}"
    ))
    .await;
    t.user_change_seen(owner).await;
    let r = follow(&t, fan, owner, "follow").await;
    assert_eq!(
        r["data"]["follow"]["viewerRelation"],
        json!({ "following": true, "followedBy": false, "requested": false, "requestedBy": false })
    );
    let report = t.verify(0).await;
    assert_eq!(report.counts.get(&Kind::StrayRequest), None, "{report}");
    let r = follow(&t, fan, owner, "unfollow").await;
    assert_eq!(r["data"]["unfollow"]["changed"], true);
    assert_eq!(t.edge(fan, owner).await.map(|e| e.0), Some(false));
}

/// A settings change is an event of its own, versioned per account; a
/// change to what the settings already are writes none.
#[tokio::test]
async fn a_settings_change_is_an_event() {
    let t = spawn_app().await;
    let owner = t.user("owner").await;
    let before = t.outbox_payloads().await.len();
    settings(&t, owner, true).await;
    settings(&t, owner, true).await;
    let r = t
        .execute(
            Viewer::User(owner),
            "mutation { updateAccountSettings(input: {hidesCollections: true}) {
                user { locked hidesCollections } } }",
            json!({}),
        )
        .await;
    assert_ok(&r);
    let events: Vec<Value> = t.outbox_payloads().await[before..]
        .iter()
        .map(|e| {
            json!({ "type": e["type"], "from": e["from"], "version": e["version"],
                    "locked": e["locked"], "hidesCollections": e["hidesCollections"] })
        })
        .collect();
    let id = owner.get();
    assert_eq!(
        events,
        [
            json!({ "type": "AccountSettingsChanged", "from": id, "version": 1,
                    "locked": true, "hidesCollections": false }),
            json!({ "type": "AccountSettingsChanged", "from": id, "version": 2,
                    "locked": true, "hidesCollections": true }),
        ]
    );
    // The projector takes it as it takes every event: nothing dead. (The
    // owner's follow comes after on the same partition, keyed by the owner:
    // once it is projected, so are the settings events.)
    let idol = t.user("idol").await;
    assert_ok(&t.follow(owner, idol).await);
    let _relay = t.start_relay();
    let _projector = t.start_projector(Arc::new(ProjectorHooks::default()));
    settled(&t, &[owner], 60).await;
    assert_eq!(t.dead_letter_count().await, 0);

    // Only an active account changes its settings; a token of no account
    // is no one.
    let suspended = t
        .user_with_status("gone", kith::model::UserStatus::Suspended)
        .await;
    let nobody = UserId::new(9_999_999).unwrap();
    for (user, code) in [(suspended, "FORBIDDEN"), (nobody, "UNAUTHENTICATED")] {
        let r = t
            .execute(
                Viewer::User(user),
                "mutation { updateAccountSettings(input: {locked: true}) { user { locked } } }",
                json!({}),
            )
            .await;
        assert_eq!(error_code(&r), Some(code), "{r}");
    }
}

/// A requester that is suspended or deleted: its request waits unlisted,
/// cannot be accepted, can be rejected, is dropped by an unlock, and is
/// back in the list with a restore.
#[tokio::test]
async fn requests_of_inactive_requesters_wait_and_cannot_be_accepted() {
    use kith::model::UserStatus;
    use kith::testing::write::lifecycle::set_status;

    let t = spawn_app().await;
    let owner = t.user("owner").await;
    let (a, b, c) = (t.user("a").await, t.user("b").await, t.user("c").await);
    settings(&t, owner, true).await;
    for fan in [a, b, c] {
        assert_ok(&follow(&t, fan, owner, "follow").await);
    }
    set_status(&t.app, a, UserStatus::Suspended).await.unwrap();
    set_status(&t.app, b, UserStatus::Deleted).await.unwrap();
    assert_eq!(listed(&t, owner).await, (vec!["c".to_owned()], 1));

    // Not accepted: nothing written, the request still there.
    let r = follow(&t, owner, a, "acceptFollowRequest").await;
    assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{r}");
    assert_eq!(t.edge(a, owner).await, None);
    // Restored, it is back and can be accepted.
    set_status(&t.app, a, UserStatus::Active).await.unwrap();
    assert_eq!(
        listed(&t, owner).await,
        (vec!["c".to_owned(), "a".to_owned()], 2)
    );
    assert_ok(&follow(&t, owner, a, "acceptFollowRequest").await);
    assert_eq!(t.edge(a, owner).await.map(|e| e.0), Some(true));

    // Suspended again is no matter now; c suspended, rejected meanwhile.
    set_status(&t.app, c, UserStatus::Suspended).await.unwrap();
    let r = follow(&t, owner, c, "rejectFollowRequest").await;
    assert_ok(&r);
    assert_eq!(r["data"]["rejectFollowRequest"]["changed"], true);
    set_status(&t.app, c, UserStatus::Active).await.unwrap();
    assert_eq!(listed(&t, owner).await, (vec![], 0), "c's request is gone");

    // The deleted requester's request is dropped by an unlock, not
    // accepted, and a restore brings back no request.
    let r = follow(&t, owner, b, "acceptFollowRequest").await;
    assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{r}");
    settings(&t, owner, false).await;
    eventually("the unlock's batch is done", 10, || async {
        let pending = t
            .count(&format!(
                "SELECT count(*) AS n FROM follow_request WHERE to_user_id = {owner} AND active"
            ))
            .await;
        (pending == 0).then_some(())
    })
    .await;
    assert_eq!(t.edge(b, owner).await, None, "dropped, not accepted");
    set_status(&t.app, b, UserStatus::Active).await.unwrap();
    settings(&t, owner, true).await;
    assert_eq!(listed(&t, owner).await, (vec![], 0));
    assert_eq!(t.edge(b, owner).await, None);
}

/// The owner's incoming requests as its list shows them: handles, newest
/// first, and the count.
async fn listed(t: &TestApp, owner: UserId) -> (Vec<String>, u64) {
    let r = t
        .execute(
            Viewer::User(owner),
            "query($id: ID!) { user(id: $id) { followRequests(first: 10) {
                totalCount edges { node { handle } } } } }",
            json!({ "id": gid(owner) }),
        )
        .await;
    assert_ok(&r);
    let list = &r["data"]["user"]["followRequests"];
    let handles = list["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node"]["handle"].as_str().unwrap().to_owned())
        .collect();
    (handles, list["totalCount"].as_u64().unwrap())
}

/// An accepted request makes a follow, so it is held to the requester's
/// follow cap: an accept past it is `FOLLOW_LIMIT` (the request waits), and
/// an unlock rejects such a request instead of accepting it.
#[tokio::test]
async fn an_accept_is_held_to_the_requesters_follow_cap() {
    let t = spawn_app_with(|c| {
        c.writes.max_followings = 1;
        c.writes.followings_ratio = 0.0;
    })
    .await;
    let (fan, other, owner) = (
        t.user("fan").await,
        t.user("other").await,
        t.user("owner").await,
    );
    assert_ok(&follow(&t, fan, other, "follow").await);
    settings(&t, owner, true).await;
    assert_ok(&follow(&t, fan, owner, "follow").await);
    let r = follow(&t, owner, fan, "acceptFollowRequest").await;
    assert_eq!(error_code(&r), Some("FOLLOW_LIMIT"), "{r}");
    assert_eq!(t.edge(fan, owner).await, None);
    assert_eq!(
        listed(&t, owner).await,
        (vec!["fan".to_owned()], 1),
        "it waits"
    );

    settings(&t, owner, false).await;
    eventually("the unlock's batch is done", 10, || async {
        let pending = t
            .count(&format!(
                "SELECT count(*) AS n FROM follow_request WHERE to_user_id = {owner} AND active"
            ))
            .await;
        (pending == 0).then_some(())
    })
    .await;
    assert_eq!(t.edge(fan, owner).await, None, "rejected, not accepted");
    assert_eq!(t.stats(fan).await.0, 1);
}
