//! Follow / unfollow transitions: the edge, the actor's counters and the
//! outbox change together, exactly once per real transition.

use std::collections::BTreeSet;

use kith::testing::events::follow::FollowEventType;

use crate::helpers::{assert_ok, spawn_app, spawn_app_with};

#[tokio::test]
async fn follow_unfollow_repeat_and_refollow() {
    let t = spawn_app().await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);

    let r = t.follow(alice, bob).await;
    assert_ok(&r);
    assert_eq!(r["data"]["follow"]["changed"], true);
    assert_eq!(r["data"]["follow"]["user"]["handle"], "bob");
    assert_eq!(r["data"]["follow"]["viewerRelation"]["following"], true);
    assert_eq!(r["data"]["follow"]["viewerRelation"]["followedBy"], false);
    assert_eq!(t.edge(alice, bob).await, Some((true, 1)));
    let (followings, v1) = t.stats(alice).await;
    assert_eq!(followings, 1);

    let r = t.follow(alice, bob).await;
    assert_ok(&r);
    assert_eq!(
        r["data"]["follow"]["changed"], false,
        "repeat follow is a no-op"
    );
    assert_eq!(r["data"]["follow"]["viewerRelation"]["following"], true);
    assert_eq!(t.edge(alice, bob).await, Some((true, 1)));
    assert_eq!(t.outbox().await.len(), 1, "a repeat writes no event");
    assert_eq!(t.stats(alice).await, (1, v1), "a repeat changes no counter");

    let r = t.unfollow(alice, bob).await;
    assert_ok(&r);
    assert_eq!(r["data"]["unfollow"]["changed"], true);
    assert_eq!(r["data"]["unfollow"]["viewerRelation"]["following"], false);
    assert!(r["data"]["unfollow"]["viewerRelation"]["followedAt"].is_null());
    assert_eq!(t.edge(alice, bob).await, Some((false, 2)));
    let (followings, v2) = t.stats(alice).await;
    assert_eq!(followings, 0);
    assert!(v2 > v1, "every change moves the version up");

    let r = t.unfollow(alice, bob).await;
    assert_eq!(
        r["data"]["unfollow"]["changed"], false,
        "repeat unfollow is a no-op"
    );
    assert_eq!(t.stats(alice).await, (0, v2), "no double decrement");

    let r = t.follow(alice, bob).await;
    assert_eq!(r["data"]["follow"]["changed"], true);
    assert_eq!(t.edge(alice, bob).await, Some((true, 3)));
    let (followings, v3) = t.stats(alice).await;
    assert_eq!(followings, 1);
    assert!(v3 > v2);

    let events = t.outbox().await;
    let summary: Vec<_> = events.iter().map(|e| (e.event_type, e.version)).collect();
    assert_eq!(
        summary,
        vec![
            (FollowEventType::FollowCreated, 1),
            (FollowEventType::FollowCanceled, 2),
            (FollowEventType::FollowCreated, 3),
        ]
    );
    for event in &events {
        assert_eq!((event.from, event.to), (alice, bob));
        assert_eq!(event.partition_key(), alice.to_string());
        assert!(event.occurred_at_ms >= event.followed_at_ms);
    }
    assert!(
        events[2].followed_at_ms >= events[0].followed_at_ms,
        "re-follow sets followed_at again"
    );
    let ids: BTreeSet<_> = events.iter().map(|e| e.event_id).collect();
    assert_eq!(ids.len(), 3, "event ids are unique");
}

#[tokio::test]
async fn relation_reads_both_directions_of_the_truth() {
    let t = spawn_app().await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    assert_ok(&t.follow(bob, alice).await);
    let r = t.follow(alice, bob).await;
    let relation = &r["data"]["follow"]["viewerRelation"];
    assert_eq!(relation["following"], true);
    assert_eq!(relation["followedBy"], true);
    assert_eq!(relation["mutual"], true);
    assert!(relation["followedByAt"].is_string());
}

#[tokio::test]
async fn unfollowing_a_stranger_writes_nothing() {
    let t = spawn_app().await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    let before = t.snapshot().await;
    let r = t.unfollow(alice, bob).await;
    assert_ok(&r);
    assert_eq!(r["data"]["unfollow"]["changed"], false);
    assert_eq!(t.snapshot().await, before);
}

#[tokio::test]
async fn concurrent_toggles_of_one_pair_agree_with_the_outbox() {
    const TASKS: usize = 50;
    let t = std::sync::Arc::new(
        spawn_app_with(|c| {
            c.writes.rate_limit_capacity = 1000;
            c.database.pool_size = 16;
        })
        .await,
    );
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);

    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..TASKS {
        let t = t.clone();
        tasks.spawn(async move {
            let r = if i % 2 == 0 {
                t.follow(alice, bob).await
            } else {
                t.unfollow(alice, bob).await
            };
            assert_ok(&r);
            let field = if i % 2 == 0 { "follow" } else { "unfollow" };
            r["data"][field]["changed"].as_bool().unwrap()
        });
    }
    let mut changes = 0;
    while let Some(changed) = tasks.join_next().await {
        changes += i64::from(changed.unwrap());
    }

    let (active, version) = t.edge(alice, bob).await.expect("edge exists");
    assert_eq!(version, changes, "one version per real transition");
    assert_eq!(active, version % 2 == 1, "odd versions are follows");

    let events = t.outbox().await;
    assert_eq!(
        events.len() as i64,
        changes,
        "one event per real transition"
    );
    let mut by_version: Vec<_> = events.iter().map(|e| (e.version, e.event_type)).collect();
    by_version.sort_by_key(|(v, _)| *v);
    for (i, (v, kind)) in by_version.iter().enumerate() {
        assert_eq!(*v, i as i64 + 1, "versions are 1..=n with no gap or repeat");
        let expected = if v % 2 == 1 {
            FollowEventType::FollowCreated
        } else {
            FollowEventType::FollowCanceled
        };
        assert_eq!(*kind, expected);
    }
    assert_eq!(t.stats(alice).await.0, i64::from(active));
}

