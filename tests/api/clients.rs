//! The frontend clients `docs/clients.md` shows, against a Kith serving
//! HTTP: each pages a list of 40 followers (three in each millisecond, so
//! cursors must break ties) with its own pagination helper, and its
//! merged result must be the list, in order, each follower once.

use kith::model::UserId;
use kith::testing::graph::ids;

use crate::helpers::{TestApp, js_client, replica, seed_followers, spawn_app};

/// A user with 40 followers, and their global ids, newest first.
async fn star(t: &TestApp) -> (UserId, String) {
    let star = t.user("star").await;
    let fans = seed_followers(t, star, "fan", 40, 3).await;
    let expected: Vec<String> = fans
        .iter()
        .map(|f| ids::user_id(f.user).to_string())
        .collect();
    (star, expected.join(","))
}

#[tokio::test]
async fn apollo_client_pages_with_relay_style_pagination() {
    let t = spawn_app().await;
    let (star, expected) = star(&t).await;
    let late = t.user("late").await;
    // The pipeline runs, so the late follow shows in the list while it is paged.
    let r = replica(&t, t.app.clone(), true).await;
    let out = js_client(
        "apollo.mjs",
        "@apollo/client",
        vec![
            format!("http://127.0.0.1:{}/graphql", r.port),
            ids::user_id(star).to_string(),
            expected,
            t.token(late),
        ],
    )
    .await;
    assert!(out.contains("forward: 6 pages, 40 followers"), "{out}");
    assert!(out.contains("backward: 7 pages, 41 followers"), "{out}");
}

#[tokio::test]
async fn urql_pages_with_graphcache_relay_pagination() {
    let t = spawn_app().await;
    let (star, expected) = star(&t).await;
    let r = replica(&t, t.app.clone(), false).await;
    let out = js_client(
        "urql.mjs",
        "@urql/exchange-graphcache",
        vec![
            format!("http://127.0.0.1:{}/graphql", r.port),
            ids::user_id(star).to_string(),
            expected,
        ],
    )
    .await;
    assert!(out.contains("6 pages, 40 followers"), "{out}");
}

/// relay-compiler accepts the schema for a `@refetchable` fragment with a
/// `@connection` (so `User` is a `Node` that `node(id:)` finds, and the
/// connection follows Relay's spec), and relay-runtime pages it with the
/// generated pagination query as `usePaginationFragment` does.
#[tokio::test]
async fn relay_pages_a_refetchable_connection() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/http-audit");
    let artifacts = dir.join("relay/__generated__");
    std::fs::create_dir_all(&artifacts).unwrap();
    let compiled = tokio::task::spawn_blocking({
        let dir = dir.clone();
        move || {
            std::process::Command::new("node")
                .arg("node_modules/relay-compiler/cli.js")
                .arg("relay.config.json")
                .current_dir(&dir)
                .output()
                .expect("node runs (scripts/stack tools installs it)")
        }
    })
    .await
    .unwrap();
    assert!(
        compiled.status.success(),
        "relay-compiler refused: {}{}",
        String::from_utf8_lossy(&compiled.stdout),
        String::from_utf8_lossy(&compiled.stderr)
    );

    let t = spawn_app().await;
    let (star, expected) = star(&t).await;
    let r = replica(&t, t.app.clone(), false).await;
    let out = js_client(
        "relay.mjs",
        "relay-runtime",
        vec![
            artifacts.display().to_string(),
            format!("http://127.0.0.1:{}/graphql", r.port),
            ids::user_id(star).to_string(),
            expected,
        ],
    )
    .await;
    assert!(out.contains("6 pages, 40 followers"), "{out}");
}

/// Kith as a subgraph behind Hive Gateway (`tests/http-audit/gateway.mjs`,
/// as docs/clients.md sets it up): composed offline with a posts subgraph
/// from `schema.subgraph.graphql`, one query spans both services, a Relay
/// walk through the gateway sees each follower once, and a follow through
/// the gateway reaches a `userCountersChanged` subscription through it.
/// Writes what the gateway adds to a profile query to
/// `target/gateway-overhead.md`.
#[tokio::test]
async fn a_federation_gateway_serves_kith_with_another_subgraph() {
    let t = spawn_app().await;
    let (star, expected) = star(&t).await;
    let late = t.user("late").await;
    // The pipeline runs: the follow must reach the subscription.
    let r = replica(&t, t.app.clone(), true).await;
    let target = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target dir");
    std::fs::create_dir_all(target).unwrap();
    let report = target.join("gateway-overhead.md");
    let out = js_client(
        "gateway.mjs",
        "@graphql-hive/gateway-runtime",
        vec![
            format!("http://127.0.0.1:{}/graphql", r.port),
            ids::user_id(star).to_string(),
            expected,
            t.token(late),
            report.display().to_string(),
        ],
    )
    .await;
    assert!(
        out.contains("across services: \"Hello from the star\" by star"),
        "{out}"
    );
    assert!(out.contains("walk: 6 pages, 40 followers"), "{out}");
    assert!(out.contains("live: 40 -> 41 followers"), "{out}");
}
