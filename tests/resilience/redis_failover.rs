//! A Redis Cluster primary dies (`kill -9`) while reads and writes run: its
//! replica takes over, Kith answers `UNAVAILABLE` (never `INTERNAL`) while
//! the slots have no primary, recovers by itself, and loses nothing.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kith::model::UserId;
use kith::testing::auth::Viewer;
use serde_json::json;

use crate::helpers::{error_code, eventually, settled, spawn_app_with};

/// Six redis-server processes (three primaries, a replica each) on
/// 127.0.0.1:7201-7206 (cluster bus +10000), killed when dropped.
struct Cluster {
    nodes: Vec<(u16, Child)>,
    _dir: tempdir::Dir,
}

mod tempdir {
    /// A directory removed when dropped.
    pub struct Dir(pub std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

const FIRST_PORT: u16 = 7201;

fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .arg("-p")
        .arg(port.to_string())
        .args(args)
        .output()
        .expect("redis-cli runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Cluster {
    fn start() -> Self {
        let dir = std::env::temp_dir().join(format!("kith-failover-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut cluster = Self {
            nodes: Vec::new(),
            _dir: tempdir::Dir(dir.clone()),
        };
        for port in FIRST_PORT..FIRST_PORT + 6 {
            // A node left by an earlier run that was killed: shut it down.
            if cli(port, &["ping"]).trim() == "PONG" {
                cli(port, &["shutdown", "nosave"]);
                let deadline = Instant::now() + Duration::from_secs(10);
                while cli(port, &["ping"]).trim() == "PONG" {
                    assert!(Instant::now() < deadline, "a stale node on {port} stays up");
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            let node_dir = dir.join(port.to_string());
            std::fs::create_dir_all(&node_dir).unwrap();
            let child = Command::new("redis-server")
                .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
                .args(["--cluster-enabled", "yes", "--cluster-node-timeout", "1000"])
                .args(["--cluster-config-file", "nodes.conf", "--save", ""])
                .args(["--appendonly", "no"])
                .arg("--dir")
                .arg(&node_dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server starts (scripts/stack up installs it)");
            // Pushed at once: a failure further on still kills it (Drop).
            cluster.nodes.push((port, child));
        }
        for port in FIRST_PORT..FIRST_PORT + 6 {
            let deadline = Instant::now() + Duration::from_secs(10);
            while cli(port, &["ping"]).trim() != "PONG" {
                assert!(Instant::now() < deadline, "redis {port} did not start");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let addresses: Vec<String> = (FIRST_PORT..FIRST_PORT + 6)
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let created = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(created.success(), "redis-cli --cluster create");
        cluster.wait_ok();
        // A replica that never synced is too stale to be promoted.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let synced = (FIRST_PORT..FIRST_PORT + 6)
                .filter(|p| {
                    let info = cli(*p, &["info", "replication"]);
                    info.contains("role:slave") && info.contains("master_link_status:up")
                })
                .count();
            if synced == 3 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "replicas not in sync ({synced} of 3)"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        cluster
    }

    /// Waits until the new cluster is ok (before Kith runs on it).
    fn wait_ok(&self) {
        let port = FIRST_PORT;
        let deadline = Instant::now() + Duration::from_secs(30);
        while !cli(port, &["cluster", "info"]).contains("cluster_state:ok") {
            assert!(Instant::now() < deadline, "cluster not ok");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn url(&self) -> String {
        format!(
            "redis+cluster://127.0.0.1:{},127.0.0.1:{},127.0.0.1:{}",
            FIRST_PORT,
            FIRST_PORT + 1,
            FIRST_PORT + 2
        )
    }

    /// The port of the primary serving `key`.
    fn primary_of(&self, key: &str) -> u16 {
        let slot: u16 = cli(FIRST_PORT, &["cluster", "keyslot", key])
            .trim()
            .parse()
            .unwrap();
        for line in cli(FIRST_PORT, &["cluster", "nodes"]).lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if !fields.get(2).is_some_and(|f| f.contains("master")) {
                continue;
            }
            let port: u16 = fields[1]
                .split('@')
                .next()
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| p.parse().ok())
                .unwrap();
            for range in &fields[8..] {
                let (a, b) = range.split_once('-').unwrap_or((range, range));
                if let (Ok(a), Ok(b)) = (a.parse::<u16>(), b.parse::<u16>())
                    && (a..=b).contains(&slot)
                {
                    return port;
                }
            }
        }
        panic!("no primary for slot {slot}");
    }

    /// `kill -9` of the node on `port`.
    fn kill(&mut self, port: u16) {
        let (_, child) = self.nodes.iter_mut().find(|(p, _)| *p == port).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (_, child) in &mut self.nodes {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

const PROFILE: &str = "query($id: ID!) { user(id: $id) { handle counters { followers }
  followers(first: 10) { edges { node { handle counters { followings } viewerRelation { following } } } } } }";

#[tokio::test]
async fn a_primary_killed_mid_load_fails_over_without_losing_anything() {
    let mut cluster = Cluster::start();
    let url = cluster.url();
    let t = spawn_app_with(|c| {
        c.redis.url = url.clone();
        c.writes.rate_limit_capacity = 100_000;
        c.writes.rate_limit_per_sec = 100_000.0;
    })
    .await;
    let relay = t.start_relay();
    let projector = t.start_projector(std::sync::Arc::default());
    let idol = t.user("idol").await;
    let mut fans: Vec<UserId> = Vec::new();
    for i in 0..40 {
        fans.push(t.user(&format!("fo-fan{i}")).await);
    }
    // Warm the caches, then kill the primary holding the idol's keys.
    let gid = |u: UserId| json!(kith::testing::graph::ids::user_id(u).to_string());
    let profile = |viewer: UserId| {
        let t = &t;
        async move {
            t.execute(Viewer::User(viewer), PROFILE, json!({ "id": gid(idol) }))
                .await
        }
    };
    for fan in &fans[..10] {
        crate::helpers::assert_ok(&t.follow(*fan, idol).await);
    }
    settled(&t, &[idol], 60).await;
    crate::helpers::assert_ok(&profile(fans[0]).await);
    let victim = cluster.primary_of(&format!("{}ucnt:{{{idol}}}", t.app.config.redis.prefix));

    let mut codes: std::collections::BTreeMap<String, u32> = Default::default();
    let mut tally = |response: &serde_json::Value| {
        let code = error_code(response).unwrap_or("ok").to_owned();
        *codes.entry(code).or_default() += 1;
    };
    let started = Instant::now();
    let mut killed = false;
    // Each fan's edge as its last acknowledged write left it (`None` after
    // an answer that says nothing, such as UNAVAILABLE).
    let mut acknowledged: std::collections::HashMap<UserId, Option<bool>> = Default::default();
    let mut i = 10;
    // Writes and reads before, during and after the switch.
    while started.elapsed() < Duration::from_secs(12) {
        if !killed && started.elapsed() > Duration::from_secs(2) {
            cluster.kill(victim);
            killed = true;
        }
        let fan = fans[i % fans.len()];
        let follow = i % 3 != 0;
        let write = if follow {
            t.follow(fan, idol).await
        } else {
            t.unfollow(fan, idol).await
        };
        acknowledged.insert(fan, error_code(&write).is_none().then_some(follow));
        tally(&write);
        tally(&profile(fan).await);
        i += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let survivor = (FIRST_PORT..FIRST_PORT + 3).find(|p| *p != victim).unwrap();
    eventually("the replica to take over", 30, || async {
        cli(survivor, &["cluster", "info"])
            .contains("cluster_state:ok")
            .then_some(())
    })
    .await;
    let unexpected: Vec<_> = codes
        .keys()
        .filter(|c| !["ok", "UNAVAILABLE"].contains(&c.as_str()))
        .collect();
    assert!(
        unexpected.is_empty(),
        "answers during the failover: {codes:?}"
    );
    // The idol's keys were on the killed primary: some requests met it dead.
    assert!(
        codes.get("UNAVAILABLE").is_some_and(|n| *n > 0),
        "no request met the killed primary, so no failover was exercised: {codes:?}"
    );

    // Every acknowledged write is in PostgreSQL, as acknowledged (an
    // acknowledged unfollow of a fan whose follow was refused during the
    // failover finds no edge at all: not following, as acknowledged).
    for (fan, state) in &acknowledged {
        if let Some(follow) = state {
            let edge = t.edge(*fan, idol).await;
            assert_eq!(
                edge.is_some_and(|(active, _)| active),
                *follow,
                "{fan}'s acknowledged write: {edge:?}"
            );
        }
    }
    // Recovered by itself: every request succeeds again.
    eventually("Kith serves again after the failover", 30, || async {
        let write = t.follow(fans[0], idol).await;
        let read = profile(fans[1]).await;
        (error_code(&write).is_none() && error_code(&read).is_none()).then_some(())
    })
    .await;
    // Redis replicates asynchronously: a cache write the dead primary
    // acknowledged just before it died may be missing on its replica (the
    // next write of that list or record, its expiry or the sampled check
    // repairs it). Every fan writes again, so what is compared below is
    // what Kith wrote after the failover.
    for fan in &fans {
        crate::helpers::assert_ok(&t.unfollow(*fan, idol).await);
        crate::helpers::assert_ok(&t.follow(*fan, idol).await);
    }
    // Nothing lost: the pipeline drains, the projection equals the truth, and
    // the idol's counter record and first page agree with PostgreSQL.
    let mut everyone = fans.clone();
    everyone.push(idol);
    settled(&t, &everyone, 60).await;
    let report = t.verify(0).await;
    crate::helpers::assert_consistent(&report);
    eprintln!("failover: primary {victim} killed; answers {codes:?}");
    projector.stop().await.unwrap();
    relay.stop().await.unwrap();
}
