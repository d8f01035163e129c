//! The report: `target/bench-reports/bench.md` and `bench.json`.

use std::fmt::Write as _;

use serde_json::json;

use crate::Memory;
use crate::bench::{Bench, Graph, Phase, Run};
use crate::limits::Limits;
use crate::reads::Reads;
use crate::writes::Writes;

/// Writes the report of every phase, the targets and what bounds them.
pub fn write(
    run: &Run,
    graph: &Graph,
    bench: &Bench,
    limits: &Limits,
    reads: &Reads,
    writes: &Writes,
    memory: &Memory,
) {
    let (clients, seconds, reports, celebrity_followers) = (
        run.clients,
        run.seconds,
        &run.reports,
        run.celebrity_followers,
    );
    let (summary, seed_secs) = (&graph.summary, graph.seed_secs);
    let Limits {
        pg_tps,
        insert_pg_ms,
        redis_get,
        redis_zrange,
        statement,
        broker,
    } = limits;
    let insert_pg_ms = *insert_pg_ms;
    let (pg_tps, redis_get, redis_zrange) = (*pg_tps, *redis_get, *redis_zrange);
    let (statement_tps, statement_pg_ms) = (statement.single_tps, statement.single_pg_ms);
    let (batched_tps, batched_pg_ms) = (statement.batched_tps, statement.batched_pg_ms);
    let batched = crate::limits::BATCHED;
    let Reads {
        ordinary_phase,
        cpu_profile,
        heavy_phase,
        known_phase,
        redis_off_phase,
        references,
        gateway,
        celebrity_phase,
    } = reads;
    let Writes {
        follow_phase,
        write_cpu,
        lag_phase,
        half_phase,
        rush_phase,
        counted,
        page_right,
        drain_secs,
        idle_broker_cores,
    } = writes;
    let (counted, page_right, drain_secs) = (*counted, *page_right, *drain_secs);
    let Memory {
        rss,
        hwm,
        bytes_per_edge,
    } = memory;
    let follow_ratio = follow_phase.throughput / pg_tps;
    let celebrity_cost = celebrity_phase.kith_pg_redis_cpu() / ordinary_phase.kith_pg_redis_cpu();
    let lag = lag_phase.lag.unwrap_or_default();
    // Machine CPU per write of the full-speed mix, counted until applied.
    let follow_cpu: f64 = ["kith", "postgres", "redis", "broker"]
        .iter()
        .map(|g| write_cpu.of(g))
        .sum::<f64>()
        * 1000.0
        / follow_phase.requests.max(1) as f64;
    let targets: Vec<(&str, f64, f64, &str)> = vec![
        // The pool's count includes background work (the relay's fallback
        // poll, projector lease renewals): a few statements a second.
        (
            "profile: PostgreSQL statements per warm request (incl. background)",
            ordinary_phase.statements,
            0.01,
            "≤",
        ),
        (
            "profile: Redis round trips per warm request",
            ordinary_phase.redis,
            2.0,
            "≤",
        ),
        (
            "profile, viewer following 5,000: PostgreSQL statements per warm request",
            heavy_phase.statements,
            0.01,
            "≤",
        ),
        (
            "profile, viewer following 5,000: throughput ÷ the ordinary viewer's",
            heavy_phase.throughput / ordinary_phase.throughput.max(1e-9),
            0.9,
            "≥",
        ),
        (
            "followers you know (celebrity): throughput ÷ the ordinary profile's",
            known_phase.throughput / ordinary_phase.throughput.max(1e-9),
            0.5,
            "≥",
        ),
        (
            "followers you know (celebrity): p99, ms",
            known_phase.p99,
            20.0,
            "≤",
        ),
        (
            "follow throughput ÷ pgbench single-insert tps",
            follow_ratio,
            0.25,
            "≥",
        ),
        (
            "machine CPU per applied follow ÷ PostgreSQL CPU per pgbench insert",
            follow_cpu / insert_pg_ms.max(1e-9),
            5.0,
            "≤",
        ),
        (
            "follow p99 at half the 25% target, ms",
            half_phase.p99,
            20.0,
            "≤",
        ),
        (
            "pipeline lag p50 at 1,000 follows/s − the broker's own send → consume p50, ms",
            lag.1 - broker.end_p50,
            5.0,
            "≤",
        ),
        ("pipeline lag p99 at 1,000 follows/s, ms", lag.2, 100.0, "≤"),
        // An open loop's rate is measured to its last answer, so a rate
        // held exactly reads a little under: 1% is allowed.
        (
            "achieved follows/s when paced at 1,000/s (within 1%)",
            lag_phase.throughput,
            990.0,
            "≥",
        ),
        (
            "celebrity profile CPU ÷ ordinary profile CPU (Kith+PG+Redis)",
            celebrity_cost,
            1.1,
            "≤",
        ),
        (
            "celebrity profile p50 ÷ ordinary p50",
            celebrity_phase.p50 / ordinary_phase.p50,
            1.1,
            "≤",
        ),
        (
            "fan rush: seconds for 10,000 follows",
            rush_phase.requests as f64 / rush_phase.throughput.max(1e-9),
            3.0,
            "≤",
        ),
        (
            "broker CPU while `kith run` waits with nothing produced, % of a core",
            idle_broker_cores * 100.0,
            5.0,
            "≤",
        ),
        (
            "fan rush: failed follows",
            rush_phase.failed as f64,
            0.0,
            "≤",
        ),
        (
            "fan rush: counter right after drain (followers)",
            counted as f64,
            10_000.0,
            "≥",
        ),
    ];
    let mut targets: Vec<(String, f64, f64, &str)> = targets
        .into_iter()
        .map(|(what, value, limit, sense)| (what.to_owned(), value, limit, sense))
        .collect();
    // Against the reference (V5), and the previous one (4.14) beside it.
    let cpu = |phase: &Phase| phase.cpu_ms.get("kith").copied().unwrap_or(0.0);
    for (version, _, reference) in references
        .iter()
        .rev()
        .filter(|(_, ask, _)| *ask == crate::reference::Ask::Fair)
    {
        let name = version.name();
        let against: [(String, f64, f64, &str); 3] = [
            (
                format!("profile throughput ÷ {name}'s (same run)"),
                ordinary_phase.throughput / reference.throughput.max(1e-9),
                5.0,
                "≥",
            ),
            (
                format!("profile p99 ÷ {name}'s p99"),
                ordinary_phase.p99 / reference.p99.max(1e-9),
                0.2,
                "≤",
            ),
            (
                format!("Kith's CPU per profile ÷ {name}'s own CPU per request"),
                cpu(ordinary_phase) / cpu(reference).max(1e-9),
                0.2,
                "≤",
            ),
        ];
        for (i, target) in against.into_iter().enumerate() {
            targets.insert(i, target);
        }
        if *version == crate::reference::Version::V5
            && let Some(off) = redis_off_phase
        {
            targets.insert(
                3,
                (
                    format!("profile with Redis off: throughput ÷ {name}'s"),
                    off.throughput / reference.throughput.max(1e-9),
                    1.5,
                    "≥",
                ),
            );
        }
    }
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Kith bench ({})\n\nOne run on this machine ({} cores): PostgreSQL, Redis, the broker, `kith run` \
         (release) and the load generator on the same cores. Graph: {} users, {} edges, a celebrity \
         with {} followers (seeded in {seed_secs:.0} s). Phases of {seconds} s over real TCP \
         (HTTP/1.1 keep-alive).\n",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        summary.users,
        summary.edges,
        celebrity_followers,
    );
    let _ = writeln!(
        md,
        "## Limits measured in the same run\n\n| what | rate |\n|---|---|\n\
         | pgbench single-row insert, {clients} clients | {pg_tps:.0} tps (PostgreSQL {insert_pg_ms:.3} ms CPU each) |\n\
         | redis-benchmark GET (a counter record), {clients} clients | {redis_get:.0}/s |\n\
         | redis-benchmark ZRANGE BYSCORE REV LIMIT 0 21 (a page), {clients} clients | {redis_zrange:.0}/s |\n\
         | `kith_change_edges` alone (one follow of a random pair of 100,000 users per call, as a lone follow's batch; pgbench, {clients} clients, no Kith) | {statement_tps:.0}/s ({:.0}% of single-row inserts; PostgreSQL, all its processes, {statement_pg_ms:.2} ms CPU each) |\n\
         | `kith_change_edges` with {batched} follows per call (as the group commit sends them under load; pgbench, 2 clients, no Kith) | {batched_tps:.0} follows/s ({:.0}% of single-row inserts; PostgreSQL {batched_pg_ms:.3} ms CPU per follow, {:.1}× an insert's) |\n\
         | the broker alone: {:.0} events/s with the relay's producer settings, read with the projector's consumer settings (no Kith) | acknowledged p50 {:.1} ms, p99 {:.1} ms; sent → consumed p50 {:.1} ms, p99 {:.1} ms; broker {:.2} ms CPU per event; {} of {} consumed; fetching alone (assigned, nothing produced) {:.0}% of a core |\n",
        statement_tps * 100.0 / pg_tps,
        batched_tps * 100.0 / pg_tps,
        batched_pg_ms / insert_pg_ms.max(1e-9),
        broker.rate,
        broker.ack_p50,
        broker.ack_p99,
        broker.end_p50,
        broker.end_p99,
        broker.cpu_ms,
        broker.received,
        broker.sent,
        broker.fetch_cores * 100.0,
    );
    let _ = writeln!(
        md,
        "## Phases\n\nCPU columns: milliseconds of CPU per request, from `/proc` (PostgreSQL: all \
         backends; broker: tansu; bench: the load generator; in the reference phase the Kith column \
         is the PostGraphile process). Statements and Redis: per request, from Kith's own counters.\n\n\
         | phase | load | requests | ok/s | p50 ms | p99 ms | p99.9 ms | errors | Kith | PostgreSQL | Redis | broker | bench | PG statements | Redis round trips |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for phase in &bench.report {
        md.push_str(&phase.row());
    }
    let _ = writeln!(
        md,
        "\nPipeline lag (commit → applied in every derived view, Kith's histogram, interpolated \
         within buckets): at 1,000/s p50 {:.1} ms, p99 {:.1} ms over {:.0} events; in the \
         full-speed mix {}.\n",
        lag.1,
        lag.2,
        lag.0,
        follow_phase
            .lag
            .map_or("n/a".to_owned(), |(n, p50, p99)| format!(
                "p50 {p50:.1} ms, p99 {p99:.1} ms over {n:.0} events"
            )),
    );
    let _ = writeln!(
        md,
        "Fan rush: {} follows in {:.1} s, {} failed; after the pipeline drained ({drain_secs:.1} s) \
         the account showed {counted} followers and its first page {} the truth's newest 20.\n",
        rush_phase.requests,
        rush_phase.requests as f64 / rush_phase.throughput.max(1e-9),
        rush_phase.failed,
        if page_right {
            "matched"
        } else {
            "did NOT match"
        },
    );
    let _ = writeln!(
        md,
        "Memory: `kith run` RSS {rss:.0} MiB (peak {hwm:.0} MiB); Redis {:.0} bytes per cached edge \
         (ZSet + version hash + marker, over {} cached followers-list entries).\n",
        bytes_per_edge.0, bytes_per_edge.1
    );
    if let Some(gateway) = gateway {
        md.push_str(&gateway_section(gateway, ordinary_phase, clients));
    }
    if !cpu_profile.is_empty() {
        let _ = writeln!(
            md,
            "## Where `kith run` spends its CPU under the ordinary profile query\n\n\
             `perf record -F 999` of the process during that phase, self time by symbol, grouped:\n\n\
             | part | share of Kith's samples |\n|---|---|"
        );
        for (part, share) in cpu_profile.iter() {
            let _ = writeln!(md, "| {part} | {share:.1}% |");
        }
        md.push('\n');
    }
    let _ = writeln!(
        md,
        "## Targets\n\n| figure | measured | limit | ratio to limit | met |\n|---|---|---|---|---|"
    );
    let mut target_json = Vec::new();
    for (what, value, limit, sense) in &targets {
        let met = match *sense {
            "≤" => value <= limit,
            _ => value >= limit,
        };
        let ratio = if *limit == 0.0 {
            "–".to_owned()
        } else {
            format!("{:.2}", value / limit)
        };
        let _ = writeln!(
            md,
            "| {what} | {value:.2} | {sense} {limit} | {ratio} | {} |",
            if met { "yes" } else { "**no**" }
        );
        target_json.push(json!({ "figure": what, "measured": value, "limit": limit, "sense": sense, "met": met }));
    }
    // What bounds the write targets, from the figures above.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let _ = writeln!(
        md,
        "\n## What bounds the write targets\n\n\
         - A write of the full-speed mix (three follows to one unfollow) took {follow_cpu:.2} ms \
         of CPU, Kith, PostgreSQL, Redis and the broker together, counted until the pipeline had \
         applied it (every process of each, so an upper bound): {cores:.0} cores carry at most \
         {:.0} such writes a second, against the 25% target's {:.0}/s.\n\
         - The follow statement alone, with nothing else running, reached {statement_tps:.0}/s, \
         {:.0}% of single-row inserts.\n\
         - The broker alone took a p50 of {:.1} ms (p99 {:.1} ms) from send to consumer at {:.0} \
         events/s, and {:.2} ms of its CPU per event; the lag target's p50 is 20 ms. With the \
         consumer's partitions assigned and nothing produced, fetching alone took {:.0}% of a \
         core of the broker, {:.0}% of what it took carrying those events: its CPU follows how \
         often it is asked more than what it carries.\n",
        cores * 1000.0 / follow_cpu.max(1e-9),
        pg_tps * 0.25,
        statement_tps * 100.0 / pg_tps,
        broker.end_p50,
        broker.end_p99,
        broker.rate,
        broker.cpu_ms,
        broker.fetch_cores * 100.0,
        // CPU ms per event × events/s = ms of CPU per second.
        broker.fetch_cores * 1000.0 * 100.0 / (broker.cpu_ms * broker.rate).max(1e-9),
    );
    let report = json!({
        "graph": { "users": summary.users, "edges": summary.edges, "celebrity_followers": celebrity_followers, "seed_seconds": seed_secs },
        "limits": {
            "pgbench_tps": pg_tps,
            "redis_get_per_s": redis_get,
            "redis_zrange_page_per_s": redis_zrange,
            "follow_statement_per_s": statement_tps,
            "follow_statement_pg_cpu_ms": statement_pg_ms,
            "follow_statement_batched": { "follows_per_call": batched, "follows_per_s": batched_tps, "pg_cpu_ms_per_follow": batched_pg_ms },
            "broker": {
                "rate": broker.rate,
                "sent": broker.sent,
                "received": broker.received,
                "ack_p50_ms": broker.ack_p50,
                "ack_p99_ms": broker.ack_p99,
                "end_to_end_p50_ms": broker.end_p50,
                "end_to_end_p99_ms": broker.end_p99,
                "fetch_only_cores": broker.fetch_cores,
                "cpu_ms_per_event": broker.cpu_ms,
            },
        },
        "phases": bench.report.iter().map(Phase::json).collect::<Vec<_>>(),
        "fan_rush": { "counted_followers": counted, "first_page_right": page_right, "drain_seconds": drain_secs },
        "memory": { "kith_rss_mib": rss, "kith_peak_rss_mib": hwm, "redis_bytes_per_cached_edge": bytes_per_edge.0 },
        "targets": target_json,
        "gateway": gateway.as_ref().map(|g| json!({
            "gateway_cpu_ms_per_request": g.gateway_cpu_ms,
            "added_p50_ms_one_client": g.one_gateway.p50 - g.one_direct.p50,
            "added_p99_ms_one_client": g.one_gateway.p99 - g.one_direct.p99,
            "throughput_ratio": g.loaded.throughput / ordinary_phase.throughput.max(1e-9),
        })),
        "cpu_profile_percent": cpu_profile.iter().map(|(k, v)| json!({ "part": k, "share": v })).collect::<Vec<_>>(),
    });
    let json_file = if std::env::var("KITH_BENCH_POOLER_URL").is_ok() {
        "bench-pooler.json"
    } else {
        "bench.json"
    };
    std::fs::write(
        reports.join(json_file),
        serde_json::to_string_pretty(&report).unwrap(),
    )
    .unwrap();
    crate::common::write_report("bench.md", &md);
}

