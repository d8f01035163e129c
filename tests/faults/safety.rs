//! The safety part of the workload: follows, unfollows, blocks, unblocks,
//! mutes, unmutes, close friends added and removed, locks and unlocks, and
//! answers to follow requests,
//! among a crowd no other writer touches, one request at a time, so every
//! answer comes in order. The record it keeps: per pair, the follow,
//! request, block and mute state its last answer left (`None`: left open),
//! as the answer's own relation reports it. A block ends the pair's
//! follows, requests and close-friend listings both ways; a follow or a
//! listing across a block is refused (`BLOCKED`); a mute changes no follow; a follow of a locked account is a
//! request; an unlock accepts them all in the background, so it leaves the
//! pairs towards the account open until pinned.

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
    pub requests: Blocks,
    pub close: Blocks,
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

/// Crowd members that lock and unlock their accounts.
const LOCKERS: std::ops::Range<i64> = 280..284;

const CROWD_MUTATION: &str = "mutation($id: ID!) { %OP%(input: {userId: $id}) {
    changed viewerRelation { following followedBy requested requestedBy } } }";
const SETTINGS: &str =
    "mutation($l: Boolean) { updateAccountSettings(input: {locked: $l}) { user { locked } } }";

/// One request of the crowd; with a definitive answer, the viewer's
/// relation it reports (none for settings).
async fn crowd_op(
    counts: &Counts,
    port: u16,
    tokens: &HashMap<i64, String>,
    actor: i64,
    target: i64,
    op: &str,
) -> (Answer, serde_json::Value) {
    let (query, vars, path) = match op {
        "lock" | "unlock" => (
            SETTINGS.to_owned(),
            json!({ "l": op == "lock" }),
            "updateAccountSettings",
        ),
        _ => {
            let id = kith::testing::graph::ids::user_id(user(target)).to_string();
            (CROWD_MUTATION.replace("%OP%", op), json!({ "id": id }), op)
        }
    };
    match http::graphql(port, &tokens[&actor], &query, vars).await {
        Ok(r) if r["data"][path].is_object() => {
            (Answer::Done, r["data"][path]["viewerRelation"].clone())
        }
        Ok(r) => match internal(&r, counts) {
            Some(
                "INVALID_INPUT"
                | "NOT_FOUND"
                | "RATE_LIMITED"
                | "FORBIDDEN"
                | "UNAUTHENTICATED"
                | "BLOCKED"
                | "BLOCK_LIMIT"
                | "CLOSE_FRIENDS_LIMIT",
            ) => (Answer::Refused, serde_json::Value::Null),
            _ => (Answer::Open, serde_json::Value::Null),
        },
        Err(_) => (Answer::Open, serde_json::Value::Null),
    }
}

/// The crowd's record as it goes.
#[derive(Default)]
struct Crowd {
    follows: Expected,
    requests: Blocks,
    blocks: Blocks,
    mutes: Blocks,
    close: Blocks,
    locked: BTreeMap<i64, Option<bool>>,
}

impl Crowd {
    /// What a definitive answer of `op` on `(a, b)` says.
    fn done(&mut self, a: i64, b: i64, op: &str, relation: &serde_json::Value) {
        let flag = |name: &str| relation[name].as_bool();
        match op {
            "follow" | "unfollow" => {
                self.follows.insert((a, b), flag("following"));
                self.requests.insert((a, b), flag("requested"));
            }
            // The answer is the owner's relation to the requester.
            "acceptFollowRequest" | "rejectFollowRequest" => {
                self.follows.insert((b, a), flag("followedBy"));
                self.requests.insert((b, a), flag("requestedBy"));
            }
            "block" => {
                self.blocks.insert((a, b), Some(true));
                for pair in [(a, b), (b, a)] {
                    self.follows.insert(pair, Some(false));
                    self.requests.insert(pair, Some(false));
                    self.close.insert(pair, Some(false));
                }
            }
            "unblock" => {
                self.blocks.insert((a, b), Some(false));
            }
            "mute" | "unmute" => {
                self.mutes.insert((a, b), Some(op == "mute"));
            }
            "addCloseFriend" | "removeCloseFriend" => {
                self.close.insert((a, b), Some(op == "addCloseFriend"));
            }
            "lock" => {
                self.locked.insert(a, Some(true));
            }
            _ => {
                // An unlock accepts pending requests in the background (and
                // a relock may stop it): every pair towards `a` is open.
                self.locked.insert(a, Some(false));
                self.open_towards(a);
            }
        }
    }

