//! `followMany`, `unfollowMany` and `removeFollower`: per-target results,
//! one event per real transition, tokens taken up front, and every view
//! agreeing once the pipeline has drained.

use std::sync::Arc;

use kith::model::{UserId, UserStatus};
use kith::testing::auth::Viewer;
use kith::testing::events::follow::FollowEventType;
use kith::testing::graph::ids;
use kith::testing::paging::ListKey;
use kith::testing::pipeline::projector::ProjectorHooks;
use kith::testing::write::lifecycle;
use serde_json::{Value, json};

use crate::helpers::{TestApp, assert_ok, error_code, settled, spawn_app, spawn_app_with};

const MANY: &str =
    "mutation($ids: [ID!]!) { MUTATION(input: {userIds: $ids, clientMutationId: \"c1\"}) {
    changedCount clientMutationId
    results { userId changed user { handle } viewerRelation { following } error { code message } }
} }";

async fn many(t: &TestApp, mutation: &str, actor: UserId, targets: &[Value]) -> Value {
    t.execute(
        Viewer::User(actor),
        &MANY.replace("MUTATION", mutation),
        json!({ "ids": targets }),
    )
    .await
}

fn gid(user: UserId) -> Value {
    json!(ids::user_id(user).to_string())
}

fn codes(response: &Value, mutation: &str) -> Vec<Option<String>> {
    response["data"][mutation]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["error"]["code"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn follow_many_applies_exactly_the_valid_new_edges() {
    let t = spawn_app().await;
    let me = t.user("me").await;
    let (a, b, c) = (t.user("a").await, t.user("b").await, t.user("c").await);
    let suspended = t.user_with_status("gone", UserStatus::Suspended).await;
    let unknown = UserId::new(9_999_999).unwrap();
    assert_ok(&t.follow(me, c).await);
    let events_before = t.outbox().await.len();

    let r = many(
        &t,
        "followMany",
        me,
        &[
            gid(b),
            gid(a),
            gid(me),
            gid(b),
            gid(unknown),
            gid(suspended),
            gid(c),
        ],
    )
    .await;
    assert_ok(&r);
    let payload = &r["data"]["followMany"];
    assert_eq!(payload["clientMutationId"], "c1");
    assert_eq!(payload["changedCount"], 2, "{r}");
    assert_eq!(
        codes(&r, "followMany"),
        vec![
            None,
            None,
            Some("SELF_TARGET".into()),
            Some("DUPLICATE".into()),
            Some("NOT_FOUND".into()),
            Some("NOT_FOLLOWABLE".into()),
            None,
        ]
    );
    let results = payload["results"].as_array().unwrap();
    assert_eq!(results[0]["userId"], gid(b), "results in the order asked");
    assert_eq!(results[0]["user"]["handle"], "b");
    assert_eq!(results[0]["viewerRelation"]["following"], true);
    assert_eq!(results[6]["changed"], false, "c was followed already");
    assert_eq!(results[6]["viewerRelation"]["following"], true);
    assert!(results[4]["user"].is_null());

    // One event per real transition, for exactly the valid new edges.
    let events = t.outbox().await;
    let mut new: Vec<(UserId, UserId, FollowEventType)> = events[events_before..]
        .iter()
        .map(|e| (e.from, e.to, e.event_type))
        .collect();
    new.sort_by_key(|e| (e.0, e.1));
    let mut expected = vec![
        (me, a, FollowEventType::FollowCreated),
        (me, b, FollowEventType::FollowCreated),
    ];
    expected.sort_by_key(|e| (e.0, e.1));
    assert_eq!(new, expected);
    assert_eq!(t.edge(me, suspended).await, None);
    assert_eq!(t.stats(me).await.0, 3);

    // The viewer's own counters and list show it at once; the rest once
    // the pipeline drains. (Started only now: the relay deletes what it
    // published, and the outbox was read above.)
    let relay = t.start_relay();
    let projector = t.start_projector(Arc::new(ProjectorHooks::default()));
    settled(&t, &[me, a, b, c], 60).await;
    for (user, followers) in [(a, 1), (b, 1), (c, 1), (suspended, 0)] {
        assert_eq!(t.full_stats(user).await.followers, followers);
    }
    let r = t
        .execute(
            Viewer::User(me),
            "query($id: ID!) { user(id: $id) { counters { followings }
                following(first: 10) { totalCount edges { node { handle } } } } }",
            json!({ "id": gid(me) }),
        )
        .await;
    assert_ok(&r);
    assert_eq!(r["data"]["user"]["counters"]["followings"], 3);
    let handles: Vec<&str> = r["data"]["user"]["following"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node"]["handle"].as_str().unwrap())
        .collect();
    let mut sorted = handles.clone();
    sorted.sort();
    assert_eq!(sorted, ["a", "b", "c"]);

    // unfollowMany: the same rules; a suspended account can be unfollowed.
    let r = many(&t, "unfollowMany", me, &[gid(a), gid(c), gid(a), gid(b)]).await;
    assert_ok(&r);
    assert_eq!(r["data"]["unfollowMany"]["changedCount"], 3);
    assert_eq!(
        codes(&r, "unfollowMany"),
        vec![None, None, Some("DUPLICATE".into()), None]
    );
    assert_eq!(t.stats(me).await.0, 0);
    settled(&t, &[me, a, b, c], 60).await;
    for user in [a, b, c] {
        assert_eq!(t.full_stats(user).await.followers, 0);
    }
    relay.stop().await.unwrap();
    projector.stop().await.unwrap();
}

#[tokio::test]
async fn a_batch_the_bucket_cannot_cover_is_refused_whole() {
    let t = spawn_app_with(|c| {
        c.writes.rate_limit_capacity = 5;
        c.writes.rate_limit_per_sec = 0.01;
    })
    .await;
    let me = t.user("me").await;
    let mut targets = Vec::new();
    for i in 0..5 {
        targets.push(t.user(&format!("t{i}")).await);
    }
    assert_ok(&t.follow(me, targets[0]).await);

    // Four tokens left, five asked: nothing is written.
    let ids: Vec<Value> = targets.iter().map(|u| gid(*u)).collect();
    let r = many(&t, "followMany", me, &ids).await;
    assert_eq!(error_code(&r), Some("RATE_LIMITED"), "{r}");
    assert!(
        r["errors"][0]["extensions"]["retryAfterMs"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(t.stats(me).await.0, 1);
    assert_eq!(t.outbox().await.len(), 1);
    for target in &targets[1..] {
        assert_eq!(t.edge(me, *target).await, None);
    }

    // Four fit, and take the bucket's last tokens.
    let r = many(&t, "followMany", me, &ids[1..]).await;
    assert_ok(&r);
    assert_eq!(r["data"]["followMany"]["changedCount"], 4);
    assert_eq!(
        error_code(&t.follow(me, targets[0]).await),
        Some("RATE_LIMITED")
    );

    // More than the bucket could ever hold, or more than 100: refused as input.
    let r = many(&t, "followMany", me, &[ids.clone(), ids.clone()].concat()).await;
    assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{r}");
    let r = many(&t, "followMany", me, &vec![gid(targets[0]); 101]).await;
    assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{r}");
    let r = many(&t, "followMany", me, &[json!("not-an-id")]).await;
    assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{r}");
    assert_eq!(t.stats(me).await.0, 5);
}

#[tokio::test]
async fn a_removed_follower_stops_following_everywhere() {
    let t = spawn_app().await;
    let (me, fan, other) = (
        t.user("me").await,
        t.user("fan").await,
        t.user("other").await,
    );
    for list in [
        ListKey::Followers(me),
        ListKey::Following(fan),
        ListKey::Following(me),
    ] {
        t.cache_list(list, &[]).await;
    }
    let relay = t.start_relay();
    let projector = t.start_projector(Arc::new(ProjectorHooks::default()));
    assert_ok(&t.follow(fan, me).await);
    assert_ok(&t.follow(fan, other).await);
    assert_ok(&t.follow(me, fan).await);
    settled(&t, &[me, fan, other], 60).await;
    // No pipeline while the owner looks: what it sees comes from the write path.
    relay.stop().await.unwrap();
    projector.stop().await.unwrap();

    let remove = "mutation($id: ID!) { removeFollower(input: {userId: $id}) {
        changed user { handle } viewerRelation { following followedBy mutual } } }";
    let r = t
        .execute(Viewer::User(me), remove, json!({ "id": gid(fan) }))
        .await;
    assert_ok(&r);
    let payload = &r["data"]["removeFollower"];
    assert_eq!(payload["changed"], true);
    assert_eq!(payload["user"]["handle"], "fan");
    assert_eq!(payload["viewerRelation"]["following"], true, "{r}");
    assert_eq!(payload["viewerRelation"]["followedBy"], false);
    assert_eq!(t.edge(fan, me).await, Some((false, 2)));
    let events = t.outbox().await;
    let last = events.last().unwrap();
    assert_eq!(
        (last.from, last.to, last.event_type),
        (fan, me, FollowEventType::FollowCanceled),
        "the follower's unfollow, with its event"
    );

    // Read-your-writes for the owner: the followers list drops the fan at once.
    let followers =
        "query($id: ID!) { user(id: $id) { followers(first: 10) { edges { node { handle } } } } }";
    let r = t
        .execute(Viewer::User(me), followers, json!({ "id": gid(me) }))
        .await;
    assert_ok(&r);
    assert_eq!(r["data"]["user"]["followers"]["edges"], json!([]), "{r}");

    let r = t
        .execute(Viewer::User(me), remove, json!({ "id": gid(fan) }))
        .await;
    assert_eq!(
        r["data"]["removeFollower"]["changed"], false,
        "a repeat changes nothing"
    );
    let r = t
        .execute(Viewer::User(me), remove, json!({ "id": gid(me) }))
        .await;
    assert_eq!(error_code(&r), Some("INVALID_INPUT"));
    let r = t
        .execute(
            Viewer::User(me),
            remove,
            json!({ "id": gid(UserId::new(8_888_888).unwrap()) }),
        )
        .await;
    assert_eq!(error_code(&r), Some("NOT_FOUND"));
    let r = t
        .execute(Viewer::Anonymous, remove, json!({ "id": gid(fan) }))
        .await;
    assert_eq!(error_code(&r), Some("UNAUTHENTICATED"));

    let relay = t.start_relay();
    let projector = t.start_projector(Arc::new(ProjectorHooks::default()));
    settled(&t, &[me, fan, other], 60).await;
    assert_eq!(t.full_stats(me).await.followers, 0);
    assert_eq!(t.full_stats(fan).await.followings, 1);
    let r = t
        .execute(
            Viewer::User(fan),
            "query($me: ID!, $fan: ID!) {
                fan: user(id: $fan) { counters { followings }
                    following(first: 10) { totalCount edges { node { handle } } }
                    relationTo(other: $me) { following followedBy } }
                me: user(id: $me) { counters { followers } viewerRelation { following followedBy }
                    followers(first: 10) { totalCount edges { node { handle } } } } }",
            json!({ "me": gid(me), "fan": gid(fan) }),
        )
        .await;
    assert_ok(&r);
    let d = &r["data"];
    assert_eq!(d["fan"]["counters"]["followings"], 1);
    assert_eq!(d["fan"]["following"]["totalCount"], 1);
    assert_eq!(
        d["fan"]["following"]["edges"][0]["node"]["handle"], "other",
        "{r}"
    );
    assert_eq!(d["fan"]["relationTo"]["following"], false);
    assert_eq!(d["fan"]["relationTo"]["followedBy"], true);
    assert_eq!(d["me"]["viewerRelation"]["following"], false);
    assert_eq!(d["me"]["counters"]["followers"], 0);
    assert_eq!(d["me"]["followers"]["totalCount"], 0);
    assert_eq!(d["me"]["followers"]["edges"], json!([]));
    relay.stop().await.unwrap();
    projector.stop().await.unwrap();
}

