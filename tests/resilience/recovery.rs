//! Crash recovery with real processes: `kill -9` of the `kith` binary, then a
//! restart, over and over; and two projectors sharing partitions, one of them
//! killed for good. The leases live in PostgreSQL, so recovery does not wait
//! on the broker's group coordinator.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kith::model::UserId;
use kith::testing::store::partitions;

use crate::helpers::{KithProcess, TestApp, eventually, settled, spawn_app_with};

/// The longest a restart (or a peer) may take to apply new events.
const RECOVERY_BOUND: Duration = Duration::from_secs(15);

/// True once `from → to` is in the projection and in `to`'s counter record.
async fn applied(t: &TestApp, from: UserId, to: UserId) -> Option<()> {
    let (active, _) = t.projected(from, to).await?;
    let record = t.counter_record(to).await?;
    let stats = t.full_stats(to).await;
    (active && record.version == stats.version as u64).then_some(())
}

/// Follows `target` from `actor` and waits for every view; returns how long it took.
async fn follow_and_time(t: &TestApp, actor: UserId, target: UserId, secs: u64) -> Duration {
    let started = Instant::now();
    assert_eq!(
        t.follow(actor, target).await["data"]["follow"]["changed"],
        true
    );
    eventually("the follow to be applied", secs, || {
        applied(t, actor, target)
    })
    .await;
    started.elapsed()
}

/// Follows and unfollows among `users` until `stop`, as other API replicas would.
fn background_writes(
    t: Arc<TestApp>,
    users: Vec<UserId>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let mut writes = 0u64;
        let mut i = 0usize;
        while !stop.load(Ordering::Relaxed) {
            let a = users[i % users.len()];
            let b = users[(i * 7 + 3) % users.len()];
            i += 1;
            if a == b {
                continue;
            }
            if i.is_multiple_of(3) {
                t.unfollow(a, b).await;
            } else {
                t.follow(a, b).await;
            }
            writes += 1;
            tokio::time::sleep(Duration::from_millis(15)).await;
        }
        writes
    })
}

/// Users at either end of any edge (untouched users have no counter record to wait for).
async fn touched_users(t: &TestApp) -> Vec<UserId> {
    use diesel_async::RunQueryDsl;
    #[derive(diesel::QueryableByName)]
    struct Row {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        id: i64,
    }
    let rows: Vec<Row> = diesel::sql_query(
        "SELECT from_user_id AS id FROM following UNION SELECT to_user_id FROM following",
    )
    .load(&mut *t.conn().await)
    .await
    .unwrap();
    rows.into_iter().filter_map(|r| UserId::new(r.id)).collect()
}

#[tokio::test]
async fn kill_9_and_restart_five_times_in_a_row() {
    let t = Arc::new(spawn_app_with(|c| c.writes.rate_limit_capacity = 100_000).await);
    let mut users = Vec::new();
    for i in 0..12 {
        users.push(t.user(&format!("u{i}")).await);
    }
    let target = t.user("target").await;
    let mut probes = Vec::new();
    for i in 0..5 {
        probes.push(t.user(&format!("probe{i}")).await);
    }
    let mut kith = KithProcess::start(&t, "run", &[]);
    follow_and_time(&t, users[0], target, 60).await;

    let stop = Arc::new(AtomicBool::new(false));
    let writer = background_writes(t.clone(), users.clone(), stop.clone());
    let mut timings = Vec::new();
    for (round, probe) in probes.iter().enumerate() {
        // Let it work for a while under writes, then kill it mid-flight.
        tokio::time::sleep(Duration::from_millis(700 + 300 * round as u64)).await;
        kith.kill();
        let started = Instant::now();
        kith = KithProcess::start(&t, "run", &[]);
        let took = follow_and_time(&t, *probe, target, 60).await;
        let since_restart = started.elapsed();
        eprintln!(
            "round {round}: new event applied {since_restart:?} after the restart (the follow itself took {took:?})"
        );
        assert!(
            since_restart < RECOVERY_BOUND,
            "round {round}: {since_restart:?} after the restart (log: {})",
            kith.log.display()
        );
        timings.push(since_restart);
    }
    stop.store(true, Ordering::Relaxed);
    let writes = writer.await.unwrap();
    let mut touched = touched_users(&t).await;
    touched.extend(probes.iter().copied().chain([target]));
    settled(&t, &touched, 60).await;
    eprintln!("{writes} background writes; recovery times {timings:?}");
    drop(kith);
}