#[tokio::test]
async fn a_follow_through_graphql_is_one_statement() {
    let t = spawn_app().await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    let before = t.app.round_trips.snapshot().0;
    assert_ok(&t.follow(alice, bob).await);
    let statements = t.app.round_trips.snapshot().0 - before;
    // `kith_change_edges` (a batch of one, the group commit idle): both
    // parties, the transition, the counters, the outbox event and the
    // relation for the payload, in one call (it was seven statements,
    // BEGIN and COMMIT included).
    assert_eq!(statements, 1, "PostgreSQL statements for one follow");
}

#[tokio::test]
async fn a_user_created_elsewhere_gets_counters_on_first_follow() {
    let t = spawn_app().await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    diesel_async::RunQueryDsl::execute(
        diesel::sql_query(format!("DELETE FROM user_stats WHERE user_id = {alice}")),
        &mut t.conn().await,
    )
    .await
    .unwrap();
    assert_ok(&t.follow(alice, bob).await);
    assert_eq!(t.stats(alice).await.0, 1);
}

#[tokio::test]
async fn a_lost_stats_row_comes_back_from_the_truth_with_a_newer_version() {
    let t = spawn_app().await;
    let (alice, bob, carol) = (
        t.user("alice").await,
        t.user("bob").await,
        t.user("carol").await,
    );
    assert_ok(&t.follow(alice, bob).await);
    assert_ok(&t.follow(alice, carol).await);
    let cached = t.counter_record(alice).await.unwrap();
    assert_eq!(cached.followings, 2);
    t.sql(&format!("DELETE FROM user_stats WHERE user_id = {alice}"))
        .await;

    // Once counted from zero, this unfollow failed the CHECK (INTERNAL);
    // once versioned from zero, the record above it froze.
    let r = t.unfollow(alice, bob).await;
    assert_ok(&r);
    assert_eq!(r["data"]["unfollow"]["changed"], true);
    let (followings, version) = t.stats(alice).await;
    assert_eq!(followings, 1, "counted from the truth");
    assert!(
        version as u64 > cached.version,
        "{version} <= {}",
        cached.version
    );
    let record = t.counter_record(alice).await.unwrap();
    assert_eq!((record.followings, record.version), (1, version as u64));
}

#[tokio::test]
async fn a_follow_or_unfollow_is_one_postgres_statement() {
    use kith::testing::write::{EdgeChange, change_edge};
    let t = spawn_app().await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    let statements = || t.app.round_trips.snapshot().0;
    for (change, changed) in [
        (EdgeChange::Follow, true),
        (EdgeChange::Follow, false),
        (EdgeChange::Unfollow, true),
        (EdgeChange::Unfollow, false),
        (EdgeChange::Follow, true),
    ] {
        let before = statements();
        let outcome = change_edge(&t.app, alice, bob, change).await.unwrap();
        assert_eq!(statements() - before, 1, "{change:?}");
        assert_eq!(outcome.changed, changed, "{change:?}");
        assert_eq!(outcome.target.handle, "bob");
    }
    // The outbox holds exactly what the Rust event type reads back.
    let events = t.outbox().await;
    assert_eq!(events.len(), 3);
    let last = events.last().unwrap();
    assert_eq!((last.from, last.to, last.version), (alice, bob, 3));
    assert_eq!(last.event_type, FollowEventType::FollowCreated);
    let (active, version) = t.edge(alice, bob).await.unwrap();
    assert!(active);
    assert_eq!(version, 3);
    // Refusals cost one statement too, and write nothing.
    let carol = t
        .user_with_status("carol", kith::model::UserStatus::Suspended)
        .await;
    let before = statements();
    let refused = change_edge(&t.app, alice, carol, EdgeChange::Follow).await;
    assert_eq!(refused.unwrap_err().code(), "INVALID_INPUT");
    assert_eq!(statements() - before, 1);
    let refused = change_edge(&t.app, carol, alice, EdgeChange::Follow).await;
    assert_eq!(refused.unwrap_err().code(), "FORBIDDEN");
    let nobody = kith::model::UserId::new(999_999).unwrap();
    let refused = change_edge(&t.app, alice, nobody, EdgeChange::Follow).await;
    assert_eq!(refused.unwrap_err().code(), "NOT_FOUND");
    let refused = change_edge(&t.app, nobody, alice, EdgeChange::Follow).await;
    assert_eq!(refused.unwrap_err().code(), "UNAUTHENTICATED");
    assert_eq!(t.outbox().await.len(), 3);
}
