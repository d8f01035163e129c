//! Kith with Redis switched off: what the engine buys without the caches.
//!
//! A second Kith process (`kith serve`, API only) starts against a Redis of
//! its own, which is then stopped: every read goes to PostgreSQL (the
//! breaker skips Redis; user rows are still held in process), as during a
//! Redis outage. It serves the same profile query as the ordinary phase.

use std::time::{Duration, Instant};

use crate::bench::{Bench, Child, Phase, Run};
use crate::load::{self, MakeCall};

/// The profile phase on a Kith whose Redis is gone; `None` (said) when no
/// `redis-server` could be started.
pub async fn phase(run: &Run, bench: &mut Bench, calls: MakeCall) -> Option<Phase> {
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").ok()?;
        probe.local_addr().ok()?.port()
    };
    let redis = std::process::Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(std::process::Stdio::null())
        .spawn();
    let Ok(redis) = redis else {
        eprintln!("redis off: redis-server does not start; the phase is skipped");
        return None;
    };
    let redis = Child(redis);
    let up = Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            up.elapsed() < Duration::from_secs(10),
            "redis-server never listened"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (addr, metrics) = crate::two_ports();
    let kith = crate::spawn_kith(
        run,
        "serve",
        addr,
        metrics,
        &format!("redis://127.0.0.1:{port}"),
        &run.reports.join("bench-kith-redis-off.log"),
    )
    .await;
    drop(redis);
    // Until the breaker opens, reads still try Redis: a warm-up past it.
    load::closed_loop(
        addr,
        run.clients,
        Duration::from_secs(5),
        None,
        calls.clone(),
    )
    .await;
    let main = (bench.addr, bench.metrics, bench.kith_pid);
    (bench.addr, bench.metrics, bench.kith_pid) = (addr, metrics, kith.0.id());
    let phase = bench
        .phase(
            "profile, ordinary users, Redis off (reads from PostgreSQL)",
            &format!("{} clients", run.clients),
            load::closed_loop(addr, run.clients, bench.phase, None, calls),
        )
        .await;
    (bench.addr, bench.metrics, bench.kith_pid) = main;
    Some(phase)
}
