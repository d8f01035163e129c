//! `commonFollowing`, `knownFollowers` and `knownFollowersCount` against
//! graphs loaded straight into the truth and the projection: the results
//! and their order match a model, paging never skips or repeats, the caches
//! and PostgreSQL agree, and a follow by either user shows at once.

use std::collections::HashMap;

use diesel::sql_types::{Array, BigInt, Text};
use diesel_async::{AsyncConnection as _, AsyncPgConnection};
use kith::model::UserId;
use kith::testing::auth::Viewer;
use kith::testing::graph::ids;
use kith::testing::paging::ListKey;
use serde_json::json;

use crate::helpers::{TestApp, assert_ok, spawn_app, spawn_app_with};
use crate::rng::Rng;

const BASE_MS: i64 = 1_700_000_000_000;

/// Creates `n` users `{prefix}0…` and returns their ids in creation order.
async fn users(t: &TestApp, prefix: &str, n: i64) -> Vec<UserId> {
    use diesel_async::RunQueryDsl as _;
    let mut conn = AsyncPgConnection::establish(t.app.config.session_url())
        .await
        .unwrap();
    kith::testing::store::users::seed(&mut conn, prefix, n)
        .await
        .unwrap();
    #[derive(diesel::QueryableByName)]
    struct Id {
        #[diesel(sql_type = BigInt)]
        id: i64,
    }
    let ids: Vec<Id> =
        diesel::sql_query("SELECT id FROM users WHERE handle LIKE $1 || '%' ORDER BY id")
            .bind::<Text, _>(prefix)
            .load(&mut conn)
            .await
            .unwrap();
    ids.into_iter()
        .map(|r| UserId::new(r.id).unwrap())
        .collect()
}

/// Active edges `(from, to, followed_at_ms)`, written to the truth, the
/// projection and the counters as a settled pipeline leaves them.
async fn edges(t: &TestApp, edges: &[(UserId, UserId, i64)]) {
    use diesel_async::RunQueryDsl as _;
    let mut conn = AsyncPgConnection::establish(t.app.config.session_url())
        .await
        .unwrap();
    let from: Vec<i64> = edges.iter().map(|e| e.0.get()).collect();
    let to: Vec<i64> = edges.iter().map(|e| e.1.get()).collect();
    let at: Vec<i64> = edges.iter().map(|e| e.2).collect();
    for table in ["following", "follower"] {
        diesel::sql_query(format!(
            "INSERT INTO {table} (from_user_id, to_user_id, active, followed_at, version)
             SELECT f, t, TRUE, 'epoch'::timestamptz + ms * interval '1 millisecond', 1
               FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS e(f, t, ms)"
        ))
        .bind::<Array<BigInt>, _>(&from)
        .bind::<Array<BigInt>, _>(&to)
        .bind::<Array<BigInt>, _>(&at)
        .execute(&mut conn)
        .await
        .unwrap();
    }
    for (column, ids) in [("followings", &from), ("followers", &to)] {
        diesel::sql_query(format!(
            "UPDATE user_stats s SET {column} = s.{column} + c.n, version = kith_next_version(s.version)
               FROM (SELECT u, count(*) AS n FROM unnest($1::bigint[]) AS u GROUP BY u) c
              WHERE s.user_id = c.u"
        ))
        .bind::<Array<BigInt>, _>(ids)
        .execute(&mut conn)
        .await
        .unwrap();
    }
}

fn gid(user: UserId) -> String {
    ids::user_id(user).to_string()
}

