//! The read phases: the profile query of ordinary users (and the same on
//! the reference), of a celebrity, deep pages and `relationships`.

use std::sync::Arc;
use std::time::Duration;

use diesel::QueryableByName;
use diesel_async::RunQueryDsl;
use serde_json::{Value, json};

use crate::bench::{
    Bench, CURSOR_AT, DEEP, Graph, KNOWN, PROFILE, Phase, RELATIONSHIPS, Run, gid, mix,
};
use crate::load::{self, Call, Conn, MakeCall};
use crate::{procs, reference};

/// What the report needs of the read phases (all are in `bench.report`).
pub struct Reads {
    pub ordinary_phase: Phase,
    pub cpu_profile: Vec<(String, f64)>,
    pub heavy_phase: Phase,
    pub known_phase: Phase,
    pub redis_off_phase: Option<Phase>,
    /// PostGraphile V5's, then 4.14's (those installed).
    /// The references' phases; the targets are against the fair query.
    pub references: Vec<(reference::Version, reference::Ask, Phase)>,
    /// The profile query through Hive Gateway, when it is installed.
    pub gateway: Option<GatewayPhases>,
    pub celebrity_phase: Phase,
}

pub async fn run(run: &Run, graph: &Graph, bench: &mut Bench) -> Reads {
    let (addr, clients, reports, schema, base_url) = (
        bench.addr,
        run.clients,
        &run.reports,
        &run.schema,
        &run.base_url,
    );
    let (ordinary, viewers, celebrity) = (&graph.ordinary, &graph.viewers, graph.celebrity);
    let mut conn = run.conn().await;
    let profile = {
        let (ordinary, viewers) = (Arc::new(ordinary.clone()), Arc::new(viewers.clone()));
        bench.calls(move |i, token| {
            let target = ordinary[(mix(i) % ordinary.len() as u64) as usize];
            let viewer = viewers[(mix(i ^ 0xABCD) % viewers.len() as u64) as usize];
            Call {
                token: Some(token(viewer)),
                body: json!({ "query": PROFILE, "variables": { "id": gid(target) } }).to_string(),
            }
        })
    };
    // Warm-up: user rows, counter records, the lists relations read.
    bench
        .warm_up(addr, clients, Duration::from_secs(5), profile.clone())
        .await;
    let perf = std::env::var("KITH_BENCH_PERF")
        .is_ok_and(|v| v == "1")
        .then(|| procs::perf_start(bench.kith_pid, &reports.join("bench-perf.data")))
        .flatten();
    let ordinary_phase = bench
        .phase(
            "profile, ordinary users",
            &format!("{clients} clients"),
            load::closed_loop(addr, clients, bench.phase, None, profile.clone()),
        )
        .await;
    let cpu_profile = perf.map(procs::PerfRecord::finish).unwrap_or_default();

    // The same profiles read by a viewer who follows 5,000: relations from
    // whole cached following lists, no statement.
    let heavy = {
        let (ordinary, viewer) = (Arc::new(ordinary.clone()), graph.heavy_viewer);
        bench.calls(move |i, token| Call {
            token: Some(token(viewer)),
            body: json!({ "query": PROFILE, "variables": {
                "id": gid(ordinary[(mix(i) % ordinary.len() as u64) as usize]) } })
            .to_string(),
        })
    };
    bench
        .warm_up(addr, clients, Duration::from_secs(5), heavy.clone())
        .await;
    let heavy_phase = bench
        .phase(
            "profile, ordinary users, a viewer following 5,000",
            &format!("{clients} clients"),
            load::closed_loop(addr, clients, bench.phase, None, heavy),
        )
        .await;

    // "Followers you know": the celebrity's profile with the count and the
    // first three of its followers a viewer following 2,000 follows.
    let known = {
        let viewer = graph.known_viewer;
        bench.calls(move |_, token| Call {
            token: Some(token(viewer)),
            body: json!({ "query": KNOWN, "variables": { "id": gid(celebrity) } }).to_string(),
        })
    };
    bench
        .warm_up(addr, clients, Duration::from_secs(5), known.clone())
        .await;
    let known_phase = bench
        .phase(
            "followers you know: celebrity, a viewer following 2,000",
            &format!("{clients} clients"),
            load::closed_loop(addr, clients, bench.phase, None, known),
        )
        .await;

    let redis_off_phase = crate::redis_off::phase(run, bench, profile.clone()).await;

    // The references: PostGraphile over the same tables, the same profile
    // query for the same users and viewers (its process in the Kith column).
    let functions: Vec<String> = {
        #[derive(QueryableByName)]
        struct Name {
            #[diesel(sql_type = diesel::sql_types::Text)]
            proname: String,
        }
        let rows: Vec<Name> = diesel::sql_query(
            "SELECT DISTINCT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
             WHERE n.nspname = $1",
        )
        .bind::<diesel::sql_types::Text, _>(&schema)
        .load(&mut conn)
        .await
        .expect("functions of the bench schema");
        rows.into_iter().map(|r| r.proname).collect()
    };
    let mut references = Vec::new();
    for version in [reference::Version::V5, reference::Version::V4] {
        let log = reports.join(format!("bench-reference-{version:?}.log").to_lowercase());
        let Some(reference) = reference::start(version, base_url, schema, &functions, log).await
        else {
            continue;
        };
        let asks: &[reference::Ask] = match version {
            reference::Version::V5 => &[reference::Ask::Fair, reference::Ask::Counted],
            reference::Version::V4 => &[reference::Ask::Fair],
        };
        for ask in asks {
            let phase = reference_phase(bench, clients, graph, version, *ask, &reference).await;
            references.push((version, *ask, phase));
        }
    }
    let gateway = gateway_phase(bench, clients, reports, profile.clone()).await;

    let celebrity_profile = {
        let viewers = Arc::new(viewers.clone());
        bench.calls(move |i, token| Call {
            token: Some(token(viewers[(mix(i) % viewers.len() as u64) as usize])),
            body: json!({ "query": PROFILE, "variables": { "id": gid(celebrity) } }).to_string(),
        })
    };
    bench
        .warm_up(
            addr,
            clients,
            Duration::from_secs(3),
            celebrity_profile.clone(),
        )
        .await;
    let celebrity_phase = bench
        .phase(
            "profile, celebrity",
            &format!("{clients} clients"),
            load::closed_loop(addr, clients, bench.phase, None, celebrity_profile.clone()),
        )
        .await;
    bench
        .phase(
            "profile, celebrity, many clients",
            "64 clients",
            load::closed_loop(addr, 64, bench.phase, None, celebrity_profile),
        )
        .await;

    let mut cursors = Vec::new();
    for offset in (1000..=10_000).step_by(250) {
        let r = bench
            .post(
                None,
                CURSOR_AT,
                json!({ "id": gid(celebrity), "offset": offset }),
            )
            .await;
        if let Some(c) = r["data"]["user"]["followers"]["pageInfo"]["endCursor"].as_str() {
            cursors.push(c.to_owned());
        }
    }
    let deep = {
        let cursors = Arc::new(cursors);
        bench.calls(move |i, _| Call {
            token: None,
            body: json!({ "query": DEEP, "variables": {
                "id": gid(celebrity), "after": cursors[(mix(i) % cursors.len() as u64) as usize] } })
            .to_string(),
        })
    };
    bench
        .phase(
            "deep pages (celebrity, 1,000-10,000 deep, by cursor)",
            &format!("{clients} clients"),
            load::closed_loop(addr, clients, bench.phase, None, deep),
        )
        .await;

    let relationships = {
        let (first, viewers) = (bench.first_id, Arc::new(viewers.clone()));
        bench.calls(move |i, token| {
            let ids: Vec<String> = (0..100)
                .map(|k| gid(first + 1 + (mix(i * 100 + k) % 2000) as i64))
                .collect();
            Call {
                token: Some(token(viewers[(mix(i) % viewers.len() as u64) as usize])),
                body: json!({ "query": RELATIONSHIPS, "variables": { "ids": ids } }).to_string(),
            }
        })
    };
    bench
        .warm_up(addr, clients, Duration::from_secs(5), relationships.clone())
        .await;
    bench
        .phase(
            "relationships, 100 ids",
            &format!("{clients} clients"),
            load::closed_loop(addr, clients, bench.phase, None, relationships),
        )
        .await;

    Reads {
        ordinary_phase,
        cpu_profile,
        heavy_phase,
        known_phase,
        redis_off_phase,
        references,
        gateway,
        celebrity_phase,
    }
}

