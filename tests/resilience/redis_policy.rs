//! Redis memory limits, each against a Redis server of the test's own: Kith
//! refuses to run on a Redis that may evict keys (one key of a cached list
//! could go without the others), and a full Redis never stalls the projector.

use std::sync::Arc;

use kith::app::{App, StartError};
use kith::testing::events::follow::{FollowEvent, FollowEventType};
use kith::testing::pipeline::projector::ProjectorHooks;
use kith::testing::store::partitions;

use crate::helpers::{Redis, eventually, spawn_app};

#[tokio::test]
async fn an_evicting_redis_is_refused_at_start_up() {
    let t = spawn_app().await;
    for policy in ["allkeys-lru", "volatile-ttl"] {
        let redis = Redis::start(&["--maxmemory-policy", policy]);
        let mut config = t.app.config.clone();
        config.redis.url = redis.url.clone();
        match App::start(config).await {
            Err(StartError::RedisEviction(found)) => assert_eq!(found, policy),
            Err(e) => panic!("{policy}: wrong error {e}"),
            Ok(_) => panic!("{policy}: started on an evicting Redis"),
        }
    }
}

#[tokio::test]
async fn a_cluster_node_named_as_one_server_is_refused_at_start_up() {
    let t = spawn_app().await;
    let dir = std::env::temp_dir().join(format!("kith-cluster-node-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let redis = Redis::start(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    let mut config = t.app.config.clone();
    config.redis.url = redis.url.clone();
    let started = App::start(config).await;
    drop(redis);
    let _ = std::fs::remove_dir_all(&dir);
    match started {
        Err(StartError::RedisClusterAsSingle) => {}
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("started on a cluster node named as one server"),
    }
}

#[tokio::test]
async fn a_full_redis_drops_caches_instead_of_stalling_the_projector() {
    let t = spawn_app().await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    // One byte of memory: every write that adds data fails with OOM.
    let redis = Redis::start(&["--maxmemory", "1", "--maxmemory-policy", "noeviction"]);
    let mut config = t.app.config.clone();
    config.redis.url = redis.url.clone();
    let full = App::start(config).await.expect("a full Redis still starts");
    let projector = t.start_projector_for(full.clone(), Arc::new(ProjectorHooks::default()));

    let at = chrono::Utc::now().timestamp_millis();
    for (version, kind) in [
        (1, FollowEventType::FollowCreated),
        (2, FollowEventType::FollowCanceled),
        (3, FollowEventType::FollowCreated),
    ] {
        let event = FollowEvent {
            schema_version: 1,
            event_id: uuid::Uuid::new_v4(),
            event_type: kind,
            from: alice,
            to: bob,
            version,
            followed_at_ms: at,
            occurred_at_ms: at,
        };
        t.produce(
            &t.app.config.pipeline.follow_topic,
            &alice.to_string(),
            &serde_json::to_vec(&event).unwrap(),
        )
        .await;
    }
    eventually("the projection", 60, || async {
        (t.projected(alice, bob).await == Some((true, 3))).then_some(())
    })
    .await;
    assert_eq!(t.full_stats(bob).await.followers, 1);
    projector.stop().await.unwrap();
    // The Redis step finished (by dropping the caches): nothing is left to re-sync.
    let group = &t.app.config.pipeline.consumer_group;
    let rows = partitions::list(&mut *t.conn().await, group).await.unwrap();
    let synced = positions(&t, group).await;
    assert!(rows.iter().any(|r| r.next_offset == Some(3)), "{rows:?}");
    assert!(
        synced.iter().all(|(next, synced)| next == synced),
        "{synced:?}"
    );
}

async fn positions(t: &crate::helpers::TestApp, group: &str) -> Vec<(Option<i64>, Option<i64>)> {
    use diesel_async::RunQueryDsl as _;
    #[derive(diesel::QueryableByName)]
    struct Row {
        #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
        next_offset: Option<i64>,
        #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::BigInt>)]
        synced_offset: Option<i64>,
    }
    let rows: Vec<Row> = diesel::sql_query(
        "SELECT next_offset, synced_offset FROM projector_partition WHERE consumer_group = $1",
    )
    .bind::<diesel::sql_types::Text, _>(group)
    .load(&mut *t.conn().await)
    .await
    .unwrap();
    rows.into_iter()
        .map(|r| (r.next_offset, r.synced_offset))
        .collect()
}

/// A crawl of every public list by an anonymous client: each read starts a
/// fill, and without a limit the caches would take Redis to its
/// `maxmemory`, where every write — the rate limiter's included — fails
/// `OOM`. Reads stop filling past `KITH_FILL_MEMORY_LIMIT` (three quarters
/// of `maxmemory` by default), and writes drop the caches they would grow
/// past it: Redis stays under it, and writes go on.
#[tokio::test]
async fn a_crawl_of_every_list_keeps_redis_under_its_fill_limit() {
    use kith::testing::auth::Viewer;

    const MAXMEMORY: u64 = 8 * 1024 * 1024;
    let redis = Redis::start(&["--maxmemory", &MAXMEMORY.to_string()]);
    let t = crate::helpers::spawn_app_with(|c| {
        c.redis.url = redis.url.clone();
        c.caches.max_fills_per_sec = 100_000;
        // Seeding 90,000 follows beside other tests takes longer than a
        // request may.
        c.database.statement_timeout_ms = 0;
    })
    .await;
    let plan = kith::testing::store::seed::Plan {
        users: 3_000,
        edges: 90_000,
        celebrities: 0,
        celebrity_followers: 0,
        prefix: "crawl".into(),
        seed: 0.3,
        communities: 0,
    };
    let seeded = kith::testing::store::seed::generate(&mut *t.conn().await, &plan, |_| {})
        .await
        .unwrap();
    let used = || async {
        let client = redis::Client::open(redis.url.as_str()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let info: String = redis::cmd("INFO")
            .arg("memory")
            .query_async(&mut conn)
            .await
            .unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .unwrap()
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    let query = "query($id: ID!) { user(id: $id) {
        followers(first: 20) { edges { node { id } } }
        following(first: 20) { edges { node { id } } } } }";
    let mut peak = 0;
    for id in seeded.first_id..seeded.first_id + seeded.users {
        let gid = kith::testing::graph::ids::user_id(kith::model::UserId::new(id).unwrap());
        let r = t
            .execute(
                Viewer::Anonymous,
                query,
                serde_json::json!({ "id": gid.to_string() }),
            )
            .await;
        assert!(r["errors"].is_null(), "{r}");
        if id % 100 == 0 {
            peak = peak.max(used().await);
        }
    }
    // The fills the crawl started are done once none is in flight.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    peak = peak.max(used().await);
    // Follows between crawled users, whose caches Redis holds: past the
    // limit the write path and the projector drop what they would grow,
    // and every view stays right.
    let user = |n: i64| kith::model::UserId::new(seeded.first_id + n).unwrap();
    let _relay = t.start_relay();
    let _projector = t.start_projector(Arc::new(ProjectorHooks::default()));
    for n in 0..40 {
        t.unfollow(user(n), user(n + 1000)).await;
        let r = t.follow(user(n), user(n + 1000)).await;
        assert!(r["errors"].is_null(), "{r}");
        peak = peak.max(used().await);
    }
    crate::helpers::settled(&t, &[], 60).await;
    peak = peak.max(used().await);
    // A removal past the limit drops the list but leaves its tombstone: an
    // add of an older version, late, cannot bring the edge back once a read
    // fills the list again.
    t.unfollow(user(0), user(1000)).await;
    crate::helpers::settled(&t, &[], 60).await;
    let (active, version) = t.projected(user(0), user(1000)).await.unwrap();
    assert!(!active);
    let [members, versions, _] = t
        .app
        .keys
        .list(kith::testing::paging::ListKey::Following(user(0)));
    let mut conn = redis::Client::open(redis.url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let kept: Option<i64> = redis::cmd("HGET")
        .arg(&versions)
        .arg(format!("{:019}", user(1000).get()))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(kept, Some(version), "the removal's tombstone");
    let listed: Option<f64> = redis::cmd("ZSCORE")
        .arg(&members)
        .arg(format!("{:019}", user(1000).get()))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(listed, None);
    assert!(
        t.app.metrics.caches_shed.get() > 0,
        "writes dropped caches past the limit"
    );
    crate::helpers::assert_consistent(&t.verify(0).await);
    let limit = MAXMEMORY / 4 * 3;
    // Each write is admitted at the most it can take: none lands past it.
    eprintln!("used_memory peaked at {peak} bytes under a limit of {limit}");
    assert!(peak < limit, "peak {peak} bytes, limit {limit}");
    let skipped = t
        .app
        .metrics
        .list_fills_skipped
        .get_or_create(&kith::testing::metrics::SkipLabels { reason: "memory" })
        .get();
    assert!(skipped > 0, "the limit was reached, and fills were skipped");
    for path in [
        "rate_limit",
        "write_through",
        "fill",
        "counter_record",
        "projector",
    ] {
        let refused = t
            .app
            .metrics
            .redis_out_of_memory
            .get_or_create(&kith::testing::metrics::PathLabels { path })
            .get();
        assert_eq!(refused, 0, "no write saw OOM on {path}");
    }
}
