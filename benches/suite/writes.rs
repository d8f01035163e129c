//! The write phases: the follow/unfollow mix at full speed, follows paced
//! at 1,000/s and at half the 25 % target, and the fan rush.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::bench::{Bench, FIRST_PAGE, FOLLOW, Graph, Phase, Run, UNFOLLOW, gid, ids, mix};
use crate::limits::Limits;
use crate::load::{self, Call};
use crate::procs;

/// What the report needs of the write phases (all are in `bench.report`).
pub struct Writes {
    pub follow_phase: Phase,
    /// CPU of the full-speed mix, until the pipeline applied it.
    pub write_cpu: procs::Cpu,
    pub lag_phase: Phase,
    pub half_phase: Phase,
    pub rush_phase: Phase,
    /// The fan rush's account: its follower counter and whether its first
    /// page matched the truth once drained, and how long that took.
    pub counted: u64,
    pub page_right: bool,
    pub drain_secs: f64,
    /// The broker's CPU, in cores, while `kith run` waits with nothing
    /// produced.
    pub idle_broker_cores: f64,
}

/// How long the broker is watched while Kith waits.
const IDLE: Duration = Duration::from_secs(5);

pub async fn run(run: &Run, graph: &Graph, bench: &mut Bench, limits: &Limits) -> Writes {
    let (addr, clients, pg_tps, rush_target) =
        (bench.addr, run.clients, limits.pg_tps, graph.rush_target);
    let mut conn = run.conn().await;
    // Distinct pairs among every seeded user but the celebrity; an unfollow
    // undoes a follow made 1,000 requests earlier.
    let pair = {
        let (first, n) = (bench.first_id + 1, bench.users - 1);
        move |k: u64| {
            let from = first + (mix(k) % n as u64) as i64;
            let to = first + (mix(k ^ 0x5555_5555) % n as u64) as i64;
            (
                from,
                if to == from {
                    first + ((to - first + 1) % n)
                } else {
                    to
                },
            )
        }
    };
    let mix_calls = bench.calls(move |i, token| {
        let (query, (from, to)) = if i % 4 == 3 && i >= 1000 {
            (UNFOLLOW, pair(i - 1000))
        } else {
            (FOLLOW, pair(i))
        };
        Call {
            token: Some(token(from)),
            body: json!({ "query": query, "variables": { "id": gid(to) } }).to_string(),
        }
    });
    // The mix's CPU is counted until the pipeline has applied it (below).
    let write_cpu0 = procs::cpu(bench.kith_pid);
    let follow_phase = bench
        .phase(
            "follow/unfollow mix, full speed",
            &format!("{clients} clients"),
            load::closed_loop(addr, clients, bench.phase, None, mix_calls),
        )
        .await;
    let half_target = (pg_tps * 0.25 / 2.0).max(1.0);
    let paced = |offset: u64| {
        bench.calls(move |i, token| {
            let (from, to) = pair(offset + i);
            Call {
                token: Some(token(from)),
                body: json!({ "query": FOLLOW, "variables": { "id": gid(to) } }).to_string(),
            }
        })
    };
    let (half_calls, lag_calls) = (paced(10_000_000), paced(20_000_000));
    bench.drain().await;
    let write_cpu = procs::cpu(bench.kith_pid).since(&write_cpu0);
    let lag_phase = bench
        .phase(
            "follows paced at 1,000/s",
            "1000/s open loop",
            load::open_loop(addr, 1000.0, bench.phase, 64, lag_calls),
        )
        .await;
    bench.drain().await;
    let half_phase = bench
        .phase(
            "follows paced at half the 25% target",
            &format!("{half_target:.0}/s open loop"),
            load::open_loop(addr, half_target, bench.phase, 64, half_calls),
        )
        .await;
    bench.drain().await;

    // Fan rush: 10,000 distinct users follow one new account.
    let rush = {
        let first = bench.first_id + 1;
        bench.calls(move |i, token| Call {
            token: Some(token(first + i as i64)),
            body: json!({ "query": FOLLOW, "variables": { "id": gid(rush_target) } }).to_string(),
        })
    };
    let rush_phase = bench
        .phase(
            "fan rush: 10,000 users follow one account",
            "64 clients",
            load::closed_loop(addr, 64, Duration::from_secs(60), Some(10_000), rush),
        )
        .await;
    let drained = Instant::now();
    let (mut counted, mut page_right) = (0, false);
    while drained.elapsed() < Duration::from_secs(60) {
        let r = bench
            .post(None, FIRST_PAGE, json!({ "id": gid(rush_target) }))
            .await;
        counted = r["data"]["user"]["counters"]["followers"]
            .as_u64()
            .unwrap_or(0);
        let shown: Vec<String> = r["data"]["user"]["followers"]["edges"]
            .as_array()
            .map(|edges| {
                edges
                    .iter()
                    .filter_map(|e| e["node"]["id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let truth: Vec<String> = ids(
            &mut conn,
            &format!(
                "SELECT from_user_id AS id FROM following WHERE to_user_id = {rush_target} AND active
                 ORDER BY followed_at DESC, from_user_id DESC LIMIT 20"
            ),
        )
        .await
        .into_iter()
        .map(gid)
        .collect();
        page_right = shown == truth;
        if counted == 10_000 && page_right {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let drain_secs = drained.elapsed().as_secs_f64();

    // Kith idle once everything is applied: nothing produced, the projector
    // parked until a relay announces events. What the broker spends then.
    bench.drain().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle_before = procs::cpu(bench.kith_pid);
    let idle_started = Instant::now();
    tokio::time::sleep(IDLE).await;
    let idle_broker_cores = procs::cpu(bench.kith_pid).since(&idle_before).of("broker")
        / idle_started.elapsed().as_secs_f64();

    Writes {
        follow_phase,
        write_cpu,
        lag_phase,
        half_phase,
        rush_phase,
        counted,
        page_right,
        drain_secs,
        idle_broker_cores,
    }
}
