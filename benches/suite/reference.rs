//! The references, run in the same bench: auto-generated GraphQL layers over
//! the same tables, asked the same profile query — PostGraphile V5 (Grafast,
//! on its own Node.js 22) and, for one release beside it, PostGraphile 4.14;
//! and Hive Gateway in front of Kith, for what a federation gateway adds.
//! `scripts/bench` installs each from its lock file
//! (`benches/reference/v5`, `v4`, `gateway`) into `target/reference` (git-ignored);
//! without one the bench runs without its phase and says so.
//!
//! The query asks PostGraphile what Kith's profile query asks Kith: the user,
//! its counters (`user_stats`), the 20 newest of its active followers (from
//! `following`, the truth, by `followed_at`), each with its counters and how
//! the viewer relates to it in both directions — as a team would ask it
//! (the follower count from `user_stats`, each relation a one-row lookup).
//! V5 is also asked the query the bench asked before, with `totalCount`
//! over the whole list and per relation, as a second row.
//!
//! Both are tuned as a team would run them: production mode, one worker per
//! core, a pool of 16 sessions per worker, no mutations, no query log, and
//! `plan_cache_mode = force_custom_plan` on every session (`PGOPTIONS`):
//! PostGraphile runs each query as a named prepared statement with `active`
//! as a parameter, and after five runs PostgreSQL may switch to a generic
//! plan that cannot use the partial `WHERE active` indexes. V5 orders and
//! filters only by columns of indexes without a predicate, and Kith's list
//! indexes have one: its server (`benches/reference/v5/server.mjs`) tags the
//! four `following` columns the query uses, as a team would.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::load::Conn;

/// The profile query in PostGraphile 4's schema for Kith's tables, as a
/// team would write it: the follower count from `user_stats` (as Kith
/// reads it), and how the viewer relates to each follower as two lookups
/// of one row (`first: 1`), one per direction, where Kith answers both.
const PROFILE_V4: &str = "query($id: BigInt!, $viewer: BigInt!) { userById(id: $id) {
  handle displayName
  userStatByUserId { followings followers posts likesReceived favsReceived }
  followingsByToUserId(first: 20, orderBy: FOLLOWED_AT_DESC, condition: {active: true}) {
    pageInfo { hasNextPage endCursor }
    edges { cursor node { followedAt userByFromUserId { id handle displayName
      userStatByUserId { followings followers posts likesReceived favsReceived }
      following: followingsByToUserId(first: 1, condition: {fromUserId: $viewer, active: true}) { nodes { followedAt } }
      followedBy: followingsByFromUserId(first: 1, condition: {toUserId: $viewer, active: true}) { nodes { followedAt } }
    } } } } } }";

/// The query the bench asked before: `totalCount` over the whole followers
/// list, and a `totalCount` per direction per follower.
const PROFILE_V4_COUNTED: &str = "query($id: BigInt!, $viewer: BigInt!) { userById(id: $id) {
  handle displayName
  userStatByUserId { followings followers posts likesReceived favsReceived }
  followingsByToUserId(first: 20, orderBy: FOLLOWED_AT_DESC, condition: {active: true}) {
    totalCount pageInfo { hasNextPage endCursor }
    edges { cursor node { followedAt userByFromUserId { id handle displayName
      userStatByUserId { followings followers posts likesReceived favsReceived }
      following: followingsByToUserId(condition: {fromUserId: $viewer, active: true}) { totalCount }
      followedBy: followingsByFromUserId(condition: {toUserId: $viewer, active: true}) { totalCount }
    } } } } } }";

/// A V4 query in V5's schema (Amber preset): primary keys are `rowId`.
fn in_v5(query: &str) -> String {
    query
        .replace("userById(id: $id)", "userByRowId(rowId: $id)")
        .replace("userByFromUserId { id ", "userByFromUserId { rowId ")
}

static PROFILE_V5: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| in_v5(PROFILE_V4));
static PROFILE_V5_COUNTED: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| in_v5(PROFILE_V4_COUNTED));

/// Which of the two profile queries a reference is asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ask {
    /// As a team would write it (the targets are against this one).
    Fair,
    /// With the counts the bench asked before.
    Counted,
}

impl Ask {
    /// How the phase names it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Fair => "the profile query (counts from user_stats, one-row relation lookups)",
            Self::Counted => "the profile query with totalCount over the list and per relation",
        }
    }
}

/// Which PostGraphile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    V5,
    V4,
}

