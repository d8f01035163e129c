//! The follow cap: past `KITH_MAX_FOLLOWINGS` followings, a follow is
//! allowed only while followings stay at most `KITH_FOLLOWINGS_RATIO` times
//! the followers; otherwise `FOLLOW_LIMIT`, and nothing is written for that
//! follow — not the edge, not the counters, not an event — even when
//! follows race.

use kith::model::UserId;
use kith::testing::auth::Viewer;
use serde_json::json;

use crate::helpers::{TestApp, assert_ok, error_code, spawn_app_with};

/// An app whose cap is 3 followings (ratio 1.1), and `n` users.
async fn capped(n: usize) -> (TestApp, UserId, Vec<UserId>) {
    let t = spawn_app_with(|c| {
        c.writes.max_followings = 3;
        c.writes.followings_ratio = 1.1;
    })
    .await;
    let me = t.user("me").await;
    let mut users = Vec::new();
    for i in 0..n {
        users.push(t.user(&format!("u{i}")).await);
    }
    (t, me, users)
}

/// `followMany` of `users` as `me`.
async fn follow_many(t: &TestApp, me: UserId, users: &[UserId]) -> serde_json::Value {
    let ids: Vec<String> = users
        .iter()
        .map(|u| kith::testing::graph::ids::user_id(*u).to_string())
        .collect();
    t.execute(
        Viewer::User(me),
        "mutation($ids: [ID!]!) { followMany(input: {userIds: $ids}) { changedCount } }",
        json!({ "ids": ids }),
    )
    .await
}

#[tokio::test]
async fn a_follow_past_the_cap_is_refused_and_writes_nothing() {
    let (t, me, u) = capped(14).await;
    for user in &u[..3] {
        assert_ok(&t.follow(me, *user).await);
    }
    let events = t.outbox().await.len();
    let refused = t.follow(me, u[3]).await;
    assert_eq!(error_code(&refused), Some("FOLLOW_LIMIT"), "{refused}");
    assert_eq!(t.edge(me, u[3]).await, None, "no edge");
    assert_eq!(t.stats(me).await.0, 3, "followings unchanged");
    assert_eq!(t.outbox().await.len(), events, "no event");

    // Enough followers lift it, up to the ratio exactly: 1.1 × 10 = 11
    // followings are allowed, a twelfth is not.
    t.sql(&format!(
        "UPDATE user_stats SET followers = 10 WHERE user_id = {me}"
    ))
    .await;
    for user in &u[3..11] {
        assert_ok(&t.follow(me, *user).await);
    }
    assert_eq!(t.stats(me).await.0, 11);
    let refused = t.follow(me, u[11]).await;
    assert_eq!(error_code(&refused), Some("FOLLOW_LIMIT"), "{refused}");
}

#[tokio::test]
async fn past_the_cap_unfollows_and_repeats_are_never_refused() {
    let (t, me, u) = capped(3).await;
    for user in &u {
        assert_ok(&t.follow(me, *user).await);
    }
    // Past the cap already (the cap came later, or the followers left).
    t.sql(&format!(
        "UPDATE user_stats SET followings = 9 WHERE user_id = {me}"
    ))
    .await;
    let again = t.follow(me, u[0]).await;
    assert_ok(&again);
    assert_eq!(again["data"]["follow"]["changed"], false);
    let gone = t.unfollow(me, u[1]).await;
    assert_ok(&gone);
    assert_eq!(gone["data"]["unfollow"]["changed"], true);
    assert_eq!(t.stats(me).await.0, 8);
}

/// `followMany` with a full `results` selection.
async fn follow_many_results(t: &TestApp, me: UserId, users: &[UserId]) -> serde_json::Value {
    let ids: Vec<String> = users
        .iter()
        .map(|u| kith::testing::graph::ids::user_id(*u).to_string())
        .collect();
    t.execute(
        Viewer::User(me),
        "mutation($ids: [ID!]!) { followMany(input: {userIds: $ids}) {
           changedCount results { changed error { code } } } }",
        json!({ "ids": ids }),
    )
    .await
}