/// The profile query through a gateway, beside the same query direct.
pub struct GatewayPhases {
    /// All the bench's clients, through the gateway.
    pub loaded: Phase,
    /// The gateway's own CPU ms per request in `loaded`, its workers included.
    pub gateway_cpu_ms: f64,
    /// One client, direct: the latency of Kith alone.
    pub one_direct: Phase,
    /// One client, through the gateway: what the hop itself adds.
    pub one_gateway: Phase,
}

/// The profile query of ordinary users through Hive Gateway in front of
/// Kith (Kith's subgraph schema composed alone): the same calls as the
/// direct phase, with all the clients (Kith's CPU in its column, the
/// gateway's beside), then with one client, direct and through it.
async fn gateway_phase(
    bench: &mut Bench,
    clients: usize,
    reports: &std::path::Path,
    profile: MakeCall,
) -> Option<GatewayPhases> {
    let gateway = reference::start_gateway(bench.addr, reports.join("bench-gateway.log")).await?;
    let probe = profile(0);
    let mut conn = Conn::open(gateway.addr).await.expect("gateway");
    let (_, body) = conn
        .send("POST", "/graphql", probe.token.as_deref(), &probe.body)
        .await
        .expect("the gateway answers");
    let answer: Value = serde_json::from_slice(&body).expect("JSON answer");
    // The viewer's relation is null for an anonymous caller: it proves the
    // token reached Kith through the gateway.
    let edges = &answer["data"]["user"]["followers"]["edges"];
    assert!(
        answer["errors"].is_null()
            && edges.as_array().is_some_and(|e| !e.is_empty())
            && edges[0]["node"]["viewerRelation"].is_object(),
        "the profile query through the gateway failed: {answer}"
    );
    let warm = Duration::from_secs(5);
    load::closed_loop(gateway.addr, clients, warm, None, profile.clone()).await;
    let before = procs::cpu(gateway.pid);
    let loaded = bench
        .phase(
            "profile, ordinary users, through Hive Gateway",
            &format!("{clients} clients"),
            load::closed_loop(gateway.addr, clients, bench.phase, None, profile.clone()),
        )
        .await;
    // `procs::cpu(pid)` counts `pid` and its children (the gateway's
    // workers) in its first group.
    let seconds = procs::cpu(gateway.pid).since(&before).of("kith");
    let gateway_cpu_ms = seconds * 1000.0 / loaded.requests.max(1) as f64;
    let mut one = Vec::new();
    for (name, addr) in [
        ("direct", bench.addr),
        ("through Hive Gateway", gateway.addr),
    ] {
        one.push(
            bench
                .phase(
                    &format!("profile, ordinary users, one client, {name}"),
                    "1 client",
                    load::closed_loop(addr, 1, bench.phase, None, profile.clone()),
                )
                .await,
        );
    }
    let one_gateway = one.pop().expect("two phases");
    let one_direct = one.pop().expect("two phases");
    Some(GatewayPhases {
        loaded,
        gateway_cpu_ms,
        one_direct,
        one_gateway,
    })
}

