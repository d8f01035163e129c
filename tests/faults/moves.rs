//! An account moves while the faults run: accounts of their own (seeded
//! after the workload's, touched by nothing else) — an old account, a new
//! one that blocks a few of the old one's followers, and the followers —
//! and a move paced to span the faults, kill -9 of `kith run` among them.
//! When the workload stops the move must end within a bound, every
//! follower the new account does not block must follow it and no longer
//! the old, and the blocked ones must still follow the old.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use kith::model::UserId;
use serde_json::{Value, json};

use super::http;
use super::stack::Stack;

/// The old account's followers.
const FOLLOWERS: i64 = 120;
/// Of them, those the new account blocks.
const BLOCKED: i64 = 6;
/// Followers a second the move brings along (with `FOLLOWERS`, the move
/// takes about 30 s, so it spans faults).
pub const PACE: &str = "4";
/// How long the move may take to end once the workload stops.
const END_BOUND: Duration = Duration::from_secs(120);

/// The move under way.
pub struct Move {
    old: i64,
    new: i64,
    followers: Vec<i64>,
    blocked: Vec<i64>,
    id: Value,
    tokens: HashMap<i64, String>,
}

/// How the move ended, against what it had to do.
pub struct Ended {
    /// `state moved failed` as `accountMove` answered last.
    pub summary: String,
    /// Followers whose edges differ from what the move had to leave.
    pub wrong: Vec<i64>,
    /// Pairs and the state the move had to leave them in, for the
    /// workload's record.
    pub expected: Vec<((i64, i64), Option<bool>)>,
    /// The new account's blocks, for the crowd's record.
    pub blocks: Vec<((i64, i64), Option<bool>)>,
}

fn gid(id: i64) -> String {
    kith::testing::graph::ids::user_id(UserId::new(id).unwrap()).to_string()
}

async fn call(port: u16, token: &str, query: &str, vars: Value) -> Value {
    let r = http::graphql(port, token, query, vars)
        .await
        .unwrap_or_else(|e| panic!("{query}: {e}"));
    assert!(r["errors"].is_null(), "{query}: {r}");
    r
}

/// Seeds the move's accounts (ids after `first`), makes the follows and
/// blocks, and moves the old account; the API must be up.
pub async fn start(stack: &Stack, first: i64) -> Move {
    let count = FOLLOWERS + 2;
    let (ok, out) = stack.kith(&["seed-users", "--count", &count.to_string(), "--prefix", "m"]);
    assert!(ok, "seed: {out}");
    let keys = kith::testing::auth::TokenKeys::new(kith::config::DEV_JWT_SECRET);
    let now = chrono::Utc::now().timestamp();
    let ids: Vec<i64> = (first + 1..=first + count).collect();
    let tokens: HashMap<i64, String> = ids
        .iter()
        .map(|&id| (id, keys.issue(UserId::new(id).unwrap(), now, 6 * 3600)))
        .collect();
    let (old, new) = (ids[0], ids[1]);
    let followers: Vec<i64> = ids[2..].to_vec();
    let blocked: Vec<i64> = followers
        .iter()
        .step_by((FOLLOWERS / BLOCKED) as usize)
        .copied()
        .collect();
    let port = stack.http_port;
    let follow = "mutation($id: ID!) { follow(input: {userId: $id}) { changed } }";
    for f in &followers {
        call(port, &tokens[f], follow, json!({ "id": gid(old) })).await;
    }
    let block = "mutation($id: ID!) { block(input: {userId: $id}) { changed } }";
    for b in &blocked {
        call(port, &tokens[&new], block, json!({ "id": gid(*b) })).await;
    }
    let alias = "mutation($id: ID!) { addAccountAlias(input: {userId: $id}) { changed } }";
    call(port, &tokens[&new], alias, json!({ "id": gid(old) })).await;
    let moved = "mutation($id: ID!) { moveAccount(input: {targetId: $id}) { move { id total } } }";
    let r = call(port, &tokens[&old], moved, json!({ "id": gid(new) })).await;
    assert_eq!(r["data"]["moveAccount"]["move"]["total"], FOLLOWERS, "{r}");
    Move {
        old,
        new,
        followers,
        blocked,
        id: r["data"]["moveAccount"]["move"]["id"].clone(),
        tokens,
    }
}

/// Waits for the move to end (within [`END_BOUND`]) and checks the truth.
pub async fn finish(
    stack: &Stack,
    conn: &mut diesel_async::AsyncPgConnection,
    moving: &Move,
) -> Ended {
    let watch = "query($id: ID!) { accountMove(id: $id) { state moved failed } }";
    let deadline = Instant::now() + END_BOUND;
    let job = loop {
        if let Ok(r) = http::graphql(
            stack.http_port,
            &moving.tokens[&moving.old],
            watch,
            json!({ "id": moving.id }),
        )
        .await
        {
            let job = r["data"]["accountMove"].clone();
            if job["state"].is_string() && job["state"] != "RUNNING" {
                break job;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the move did not end within {END_BOUND:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let rows: Vec<super::EdgeRow> = super::query_all(
        conn,
        &format!(
            "SELECT from_user_id, to_user_id, active FROM following
              WHERE to_user_id IN ({}, {})",
            moving.old, moving.new
        ),
    )
    .await;
    let active = |from: i64, to: i64| {
        rows.iter()
            .any(|r| r.from_user_id == from && r.to_user_id == to && r.active)
    };
    let mut wrong = Vec::new();
    let mut expected = Vec::new();
    for &f in &moving.followers {
        let stays = moving.blocked.contains(&f);
        if active(f, moving.old) != stays || active(f, moving.new) == stays {
            wrong.push(f);
        }
        expected.push(((f, moving.old), Some(stays)));
        expected.push(((f, moving.new), Some(!stays)));
    }
    let ok = job["state"] == "DONE"
        && job["moved"] == FOLLOWERS - moving.blocked.len() as i64
        && job["failed"] == moving.blocked.len() as i64;
    if !ok {
        wrong.push(0);
    }
    Ended {
        summary: format!(
            "{} followers ({} blocked by the new account): {}, {} moved, {} left behind",
            FOLLOWERS,
            moving.blocked.len(),
            job["state"],
            job["moved"],
            job["failed"]
        ),
        wrong,
        expected,
        blocks: moving
            .blocked
            .iter()
            .map(|&b| ((moving.new, b), Some(true)))
            .collect(),
    }
}