/// Every page of `field` on `user` (`args` besides paging), as (id, ms),
/// forwards with `first: size` and backwards with `last: size`; checks the
/// page info on the way and that both directions agree.
async fn walk(
    t: &TestApp,
    viewer: Viewer,
    user: UserId,
    field: &str,
    args: &str,
    size: usize,
) -> (Vec<(String, i64)>, u64) {
    let query = |forward: bool| {
        let (n, cursor) = if forward {
            ("first", "after")
        } else {
            ("last", "before")
        };
        format!(
            "query($id: ID!, $c: String) {{ user(id: $id) {{ {field}({args} {n}: {size}, {cursor}: $c) {{
                totalCount pageInfo {{ hasNextPage hasPreviousPage startCursor endCursor }}
                edges {{ cursor followedAt node {{ id }} }} }} }} }}"
        )
    };
    let mut pages_forward = Vec::new();
    let mut total = 0;
    for forward in [true, false] {
        let mut cursor: Option<String> = None;
        let mut all: Vec<(String, i64)> = Vec::new();
        for round in 0.. {
            assert!(round < 10_000, "paging does not end");
            let r = t
                .execute(
                    viewer,
                    &query(forward),
                    json!({ "id": gid(user), "c": cursor }),
                )
                .await;
            assert_ok(&r);
            let connection = &r["data"]["user"][field];
            total = connection["totalCount"].as_u64().unwrap();
            let mut page: Vec<(String, i64)> = connection["edges"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    (
                        e["node"]["id"].as_str().unwrap().to_owned(),
                        chrono::DateTime::parse_from_rfc3339(e["followedAt"].as_str().unwrap())
                            .unwrap()
                            .timestamp_millis(),
                    )
                })
                .collect();
            let info = &connection["pageInfo"];
            let (more, other) = if forward {
                (info["hasNextPage"].as_bool().unwrap(), "hasPreviousPage")
            } else {
                (info["hasPreviousPage"].as_bool().unwrap(), "hasNextPage")
            };
            // Past the first page the cursor's own edge lies behind it.
            assert_eq!(info[other], json!(cursor.is_some()), "{r}");
            if forward {
                all.extend(page);
            } else {
                page.extend(all);
                all = page;
            }
            if !more {
                break;
            }
            let end = if forward { "endCursor" } else { "startCursor" };
            cursor = Some(info[end].as_str().unwrap().to_owned());
        }
        pages_forward.push(all);
    }
    assert_eq!(
        pages_forward[0], pages_forward[1],
        "forwards and backwards agree"
    );
    (pages_forward.swap_remove(0), total)
}

/// The model's answer in the API's shape (global id, follow time), newest
/// first, ties by larger id first.
fn expected(mut items: Vec<(UserId, i64)>) -> Vec<(String, i64)> {
    items.sort_by_key(|e| std::cmp::Reverse((e.1, e.0)));
    items
        .into_iter()
        .map(|(user, ms)| (gid(user), ms))
        .collect()
}

/// Whom both follow, from the edges: the more recent time of the two.
fn common_model(edges: &[(UserId, UserId, i64)], a: UserId, b: UserId) -> Vec<(String, i64)> {
    let of = |owner: UserId| -> HashMap<UserId, i64> {
        edges
            .iter()
            .filter(|e| e.0 == owner)
            .map(|e| (e.1, e.2))
            .collect()
    };
    let (fa, fb) = (of(a), of(b));
    expected(
        fa.iter()
            .filter_map(|(u, ta)| Some((*u, (*ta).max(*fb.get(u)?))))
            .collect(),
    )
}

async fn common_count(t: &TestApp, a: UserId, b: UserId) -> u64 {
    let r = t
        .execute(
            Viewer::Anonymous,
            "query($id: ID!, $w: ID!) { user(id: $id) { commonFollowing(with: $w, first: 1) { totalCount } } }",
            json!({ "id": gid(a), "w": gid(b) }),
        )
        .await;
    assert_ok(&r);
    r["data"]["user"]["commonFollowing"]["totalCount"]
        .as_u64()
        .unwrap()
}

