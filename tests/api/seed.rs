//! `kith seed-data`'s generator: a graph that is consistent everywhere, with
//! the celebrities and the skew it promises.

use diesel::QueryableByName;
use diesel::sql_types::BigInt;
use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl as _};
use kith::model::UserId;
use kith::testing::store::seed::{Plan, generate};

use crate::helpers::{assert_consistent, spawn_app};

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

#[tokio::test]
async fn a_seeded_graph_is_consistent_and_skewed() {
    let t = spawn_app().await;
    let existing = t.user("before").await;
    let plan = Plan {
        users: 3_000,
        edges: 40_000,
        celebrities: 2,
        celebrity_followers: 2_999,
        prefix: "seed".into(),
        seed: 0.5,
        communities: 0,
    };
    let mut steps = Vec::new();
    // Its own session, as `kith seed-data` has: no API statement_timeout.
    let mut conn = AsyncPgConnection::establish(t.app.config.session_url())
        .await
        .unwrap();
    let summary = generate(&mut conn, &plan, |s| steps.push(s.to_owned()))
        .await
        .unwrap();
    assert!(summary.first_id > existing.get());
    assert!(!steps.is_empty());
    // Duplicates are drawn again: the graph has the edges asked for.
    assert_eq!(summary.edges, 40_000, "{summary:?}");
    for c in 0..2 {
        let celebrity = UserId::new(summary.first_id + c).unwrap();
        assert_eq!(t.full_stats(celebrity).await.followers, 2_999);
    }
    let t = &t;
    let count = |sql: &'static str| async move {
        let Count { n } = diesel::sql_query(sql)
            .get_result(&mut *t.conn().await)
            .await
            .unwrap();
        n
    };
    assert_eq!(
        count("SELECT count(*) AS n FROM following").await,
        summary.edges
    );
    assert_eq!(
        count("SELECT count(*) AS n FROM follower").await,
        summary.edges
    );
    // Skew: the busiest tenth of ordinary users holds most of their followers.
    let top = count(
        "SELECT sum(followers)::BIGINT AS n FROM (SELECT followers FROM user_stats
           ORDER BY followers DESC OFFSET 2 LIMIT 300) x",
    )
    .await;
    let all = count("SELECT (sum(followers) - 2 * 2999)::BIGINT AS n FROM user_stats").await;
    assert!(top * 2 > all, "top tenth {top} of {all}");
    // Users created afterwards get fresh ids.
    let after = t.user("after").await;
    assert!(after.get() > summary.first_id + 2_999);
    assert_consistent(&t.verify(0).await);
}

/// With communities, most follows stay within the follower's community
/// (user `i` counted from the first is in community `i mod K`).
#[tokio::test]
async fn a_graph_with_communities_keeps_most_follows_within_them() {
    let t = spawn_app().await;
    let plan = Plan {
        users: 2_000,
        edges: 20_000,
        celebrities: 0,
        celebrity_followers: 0,
        prefix: "c".into(),
        seed: 0.5,
        communities: 10,
    };
    let mut conn = AsyncPgConnection::establish(t.app.config.session_url())
        .await
        .unwrap();
    let summary = generate(&mut conn, &plan, |_| {}).await.unwrap();
    assert_eq!(summary.edges, 20_000, "{summary:?}");
    let within = t
        .count(&format!(
            "SELECT count(*) AS n FROM following
              WHERE (from_user_id - {first}) % 10 = (to_user_id - {first}) % 10",
            first = summary.first_id
        ))
        .await;
    // 80% drawn within, and a tenth of the rest lands within by chance.
    assert!(within > 15_000, "{within} of 20,000 within their community");
    assert_consistent(&t.verify(0).await);
}