#[tokio::test]
async fn a_suspended_account_can_neither_batch_nor_come_back_as_a_removed_follower() {
    let t = spawn_app().await;
    let (me, sus, a) = (t.user("me").await, t.user("sus").await, t.user("a").await);
    assert_ok(&t.follow(sus, me).await);
    lifecycle::set_status(&t.app, sus, UserStatus::Suspended)
        .await
        .unwrap();

    // A suspended actor's batch is refused whole.
    let r = many(&t, "followMany", sus, &[gid(a)]).await;
    assert_eq!(error_code(&r), Some("FORBIDDEN"), "{r}");
    assert_eq!(t.edge(sus, a).await, None);

    // Its hidden edge to me is removed for good: its restore leaves it out.
    let remove = "mutation($id: ID!) { removeFollower(input: {userId: $id}) { changed } }";
    let r = t
        .execute(Viewer::User(me), remove, json!({ "id": gid(sus) }))
        .await;
    assert_ok(&r);
    assert_eq!(
        r["data"]["removeFollower"]["changed"], false,
        "already hidden"
    );
    let summary = lifecycle::set_status(&t.app, sus, UserStatus::Active)
        .await
        .unwrap();
    assert_eq!(summary.restored, 0, "{summary:?}");
    assert_eq!(t.edge(sus, me).await.map(|(active, _)| active), Some(false));
}

