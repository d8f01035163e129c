//! Subscriptions over a real WebSocket (`graphql-transport-ws`, as
//! `graphql-ws` and Apollo Client speak it): counters and follower events
//! from a follow made on another replica, the connection's authentication
//! and limits, and coalesced counter updates.

use std::time::Duration;

use kith::model::UserId;
use serde_json::{Value, json};

use crate::helpers::{
    KithProcess, LiveClient, auth, eventually, gid, replica, spawn_app, spawn_app_with,
};
use crate::http_client;

const COUNTERS: &str = "subscription($id: ID!) { userCountersChanged(userId: $id) {
    userId counters { followers followings } } }";
const EVENTS: &str = "subscription($id: ID!) { followerEvents(userId: $id) {
    type userId followerId version follower { handle counters { followings } } } }";

/// Waits until the `kith` process on `port` answers and receives live updates.
async fn wait_listening(port: u16) {
    eventually("the replica to listen for live updates", 60, || async {
        let body = http_client::get(port, "/readyz").await.ok()?;
        let body: Value = serde_json::from_slice(&body).ok()?;
        (body["live"] == "listening").then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_subscriber_on_one_replica_sees_a_follow_made_on_another() {
    let t = spawn_app().await;
    let (star, fan, watcher) = (
        t.user("star").await,
        t.user("fan").await,
        t.user("watcher").await,
    );
    let (port_a, port_b) = (http_client::free_port(), http_client::free_port());
    // Replica A serves only; replica B serves, relays and projects.
    let _a = KithProcess::start(
        &t,
        "serve",
        &[("KITH_HTTP_ADDR", format!("127.0.0.1:{port_a}"))],
    );
    let _b = KithProcess::start(
        &t,
        "run",
        &[("KITH_HTTP_ADDR", format!("127.0.0.1:{port_b}"))],
    );
    wait_listening(port_a).await;
    wait_listening(port_b).await;

    // Follower events are the account owner's: the star watches its own.
    let mut client = LiveClient::connect(port_a, auth(&t, star)).await.unwrap();
    // Events first: by the time the counters answer, both have started.
    client
        .subscribe("e", EVENTS, json!({ "id": gid(star) }))
        .await;
    client
        .subscribe("c", COUNTERS, json!({ "id": gid(star) }))
        .await;
    let first = client.next_of("c").await;
    assert_eq!(
        first["userCountersChanged"],
        json!({ "userId": gid(star), "counters": { "followers": 0, "followings": 0 } }),
        "the current counters come first"
    );

    let follow = "mutation($id: ID!) { follow(input: {userId: $id}) { changed } }";
    let r = http_client::graphql(port_b, &t.token(fan), follow, json!({ "id": gid(star) }))
        .await
        .unwrap();
    assert_eq!(r["data"]["follow"]["changed"], true, "{r}");

    let event = client.next_of("e").await;
    assert_eq!(
        event["followerEvents"],
        json!({
            "type": "FOLLOWED", "userId": gid(star), "followerId": gid(fan), "version": 1,
            "follower": { "handle": "fan", "counters": { "followings": 1 } },
        })
    );
    let counters = client.next_of("c").await;
    assert_eq!(
        counters["userCountersChanged"]["counters"]["followers"], 1,
        "{counters}"
    );
    // A subscriber that re-queries replica A on the event sees the follow.
    let profile = "query($id: ID!) { user(id: $id) { counters { followers }
        followers(first: 5) { edges { node { handle } } } } }";
    let r = http_client::graphql(
        port_a,
        &t.token(watcher),
        profile,
        json!({ "id": gid(star) }),
    )
    .await
    .unwrap();
    assert_eq!(r["data"]["user"]["counters"]["followers"], 1, "{r}");
    assert_eq!(
        r["data"]["user"]["followers"]["edges"][0]["node"]["handle"],
        "fan"
    );

    let unfollow = "mutation($id: ID!) { unfollow(input: {userId: $id}) { changed } }";
    http_client::graphql(port_b, &t.token(fan), unfollow, json!({ "id": gid(star) }))
        .await
        .unwrap();
    let event = client.next_of("e").await;
    assert_eq!(event["followerEvents"]["type"], "UNFOLLOWED");
    assert_eq!(event["followerEvents"]["version"], 2);
    let counters = client.next_of("c").await;
    assert_eq!(counters["userCountersChanged"]["counters"]["followers"], 0);

    // Completing one subscription leaves the other running.
    client.send(json!({ "id": "c", "type": "complete" })).await;
    http_client::graphql(port_b, &t.token(fan), follow, json!({ "id": gid(star) }))
        .await
        .unwrap();
    let event = client.next_of("e").await;
    assert_eq!(event["followerEvents"]["version"], 3);
}

#[tokio::test]
async fn connections_need_a_token_and_stay_within_their_limits() {
    let t = spawn_app_with(|c| {
        c.live.max_connections_per_user = 2;
        c.live.max_subscriptions_per_connection = 2;
        c.live.ws_init_timeout_ms = 300;
        c.limits.max_body_bytes = 4096;
    })
    .await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    let r = replica(&t, t.app.clone(), false).await;

    for payload in [
        json!({}),
        json!({ "authorization": "Bearer not-a-token" }),
        json!({ "authorization": t.token(alice) }),
    ] {
        let refused = LiveClient::connect(r.port, payload.clone()).await;
        let reason = refused
            .err()
            .unwrap_or_else(|| panic!("{payload} was accepted"));
        assert!(reason.starts_with("closed"), "{payload}: {reason}");
    }

    let mut first = LiveClient::connect(r.port, auth(&t, alice)).await.unwrap();
    let second = LiveClient::connect(r.port, json!({ "token": t.token(alice) }))
        .await
        .unwrap();
    let third = LiveClient::connect(r.port, auth(&t, alice)).await;
    assert!(
        third
            .as_ref()
            .err()
            .is_some_and(|r| r.contains("live connections")),
        "a third connection of one user is refused: {:?}",
        third.err()
    );
    // Another user is not affected; a closed connection frees its place.
    LiveClient::connect(r.port, auth(&t, bob)).await.unwrap();
    drop(second);
    eventually("the closed connection's place to be freed", 10, || async {
        LiveClient::connect(r.port, auth(&t, alice)).await.ok()
    })
    .await;

    for id in ["1", "2", "3"] {
        first
            .subscribe(id, COUNTERS, json!({ "id": gid(bob) }))
            .await;
    }
    // The three start concurrently: whichever comes last is refused.
    let mut firsts: std::collections::BTreeMap<String, Value> = Default::default();
    while firsts.len() < 3 {
        let message = first.next().await.unwrap();
        let id = message["id"].as_str().unwrap_or_default().to_owned();
        firsts.entry(id).or_insert(message);
    }
    let refused: Vec<&Value> = firsts
        .values()
        .filter(|m| m["type"] == "error" || !m["payload"]["errors"].is_null())
        .collect();
    assert_eq!(refused.len(), 1, "{firsts:?}");
    let errors = if refused[0]["type"] == "error" {
        &refused[0]["payload"]
    } else {
        &refused[0]["payload"]["errors"]
    };
    assert_eq!(errors[0]["extensions"]["code"], "INVALID_INPUT", "{errors}");
    assert!(
        errors[0]["message"]
            .as_str()
            .unwrap()
            .contains("subscriptions per connection")
    );

    // Unknown users are NOT_FOUND; someone else's follower events FORBIDDEN.
    let nobody = gid(UserId::new(987_654).unwrap());
    first
        .subscribe("5", COUNTERS, json!({ "id": nobody }))
        .await;
    let refused = first.errors_of("5").await;
    assert_eq!(refused[0]["extensions"]["code"], "NOT_FOUND", "{refused}");
    first
        .subscribe("7", EVENTS, json!({ "id": gid(bob) }))
        .await;
    let refused = first.errors_of("7").await;
    assert_eq!(refused[0]["extensions"]["code"], "FORBIDDEN", "{refused}");

    // A query over the socket runs as the connection's viewer, as over HTTP.
    first
        .subscribe("6", "query { viewer { handle } }", json!({}))
        .await;
    assert_eq!(
        first.next_of("6").await,
        json!({ "viewer": { "handle": "alice" } })
    );

    // A message over KITH_MAX_BODY_BYTES closes the connection.
    let mut big = LiveClient::connect(r.port, auth(&t, bob)).await.unwrap();
    big.subscribe(
        "1",
        &format!("query {{ viewer {{ handle }} }} #{}", "x".repeat(8192)),
        json!({}),
    )
    .await;
    assert!(big.next().await.is_err(), "an oversized message is refused");

    // A connection that does not authenticate in time is dropped.
    let mut silent = LiveClient::open(r.port).await.unwrap();
    let started = std::time::Instant::now();
    assert!(silent.next().await.is_err());
    assert!(started.elapsed() < Duration::from_secs(5));

    // Malformed ids are coded errors; subscriptions are not served over HTTP.
    first
        .subscribe("4", COUNTERS, json!({ "id": "nope" }))
        .await;
    let refused = first.errors_of("4").await;
    assert_eq!(
        refused[0]["extensions"]["code"], "INVALID_INPUT",
        "{refused}"
    );
    let over_http = t
        .execute(
            kith::testing::auth::Viewer::User(alice),
            COUNTERS,
            json!({ "id": gid(bob) }),
        )
        .await;
    assert_eq!(
        crate::helpers::error_code(&over_http),
        Some("INVALID_INPUT"),
        "{over_http}"
    );
}

#[tokio::test]
async fn counter_updates_are_coalesced() {
    let t = spawn_app().await;
    let star = t.user("star").await;
    let mut fans = Vec::new();
    for i in 0..30 {
        fans.push(t.user(&format!("fan{i}")).await);
    }
    let r = replica(&t, t.app.clone(), true).await;
    let mut client = LiveClient::connect(r.port, auth(&t, star)).await.unwrap();
    client
        .subscribe("c", COUNTERS, json!({ "id": gid(star) }))
        .await;
    client.next_of("c").await;
    let started = tokio::time::Instant::now();
    for fan in &fans {
        t.follow(*fan, star).await;
    }
    let mut updates = 0;
    loop {
        let payload = client.next_of("c").await;
        updates += 1;
        if payload["userCountersChanged"]["counters"]["followers"] == 30 {
            break;
        }
    }
    let elapsed = started.elapsed();
    // At most one update per 250 ms interval, plus the first.
    let bound = elapsed.as_millis() / 250 + 2;
    eprintln!("{updates} updates for 30 follows in {elapsed:?}");
    assert!(
        updates as u128 <= bound && updates < 30,
        "{updates} updates in {elapsed:?}"
    );
}

/// The `graphql-ws` npm client — what Apollo Client and most frontends
/// subscribe with — against a replica with its pipeline (`tests/http-audit/live.mjs`).
#[tokio::test]
async fn the_graphql_ws_client_sees_a_follow_live() {
    let t = spawn_app().await;
    let (star, fan) = (t.user("star").await, t.user("fan").await);
    let r = replica(&t, t.app.clone(), true).await;
    crate::helpers::js_client(
        "live.mjs",
        "graphql-ws",
        vec![
            format!("ws://127.0.0.1:{}/graphql", r.port),
            format!("http://127.0.0.1:{}/graphql", r.port),
            // Follower events are the account owner's: the star watches.
            t.token(star),
            t.token(fan),
            gid(star),
        ],
    )
    .await;
}

/// Waits for the server to close `client`, answering pings; the close frame.
async fn closed(client: &mut LiveClient) -> String {
    loop {
        match client.next().await {
            Ok(message) => client.held.push(message),
            Err(reason) => return reason,
        }
    }
}

#[tokio::test]
async fn a_connection_ends_when_its_token_does() {
    let t = spawn_app_with(|c| c.auth.jwt_leeway_secs = 0).await;
    let alice = t.user("alice").await;
    let r = replica(&t, t.app.clone(), false).await;
    let now = chrono::Utc::now().timestamp();
    let token = t.app.auth.tokens.issue(alice, now, 3);
    let payload = json!({ "authorization": format!("Bearer {token}") });
    let mut client = LiveClient::connect(r.port, payload).await.unwrap();
    client
        .subscribe("1", "query { viewer { handle } }", json!({}))
        .await;
    assert_eq!(
        client.next_of("1").await,
        json!({ "viewer": { "handle": "alice" } })
    );
    client
        .subscribe("2", COUNTERS, json!({ "id": gid(alice) }))
        .await;
    client.next_of("2").await;
    let started = std::time::Instant::now();
    let reason = closed(&mut client).await;
    assert_eq!(reason, "closed 4403: Forbidden: token expired");
    let expired_after = chrono::Utc::now().timestamp() - (now + 3);
    assert!(
        (0..=3).contains(&expired_after),
        "closed {expired_after} s past exp (after {:?})",
        started.elapsed()
    );
    // A token already past its `exp` is refused at `connection_init`.
    let stale = t.app.auth.tokens.issue(alice, now - 10, 5);
    let refused = LiveClient::connect(
        r.port,
        json!({ "authorization": format!("Bearer {stale}") }),
    )
    .await;
    assert!(refused.is_err(), "an expired token was admitted");
}

#[tokio::test]
async fn a_suspended_account_loses_its_connections_within_seconds() {
    let t = spawn_app().await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    // A real `kith serve`: it learns of the suspension, made by this
    // process, the way every replica does (PostgreSQL's notice).
    let port = http_client::free_port();
    let _server = KithProcess::start(
        &t,
        "serve",
        &[("KITH_HTTP_ADDR", format!("127.0.0.1:{port}"))],
    );
    wait_listening(port).await;
    let mut client = LiveClient::connect(port, auth(&t, alice)).await.unwrap();
    client
        .subscribe("c", COUNTERS, json!({ "id": gid(bob) }))
        .await;
    client.next_of("c").await;
    let mut other = LiveClient::connect(port, auth(&t, bob)).await.unwrap();
    let started = std::time::Instant::now();
    kith::testing::write::lifecycle::set_status(&t.app, alice, kith::model::UserStatus::Suspended)
        .await
        .unwrap();
    let reason = closed(&mut client).await;
    assert_eq!(reason, "closed 4403: Forbidden: account not active");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "closed after {:?}",
        started.elapsed()
    );
    // Nobody else's connection is touched.
    other
        .subscribe("q", "query { viewer { handle } }", json!({}))
        .await;
    assert_eq!(
        other.next_of("q").await,
        json!({ "viewer": { "handle": "bob" } })
    );
    // And the suspended account cannot connect again.
    assert!(LiveClient::connect(port, auth(&t, alice)).await.is_err());
}