#[tokio::test]
async fn common_following_of_a_large_and_a_small_list() {
    // `big` follows 50,000 with no followers: past the follow cap, which
    // is not what this test is about.
    let t = spawn_app_with(|c| c.writes.max_followings = 0).await;
    let pool = users(&t, "p", 50_000).await;
    let (big, small) = (t.user("big").await, t.user("small").await);
    let mut rng = Rng(7);
    let mut graph: Vec<(UserId, UserId, i64)> = pool
        .iter()
        .map(|u| (big, *u, BASE_MS + rng.below(200_000) as i64))
        .collect();
    // Twenty shared (two at the same time as in the big list, to test ties),
    // and three the big list lacks.
    let outsiders = users(&t, "o", 3).await;
    for (i, u) in pool.iter().step_by(2_500).enumerate() {
        graph.push((
            small,
            *u,
            BASE_MS + if i < 2 { 0 } else { rng.below(400_000) as i64 },
        ));
    }
    for u in &outsiders {
        graph.push((small, *u, BASE_MS + 5));
    }
    edges(&t, &graph).await;
    let model = common_model(&graph, big, small);
    assert_eq!(model.len(), 20);

    let (from_big, total) = walk(
        &t,
        Viewer::Anonymous,
        big,
        "commonFollowing",
        &format!("with: \"{}\",", gid(small)),
        7,
    )
    .await;
    assert_eq!(total, 20);
    assert_eq!(from_big, model);
    let (from_small, total) = walk(
        &t,
        Viewer::Anonymous,
        small,
        "commonFollowing",
        &format!("with: \"{}\",", gid(big)),
        6,
    )
    .await;
    assert_eq!(total, 20);
    assert_eq!(from_small, model, "the same from either side");

    // The same once the list caches hold both lists (the big one in part).
    for list in [ListKey::Following(big), ListKey::Following(small)] {
        kith::testing::read::pages::fill(&t.app, list, true)
            .await
            .unwrap();
    }
    t.app.read.forget_intersections();
    let (cached, _) = walk(
        &t,
        Viewer::Anonymous,
        big,
        "commonFollowing",
        &format!("with: \"{}\",", gid(small)),
        20,
    )
    .await;
    assert_eq!(cached, model);

    // A follow or unfollow by either user shows at once.
    let extra = pool[1];
    assert_ok(&t.follow(small, extra).await);
    assert_eq!(common_count(&t, big, small).await, 21);
    assert_eq!(common_count(&t, small, big).await, 21);
    assert_ok(&t.unfollow(big, extra).await);
    assert_eq!(common_count(&t, big, small).await, 20);
    assert_ok(&t.follow(big, outsiders[0]).await);
    assert_eq!(common_count(&t, small, big).await, 21);
}

#[tokio::test]
async fn common_following_of_large_overlapping_lists_and_of_disjoint_ones() {
    let t = spawn_app().await;
    let pool = users(&t, "q", 4_500).await;
    let (c, d, e, f) = (
        t.user("c").await,
        t.user("d").await,
        t.user("e").await,
        t.user("f").await,
    );
    let mut rng = Rng(11);
    let mut graph = Vec::new();
    for u in &pool[..3_000] {
        graph.push((c, *u, BASE_MS + rng.below(10_000) as i64));
    }
    for u in &pool[1_500..] {
        graph.push((d, *u, BASE_MS + rng.below(10_000) as i64));
    }
    for u in &pool[..10] {
        graph.push((e, *u, BASE_MS));
    }
    for u in &pool[10..20] {
        graph.push((f, *u, BASE_MS));
    }
    edges(&t, &graph).await;
    let model = common_model(&graph, c, d);
    assert_eq!(model.len(), 1_500);
    let (paged, total) = walk(
        &t,
        Viewer::Anonymous,
        c,
        "commonFollowing",
        &format!("with: \"{}\",", gid(d)),
        100,
    )
    .await;
    assert_eq!(total, 1_500);
    assert_eq!(paged, model);

    let (none, total) = walk(
        &t,
        Viewer::Anonymous,
        e,
        "commonFollowing",
        &format!("with: \"{}\",", gid(f)),
        10,
    )
    .await;
    assert_eq!((none.len(), total), (0, 0));

    // A cursor of one pair's connection is refused by another's.
    let r = t
        .execute(
            Viewer::Anonymous,
            "query($id: ID!, $w: ID!) { user(id: $id) { commonFollowing(with: $w, first: 1) { pageInfo { endCursor } } } }",
            json!({ "id": gid(c), "w": gid(d) }),
        )
        .await;
    let cursor = r["data"]["user"]["commonFollowing"]["pageInfo"]["endCursor"].clone();
    for (user, with) in [(d, c), (c, e)] {
        let r = t
            .execute(
                Viewer::Anonymous,
                "query($id: ID!, $w: ID!, $c: String) { user(id: $id) { commonFollowing(with: $w, first: 1, after: $c) { totalCount } } }",
                json!({ "id": gid(user), "w": gid(with), "c": cursor }),
            )
            .await;
        assert_eq!(crate::helpers::error_code(&r), Some("BAD_CURSOR"), "{r}");
    }
}