impl Version {
    pub fn name(self) -> &'static str {
        match self {
            Self::V5 => "PostGraphile V5",
            Self::V4 => "PostGraphile 4.14",
        }
    }

    /// The profile query in its schema.
    pub fn profile(self, ask: Ask) -> &'static str {
        match (self, ask) {
            (Self::V5, Ask::Fair) => PROFILE_V5.as_str(),
            (Self::V5, Ask::Counted) => PROFILE_V5_COUNTED.as_str(),
            (Self::V4, Ask::Fair) => PROFILE_V4,
            (Self::V4, Ask::Counted) => PROFILE_V4_COUNTED,
        }
    }

    /// The query's root field.
    pub fn user_field(self) -> &'static str {
        match self {
            Self::V5 => "userByRowId",
            Self::V4 => "userById",
        }
    }

    fn home(self) -> PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(match self {
            Self::V5 => "target/reference/v5",
            Self::V4 => "target/reference/v4",
        })
    }
}

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

/// Starts PostGraphile `version` on `schema` of the database at `url` (a
/// URL without schema options); V4 leaves out `functions` (Kith's own
/// PL/pgSQL functions, which are not part of the tables' API and whose
/// generated names clash), V5 all functions. `None` when it is not installed
/// or does not come up within a minute.
pub async fn start(
    version: Version,
    url: &str,
    schema: &str,
    functions: &[String],
    log: PathBuf,
) -> Option<Reference> {
    let home = version.home();
    let bin = home.join(match version {
        Version::V5 => "node_modules/.bin/node",
        Version::V4 => "node_modules/.bin/postgraphile",
    });
    if !bin.exists() {
        eprintln!(
            "reference: {} is not installed (scripts/bench installs it with npm)",
            version.name()
        );
        return None;
    }
    let addr = free_addr()?;
    let (port, pool, workers) = (addr.port().to_string(), "16", cores().to_string());
    let mut command = std::process::Command::new(bin);
    command
        .current_dir(&home)
        .env("NODE_ENV", "production")
        .env("PGOPTIONS", "-c plan_cache_mode=force_custom_plan");
    match version {
        Version::V5 => {
            command
                .args(["server.mjs", url, schema, "127.0.0.1", &port, pool])
                .env("REFERENCE_WORKERS", &workers);
        }
        Version::V4 => {
            let tags = serde_json::json!({
                "version": 1,
                "config": { "procedure": functions.iter().map(|f| (f.clone(), serde_json::json!({ "tags": { "omit": true } }))).collect::<serde_json::Map<_, _>>() },
            });
            std::fs::write(home.join("postgraphile.tags.json5"), tags.to_string()).ok()?;
            command
                .args([
                    "-c",
                    url,
                    "-s",
                    schema,
                    "--host",
                    "127.0.0.1",
                    "--port",
                    &port,
                ])
                // No mutations, no query log, the pool, a worker per core
                // (Node.js runs JavaScript on one).
                .args([
                    "--disable-default-mutations",
                    "--disable-query-log",
                    "-m",
                    pool,
                ])
                .args(["--cluster-workers", &workers]);
        }
    }
    up(command, addr, log, version.name()).await
}

/// Hive Gateway's runtime (`benches/reference/gateway`, installed by
/// `scripts/bench` into `target/reference/gateway`) in front of the Kith at
/// `kith`, composed from the committed subgraph schema, one worker per core,
/// on the machine's Node.js. `None` when it is not installed or does not
/// come up within a minute.
pub async fn start_gateway(kith: SocketAddr, log: PathBuf) -> Option<Reference> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let home = root.join("target/reference/gateway");
    if !home.join("node_modules").exists() {
        eprintln!("gateway: not installed (scripts/bench installs it with npm)");
        return None;
    }
    let addr = free_addr()?;
    let mut command = std::process::Command::new("node");
    command
        .current_dir(&home)
        .env("NODE_ENV", "production")
        .env("GATEWAY_WORKERS", cores().to_string())
        .arg("server.mjs")
        .arg(root.join("schema.subgraph.graphql"))
        .args([
            format!("http://{kith}/graphql"),
            "127.0.0.1".to_owned(),
            addr.port().to_string(),
        ]);
    up(command, addr, log, "Hive Gateway").await
}

fn free_addr() -> Option<SocketAddr> {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").ok()?;
    probe.local_addr().ok()
}

/// Spawns `command` (its output to `log`) and waits up to a minute for it to
/// answer `{ __typename }` at `addr`.
async fn up(
    mut command: std::process::Command,
    addr: SocketAddr,
    log: PathBuf,
    name: &str,
) -> Option<Reference> {
    let out = std::fs::File::create(log).ok()?;
    let child = match command.stdout(out.try_clone().ok()?).stderr(out).spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("reference: {name} could not start: {e}");
            return None;
        }
    };
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
    eprintln!("reference: {name} did not come up within 60 s");
    None
}