/// The profile query of ordinary users on a running reference.
async fn reference_phase(
    bench: &mut Bench,
    clients: usize,
    graph: &Graph,
    version: reference::Version,
    ask: reference::Ask,
    reference: &reference::Reference,
) -> Phase {
    let calls: MakeCall = {
        let ordinary = Arc::new(graph.ordinary.clone());
        let viewers = Arc::new(graph.viewers.clone());
        Arc::new(move |i| {
            let target = ordinary[(mix(i) % ordinary.len() as u64) as usize];
            let viewer = viewers[(mix(i ^ 0xABCD) % viewers.len() as u64) as usize];
            Call {
                token: None,
                body: json!({ "query": version.profile(ask), "variables": {
                    "id": target.to_string(), "viewer": viewer.to_string() } })
                .to_string(),
            }
        })
    };
    let probe = calls(0);
    let mut conn = Conn::open(reference.addr).await.expect("reference");
    let (_, body) = conn
        .send("POST", "/graphql", None, &probe.body)
        .await
        .expect("reference answers");
    let answer: Value = serde_json::from_slice(&body).expect("JSON answer");
    assert!(
        answer["errors"].is_null()
            && answer["data"][version.user_field()]["followingsByToUserId"]["edges"]
                .as_array()
                .is_some_and(|e| !e.is_empty()),
        "the {} query failed: {answer}",
        version.name()
    );
    // Warm-up, past PostgreSQL's five runs of a prepared statement.
    load::closed_loop(
        reference.addr,
        clients,
        Duration::from_secs(5),
        None,
        calls.clone(),
    )
    .await;
    let kith_pid = std::mem::replace(&mut bench.kith_pid, reference.pid);
    let phase = bench
        .phase(
            &format!(
                "reference: {}, {}, ordinary users",
                version.name(),
                ask.name()
            ),
            &format!("{clients} clients"),
            load::closed_loop(reference.addr, clients, bench.phase, None, calls),
        )
        .await;
    bench.kith_pid = kith_pid;
    phase
}