/// Batches and single follows of one actor, overlapping, all at once: none
/// waits on another in a circle (no deadlock error), and the counters agree
/// with the edges.
#[tokio::test]
async fn overlapping_batches_of_one_actor_never_deadlock() {
    let t = Arc::new(
        spawn_app_with(|c| {
            c.writes.rate_limit_capacity = 10_000;
            c.writes.rate_limit_per_sec = 10_000.0;
        })
        .await,
    );
    let me = t.user("me").await;
    let mut targets = Vec::new();
    for i in 0..12 {
        targets.push(t.user(&format!("t{i}")).await);
    }
    let mut tasks = Vec::new();
    for round in 0..24usize {
        let t = t.clone();
        let targets = targets.clone();
        tasks.push(tokio::spawn(async move {
            // Overlapping windows, in both directions, some given backwards.
            let mut ids: Vec<Value> = targets
                .iter()
                .cycle()
                .skip(round % targets.len())
                .take(5)
                .map(|u| gid(*u))
                .collect();
            if round % 2 == 0 {
                ids.reverse();
            }
            let mutation = if round % 3 == 0 {
                "unfollowMany"
            } else {
                "followMany"
            };
            let batch = many(&t, mutation, me, &ids).await;
            let single = t.follow(me, targets[(round * 5) % targets.len()]).await;
            (batch, single)
        }));
    }
    for task in tasks {
        let (batch, single) = task.await.unwrap();
        assert_ok(&batch);
        assert_ok(&single);
    }
    let active = t
        .snapshot()
        .await
        .following
        .iter()
        .filter(|(from, _, active, _)| *from == me.get() && *active)
        .count();
    assert_eq!(t.stats(me).await.0, active as i64);
}

/// A batch's results are charged once per id: asking each result for an
/// intersection is refused before anything is written.
#[tokio::test]
async fn a_batch_is_charged_for_every_result() {
    let t = spawn_app().await;
    let me = t.user("me").await;
    let mut ids = Vec::new();
    for i in 0..10 {
        ids.push(gid(t.user(&format!("t{i}")).await));
    }
    let r = t
        .execute(
            Viewer::User(me),
            "mutation($ids: [ID!]!, $me: ID!) { followMany(input: {userIds: $ids}) {
                results { user { commonFollowing(with: $me, first: 1) { totalCount } } } } }",
            json!({ "ids": ids, "me": gid(me) }),
        )
        .await;
    assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{r}");
    assert!(
        r["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("complex"),
        "{r}"
    );
    assert_eq!(t.stats(me).await.0, 0, "nothing written");
    assert!(t.outbox().await.is_empty());
}
