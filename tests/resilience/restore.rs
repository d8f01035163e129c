//! PostgreSQL restored to an earlier point while Redis and the broker hold
//! newer state, with real processes: a dump is taken, the service goes on
//! (a lost timeline, applied everywhere), the dump is restored. `kith run`
//! refuses the restored database, `kith after-restore` brings everything in
//! line (docs/operations.md, Restores and copies), and nothing the lost
//! timeline wrote is applied.

use std::process::Command;

use kith::model::UserId;
use kith::testing::paging::ListKey;

use crate::helpers::{
    KithProcess, TestApp, assert_consistent, eventually, pg_tool, settled, spawn_app_with,
};

/// True once `from → to` is in the projection and in `to`'s counter record.
async fn applied(t: &TestApp, from: UserId, to: UserId) -> Option<()> {
    let (active, _) = t.projected(from, to).await?;
    let record = t.counter_record(to).await?;
    (active && record.version == t.full_stats(to).await.version as u64).then_some(())
}

fn run(program: &str, args: &[&str]) {
    let out = Command::new(program).args(args).output().expect(program);
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn a_restored_database_is_refused_until_after_restore_brings_it_in_line() {
    let t = spawn_app_with(|c| c.writes.rate_limit_capacity = 1000).await;
    let schema = t
        .app
        .config
        .pipeline
        .consumer_group
        .trim_end_matches(".projector")
        .to_owned();
    let base = kith::config::Config::from_env().unwrap().database.url;
    let users: Vec<UserId> = {
        let mut users = Vec::new();
        for name in ["a", "b", "c", "d", "e"] {
            users.push(t.user(name).await);
        }
        users
    };
    let [a, b, c, d, e] = users[..] else {
        unreachable!()
    };
    for user in &users {
        t.cache_list(ListKey::Followers(*user), &[]).await;
        t.cache_list(ListKey::Following(*user), &[]).await;
    }
    let mut kith = KithProcess::start(&t, "run", &[]);
    for (from, to) in [(a, b), (b, c), (c, a)] {
        let answer = t.follow(from, to).await;
        assert_eq!(answer["data"]["follow"]["changed"], true, "{answer}");
        eventually("the follow applied", 60, || applied(&t, from, to)).await;
    }
    settled(&t, &[a, b, c], 60).await;

    let dump = std::env::temp_dir().join(format!("{schema}.dump"));
    let dump = dump.to_str().unwrap();
    run(
        &pg_tool("pg_dump"),
        &[
            "--format=custom",
            "--no-owner",
            "--schema",
            &schema,
            "--file",
            dump,
            &base,
        ],
    );

    // The lost timeline: written, published, applied everywhere.
    for (from, to) in [(a, c), (a, d)] {
        t.follow(from, to).await;
        eventually("the follow applied", 60, || applied(&t, from, to)).await;
    }
    kith.terminate();
    assert_eq!(t.counter_record(a).await.unwrap().followings, 3);

    // The restore: the schema as the dump holds it.
    t.sql(&format!("DROP SCHEMA {schema} CASCADE")).await;
    run(
        &pg_tool("pg_restore"),
        &["--no-owner", "--dbname", &base, dump],
    );
    let _ = std::fs::remove_file(dump);
    assert_eq!(t.full_stats(a).await.followings, 1);

    // Kith refuses to run its pipeline on the restored database.
    let mut refused = KithProcess::start(&t, "run", &[]);
    let status = refused
        .wait_for_exit(60)
        .expect("kith run refuses and exits");
    assert!(!status.success());
    let log = refused.log_text();
    assert!(log.contains("kith after-restore"), "{log}");

    // The procedure. The restored leases were live when the dump was
    // taken: it refuses until they lapse, as a live projector's would.
    let out = eventually("after-restore to run", 60, || async {
        let (status, out) = KithProcess::run_to_end(&t, &["after-restore", "--quiet"]);
        if status.success() {
            return Some(out);
        }
        assert!(out.contains("a projector holds the lease"), "{out}");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        None
    })
    .await;
    assert!(out.contains("event origin renewed"), "{out}");
    assert!(out.contains("messages skipped"), "{out}");

    // The service goes on from the restored truth.
    let mut kith = KithProcess::start(&t, "run", &[]);
    t.follow(e, a).await;
    eventually("the follow applied", 60, || applied(&t, e, a)).await;
    settled(&t, &[], 60).await;
    // The procedure refuses to run beside a relay or a projector.
    let (status, out) = KithProcess::run_to_end(&t, &["after-restore", "--quiet"]);
    assert!(!status.success(), "refused while Kith runs: {out}");
    assert!(out.contains("refused"), "{out}");
    for (from, to) in [(a, c), (a, d)] {
        assert_eq!(t.projected(from, to).await, None, "{from} -> {to}");
    }
    assert_eq!(t.full_stats(a).await.followings, 1);
    assert_eq!(t.full_stats(c).await.followers, 1);
    let record = t.counter_record(a).await;
    assert!(record.is_none_or(|r| r.followings == 1), "{record:?}");
    let (status, out) = KithProcess::run_to_end(&t, &["verify", "--quiet"]);
    assert!(status.success(), "{out}");
    assert!(out.contains("disagreements: 0"), "{out}");
    assert_consistent(&t.verify(0).await);
    let letters = kith::testing::store::dead_letters::list(&mut *t.conn().await, 0, 100, false)
        .await
        .unwrap();
    assert!(
        letters.is_empty(),
        "nothing was even read again: {letters:#?}"
    );
    kith.terminate();
}