#[tokio::test]
async fn one_socket_cannot_take_every_postgres_connection() {
    let t = spawn_app_with(|c| {
        c.database.pool_size = 6;
        c.live.max_operations_per_connection = 2;
        // What is tested is that no query fails for want of a connection
        // (`UNAVAILABLE`), not how fast a deep page is: through the test
        // pooler's smaller server pool, on a loaded machine, one can take
        // longer than the default deadline and be answered `TIMEOUT`.
        c.limits.request_timeout_ms = 20_000;
    })
    .await;
    let (star, reader) = (t.user("star").await, t.user("reader").await);
    crate::helpers::seed_followers(&t, star, "fan", 20_000, 1).await;
    // This schema's tables only: a whole-database ANALYZE walks every test's.
    t.sql("ANALYZE following, follower, users, user_stats")
        .await;
    let r = replica(&t, t.app.clone(), false).await;
    let mut attacker = LiveClient::connect(r.port, auth(&t, reader)).await.unwrap();
    // 3,000 queries that each page deep into a 20,000-edge list in
    // PostgreSQL, sent at once on one socket.
    let deep = "query($id: ID!) { user(id: $id) {
        a: followers(first: 1, offset: 9000) { edges { cursor } }
        b: following(first: 1, offset: 9000) { edges { cursor } } } }";
    for i in 0..3000 {
        attacker
            .subscribe(&format!("d{i}"), deep, json!({ "id": gid(star) }))
            .await;
    }
    // Meanwhile another client's profile queries over HTTP all answer.
    let probe = "query($id: ID!) { user(id: $id) { handle counters { followers }
        followers(first: 20) { edges { node { handle } } } } }";
    let token = t.token(reader);
    let mut slowest = Duration::ZERO;
    for _ in 0..40 {
        let started = std::time::Instant::now();
        let answer = http_client::graphql(r.port, &token, probe, json!({ "id": gid(star) }))
            .await
            .unwrap();
        slowest = slowest.max(started.elapsed());
        assert!(
            answer["errors"].is_null(),
            "the probe was refused: {answer}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    // The attacker's queries ran a few at a time: each ran, or was told to
    // slow down once too many waited — none failed for want of a connection.
    let (mut ran, mut refused) = (0, 0);
    while ran + refused < 3000 {
        let message = attacker.next().await.unwrap();
        match message["type"].as_str() {
            Some("next") => {
                let code = &message["payload"]["errors"][0]["extensions"]["code"];
                match code.as_str() {
                    None => ran += 1,
                    Some("RATE_LIMITED") => refused += 1,
                    Some(other) => panic!("an attacker's query answered {other}: {message}"),
                }
            }
            Some("complete") => {}
            _ => panic!("{message}"),
        }
    }
    eprintln!("attacker: {ran} ran, {refused} refused; slowest probe {slowest:?}");
    assert!(ran >= 2 && refused > 0, "{ran} ran, {refused} refused");
}

#[tokio::test]
async fn a_subscriptions_loaders_remember_no_one() {
    let t = spawn_app().await;
    let mut users = Vec::new();
    for i in 0..50 {
        users.push(t.user(&format!("u{i}")).await);
    }
    let live = kith::testing::graph::loaders::Loaders::uncached(&t.app);
    let request = kith::testing::graph::loaders::Loaders::new(&t.app);
    for _ in 0..3 {
        assert_eq!(live.users(&users).await.unwrap().len(), 50);
        assert_eq!(request.users(&users).await.unwrap().len(), 50);
    }
    assert_eq!(live.remembered(), 0, "a subscription lives long");
    assert_eq!(request.remembered(), 50, "a request remembers what it saw");
}
