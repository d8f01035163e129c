//! The broker goes away while follows keep arriving, then comes back: every
//! event is still delivered and applied. Runs its own tansu broker, so the
//! shared one stays up for the other tests.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use kith::model::UserId;
use kith::testing::pipeline::projector::ProjectorHooks;

use crate::helpers::{TestApp, eventually, spawn_app_with};

/// A tansu broker owned by one test; killed when dropped.
struct Broker {
    child: Option<Child>,
    dir: PathBuf,
    port: u16,
}

fn tansu_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("KITH_TANSU_BIN") {
        return bin.into();
    }
    let tools = std::env::var_os("KITH_TOOLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/kith")
        });
    tools.join("tansu-0.6.0/bin/tansu")
}

impl Broker {
    fn start(dir: PathBuf, port: u16) -> Self {
        let mut broker = Self {
            child: None,
            dir,
            port,
        };
        broker.restart();
        broker
    }

    fn restart(&mut self) {
        let bin = tansu_binary();
        assert!(
            bin.exists(),
            "tansu not found at {} (scripts/stack up installs it)",
            bin.display()
        );
        let url = format!("tcp://127.0.0.1:{}", self.port);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("tansu.log"))
            .unwrap();
        let child = Command::new(bin)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args(["--storage-engine", "sqlite://tansu.db"])
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(std::time::Instant::now() < deadline, "tansu did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL: no goodbye to the clients.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn applied_everything(t: &TestApp, target: UserId, followers: i64) -> Option<()> {
    let backlog = kith::testing::store::outbox::backlog(&mut *t.conn().await)
        .await
        .unwrap();
    let stats = t.full_stats(target).await;
    let record = t.counter_record(target).await?;
    (backlog == 0 && stats.followers == followers && i64::from(record.followers) == followers)
        .then_some(())
}

#[tokio::test]
async fn events_survive_a_broker_outage() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = std::env::temp_dir().join(format!("kith-outage-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut broker = Broker::start(dir, port);

    let t = spawn_app_with(|c| c.pipeline.kafka_brokers = format!("127.0.0.1:{port}")).await;
    let target = t.user("target").await;
    let mut fans = Vec::new();
    for i in 0..12 {
        fans.push(t.user(&format!("fan{i}")).await);
    }
    let relay = t.start_relay();
    let projector = t.start_projector(Arc::new(ProjectorHooks::default()));

    for fan in &fans[..4] {
        assert_eq!(
            t.follow(*fan, target).await["data"]["follow"]["changed"],
            true
        );
    }
    eventually("the first follows", 60, || {
        applied_everything(&t, target, 4)
    })
    .await;

    broker.kill();
    // The API keeps accepting writes; the outbox keeps them.
    for fan in &fans[4..] {
        assert_eq!(
            t.follow(*fan, target).await["data"]["follow"]["changed"],
            true
        );
    }
    assert_eq!(
        t.unfollow(fans[0], target).await["data"]["unfollow"]["changed"],
        true
    );
    let pending = kith::testing::store::outbox::backlog(&mut *t.conn().await)
        .await
        .unwrap();
    assert!(
        pending > 0,
        "events wait in the outbox while the broker is down"
    );

    broker.restart();
    eventually("every event after the outage", 120, || {
        applied_everything(&t, target, 11)
    })
    .await;
    for fan in &fans[1..] {
        assert_eq!(t.projected(*fan, target).await, Some((true, 1)));
    }
    assert_eq!(t.projected(fans[0], target).await, Some((false, 2)));
    relay.stop().await.unwrap();
    projector.stop().await.unwrap();
}
