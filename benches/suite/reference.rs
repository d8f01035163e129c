//! The reference, run in the same bench: an
//! auto-generated GraphQL layer — PostGraphile 4.14 (Node.js) — over the same
//! tables, asked the same profile query. `scripts/bench` installs it with npm
//! into `target/reference` (git-ignored); without it the bench runs without
//! this phase and says so.
//!
//! The query asks PostGraphile what Kith's profile query asks Kith: the user,
//! its counters (`user_stats`), the 20 newest of its active followers (from
//! `following`, the truth, by `followed_at`), each with its counters and how
//! the viewer relates to it in both directions.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::load::Conn;

/// The profile query in PostGraphile's schema for Kith's tables.
pub const PROFILE: &str = "query($id: BigInt!, $viewer: BigInt!) { userById(id: $id) {
  handle displayName
  userStatByUserId { followings followers posts likesReceived favsReceived }
  followingsByToUserId(first: 20, orderBy: FOLLOWED_AT_DESC, condition: {active: true}) {
    totalCount pageInfo { hasNextPage endCursor }
    edges { cursor node { followedAt userByFromUserId { id handle displayName
      userStatByUserId { followings followers posts likesReceived favsReceived }
      following: followingsByToUserId(condition: {fromUserId: $viewer, active: true}) { totalCount }
      followedBy: followingsByFromUserId(condition: {toUserId: $viewer, active: true}) { totalCount }
    } } } } } }";

/// A running PostGraphile, stopped when dropped.
pub struct Reference {
    child: std::process::Child,
    /// Where it serves `POST /graphql`.
    pub addr: SocketAddr,
    /// Its main process (its workers are that process's children).
    pub pid: u32,
}

impl Drop for Reference {
    fn drop(&mut self) {
        // Its workers first: they would outlive a killed main process.
        for worker in crate::procs::children(self.pid) {
            let _ = std::process::Command::new("kill")
                .args(["-9", &worker.to_string()])
                .status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn home() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/reference")
}

/// Starts PostGraphile on `schema` of the database at `url` (a URL without
/// schema options), leaving out `functions` (Kith's own PL/pgSQL functions,
/// which are not part of the tables' API and whose generated names clash);
/// `None` when it is not installed or does not come up within a minute.
pub async fn start(
    url: &str,
    schema: &str,
    functions: &[String],
    log: PathBuf,
) -> Option<Reference> {
    let bin = home().join("node_modules/.bin/postgraphile");
    if !bin.exists() {
        eprintln!("reference: PostGraphile is not installed (scripts/bench installs it with npm)");
        return None;
    }
    let tags = serde_json::json!({
        "version": 1,
        "config": { "procedure": functions.iter().map(|f| (f.clone(), serde_json::json!({ "tags": { "omit": true } }))).collect::<serde_json::Map<_, _>>() },
    });
    std::fs::write(home().join("postgraphile.tags.json5"), tags.to_string()).ok()?;
    let addr: SocketAddr = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").ok()?;
        probe.local_addr().ok()?
    };
    let out = std::fs::File::create(log).ok()?;
    let child = std::process::Command::new(bin)
        .current_dir(home())
        .env("NODE_ENV", "production")
        .args(["-c", url, "-s", schema, "--host", "127.0.0.1"])
        .args(["--port", &addr.port().to_string()])
        // Tuned as for production: no mutations, no query log, a pool as
        // large as the bench's clients, and a worker per core (Node.js runs
        // JavaScript on one).
        .args([
            "--disable-default-mutations",
            "--disable-query-log",
            "-m",
            "16",
        ])
        .args(["--cluster-workers", &cores().to_string()])
        .stdout(out.try_clone().ok()?)
        .stderr(out)
        .spawn()
        .ok()?;
    let reference = Reference {
        pid: child.id(),
        child,
        addr,
    };
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        if let Ok(mut conn) = Conn::open(addr).await
            && let Ok((200, _)) = conn
                .send("POST", "/graphql", None, r#"{"query":"{ __typename }"}"#)
                .await
        {
            return Some(reference);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!("reference: PostGraphile did not come up within 60 s");
    None
}
