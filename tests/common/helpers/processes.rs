//! Real processes owned by one test — `kith` binaries and `redis-server`s —
//! killed with SIGKILL by the tests of crashes and outages.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use super::*;

/// A real `kith` process (the binary this package builds) on a test's
/// schema, Redis prefix, topics and consumer group. Killed with SIGKILL when
/// dropped; its log goes to `target/test-logs/`.
pub struct KithProcess {
    child: std::process::Child,
    pub log: std::path::PathBuf,
}

impl KithProcess {
    /// Starts `kith <command>` (`run`, `project`, `relay`, `serve`) with the
    /// test app's configuration plus `extra` variables.
    pub fn start(t: &TestApp, command: &str, extra: &[(&str, String)]) -> Self {
        let c = &t.app.config;
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .expect("target dir")
            .join("test-logs");
        std::fs::create_dir_all(&dir).unwrap();
        static STARTS: AtomicU32 = AtomicU32::new(0);
        let log = dir.join(format!(
            "{}-{command}-{}.log",
            c.pipeline.consumer_group,
            STARTS.fetch_add(1, Ordering::Relaxed)
        ));
        let out = std::fs::File::create(&log).unwrap();
        let mut cmd = kith_command(t, &[command]);
        cmd.stdin(std::process::Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        for (name, value) in extra {
            cmd.env(name, value);
        }
        let child = cmd.spawn().expect("kith binary starts");
        Self { child, log }
    }

    /// Runs an operator command (`kith after-restore`, `kith verify`…) on
    /// the test app's configuration to its end: its exit status and what
    /// it printed (stdout, then stderr).
    pub fn run_to_end(t: &TestApp, args: &[&str]) -> (std::process::ExitStatus, String) {
        let out = kith_command(t, args)
            .stdin(Stdio::null())
            .output()
            .expect("kith binary runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status, text)
    }

    /// Waits up to `secs` for the process to end on its own; its status.
    pub fn wait_for_exit(&mut self, secs: u64) -> Option<std::process::ExitStatus> {
        for _ in 0..secs * 10 {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        None
    }

    /// What the process logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `kill -TERM`, then waits for the process to end (a graceful stop).
    pub fn terminate(&mut self) {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let _ = self.child.wait();
    }

    /// `kill -9`: no clean-up of any kind.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for KithProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `kith <args>` with the test app's configuration in its environment.
fn kith_command(t: &TestApp, args: &[&str]) -> std::process::Command {
    let c = &t.app.config;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kith"));
    cmd.args(args)
        .env("DATABASE_URL", &c.database.url)
        .env("DATABASE_SESSION_URL", c.session_url())
        .env(
            "KITH_PG_STATEMENT_CACHE",
            c.database.pg_statement_cache.to_string(),
        )
        .env("DATABASE_POOL_SIZE", "4")
        .env("REDIS_URL", &c.redis.url)
        .env("REDIS_POOL_SIZE", "4")
        .env("KITH_REDIS_PREFIX", &c.redis.prefix)
        .env("KAFKA_BROKERS", &c.pipeline.kafka_brokers)
        .env("KITH_FOLLOW_TOPIC", &c.pipeline.follow_topic)
        .env("KITH_CONTENT_TOPIC", &c.pipeline.content_topic)
        .env("KITH_TOPIC_REPLICATION_FACTOR", "1")
        .env("KITH_TOPIC_MIN_INSYNC_REPLICAS", "1")
        .env("KITH_DEAD_LETTER_TOPIC", &c.pipeline.dead_letter_topic)
        .env(
            "KITH_TOPIC_PARTITIONS",
            c.pipeline.topic_partitions.to_string(),
        )
        .env("KITH_CONSUMER_GROUP", &c.pipeline.consumer_group)
        .env(
            "KITH_PROJECTOR_LEASE_MS",
            c.pipeline.projector_lease_ms.to_string(),
        )
        .env("KITH_RELAY_POLL_MS", c.pipeline.relay_poll_ms.to_string())
        .env("KITH_HTTP_ADDR", "127.0.0.1:0")
        .env("KITH_METRICS_ADDR", "off")
        .env("RUST_LOG", "info");
    cmd
}

/// The path of a PostgreSQL client tool of the newest installed version
/// (`pg_dump`, `pg_restore`), or its bare name.
pub fn pg_tool(name: &str) -> String {
    let mut found: Vec<_> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin").join(name))
        .filter(|p| p.exists())
        .collect();
    found.sort_by_key(|p| {
        p.parent()
            .and_then(|b| b.parent())
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
    });
    found
        .pop()
        .map_or_else(|| name.to_owned(), |p| p.display().to_string())
}

/// A `redis-server` owned by one test; killed when dropped.
pub struct Redis {
    child: Option<Child>,
    port: u16,
    args: Vec<String>,
    pub url: String,
}

impl Redis {
    pub fn start(args: &[&str]) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut redis = Self {
            child: None,
            port,
            args: args.iter().map(|a| a.to_string()).collect(),
            url: format!("redis://127.0.0.1:{port}/0"),
        };
        redis.restart();
        redis
    }

    /// Starts the server again on the same port (after [`Redis::kill`]).
    pub fn restart(&mut self) {
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (scripts/stack up installs it)");
        self.child = Some(child);
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// SIGKILL: every connection drops at once.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}
