//! The read phases: the profile query of ordinary users (and the same on
//! the reference), of a celebrity, deep pages and `relationships`.

use std::sync::Arc;
use std::time::Duration;

use diesel::QueryableByName;
use diesel_async::RunQueryDsl;
use serde_json::{Value, json};

use crate::bench::{Bench, CURSOR_AT, DEEP, Graph, PROFILE, Phase, RELATIONSHIPS, Run, gid, mix};
use crate::load::{self, Call, Conn, MakeCall};
use crate::{procs, reference};

/// What the report needs of the read phases (all are in `bench.report`).
pub struct Reads {
    pub ordinary_phase: Phase,
    pub cpu_profile: Vec<(String, f64)>,
    pub reference_phase: Option<Phase>,
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
    load::closed_loop(addr, clients, Duration::from_secs(5), None, profile.clone()).await;
    let perf = std::env::var("KITH_BENCH_PERF")
        .is_ok_and(|v| v == "1")
        .then(|| procs::perf_start(bench.kith_pid, &reports.join("bench-perf.data")))
        .flatten();
    let ordinary_phase = bench
        .phase(
            "profile, ordinary users",
            &format!("{clients} clients"),
            load::closed_loop(addr, clients, bench.phase, None, profile),
        )
        .await;
    let cpu_profile = perf.map(procs::PerfRecord::finish).unwrap_or_default();

    // The reference: PostGraphile over the same tables, the same profile
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
    let reference_phase = match reference::start(
        base_url,
        schema,
        &functions,
        reports.join("bench-reference.log"),
    )
    .await
    {
        None => None,
        Some(reference) => {
            let calls: MakeCall = {
                let (ordinary, viewers) = (Arc::new(ordinary.clone()), Arc::new(viewers.clone()));
                Arc::new(move |i| {
                    let target = ordinary[(mix(i) % ordinary.len() as u64) as usize];
                    let viewer = viewers[(mix(i ^ 0xABCD) % viewers.len() as u64) as usize];
                    Call {
                        token: None,
                        body: json!({ "query": reference::PROFILE, "variables": {
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
                    && answer["data"]["userById"]["followingsByToUserId"]["edges"]
                        .as_array()
                        .is_some_and(|e| !e.is_empty()),
                "the reference query failed: {answer}"
            );
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
                    "reference: PostGraphile 4.14, the same profile query, ordinary users",
                    &format!("{clients} clients"),
                    load::closed_loop(reference.addr, clients, bench.phase, None, calls),
                )
                .await;
            bench.kith_pid = kith_pid;
            Some(phase)
        }
    };

    let celebrity_profile = {
        let viewers = Arc::new(viewers.clone());
        bench.calls(move |i, token| Call {
            token: Some(token(viewers[(mix(i) % viewers.len() as u64) as usize])),
            body: json!({ "query": PROFILE, "variables": { "id": gid(celebrity) } }).to_string(),
        })
    };
    load::closed_loop(
        addr,
        clients,
        Duration::from_secs(3),
        None,
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
    load::closed_loop(
        addr,
        clients,
        Duration::from_secs(5),
        None,
        relationships.clone(),
    )
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
        reference_phase,
        celebrity_phase,
    }
}