#[tokio::test]
async fn follow_many_past_the_cap_applies_what_fits_in_order() {
    let (t, me, u) = capped(5).await;
    assert_ok(&t.follow(me, u[0]).await);
    let events = t.outbox().await.len();
    let r = follow_many_results(&t, me, &u[1..]).await;
    assert_ok(&r);
    let many = &r["data"]["followMany"];
    assert_eq!(many["changedCount"], 2, "{r}");
    let codes: Vec<&serde_json::Value> = many["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["error"]["code"])
        .collect();
    assert_eq!(
        codes,
        [
            &json!(null),
            &json!(null),
            &json!("FOLLOW_LIMIT"),
            &json!("FOLLOW_LIMIT")
        ],
        "{r}"
    );
    assert_eq!(t.stats(me).await.0, 3);
    assert_eq!(t.outbox().await.len(), events + 2);
    for user in &u[1..3] {
        assert_eq!(t.edge(me, *user).await, Some((true, 1)));
    }
    for user in &u[3..] {
        assert_eq!(t.edge(me, *user).await, None);
    }
}

#[tokio::test]
async fn follow_many_under_the_cap_applies() {
    let (t, me, u) = capped(3).await;
    assert_ok(&t.follow(me, u[0]).await);
    // u0 is followed already: two new follows take followings to the cap.
    let r = follow_many(&t, me, &u).await;
    assert_ok(&r);
    assert_eq!(r["data"]["followMany"]["changedCount"], 2);
    assert_eq!(t.stats(me).await.0, 3);
}

/// Follows one below the cap, each made to hold its locks while it
/// commits: they queue on the actor's counters, and only the first fits.
#[tokio::test]
async fn racing_follows_never_pass_the_cap_together() {
    let (t, me, u) = capped(8).await;
    for user in &u[..2] {
        assert_ok(&t.follow(me, *user).await);
    }
    // Every new edge's commit waits 300 ms, its locks held.
    t.delay_edge_commits(0.3).await;
    let answers = futures::future::join_all(u[2..].iter().map(|user| t.follow(me, *user))).await;
    let ok = answers.iter().filter(|a| error_code(a).is_none()).count();
    let limited = answers
        .iter()
        .filter(|a| error_code(a) == Some("FOLLOW_LIMIT"))
        .count();
    assert_eq!((ok, limited), (1, 5), "{answers:?}");
    assert_eq!(t.stats(me).await.0, 3);
    assert_eq!(t.outbox().await.len(), 3);
}

/// The outcomes of one call of an edge function, or PostgreSQL's error.
async fn outcomes(t: &TestApp, call: String) -> Result<Vec<String>, String> {
    #[derive(diesel::QueryableByName)]
    struct Row {
        #[diesel(sql_type = diesel::sql_types::Text)]
        outcome: String,
    }
    diesel_async::RunQueryDsl::load::<Row>(
        diesel::sql_query(format!("SELECT outcome FROM {call}")),
        &mut *t.conn().await,
    )
    .await
    .map(|rows| rows.into_iter().map(|r| r.outcome).collect())
    .map_err(|e| e.to_string())
}

/// The two functions kept for processes of the release before (during a
/// rolling deploy) apply through the group commit's function, and answer
/// the cap as that release reads it: an error, with nothing written.
#[tokio::test]
async fn the_release_befores_functions_keep_its_contract() {
    let (t, me, u) = capped(5).await;
    let one = |target: UserId, follow: bool| {
        format!("kith_change_edge({me}, {target}, {follow}, gen_random_uuid(), 3, 1.1)")
    };
    let many = |targets: &[UserId]| {
        let ids: Vec<String> = targets.iter().map(|u| u.to_string()).collect();
        let events = vec!["gen_random_uuid()"; targets.len()].join(", ");
        format!(
            "kith_change_edges({me}, ARRAY[{}]::bigint[], ARRAY[{events}]::uuid[], TRUE, 3, 1.1)",
            ids.join(", ")
        )
    };
    assert_eq!(outcomes(&t, one(u[0], true)).await.unwrap(), ["ok"]);
    assert_eq!(outcomes(&t, many(&u[1..3])).await.unwrap(), ["ok", "ok"]);
    assert_eq!(t.stats(me).await.0, 3);
    let events = t.outbox().await.len();
    assert_eq!(events, 3, "one event per follow");

    for refused in [one(u[3], true), many(&u[3..5])] {
        let e = outcomes(&t, refused).await.unwrap_err();
        assert!(e.contains("kith: follow limit"), "{e}");
    }
    assert_eq!(t.stats(me).await.0, 3, "followings unchanged");
    assert_eq!(t.edge(me, u[3]).await, None, "no edge");
    assert_eq!(t.outbox().await.len(), events, "no event");

    assert_eq!(outcomes(&t, one(u[0], false)).await.unwrap(), ["ok"]);
    assert_eq!(t.stats(me).await.0, 2);
}