#[tokio::test]
async fn known_followers_for_anonymous_empty_and_busy_viewers() {
    let t = spawn_app().await;
    let fans = users(&t, "fan", 200).await;
    let others = users(&t, "x", 50).await;
    let (star, nobody, busy) = (
        t.user("star").await,
        t.user("nobody").await,
        t.user("busy").await,
    );
    let mut rng = Rng(3);
    let mut graph: Vec<(UserId, UserId, i64)> = fans
        .iter()
        .map(|u| (*u, star, BASE_MS + rng.below(100_000) as i64))
        .collect();
    for u in fans.iter().step_by(7).chain(&others) {
        graph.push((busy, *u, BASE_MS + rng.below(100_000) as i64));
    }
    edges(&t, &graph).await;
    let model = expected(
        graph
            .iter()
            .filter(|e| e.1 == star && graph.iter().any(|b| b.0 == busy && b.1 == e.0))
            .map(|e| (e.0, e.2))
            .collect(),
    );
    assert_eq!(model.len(), 29);

    let (known, total) = walk(&t, Viewer::User(busy), star, "knownFollowers", "", 8).await;
    assert_eq!(total, 29);
    assert_eq!(known, model, "ordered by when they followed the star");
    let (known, total) = walk(&t, Viewer::User(nobody), star, "knownFollowers", "", 8).await;
    assert_eq!((known.len(), total), (0, 0));
    let (known, total) = walk(&t, Viewer::Anonymous, star, "knownFollowers", "", 8).await;
    assert_eq!((known.len(), total), (0, 0));

    // The count, on the viewer's relation: alone, and batched over a page.
    let count = "query($id: ID!) { user(id: $id) {
        viewerRelation { knownFollowersCount { count exact } }
        followers(first: 50) { edges { node { id viewerRelation { knownFollowersCount { count exact } } } } } } }";
    let r = t
        .execute(Viewer::User(busy), count, json!({ "id": gid(star) }))
        .await;
    assert_ok(&r);
    assert_eq!(
        r["data"]["user"]["viewerRelation"]["knownFollowersCount"],
        json!({ "count": 29, "exact": true })
    );
    for edge in r["data"]["user"]["followers"]["edges"].as_array().unwrap() {
        // Each fan has no followers of its own.
        assert_eq!(
            edge["node"]["viewerRelation"]["knownFollowersCount"],
            json!({ "count": 0, "exact": true })
        );
    }
    let r = t
        .execute(Viewer::User(nobody), count, json!({ "id": gid(star) }))
        .await;
    assert_eq!(
        r["data"]["user"]["viewerRelation"]["knownFollowersCount"],
        json!({ "count": 0, "exact": true })
    );
    let r = t
        .execute(Viewer::Anonymous, count, json!({ "id": gid(star) }))
        .await;
    assert_ok(&r);
    assert!(r["data"]["user"]["viewerRelation"].is_null());
}

#[tokio::test]
async fn known_followers_count_is_a_lower_bound_past_its_walk() {
    let t = spawn_app().await;
    let fans = users(&t, "kf", 3_000).await;
    let (star, viewer) = (t.user("star").await, t.user("viewer").await);
    let mut graph: Vec<(UserId, UserId, i64)> = fans.iter().map(|u| (*u, star, BASE_MS)).collect();
    // The viewer follows 1,500 fans: more than the count walks, fewer than
    // the star's followers — so its own list is walked, and only in part.
    for (i, u) in fans.iter().take(1_500).enumerate() {
        graph.push((viewer, *u, BASE_MS + i as i64));
    }
    edges(&t, &graph).await;
    let r = t
        .execute(
            Viewer::User(viewer),
            "query($id: ID!) { user(id: $id) { viewerRelation { knownFollowersCount { count exact } } } }",
            json!({ "id": gid(star) }),
        )
        .await;
    assert_ok(&r);
    assert_eq!(
        r["data"]["user"]["viewerRelation"]["knownFollowersCount"],
        json!({ "count": 1000, "exact": false }),
        "at least 1,000"
    );
}

/// A followers page whose every node asks `commonFollowing` costs what it
/// says: the complexity model refuses it before any work.
#[tokio::test]
async fn intersections_are_charged_for_their_work() {
    let t = spawn_app().await;
    let user = t.user("u").await;
    let many: String = (0..25)
        .map(|i| format!("c{i}: commonFollowing(with: $id, first: 1) {{ totalCount }} "))
        .collect();
    let r = t
        .execute(
            Viewer::Anonymous,
            &format!("query($id: ID!) {{ user(id: $id) {{ {many} }} }}"),
            json!({ "id": gid(user) }),
        )
        .await;
    assert_eq!(crate::helpers::error_code(&r), Some("INVALID_INPUT"), "{r}");
    assert!(r["data"].is_null());
}

