//! Kith as a Federation 2 subgraph: `_entities` resolves `User`
//! representations through the request's loaders (warm: no PostgreSQL
//! statement), answers null for ids it does not know, and is bounded by
//! its representations times its selection's cost; `_service` answers the
//! committed subgraph schema, and is refused with introspection.

use kith::model::{UserId, UserStatus};
use kith::testing::auth::Viewer;
use kith::testing::graph::ids;
use kith::testing::paging::ListKey;
use kith::testing::read::pages;
use kith::testing::write::lifecycle;
use serde_json::{Value, json};

use crate::helpers::{TestApp, assert_ok, error_code, seed_followers, spawn_app, spawn_app_with};

const ENTITIES: &str = "query($r: [_Any!]!) { _entities(representations: $r) {
  ... on User { id handle counters { followers followings }
    viewerRelation { following followedBy } } } }";

fn representation(id: &str) -> Value {
    json!({ "__typename": "User", "id": id })
}

fn of(user: UserId) -> Value {
    representation(ids::user_id(user).as_ref())
}

async fn entities(t: &TestApp, viewer: UserId, representations: Vec<Value>) -> Value {
    t.execute(
        Viewer::User(viewer),
        ENTITIES,
        json!({ "r": representations }),
    )
    .await
}

#[tokio::test]
async fn a_hundred_warm_entities_cost_no_statement_and_two_redis_round_trips() {
    let t = spawn_app().await;
    let star = t.user("star").await;
    let fans: Vec<UserId> = seed_followers(&t, star, "fan", 100, 1)
        .await
        .iter()
        .map(|p| p.user)
        .collect();
    let representations: Vec<Value> = fans.iter().map(|f| of(*f)).collect();
    assert!(
        pages::fill(&t.app, ListKey::Followers(star), false)
            .await
            .unwrap()
    );

    // 101 following lists to fill, more than one background fill takes
    // on: two cold reads warm them, as for a page of a hundred.
    t.users_cached().await;
    for _ in 0..2 {
        assert_ok(&entities(&t, star, representations.clone()).await);
        t.fills_finished().await;
    }

    let before = t.app.round_trips.snapshot();
    let warm = entities(&t, star, representations).await;
    let after = t.app.round_trips.snapshot();
    assert_ok(&warm);
    let (postgres, redis) = (after.0 - before.0, after.1 - before.1);
    assert!(
        postgres == 0 && redis <= 2,
        "(postgres, redis) = ({postgres}, {redis})"
    );
    let answered = warm["data"]["_entities"].as_array().unwrap();
    assert_eq!(answered.len(), 100);
    for (fan, entity) in fans.iter().zip(answered) {
        assert_eq!(entity["id"], ids::user_id(*fan).to_string(), "in order");
        assert_eq!(entity["counters"]["followings"], 1);
        assert_eq!(entity["viewerRelation"]["followedBy"], true);
        assert_eq!(entity["viewerRelation"]["following"], false);
    }
}

#[tokio::test]
async fn ids_kith_does_not_know_are_null_beside_the_others() {
    let t = spawn_app().await;
    let (me, friend, gone) = (
        t.user("me").await,
        t.user("friend").await,
        t.user("gone").await,
    );
    lifecycle::set_status(&t.app, gone, UserStatus::Deleted)
        .await
        .unwrap();
    let unknown = UserId::new(987_654_321).unwrap();
    let r = entities(
        &t,
        me,
        vec![
            of(friend),
            representation("not-an-id"),
            of(unknown),
            of(gone),
        ],
    )
    .await;
    assert_ok(&r);
    let answered = r["data"]["_entities"].as_array().unwrap();
    assert_eq!(answered[0]["handle"], "friend", "{r}");
    assert!(answered[1..].iter().all(Value::is_null), "{r}");
}

