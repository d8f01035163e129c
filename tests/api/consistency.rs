//! The consistency tools against real PostgreSQL and Redis: verify finds
//! each kind of drift, reconcile and rebuild-cache repair it without racing
//! the pipeline, and the sampled check repairs counters as they are read.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use kith::model::UserId;
use kith::testing::consistency::verify::Kind;
use kith::testing::consistency::{rebuild, reconcile};
use kith::testing::paging::ListKey;
use kith::testing::pipeline::projector::ProjectorHooks;

use crate::helpers::{TestApp, assert_consistent, eventually, settled, spawn_app_with};

fn hooks() -> Arc<ProjectorHooks> {
    Arc::new(ProjectorHooks::default())
}

/// A small graph through the whole pipeline, with some lists cached.
async fn graph(t: &TestApp, n: usize) -> Vec<UserId> {
    let mut users = Vec::new();
    for i in 0..n {
        users.push(t.user(&format!("g{i}")).await);
    }
    for user in &users[..3] {
        t.cache_list(ListKey::Followers(*user), &[]).await;
        t.cache_list(ListKey::Following(*user), &[]).await;
    }
    let relay = t.start_relay();
    let projector = t.start_projector(hooks());
    for (i, a) in users.iter().enumerate() {
        for b in users.iter().skip(i + 1).step_by(2) {
            t.follow(*a, *b).await;
            t.follow(*b, *a).await;
        }
    }
    t.unfollow(users[1], users[0]).await;
    settled(t, &users, 60).await;
    relay.stop().await.unwrap();
    projector.stop().await.unwrap();
    users
}

async fn record_bytes(t: &TestApp, user: UserId, bytes: &[u8]) {
    let mut redis = t.app.redis.get().await.unwrap();
    let _: () = redis::cmd("SET")
        .arg(t.app.keys.counter_record(user))
        .arg(bytes)
        .query_async(&mut *redis)
        .await
        .unwrap();
}

async fn redis_cmd(t: &TestApp, cmd: &mut redis::Cmd) {
    let mut redis = t.app.redis.get().await.unwrap();
    let _: redis::Value = cmd.query_async(&mut *redis).await.unwrap();
}

