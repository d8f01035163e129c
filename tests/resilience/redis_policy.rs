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
        config.redis_url = redis.url.clone();
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
    config.redis_url = redis.url.clone();
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
    config.redis_url = redis.url.clone();
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
            &t.app.config.follow_topic,
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
    let group = &t.app.config.consumer_group;
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