    /// What an answer that left the outcome open leaves unknown.
    fn open(&mut self, a: i64, b: i64, op: &str) {
        match op {
            "follow" | "unfollow" => {
                self.follows.insert((a, b), None);
                self.requests.insert((a, b), None);
            }
            "acceptFollowRequest" | "rejectFollowRequest" => {
                self.follows.insert((b, a), None);
                self.requests.insert((b, a), None);
            }
            "block" | "unblock" => {
                self.blocks.insert((a, b), None);
                for pair in [(a, b), (b, a)] {
                    self.follows.insert(pair, None);
                    self.requests.insert(pair, None);
                    self.close.insert(pair, None);
                }
            }
            "mute" | "unmute" => {
                self.mutes.insert((a, b), None);
            }
            "addCloseFriend" | "removeCloseFriend" => {
                self.close.insert((a, b), None);
            }
            _ => {
                self.locked.insert(a, None);
                self.open_towards(a);
            }
        }
    }

    fn open_towards(&mut self, a: i64) {
        for x in CROWD.filter(|x| *x != a) {
            self.follows.insert((x, a), None);
            self.requests.insert((x, a), None);
        }
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
    let mut crowd = Crowd::default();
    let n = (CROWD.end - CROWD.start) as u64;
    while !stop.load(Ordering::Relaxed) {
        let a = CROWD.start + rng.below(n) as i64;
        let b = CROWD.start + (a - CROWD.start + 1 + rng.below(n - 1) as i64) % n as i64;
        let roll = rng.below(100);
        let op = match roll {
            0..30 => "follow",
            30..40 => "unfollow",
            40..52 => "block",
            52..62 => "unblock",
            62..66 => "mute",
            66..68 => "unmute",
            68..72 => "addCloseFriend",
            72..74 => "removeCloseFriend",
            74..82 => "acceptFollowRequest",
            82..88 => "rejectFollowRequest",
            _ if LOCKERS.contains(&a) => {
                if rng.below(2) == 0 {
                    "lock"
                } else {
                    "unlock"
                }
            }
            _ => "follow",
        };
        let (answer, relation) = crowd_op(&counts, port, &tokens, a, b, op).await;
        counts.ops.fetch_add(1, Ordering::Relaxed);
        counts.safety_ops.fetch_add(1, Ordering::Relaxed);
        match answer {
            Answer::Done => {
                counts.done.fetch_add(1, Ordering::Relaxed);
                crowd.done(a, b, op, &relation);
            }
            // `BLOCKED`, `RATE_LIMITED`: nothing written.
            Answer::Refused => {
                counts.refused.fetch_add(1, Ordering::Relaxed);
            }
            Answer::Open => {
                counts.open.fetch_add(1, Ordering::Relaxed);
                crowd.open(a, b, op);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    // One last definitive answer for whatever was left open: locks first
    // (locked: no acceptance runs after), blocks, mutes, close friends
    // (a removal where a block stands), then follows (an unfollow where a
    // block stands), each recorded from its answer.
    let pin = async |a: i64, b: i64, op: &str| loop {
        match crowd_op(&counts, port, &tokens, a, b, op).await {
            (Answer::Done, relation) => break relation,
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    let open: Vec<i64> = crowd
        .locked
        .iter()
        .filter(|(_, s)| s.is_none())
        .map(|(u, _)| *u)
        .collect();
    for a in open {
        pin(a, a, "lock").await;
        crowd.locked.insert(a, Some(true));
    }
    // An acceptance batch that began before a relock may still commit.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let open: Vec<(i64, i64)> = crowd
        .blocks
        .iter()
        .filter(|(_, s)| s.is_none())
        .map(|(p, _)| *p)
        .collect();
    for (a, b) in open {
        let op = if rng.below(2) == 0 {
            "block"
        } else {
            "unblock"
        };
        let relation = pin(a, b, op).await;
        crowd.done(a, b, op, &relation);
    }
    let open: Vec<(i64, i64)> = crowd
        .mutes
        .iter()
        .filter(|(_, s)| s.is_none())
        .map(|(p, _)| *p)
        .collect();
    for (a, b) in open {
        let op = if rng.below(2) == 0 { "mute" } else { "unmute" };
        let relation = pin(a, b, op).await;
        crowd.done(a, b, op, &relation);
    }
    let open: Vec<(i64, i64)> = crowd
        .close
        .iter()
        .filter(|(_, s)| s.is_none())
        .map(|(p, _)| *p)
        .collect();
    for (a, b) in open {
        let add = rng.below(2) == 0 && blocked(&crowd.blocks, a, b) == Some(false);
        let op = if add {
            "addCloseFriend"
        } else {
            "removeCloseFriend"
        };
        let relation = pin(a, b, op).await;
        crowd.done(a, b, op, &relation);
    }
    let open: BTreeSet<(i64, i64)> = crowd
        .follows
        .iter()
        .chain(crowd.requests.iter())
        .filter(|(_, s)| s.is_none())
        .map(|(p, _)| *p)
        .collect();
    for (a, b) in open {
        let follow = rng.below(2) == 0 && blocked(&crowd.blocks, a, b) == Some(false);
        let op = if follow { "follow" } else { "unfollow" };
        let relation = pin(a, b, op).await;
        crowd.done(a, b, op, &relation);
    }
    // An unlocked account's pending requests all become follows (the
    // sweeper finishes what the unlock left).
    for (&a, locked) in &crowd.locked {
        if *locked == Some(false) {
            for x in CROWD.filter(|x| *x != a) {
                if crowd.requests.get(&(x, a)) == Some(&Some(true)) {
                    crowd.requests.insert((x, a), Some(false));
                    crowd.follows.insert((x, a), Some(true));
                }
            }
        }
    }
    Record {
        follows: crowd.follows,
        blocks: crowd.blocks,
        mutes: crowd.mutes,
        requests: crowd.requests,
        close: crowd.close,
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

/// Pairs whose row in `table` (`block`, `mute`, `follow_request`,
/// `close_friend`) differs
/// from `record`.
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

/// Blocks, mutes, requests and close friends whose truth differs from the
/// record, and follows and close-friend listings across a block.
pub(crate) async fn check(conn: &mut AsyncPgConnection, record: &Record) -> Checked {
    let mut blocks = differing(conn, "block", &record.blocks).await;
    blocks.extend(differing(conn, "follow_request", &record.requests).await);
    let mut mutes = differing(conn, "mute", &record.mutes).await;
    mutes.sort_unstable();
    let across = |table: &str| {
        format!(
            "SELECT count(*) AS n FROM {table} f JOIN block b ON b.active
                AND ((b.from_user_id, b.to_user_id) = (f.from_user_id, f.to_user_id)
                  OR (b.from_user_id, b.to_user_id) = (f.to_user_id, f.from_user_id))
              WHERE f.active"
        )
    };
    let follows: Count = query_one(conn, &across("following")).await;
    let listings: Count = query_one(conn, &across("close_friend")).await;
    Checked {
        blocks,
        mutes,
        close: differing(conn, "close_friend", &record.close).await,
        follows_across: follows.n,
        listings_across: listings.n,
    }
}

/// What [`check`] found.
pub(crate) struct Checked {
    /// Blocks and requests differing from the record.
    pub blocks: Vec<(i64, i64)>,
    /// Mutes differing from the record.
    pub mutes: Vec<(i64, i64)>,
    /// Close-friend listings differing from the record.
    pub close: Vec<(i64, i64)>,
    /// Follows across a block.
    pub follows_across: i64,
    /// Close-friend listings across a block.
    pub listings_across: i64,
}

/// How many pairs ever had a follow request, and the sum of their
/// versions (each request made, cancelled, accepted or rejected is one).
pub(crate) async fn request_activity(conn: &mut AsyncPgConnection) -> (i64, i64) {
    let pairs: Count = query_one(conn, "SELECT count(*) AS n FROM follow_request").await;
    let steps: Count = query_one(
        conn,
        "SELECT coalesce(sum(version), 0)::BIGINT AS n FROM follow_request",
    )
    .await;
    (pairs.n, steps.n)
}
