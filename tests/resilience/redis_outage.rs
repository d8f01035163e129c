//! Redis dying, hanging or busy while Kith runs, each against a Redis of the
//! test's own: reads are still answered correctly from PostgreSQL without
//! waiting on Redis each time, writes fail fast with `UNAVAILABLE`, and
//! everything resumes by itself when Redis answers again.

use std::time::{Duration, Instant};

use kith::app::App;
use kith::model::UserId;
use kith::testing::auth::Viewer;
use kith::testing::cache::RedisPool;
use serde_json::{Value, json};

use crate::helpers::Redis;
use crate::helpers::{TestApp, assert_ok, error_code, eventually, spawn_app};

const PROFILE: &str = "query($id: ID!) { user(id: $id) { handle
    counters { followings followers }
    following(first: 5) { totalCount edges { node { handle } } } } }";

/// Far longer than a read may take once Redis is known to be away.
const REDIS_TIMEOUT_MS: u64 = 3000;
const FAST: Duration = Duration::from_millis(2000);

/// The same schema and PostgreSQL as `t`, with Redis at `url`.
fn on_redis(t: &TestApp, url: &str) -> TestApp {
    let mut config = t.app.config.clone();
    config.redis.url = url.to_owned();
    config.redis.timeout_ms = REDIS_TIMEOUT_MS;
    let timeout = Duration::from_millis(REDIS_TIMEOUT_MS);
    let redis = RedisPool::new(url, 4, timeout, timeout).unwrap();
    let app = App::new(config, t.app.pg.clone(), redis, Default::default());
    let schema = kith::testing::graph::schema(app.clone());
    TestApp { app, schema }
}

async fn profile(k: &TestApp, user: UserId) -> (Value, Duration) {
    let id = kith::testing::graph::ids::user_id(user).to_string();
    let started = Instant::now();
    let r = k
        .execute(Viewer::Anonymous, PROFILE, json!({ "id": id }))
        .await;
    (r, started.elapsed())
}

/// While Redis cannot answer: reads are right and fast, a follow is refused
/// fast with `UNAVAILABLE` and writes nothing.
async fn degraded(k: &TestApp, actor: UserId, target: UserId, expected: &Value) {
    let (r, _first) = profile(k, actor).await;
    assert_eq!(&r, expected, "first read without Redis");
    for _ in 0..5 {
        let (r, took) = profile(k, actor).await;
        assert_eq!(&r, expected);
        assert!(took < FAST, "a read waited on Redis: {took:?}");
    }
    let started = Instant::now();
    let r = k.follow(actor, target).await;
    assert_eq!(error_code(&r), Some("UNAVAILABLE"), "{r}");
    assert!(
        started.elapsed() < FAST,
        "a write waited on Redis: {:?}",
        started.elapsed()
    );
    assert_eq!(k.edge(actor, target).await, None);
}

/// Redis answers again: the follow goes through without any restart.
async fn recovered(k: &TestApp, actor: UserId, target: UserId) {
    eventually("a follow to succeed once Redis is back", 20, || async {
        let r = k.follow(actor, target).await;
        (r["data"]["follow"]["changed"] == true).then_some(())
    })
    .await;
    assert!(!k.app.redis.is_down());
    let (r, _) = profile(k, actor).await;
    assert_ok(&r);
    assert_eq!(r["data"]["user"]["counters"]["followings"], 2, "{r}");
}

async fn setup() -> (TestApp, UserId, UserId, UserId) {
    let t = spawn_app().await;
    let (alice, bob, carol) = (
        t.user("alice").await,
        t.user("bob").await,
        t.user("carol").await,
    );
    t.follow(alice, bob).await;
    (t, alice, bob, carol)
}

#[tokio::test]
async fn a_killed_redis_is_skipped_until_it_is_back() {
    let (t, alice, _bob, carol) = setup().await;
    let mut redis = Redis::start(&[]);
    let k = on_redis(&t, &redis.url);
    let (expected, _) = profile(&k, alice).await;
    assert_ok(&expected);
    assert_eq!(expected["data"]["user"]["counters"]["followings"], 1);

    redis.kill();
    degraded(&k, alice, carol, &expected).await;
    assert!(k.app.redis.is_down());
    redis.restart();
    recovered(&k, alice, carol).await;
}

#[tokio::test]
async fn a_redis_that_never_answers_is_skipped() {
    let (t, alice, _bob, carol) = setup().await;
    let (expected, _) = profile(&t, alice).await;
    assert_ok(&expected);
    // Accepts connections and never says a word: a partition, a hung server.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://{}/0", listener.local_addr().unwrap());
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = held.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            sink.lock().unwrap().push(stream);
        }
    });
    let k = on_redis(&t, &url);
    degraded(&k, alice, carol, &expected).await;
}

#[tokio::test]
async fn a_busy_redis_is_unavailable_then_recovers() {
    let (t, alice, _bob, carol) = setup().await;
    let redis = Redis::start(&["--busy-reply-threshold", "50"]);
    let k = on_redis(&t, &redis.url);
    let (expected, _) = profile(&k, alice).await;
    assert_ok(&expected);

    // A script that never ends: Redis answers BUSY to everyone else.
    let client = redis::Client::open(redis.url.as_str()).unwrap();
    let mut runner = client.get_multiplexed_async_connection().await.unwrap();
    let script = tokio::spawn(async move {
        redis::cmd("EVAL")
            .arg("while true do end")
            .arg(0)
            .query_async::<()>(&mut runner)
            .await
    });
    let mut probe = client.get_multiplexed_async_connection().await.unwrap();
    eventually("Redis to answer BUSY", 10, || {
        let mut probe = probe.clone();
        async move {
            let e = redis::cmd("PING")
                .query_async::<()>(&mut probe)
                .await
                .err()?;
            (e.code() == Some("BUSY")).then_some(())
        }
    })
    .await;
    degraded(&k, alice, carol, &expected).await;

    let _: () = redis::cmd("SCRIPT")
        .arg("KILL")
        .query_async(&mut probe)
        .await
        .unwrap();
    assert!(script.await.unwrap().is_err());
    recovered(&k, alice, carol).await;
}
