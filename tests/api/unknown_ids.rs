//! Reads name users by id, and a client can make ids up: a read of a user
//! that does not exist must create nothing (no list fill, no Redis key), and
//! a Redis that is full (`maxmemory` under `noeviction`) refuses writes on
//! purpose (`UNAVAILABLE`) while reads carry on from PostgreSQL. Each test
//! against a Redis server of its own, so its key count is its own.

use kith::testing::auth::Viewer;
use kith::testing::graph::ids;
use serde_json::{Value, json};

use crate::helpers::Redis;
use crate::helpers::{TestApp, error_code, spawn_app_with};

async fn keys(redis: &Redis) -> i64 {
    let client = redis::Client::open(redis.url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("DBSIZE").query_async(&mut conn).await.unwrap()
}

/// `n` made-up global user ids, none of them a user.
fn unknown_ids(n: usize, salt: u64) -> Vec<String> {
    let mut rng = crate::rng::Rng(salt.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    (0..n)
        .map(|_| {
            let id = rng.below(1 << 40) as i64 + 1_000_000;
            ids::user_id(kith::model::UserId::new(id).unwrap()).to_string()
        })
        .collect()
}

/// One request of aliased reads of unknown ids, of the shapes that name a
/// user by id (an intersection is charged for 20,000 rows: three fit).
fn hostile_query(user: &str, others: &[String]) -> (String, Value) {
    let fields: String = others
        .iter()
        .enumerate()
        .map(|(i, id)| match i {
            0..3 => format!("c{i}: commonFollowing(with: \"{id}\", first: 1) {{ totalCount }} "),
            _ => format!("r{i}: relationTo(other: \"{id}\") {{ following followedBy }} "),
        })
        .collect();
    (
        format!("query($id: ID!) {{ user(id: $id) {{ handle {fields} }} }}"),
        json!({ "id": user }),
    )
}

const RELATIONSHIPS: &str = "query($ids: [ID!]!) { relationships(ids: $ids) { following } }";

#[tokio::test]
async fn reads_of_unknown_users_leave_no_keys_in_redis() {
    let redis = Redis::start(&["--maxmemory-policy", "noeviction"]);
    let t = spawn_app_with(|c| c.redis.url = redis.url.clone()).await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    t.follow(alice, bob).await;
    let alice_id = ids::user_id(alice).to_string();
    // Warm what the real users' reads cache (their counter records and
    // lists), then count.
    let bob_id = ids::user_id(bob).to_string();
    for others in [vec![bob_id.clone()], vec![bob_id.clone(); 4]] {
        let (warm, vars) = hostile_query(&alice_id, &others);
        t.execute(Viewer::Anonymous, &warm, vars).await;
        t.execute(
            Viewer::User(alice),
            RELATIONSHIPS,
            json!({ "ids": [&bob_id] }),
        )
        .await;
        t.fills_finished().await;
    }
    let before = keys(&redis).await;

    let mut answered = 0;
    for round in 0..60u64 {
        let others = unknown_ids(50, round);
        let (query, vars) = hostile_query(&alice_id, &others);
        let r = t.execute(Viewer::Anonymous, &query, vars).await;
        assert!(r["errors"].is_null(), "{r}");
        for (i, _) in others.iter().enumerate() {
            match i {
                0..3 => assert_eq!(r["data"]["user"][format!("c{i}")]["totalCount"], 0),
                _ => assert_eq!(r["data"]["user"][format!("r{i}")], Value::Null, "{r}"),
            }
            answered += 1;
        }
        // The viewer's own relations read the same way: null where unknown.
        let r = t
            .execute(
                Viewer::User(alice),
                RELATIONSHIPS,
                json!({ "ids": &others }),
            )
            .await;
        assert!(
            r["data"]["relationships"]
                .as_array()
                .unwrap()
                .iter()
                .all(Value::is_null),
            "{r}"
        );
    }
    // A user who exists but is not active: its lists are not filled either.
    let sus = t.user("sus").await;
    kith::testing::write::lifecycle::set_status(&t.app, sus, kith::model::UserStatus::Suspended)
        .await
        .unwrap();
    let (query, vars) = hostile_query(&alice_id, &[ids::user_id(sus).to_string()]);
    let r = t.execute(Viewer::Anonymous, &query, vars).await;
    assert!(r["errors"].is_null(), "{r}");
    t.fills_finished().await;
    let after = keys(&redis).await;
    assert_eq!(answered, 3000);
    eprintln!("Redis keys: {before} before, {after} after");
    let skipped = t.app.metrics.render(&Default::default());
    assert!(
        skipped.contains("kith_list_fills_skipped_total{reason=\"not_active\"}"),
        "{skipped}"
    );
    assert!(
        after <= before + 2,
        "{} keys before, {} after 6,000 reads of unknown users",
        before,
        after
    );
}

async fn profile(t: &TestApp, user: kith::model::UserId) -> Value {
    t.execute(
        Viewer::Anonymous,
        "query($id: ID!) { user(id: $id) { handle counters { followings }
            following(first: 5) { edges { node { handle } } } } }",
        json!({ "id": ids::user_id(user).to_string() }),
    )
    .await
}