/// What a federation gateway in front of Kith adds to the profile query.
fn gateway_section(g: &crate::reads::GatewayPhases, direct: &Phase, clients: usize) -> String {
    let kith = |phase: &Phase| phase.cpu_ms.get("kith").copied().unwrap_or(0.0);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!(
        "## Through a federation gateway\n\n\
         Hive Gateway's runtime (`benches/reference/gateway`: Kith's committed subgraph schema \
         composed alone, the viewer's JWT forwarded, one Node.js worker per core) in front of the \
         same `kith run`, asked the same profile query for the same users and viewers; every \
         process on the same cores.\n\n\
         | path | load | ok/s | p50 ms | p99 ms | Kith CPU ms/request | gateway CPU ms/request |\n\
         |---|---|---|---|---|---|---|\n\
         | direct (the ordinary profile phase above) | {clients} clients | {:.0} | {:.2} | {:.2} | {:.3} | – |\n\
         | through the gateway | {clients} clients | {:.0} | {:.2} | {:.2} | {:.3} | {:.3} |\n\
         | direct | 1 client | {:.0} | {:.2} | {:.2} | {:.3} | – |\n\
         | through the gateway | 1 client | {:.0} | {:.2} | {:.2} | {:.3} | – |\n\n\
         One request at a time, the gateway adds {:.2} ms at the median and {:.2} ms at p99. \
         Under {clients} clients it carries {:.0}% of Kith's direct throughput: the gateway's \
         own CPU per request is {:.1}× Kith's, on the same {cores} cores.\n\n",
        direct.throughput,
        direct.p50,
        direct.p99,
        kith(direct),
        g.loaded.throughput,
        g.loaded.p50,
        g.loaded.p99,
        kith(&g.loaded),
        g.gateway_cpu_ms,
        g.one_direct.throughput,
        g.one_direct.p50,
        g.one_direct.p99,
        kith(&g.one_direct),
        g.one_gateway.throughput,
        g.one_gateway.p50,
        g.one_gateway.p99,
        kith(&g.one_gateway),
        g.one_gateway.p50 - g.one_direct.p50,
        g.one_gateway.p99 - g.one_direct.p99,
        g.loaded.throughput * 100.0 / direct.throughput.max(1e-9),
        g.gateway_cpu_ms / kith(&g.loaded).max(1e-9),
    )
}
