//! A private stack for the fault suite — its own PostgreSQL, Redis and tansu
//! on free ports, brought up by `scripts/stack` — and the `kith run` process
//! under test, so that every fault hits only this suite. With
//! `KITH_FAULT_PG_HA=1`, PostgreSQL is a private pg_auto_failover formation
//! (`scripts/stack ha up`) and kith is given its multi-host URL.

use crate::http::free_port;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The private stack and the kith process running on it.
pub struct Stack {
    pub dir: PathBuf,
    /// Kith's: the single server's, or the formation's.
    pub database_url: String,
    single_url: String,
    pub redis_url: String,
    pub brokers: String,
    pub http_port: u16,
    pub logs: PathBuf,
    /// The first of the formation's three ports, when PostgreSQL is one.
    pub ha_port: Option<u16>,
    kith: Option<Child>,
    starts: u32,
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

impl Stack {
    /// Brings up a fresh private stack (data under `target/fault-stack`).
    pub fn up() -> Self {
        let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .expect("target dir")
            .to_path_buf();
        let dir = target.join("fault-stack");
        let logs = target.join("fault-reports");
        std::fs::create_dir_all(&logs).unwrap();
        let single_url = format!("postgres://kith:kith@127.0.0.1:{}/kith", free_port());
        let stack = Self {
            database_url: single_url.clone(),
            single_url,
            redis_url: format!("redis://127.0.0.1:{}/0", free_port()),
            brokers: format!("127.0.0.1:{}", free_port()),
            http_port: free_port(),
            ha_port: (std::env::var("KITH_FAULT_PG_HA").as_deref() == Ok("1")).then(free_port),
            dir,
            logs,
            kith: None,
            starts: 0,
        };
        // Whatever an earlier run left behind goes first.
        let _ = stack.script(&["down"]);
        let _ = std::fs::remove_dir_all(&stack.dir);
        stack.script(&["up"]).expect("the private stack starts");
        let mut stack = stack;
        if stack.ha_port.is_some() {
            let line = stack.script(&["ha", "up"]).expect("the formation starts");
            stack.database_url = line
                .strip_prefix("DATABASE_URL=")
                .unwrap_or_else(|| panic!("scripts/stack ha up ended with {line:?}"))
                .to_owned();
        }
        stack
    }

    /// Runs `scripts/stack` against this stack; the last line it printed.
    pub fn script(&self, args: &[&str]) -> Result<String, String> {
        let mut command = Command::new(repo().join("scripts/stack"));
        command
            .args(args)
            .env("KITH_STACK_DIR", &self.dir)
            .env("REDIS_URL", &self.redis_url)
            .env("KAFKA_BROKERS", &self.brokers)
            .stdin(Stdio::null());
        match self.ha_port {
            // The single server's URL names the role and database the
            // formation gets; the formation's URL is kith's.
            Some(port) => command
                .env("KITH_PG_HA_PORT", port.to_string())
                .env("DATABASE_URL", &self.single_url),
            None => command.env("DATABASE_URL", &self.database_url),
        };
        let output = command.output().map_err(|e| e.to_string())?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout)
                .lines()
                .last()
                .unwrap_or_default()
                .to_owned())
        } else {
            Err(format!(
                "scripts/stack {args:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    }

    /// The environment a kith process on this stack gets.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let mut env = vec![
            ("DATABASE_URL", self.database_url.clone()),
            ("DATABASE_POOL_SIZE", "8".into()),
            ("REDIS_URL", self.redis_url.clone()),
            ("KAFKA_BROKERS", self.brokers.clone()),
            ("KITH_TOPIC_PARTITIONS", "4".into()),
            ("KITH_TOPIC_REPLICATION_FACTOR", "1".into()),
            ("KITH_TOPIC_MIN_INSYNC_REPLICAS", "1".into()),
            ("KITH_HTTP_ADDR", format!("127.0.0.1:{}", self.http_port)),
            ("KITH_RATE_LIMIT_CAPACITY", "1000000".into()),
            ("KITH_RATE_LIMIT_PER_SEC", "100000".into()),
            ("KITH_RELAY_POLL_MS", "500".into()),
            ("KITH_COUNTER_CHECK_INTERVAL_SECS", "0".into()),
            ("KITH_MOVE_FOLLOWERS_PER_SEC", super::moves::PACE.into()),
            (
                "RUST_LOG",
                std::env::var("KITH_FAULT_RUST_LOG").unwrap_or_else(|_| "info".into()),
            ),
        ];
        // librdkafka's own debug contexts, e.g. `consumer,fetch,topic`.
        if let Ok(debug) = std::env::var("KITH_FAULT_KAFKA_DEBUG") {
            env.push(("KITH_KAFKA_DEBUG", debug));
        }
        env
    }

    /// Runs a `kith` command to completion; returns its stdout.
    pub fn kith(&self, args: &[&str]) -> (bool, String) {
        let output = Command::new(env!("CARGO_BIN_EXE_kith"))
            .args(args)
            .envs(self.env())
            .stdin(Stdio::null())
            .output()
            .expect("kith runs");
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
        )
    }

    /// Starts `kith run` (API, relay and projector in one process).
    pub fn start_kith(&mut self) {
        assert!(self.kith.is_none(), "kith is running already");
        self.starts += 1;
        let log =
            std::fs::File::create(self.logs.join(format!("kith-run-{}.log", self.starts))).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_kith"))
            .arg("run")
            .envs(self.env())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("kith starts");
        self.kith = Some(child);
    }

    /// `kill -9` of the kith process.
    pub fn kill_kith(&mut self) {
        if let Some(mut child) = self.kith.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Waits until the API answers.
    pub async fn wait_for_api(&self, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if super::http::get(self.http_port, "/healthz").await.is_ok() {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the API did not come up"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        self.kill_kith();
        let _ = self.script(&["down"]);
    }
}
