//! The safety part of the workload: follows, unfollows, blocks, unblocks,
//! mutes and unmutes among a crowd no other writer touches, one request at
//! a time, so every answer comes in order. The record it keeps: per pair,
//! the follow, block and mute state its last answer left (`None`: left
//! open). A block ends the pair's follows both ways; a follow across a
//! block is refused (`BLOCKED`); a mute changes no follow.

use super::*;

/// The crowd's users (the star, `USERS`, is not among them).
pub(crate) const CROWD: std::ops::Range<i64> = 280..292;

/// Per directed pair: whether the first blocks (or mutes) the second.
pub(crate) type Blocks = BTreeMap<(i64, i64), Option<bool>>;

/// What the crowd's record says at the end, every state definitive.
pub(crate) struct Record {
    pub follows: Expected,
    pub blocks: Blocks,
    pub mutes: Blocks,
}

fn blocked(blocks: &Blocks, a: i64, b: i64) -> Option<bool> {
    match (
        blocks.get(&(a, b)).copied().unwrap_or(Some(false)),
        blocks.get(&(b, a)).copied().unwrap_or(Some(false)),
    ) {
        (Some(x), Some(y)) => Some(x || y),
        _ => None,
    }
}

pub(crate) async fn blocker(
    seed: u64,
    port: u16,
    tokens: Arc<HashMap<i64, String>>,
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
) -> Record {
    let mut rng = Rng(seed ^ 0xB10C_B10C);
    let mut follows = Expected::new();
    let mut blocks = Blocks::new();
    let mut mutes = Blocks::new();
    let n = (CROWD.end - CROWD.start) as u64;
    while !stop.load(Ordering::Relaxed) {
        let a = CROWD.start + rng.below(n) as i64;
        let b = CROWD.start + (a - CROWD.start + 1 + rng.below(n - 1) as i64) % n as i64;
        let roll = rng.below(100);
        let op = match roll {
            0..35 => "follow",
            35..50 => "unfollow",
            50..68 => "block",
            68..82 => "unblock",
            82..92 => "mute",
            _ => "unmute",
        };
        let answer = edge_op(&counts, port, &tokens, a, b, op).await;
        counts.ops.fetch_add(1, Ordering::Relaxed);
        counts.safety_ops.fetch_add(1, Ordering::Relaxed);
        match answer {
            Answer::Done => {
                counts.done.fetch_add(1, Ordering::Relaxed);
                match op {
                    "follow" => {
                        follows.insert((a, b), Some(true));
                    }
                    "unfollow" => {
                        follows.insert((a, b), Some(false));
                    }
                    "block" => {
                        blocks.insert((a, b), Some(true));
                        follows.insert((a, b), Some(false));
                        follows.insert((b, a), Some(false));
                    }
                    "unblock" => {
                        blocks.insert((a, b), Some(false));
                    }
                    _ => {
                        mutes.insert((a, b), Some(op == "mute"));
                    }
                }
            }
            // `BLOCKED`, `RATE_LIMITED`: nothing written.
            Answer::Refused => {
                counts.refused.fetch_add(1, Ordering::Relaxed);
            }
            Answer::Open => {
                counts.open.fetch_add(1, Ordering::Relaxed);
                match op {
                    "follow" | "unfollow" => {
                        follows.insert((a, b), None);
                    }
                    "mute" | "unmute" => {
                        mutes.insert((a, b), None);
                    }
                    _ => {
                        blocks.insert((a, b), None);
                        follows.insert((a, b), None);
                        follows.insert((b, a), None);
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    // One last definitive answer for whatever was left open: blocks first,
    // then follows (an unfollow where a block stands).
    let pin = async |a: i64, b: i64, op: &str| loop {
        match edge_op(&counts, port, &tokens, a, b, op).await {
            Answer::Done => break,
            Answer::Refused | Answer::Open => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    let open: Vec<(i64, i64)> = blocks
        .iter()
        .filter(|(_, s)| s.is_none())
        .map(|(p, _)| *p)
        .collect();
    for (a, b) in open {
        let block = rng.below(2) == 0;
        pin(a, b, if block { "block" } else { "unblock" }).await;
        blocks.insert((a, b), Some(block));
        if block {
            follows.insert((a, b), Some(false));
            follows.insert((b, a), Some(false));
        }
    }
    let open: Vec<(i64, i64)> = follows
        .iter()
        .filter(|(_, s)| s.is_none())
        .map(|(p, _)| *p)
        .collect();
    for (a, b) in open {
        let follow = rng.below(2) == 0 && blocked(&blocks, a, b) == Some(false);
        pin(a, b, if follow { "follow" } else { "unfollow" }).await;
        follows.insert((a, b), Some(follow));
    }
    let open: Vec<(i64, i64)> = mutes
        .iter()
        .filter(|(_, s)| s.is_none())
        .map(|(p, _)| *p)
        .collect();
    for (a, b) in open {
        let mute = rng.below(2) == 0;
        pin(a, b, if mute { "mute" } else { "unmute" }).await;
        mutes.insert((a, b), Some(mute));
    }
    Record {
        follows,
        blocks,
        mutes,
    }
}

#[derive(QueryableByName)]
struct BlockRow {
    #[diesel(sql_type = BigInt)]
    from_user_id: i64,
    #[diesel(sql_type = BigInt)]
    to_user_id: i64,
    #[diesel(sql_type = Bool)]
    active: bool,
}

/// Pairs whose row in `table` (`block` or `mute`) differs from `record`.
async fn differing(conn: &mut AsyncPgConnection, table: &str, record: &Blocks) -> Vec<(i64, i64)> {
    let rows: Vec<BlockRow> = query_all(
        conn,
        &format!("SELECT from_user_id, to_user_id, active FROM {table}"),
    )
    .await;
    let truth: BTreeMap<(i64, i64), bool> = rows
        .iter()
        .map(|r| ((r.from_user_id, r.to_user_id), r.active))
        .collect();
    let mut wrong = Vec::new();
    for (pair, state) in record {
        let want = state.expect("every pair has a definitive answer");
        if truth.get(pair).copied().unwrap_or(false) != want {
            wrong.push(*pair);
        }
    }
    for (pair, active) in &truth {
        if *active && !record.contains_key(pair) {
            wrong.push(*pair);
        }
    }
    wrong
}

/// Blocks and mutes whose truth differs from the record, and follows
/// across a block.
pub(crate) async fn check(
    conn: &mut AsyncPgConnection,
    record: &Record,
) -> (Vec<(i64, i64)>, Vec<(i64, i64)>, i64) {
    let blocks = differing(conn, "block", &record.blocks).await;
    let mutes = differing(conn, "mute", &record.mutes).await;
    let across: Count = query_one(
        conn,
        "SELECT count(*) AS n FROM following f JOIN block b ON b.active
            AND ((b.from_user_id, b.to_user_id) = (f.from_user_id, f.to_user_id)
              OR (b.from_user_id, b.to_user_id) = (f.to_user_id, f.from_user_id))
          WHERE f.active",
    )
    .await;
    (blocks, mutes, across.n)
}