#[tokio::test]
async fn entities_are_bounded_by_count_and_by_representations_times_their_cost() {
    let t = spawn_app().await;
    let (me, other) = (t.user("me").await, t.user("other").await);
    let max = t.app.config.limits.max_query_complexity;
    let times = |n: usize| (0..n).map(|_| of(me)).collect::<Vec<_>>();
    let run = async |query: &str, n: usize| {
        t.execute(
            Viewer::User(me),
            query,
            json!({ "r": times(n), "o": ids::user_id(other).to_string() }),
        )
        .await
    };

    // At most 100 at once, as `users(ids)`.
    let r = entities(&t, me, times(101)).await;
    assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{r:.300}");
    assert_ok(&entities(&t, me, times(100)).await);

    // A page in the selection counts its rows, for each entity: 301.
    let paged = "query($r: [_Any!]!) { _entities(representations: $r) {
      ... on User { followers(first: 100) { edges { node { id } } } } } }";
    assert_eq!(
        error_code(&run(paged, max / 301 + 1).await),
        Some("INVALID_INPUT")
    );
    assert_ok(&run(paged, max / 301).await);

    // Spelt through a fragment and a variable, the same.
    let spelt = "query($r: [_Any!]!, $n: Int) { _entities(representations: $r) { ...E } }
      fragment E on User { followers(first: $n) { ...P } }
      fragment P on FollowConnection { edges { node { id } } }";
    let r = t
        .execute(
            Viewer::User(me),
            spelt,
            json!({ "r": times(max / 301 + 1), "n": 100 }),
        )
        .await;
    assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{r:.300}");

    // An intersection counts its walk, for each entity.
    let intersection = "query($r: [_Any!]!, $o: ID!) { _entities(representations: $r) {
      ... on User { commonFollowing(with: $o, first: 1) { totalCount } } } }";
    let r = run(intersection, 6).await;
    assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{r:.300}");
    // An offset counts the rows it skips.
    let skipping = "query($r: [_Any!]!) { _entities(representations: $r) {
      ... on User { followers(offset: 10000, first: 1) { totalCount } } } }";
    assert_eq!(error_code(&run(skipping, 100).await), Some("INVALID_INPUT"));
}

/// Fragments that spread each other twice, 40 deep, under `_entities`:
/// refused at once, as their expansion is too big, without walking its
/// 2^40 fields (every walk of the limits reckons a fragment once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fragments_spread_twice_deep_are_reckoned_once_each() {
    let t = std::sync::Arc::new(spawn_app().await);
    let me = t.user("me").await;
    let mut query = String::from("query { _entities(representations: []) { ...F0 } }\n");
    for i in 0..40 {
        query.push_str(&format!(
            "fragment F{i} on User {{ ...F{next} ...F{next} }}\n",
            next = i + 1
        ));
    }
    query.push_str("fragment F40 on User { id }\n");
    let run = tokio::spawn({
        let t = t.clone();
        async move { t.execute(Viewer::User(me), &query, json!({})).await }
    });
    let r = tokio::time::timeout(std::time::Duration::from_secs(20), run)
        .await
        .expect("the limits answer within seconds")
        .unwrap();
    assert!(error_code(&r).is_some(), "{r:.300}");
}

#[tokio::test]
async fn the_service_answers_the_committed_subgraph_schema_unless_introspection_is_off() {
    let t = spawn_app().await;
    let r = t
        .execute(Viewer::Anonymous, "{ _service { sdl } }", json!({}))
        .await;
    assert_ok(&r);
    let committed = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/schema.subgraph.graphql"
    ))
    .unwrap();
    assert_eq!(r["data"]["_service"]["sdl"], committed);

    let off = spawn_app_with(|c| c.limits.introspection = false).await;
    let r = off
        .execute(Viewer::Anonymous, "{ _service { sdl } }", json!({}))
        .await;
    assert_eq!(error_code(&r), Some("INTROSPECTION_DISABLED"), "{r}");
}