#[tokio::test]
async fn a_killed_projector_hands_its_partitions_to_the_other() {
    let t = spawn_app_with(|c| {
        c.writes.rate_limit_capacity = 100_000;
        c.pipeline.topic_partitions = 4;
    })
    .await;
    let group = t.app.config.pipeline.consumer_group.clone();
    let target = t.user("target").await;
    let mut fans = Vec::new();
    for i in 0..24 {
        fans.push(t.user(&format!("fan{i}")).await);
    }
    let _first = KithProcess::start(&t, "run", &[]);
    let mut second = KithProcess::start(&t, "project", &[]);

    // Both members hold a share of every topic.
    let owners = eventually("both projectors to hold partitions", 60, || async {
        let rows = partitions::list(&mut *t.conn().await, &group)
            .await
            .unwrap();
        let owners: BTreeSet<_> = rows.iter().filter_map(|r| r.owner).collect();
        (rows.len() == 8 && rows.iter().all(|r| r.owner.is_some()) && owners.len() == 2)
            .then_some(rows)
    })
    .await;
    for fan in &fans[..12] {
        t.follow(*fan, target).await;
    }
    settled(&t, &[target], 60).await;

    // Which member is the second process? The one that stops heartbeating.
    second.kill();
    let killed_at = Instant::now();
    for fan in &fans[12..] {
        t.follow(*fan, target).await;
    }
    settled(&t, &[target], 60).await;
    let took = killed_at.elapsed();
    eprintln!("all events applied {took:?} after the kill");
    assert!(took < RECOVERY_BOUND, "{took:?} after the kill");
    assert_eq!(t.full_stats(target).await.followers, 24);

    let rows = partitions::list(&mut *t.conn().await, &group)
        .await
        .unwrap();
    let survivors: BTreeSet<_> = rows.iter().filter_map(|r| r.owner).collect();
    assert_eq!(
        survivors.len(),
        1,
        "one member holds every partition: {rows:?}"
    );
    let moved = owners
        .iter()
        .filter(|before| {
            Some(before.owner)
                != rows
                    .iter()
                    .find(|r| r.topic == before.topic && r.partition == before.partition)
                    .map(|r| r.owner)
        })
        .count();
    assert!(
        moved >= 1,
        "the dead member's partitions moved: {owners:?} -> {rows:?}"
    );
}

#[tokio::test]
async fn a_killed_relay_hands_the_outbox_to_a_standby() {
    let t = spawn_app_with(|c| c.writes.rate_limit_capacity = 1000).await;
    let target = t.user("target").await;
    let (first_fan, second_fan) = (t.user("first").await, t.user("second").await);
    let projector = t.start_projector(std::sync::Arc::new(
        kith::testing::pipeline::projector::ProjectorHooks::default(),
    ));
    let mut active = KithProcess::start(&t, "relay", &[]);
    follow_and_time(&t, first_fan, target, 60).await;
    // The standby starts once the first relay leads, then the leader dies.
    let _standby = KithProcess::start(&t, "relay", &[]);
    active.kill();
    let killed_at = Instant::now();
    follow_and_time(&t, second_fan, target, 60).await;
    let took = killed_at.elapsed();
    eprintln!("relayed again {took:?} after the leader's kill -9");
    assert!(took < RECOVERY_BOUND, "{took:?}");
    projector.stop().await.unwrap();
}