/// A follow whose cache writes failed (every pooled Redis connection was
/// lent out when they were sent) still shows at once in its process: the
/// actor's counters, and with them the versions an intersection computed
/// before it is kept under, are read from the truth; that first read
/// writes the record back, and Redis serves it from then on.
#[tokio::test]
async fn a_follow_the_caches_missed_still_shows_at_once() {
    use diesel_async::RunQueryDsl as _;
    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = BigInt)]
        n: i64,
    }
    #[derive(diesel::QueryableByName)]
    struct Pid {
        #[diesel(sql_type = diesel::sql_types::Integer)]
        pid: i32,
    }
    // The follow waits for the row, then half the request's deadline for a
    // Redis connection; its statement may wait as long as the test holds
    // the row.
    let t = std::sync::Arc::new(
        spawn_app_with(|c| {
            c.limits.request_timeout_ms = 5_000;
            c.database.statement_timeout_ms = 5_000;
        })
        .await,
    );
    let [a, b, c1, c2] = ["a", "b", "c1", "c2"].map(|h| t.user(h));
    let (a, b, c1, c2) = (a.await, b.await, c1.await, c2.await);
    for (from, to) in [(b, c1), (b, c2), (a, c1)] {
        assert_ok(&t.follow(from, to).await);
    }
    assert_eq!(common_count(&t, b, a).await, 1);
    // Fills those reads started hold no Redis connection the test lends.
    t.fills_finished().await;

    // `a`'s follow of `c2` waits for `a`'s stats row, which the test holds
    // until it has every pooled Redis connection.
    let session = t.app.config.session_url().to_owned();
    let mut holder = AsyncPgConnection::establish(&session).await.unwrap();
    let mut watch = AsyncPgConnection::establish(&session).await.unwrap();
    let me: Pid = diesel::sql_query("SELECT pg_backend_pid() AS pid")
        .get_result(&mut holder)
        .await
        .unwrap();
    for statement in [
        "BEGIN".to_owned(),
        format!("SELECT 1 FROM user_stats WHERE user_id = {a} FOR UPDATE"),
    ] {
        diesel::sql_query(statement)
            .execute(&mut holder)
            .await
            .unwrap();
    }
    let following = {
        let t = t.clone();
        tokio::spawn(async move { t.follow(a, c2).await })
    };
    let waiting = format!(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE {} = ANY(pg_blocking_pids(pid))",
        me.pid
    );
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let found: Count = diesel::sql_query(waiting.as_str())
            .get_result(&mut watch)
            .await
            .unwrap();
        if found.n == 1 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the follow never waited for the row"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let mut lent = Vec::new();
    for _ in 0..t.app.config.redis.pool_size {
        lent.push(t.app.redis.get().await.unwrap());
    }
    diesel::sql_query("COMMIT")
        .execute(&mut holder)
        .await
        .unwrap();
    // The follow commits; its cache writes find no connection and give up.
    crate::helpers::eventually("the cache writes give up", 10, || async {
        t.app.read.counters_unsynced(a).then_some(())
    })
    .await;
    drop(lent);
    let r = following.await.unwrap();
    assert_ok(&r);
    assert_eq!(r["data"]["follow"]["changed"], json!(true), "{r}");
    let stale = t.counter_record(a).await.unwrap();
    assert_eq!(stale.followings, 1, "the record was not written through");

    assert_eq!(common_count(&t, b, a).await, 2);
    // That read wrote the record back: Redis serves it again.
    assert!(!t.app.read.counters_unsynced(a));
    assert_eq!(t.counter_record(a).await.unwrap().followings, 2);
    assert_eq!(common_count(&t, a, b).await, 2);
    let r = TestApp::execute(
        &t,
        Viewer::User(a),
        "query($id: ID!) { user(id: $id) { counters { followings } } }",
        json!({ "id": gid(a) }),
    )
    .await;
    assert_eq!(r["data"]["user"]["counters"]["followings"], json!(2), "{r}");
}