#[tokio::test]
async fn a_full_redis_refuses_follows_as_unavailable_and_reads_go_on() {
    let t = crate::helpers::spawn_app().await;
    let (alice, bob, carol) = (
        t.user("alice").await,
        t.user("bob").await,
        t.user("carol").await,
    );
    t.follow(carol, bob).await;
    // One byte of memory: every write that adds data fails with OOM.
    let redis = Redis::start(&["--maxmemory", "1", "--maxmemory-policy", "noeviction"]);
    let mut config = t.app.config.clone();
    config.redis.url = redis.url.clone();
    let full = kith::app::App::start(config)
        .await
        .expect("a full Redis still starts");
    let full = TestApp {
        schema: kith::testing::graph::schema(full.clone()),
        app: full,
    };
    let before = t.snapshot().await;
    let r = full.follow(alice, bob).await;
    assert_eq!(error_code(&r), Some("UNAVAILABLE"), "{r}");
    assert_eq!(t.snapshot().await, before, "nothing written");
    let counted = full.app.metrics.render(&Default::default());
    assert!(
        counted.contains("kith_redis_out_of_memory_total{path=\"rate_limit\"} 1\n"),
        "{counted}"
    );
    // Reads go on, from PostgreSQL.
    let r = profile(&full, carol).await;
    assert!(r["errors"].is_null(), "{r}");
    assert_eq!(r["data"]["user"]["counters"]["followings"], 1);
    assert_eq!(
        r["data"]["user"]["following"]["edges"][0]["node"]["handle"],
        "bob"
    );
}

#[tokio::test]
async fn fills_reads_start_are_bounded_per_process() {
    let t = spawn_app_with(|c| c.caches.max_fills_per_sec = 2).await;
    let mut users = Vec::new();
    for i in 0..20 {
        users.push(t.user(&format!("u{i}")).await);
    }
    // Twenty lists of real users asked for at once: the bucket's two are
    // filled (and one more for each half second the request took, as the
    // bucket refills), the rest are read from PostgreSQL and counted as
    // skipped.
    let fields: String = users
        .iter()
        .enumerate()
        .map(|(i, user)| {
            format!(
                "u{i}: user(id: \"{}\") {{ followers(first: 1) {{ totalCount }} }} ",
                ids::user_id(*user).as_str()
            )
        })
        .collect();
    let started = std::time::Instant::now();
    let r = t
        .execute(Viewer::Anonymous, &format!("{{ {fields} }}"), json!({}))
        .await;
    let refilled = (started.elapsed().as_secs_f64() * 2.0).floor() as usize;
    assert!(r["errors"].is_null(), "{r}");
    t.fills_finished().await;
    let mut cached = 0;
    for user in &users {
        cached += usize::from(
            t.cached_list(kith::testing::paging::ListKey::Followers(*user))
                .await
                .is_some(),
        );
    }
    assert!(
        cached <= 2 + refilled,
        "{cached} lists filled within a budget of 2 a second ({refilled} refilled meanwhile)"
    );
    let text = t.app.metrics.render(&Default::default());
    assert!(
        text.contains("kith_list_fills_skipped_total{reason=\"budget\"}"),
        "{text}"
    );
}