#[tokio::test]
async fn verify_finds_every_kind_of_drift_and_reconcile_repairs_it() {
    let t = spawn_app_with(|c| c.writes.rate_limit_capacity = 1000).await;
    let u = graph(&t, 6).await;
    assert_consistent(&t.verify(0).await);

    // Projection: a missing row, an older row, an orphan.
    t.sql(&format!(
        "DELETE FROM follower WHERE from_user_id = {} AND to_user_id = {}",
        u[0], u[1]
    ))
    .await;
    t.sql(&format!(
        "UPDATE follower SET version = version - 1, active = NOT active WHERE from_user_id = {} AND to_user_id = {}",
        u[1], u[0]
    ))
    .await;
    t.sql(&format!(
        "INSERT INTO follower (to_user_id, from_user_id, active, followed_at, version)
         VALUES ({}, {}, TRUE, date_trunc('milliseconds', now()), 1)",
        u[2], u[4]
    ))
    .await;
    // Counters: drifted both ways.
    t.sql(&format!(
        "UPDATE user_stats SET followers = followers + 3 WHERE user_id = {}",
        u[3]
    ))
    .await;
    t.sql(&format!(
        "UPDATE user_stats SET followings = 0 WHERE user_id = {}",
        u[2]
    ))
    .await;
    // A counter record corrupted under its own version.
    let mut record = t.counter_record(u[4]).await.unwrap();
    record.posts += 7;
    record_bytes(&t, u[4], &record.encode()).await;
    // Cached lists: a member gone, one too many, one with the wrong score.
    let [fans1, _, _] = t.app.keys.list(ListKey::Followers(u[1]));
    let [flws2, _, _] = t.app.keys.list(ListKey::Following(u[2]));
    let member = |u: UserId| format!("{:019}", u.get());
    redis_cmd(&t, redis::cmd("ZREM").arg(&fans1).arg(member(u[0]))).await;
    redis_cmd(&t, redis::cmd("ZADD").arg(&fans1).arg(1).arg(member(u[5]))).await;
    let cached = t.cached_list(ListKey::Following(u[2])).await.unwrap();
    redis_cmd(
        &t,
        redis::cmd("ZADD").arg(&flws2).arg(5).arg(member(cached[0])),
    )
    .await;

    let report = t.verify(0).await;
    let count = |kind| report.counts.get(&kind).copied().unwrap_or(0);
    assert_eq!(count(Kind::ProjectionMissing), 1, "{report}");
    assert_eq!(count(Kind::ProjectionDiffers), 1, "{report}");
    assert_eq!(count(Kind::ProjectionOrphan), 1, "{report}");
    assert_eq!(count(Kind::FollowersDiffer), 1, "{report}");
    assert_eq!(count(Kind::FollowingsDiffer), 1, "{report}");
    // The corrupted record, and the records of both drifted counters.
    assert_eq!(count(Kind::CounterRecordDiffers), 3, "{report}");
    // The removed member, and the orphan missing from the cached list.
    assert_eq!(count(Kind::ListMemberMissing), 2, "{report}");
    assert_eq!(count(Kind::ListMemberExtra), 1, "{report}");
    assert_eq!(count(Kind::ListEntryDiffers), 1, "{report}");
    // Persistent drift survives the settle re-check.
    assert_eq!(t.verify(200).await.total(), report.total());

    let summary = reconcile::reconcile(&t.app, reconcile::Scope::Full, 3, false)
        .await
        .unwrap();
    assert_eq!(
        (summary.projection_updated, summary.orphans_deleted),
        (2, 1),
        "{summary}"
    );
    assert!(summary.counters_fixed >= 2, "{summary}");
    let rebuilt = rebuild::rebuild(
        &t.app,
        rebuild::Options {
            batch: 4,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(rebuilt.lists, 6, "{rebuilt}");
    assert_consistent(&t.verify(0).await);
}

#[tokio::test]
async fn reconcile_and_rebuild_while_the_pipeline_runs_count_nothing_twice() {
    let t = Arc::new(spawn_app_with(|c| c.writes.rate_limit_capacity = 100_000).await);
    let mut users = Vec::new();
    for i in 0..10 {
        users.push(t.user(&format!("r{i}")).await);
    }
    for user in &users {
        t.cache_list(ListKey::Followers(*user), &[]).await;
    }
    let relay = t.start_relay();
    let projector = t.start_projector(hooks());
    // Writes go on for as long as the repairs do, so they overlap.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let t = t.clone();
        let users = users.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut round = 0;
            while !stop.load(Ordering::Relaxed) {
                for (i, a) in users.iter().enumerate() {
                    let b = users[(i + 1 + round) % users.len()];
                    if round % 2 == 0 {
                        t.follow(*a, b).await;
                    } else {
                        t.unfollow(*a, b).await;
                    }
                }
                round += 1;
            }
            round
        })
    };
    // Repairs run while writes and the projector run; Redis loses everything once.
    for round in 0..4 {
        reconcile::reconcile(&t.app, reconcile::Scope::Full, 5, false)
            .await
            .unwrap();
        if round == 1 {
            t.flush_redis().await;
        }
        rebuild::rebuild(
            &t.app,
            rebuild::Options {
                batch: 3,
                all_lists: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = writer.await.unwrap();
    assert!(
        rounds >= 2,
        "the writes overlapped the repairs ({rounds} rounds)"
    );
    settled(&t, &[], 60).await;
    // No repair ran after the writes: whatever the repairs and the
    // pipeline did together must agree with the truth now.
    eventually("every view to agree", 30, || async {
        (t.verify(0).await.total() == 0).then_some(())
    })
    .await;
    relay.stop().await.unwrap();
    projector.stop().await.unwrap();
}

#[tokio::test]
async fn an_incremental_reconcile_looks_only_at_what_changed() {
    let t = spawn_app_with(|c| c.writes.rate_limit_capacity = 1000).await;
    let u = graph(&t, 5).await;
    let first = reconcile::reconcile(&t.app, reconcile::Scope::Incremental, 100, false)
        .await
        .unwrap();
    assert!(first.edges_checked > 0);
    // The watermark sits a minute before the first run: move it past the
    // edges so far, as a later run would see it.
    t.sql("UPDATE reconcile_watermark SET watermark = now()")
        .await;
    t.sql(&format!(
        "UPDATE user_stats SET followers = followers + 1 WHERE user_id = {}",
        u[4]
    ))
    .await;
    t.follow(u[0], u[2]).await;
    let second = reconcile::reconcile(&t.app, reconcile::Scope::Incremental, 100, false)
        .await
        .unwrap();
    assert_eq!(second.edges_checked, 1, "{second}");
    assert_eq!(
        second.projection_updated, 1,
        "the new edge, before the projector: {second}"
    );
    let counts = kith::testing::store::checks::user_counts(&mut *t.conn().await, &[u[2]])
        .await
        .unwrap();
    assert_eq!(t.full_stats(u[2]).await.followers, counts[0].true_followers);
    // The drift on u[4] was not in the changed set; a full run finds it.
    let full = reconcile::reconcile(&t.app, reconcile::Scope::Full, 100, false)
        .await
        .unwrap();
    assert_eq!(full.counters_fixed, 1, "{full}");
    assert_consistent(&t.verify(0).await);
}

#[tokio::test]
async fn the_sampled_check_repairs_counters_as_they_are_read() {
    let t = spawn_app_with(|c| {
        c.writes.rate_limit_capacity = 1000;
        c.consistency.counter_check_interval_secs = 600;
    })
    .await;
    let u = graph(&t, 4).await;
    let before = t.full_stats(u[2]).await;
    t.sql(&format!("UPDATE user_stats SET followers = followers + 5, version = kith_next_version(version) WHERE user_id = {}", u[2])).await;
    let query = "query($id: ID!) { node(id: $id) { ... on User { counters { followers } } } }";
    let id = kith::testing::graph::ids::user_id(u[2]).to_string();
    let read = t
        .execute(
            kith::testing::auth::Viewer::Anonymous,
            query,
            serde_json::json!({ "id": id }),
        )
        .await;
    // The read itself serves what the cache holds; the check runs behind it.
    assert!(read["errors"].is_null(), "{read}");
    eventually("the drift to be repaired", 30, || async {
        let now = t.full_stats(u[2]).await;
        let record = t.counter_record(u[2]).await?;
        let counted = t.app.metrics.consistency_repairs.get() >= 1;
        (now.followers == before.followers
            && record.followers as i64 == before.followers
            && counted)
            .then_some(())
    })
    .await;
    // Once per interval: a second drift is not looked at by the next read.
    t.sql(&format!(
        "UPDATE user_stats SET followers = followers + 1 WHERE user_id = {}",
        u[2]
    ))
    .await;
    t.execute(
        kith::testing::auth::Viewer::Anonymous,
        query,
        serde_json::json!({ "id": id }),
    )
    .await;
    let mut redis = t.app.redis.get().await.unwrap();
    let mark_ttl: i64 = redis::cmd("PTTL")
        .arg(t.app.keys.counter_check_mark(u[2]))
        .query_async(&mut *redis)
        .await
        .unwrap();
    assert!(
        mark_ttl > 500_000,
        "the mark holds for the interval: {mark_ttl}"
    );
    // Longer than a check takes to settle and repair.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(t.full_stats(u[2]).await.followers, before.followers + 1);
}

#[tokio::test]
async fn reconcile_sets_a_count_that_drifted_low_instead_of_driving_it_below_zero() {
    let t = spawn_app_with(|c| c.writes.rate_limit_capacity = 1000).await;
    let (alice, bob, carol) = (
        t.user("alice").await,
        t.user("bob").await,
        t.user("carol").await,
    );
    // The projection still shows alice (and an orphan, carol) following bob,
    // while bob's count already says 0 — as after a cancel that was dead-lettered.
    t.follow(alice, bob).await;
    t.unfollow(alice, bob).await;
    for from in [alice, carol] {
        t.sql(&format!(
            "INSERT INTO follower (to_user_id, from_user_id, active, followed_at, version)
             VALUES ({bob}, {from}, TRUE, date_trunc('milliseconds', now()), 1)"
        ))
        .await;
    }
    assert_eq!(t.full_stats(bob).await.followers, 0);

    let summary = reconcile::reconcile(&t.app, reconcile::Scope::Full, 10, false)
        .await
        .expect("no counter goes below zero");
    assert_eq!(
        (summary.projection_updated, summary.orphans_deleted),
        (1, 1),
        "{summary}"
    );
    assert_eq!(t.full_stats(bob).await.followers, 0);
    assert_consistent(&t.verify(0).await);
}

#[tokio::test]
async fn a_scheduled_reconcile_repairs_drift_by_itself() {
    let t = spawn_app_with(|c| c.writes.rate_limit_capacity = 1000).await;
    let u = graph(&t, 4).await;
    let right = t.full_stats(u[1]).await.followers;
    t.sql(&format!(
        "UPDATE user_stats SET followers = followers + 2 WHERE user_id = {}",
        u[1]
    ))
    .await;
    let (trigger, shutdown) = kith::testing::shutdown::Shutdown::new();
    let schedule = tokio::spawn(reconcile::schedule(
        t.app.clone(),
        Duration::from_millis(200),
        shutdown,
    ));
    eventually("the scheduled run to repair it", 30, || async {
        (t.full_stats(u[1]).await.followers == right
            && t.app.metrics.consistency_repairs.get() >= 1)
            .then_some(())
    })
    .await;
    trigger.trigger();
    schedule.await.unwrap();
}

/// `kith <args>` on the test's schema and Redis prefix, its clock `ahead`
/// of this machine's (libfaketime, installed by `scripts/stack tools`);
/// waits for it to exit successfully.
fn kith_ahead(t: &TestApp, ahead: &str, args: &[&str]) {
    let preload = ["x86_64-linux-gnu", "aarch64-linux-gnu"]
        .iter()
        .map(|arch| format!("/usr/lib/{arch}/faketime/libfaketimeMT.so.1"))
        .find(|path| std::path::Path::new(path).exists())
        .expect("libfaketime (scripts/stack tools installs it)");
    let c = &t.app.config;
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_kith"))
        .args(args)
        .env("DATABASE_URL", &c.database.url)
        .env("DATABASE_SESSION_URL", c.session_url())
        .env(
            "KITH_PG_STATEMENT_CACHE",
            c.database.pg_statement_cache.to_string(),
        )
        .env("REDIS_URL", &c.redis.url)
        .env("KITH_REDIS_PREFIX", &c.redis.prefix)
        .env("KITH_METRICS_ADDR", "off")
        .env("LD_PRELOAD", preload)
        .env("FAKETIME", ahead)
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "kith {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
async fn a_host_clock_ahead_of_postgres_makes_reconcile_skip_nothing() {
    let t = spawn_app_with(|_| {}).await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    // A first incremental run (everything) on a host five minutes ahead.
    kith_ahead(&t, "+300s", &["reconcile", "--quiet"]);
    // An edge changes after it, and its projection is missing (no projector
    // runs here): the next incremental run must repair it.
    t.follow(alice, bob).await;
    assert_eq!(t.projected(alice, bob).await, None);
    kith_ahead(&t, "+300s", &["reconcile", "--quiet"]);
    assert_eq!(
        t.projected(alice, bob).await,
        Some((true, 1)),
        "the incremental run skipped an edge changed after the last one"
    );
}

/// A derived view ahead of the truth (a restored database, an event another
/// database wrote) is set back by `rebuild-cache`, which counts what it
/// really changed: nothing, when run again.
#[tokio::test]
async fn rebuild_cache_sets_back_what_is_ahead_of_the_truth_and_counts_it() {
    let t = spawn_app_with(|c| c.writes.rate_limit_capacity = 1000).await;
    let u = graph(&t, 4).await;
    let truth = t.counter_record(u[2]).await.unwrap();
    let mut ahead = truth;
    ahead.followings += 1;
    ahead.version += 5;
    record_bytes(&t, u[2], &ahead.encode()).await;
    // u[2] does not follow u[0]; the list says so under a version above any.
    let [fans0, versions0, _] = t.app.keys.list(ListKey::Followers(u[0]));
    let member = format!("{:019}", u[2].get());
    redis_cmd(&t, redis::cmd("ZADD").arg(&fans0).arg(1).arg(&member)).await;
    redis_cmd(&t, redis::cmd("HSET").arg(&versions0).arg(&member).arg(99)).await;
    let report = t.verify(0).await;
    assert_eq!(
        report.counts.get(&Kind::CounterRecordDiffers),
        Some(&1),
        "{report}"
    );
    assert!(
        report
            .to_string()
            .contains("repair with: kith rebuild-cache"),
        "{report}"
    );

    let options = rebuild::Options {
        batch: 3,
        ..Default::default()
    };
    let first = rebuild::rebuild(&t.app, options).await.unwrap();
    assert_eq!(
        (first.records.rewritten, first.records.ahead),
        (1, 1),
        "{first}"
    );
    assert_eq!(first.lists_changed, 1, "{first}");
    assert_eq!(t.counter_record(u[2]).await, Some(truth));
    assert_consistent(&t.verify(0).await);
    let again = rebuild::rebuild(&t.app, options).await.unwrap();
    assert_eq!(
        (again.records.changed(), again.lists_changed),
        (0, 0),
        "{again}"
    );
    assert_eq!(again.records.checked, 4, "{again}");
}

/// An incremental reconcile finds projection rows with no truth row among
/// those written inside its window, and `verify` names the repair to run.
#[tokio::test]
async fn an_incremental_reconcile_finds_orphans_written_in_its_window() {
    let t = spawn_app_with(|c| c.writes.rate_limit_capacity = 1000).await;
    let u = graph(&t, 4).await;
    reconcile::reconcile(&t.app, reconcile::Scope::Incremental, 100, false)
        .await
        .unwrap();
    t.sql("UPDATE reconcile_watermark SET watermark = now()")
        .await;
    // What an event with no truth behind it leaves: a row and its count.
    t.sql(&format!(
        "INSERT INTO follower (to_user_id, from_user_id, active, followed_at, version)
         VALUES ({}, {}, TRUE, date_trunc('milliseconds', now()), 3)",
        u[0], u[2]
    ))
    .await;
    t.sql(&format!(
        "UPDATE user_stats SET followers = followers + 1 WHERE user_id = {}",
        u[0]
    ))
    .await;
    let report = t.verify(0).await;
    assert_eq!(
        report.counts.get(&Kind::ProjectionOrphan),
        Some(&1),
        "{report}"
    );
    assert!(
        report
            .to_string()
            .contains("repair with: kith reconcile --full"),
        "{report}"
    );
    let summary = reconcile::reconcile(&t.app, reconcile::Scope::Incremental, 2, false)
        .await
        .unwrap();
    assert_eq!(summary.orphans_deleted, 1, "{summary}");
    assert!(summary.counters_fixed >= 1, "{summary}");
    assert_consistent(&t.verify(0).await);
}
