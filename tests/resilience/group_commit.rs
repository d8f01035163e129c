//! A `kith serve` killed with SIGKILL while group-commit batches are in
//! flight: every follow it acknowledged is in the truth with its event and
//! its counter; no change is half-written; a follow it never answered is
//! whole or absent, never a part of it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
use diesel_async::RunQueryDsl;
use serde_json::json;
use tokio::sync::Mutex;

use crate::helpers::{KithProcess, spawn_app_with};
use crate::http_client::{free_port, get, graphql};

const USERS: usize = 48;
const WRITERS: usize = 24;
const FOLLOW: &str = "mutation($id: ID!) { follow(input: {userId: $id}) { changed } }";

#[derive(QueryableByName)]
struct Edge {
    #[diesel(sql_type = BigInt)]
    from_user_id: i64,
    #[diesel(sql_type = BigInt)]
    to_user_id: i64,
    #[diesel(sql_type = BigInt)]
    version: i64,
}

#[derive(QueryableByName)]
struct Event {
    #[diesel(sql_type = Text)]
    event_type: String,
    #[diesel(sql_type = BigInt)]
    from_id: i64,
    #[diesel(sql_type = BigInt)]
    to_id: i64,
    #[diesel(sql_type = BigInt)]
    version: i64,
    #[diesel(sql_type = Text)]
    tx: String,
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    user_id: i64,
    #[diesel(sql_type = BigInt)]
    followings: i64,
}

#[tokio::test]
async fn a_kill_mid_batch_keeps_every_acknowledged_change_whole() {
    let t = spawn_app_with(|c| {
        c.writes.rate_limit_capacity = 1_000_000;
        c.writes.rate_limit_per_sec = 100_000.0;
    })
    .await;
    let mut users = Vec::with_capacity(USERS);
    for i in 0..USERS {
        users.push(t.user(&format!("gc{i}")).await);
    }
    let ids: Arc<Vec<String>> = Arc::new(
        users
            .iter()
            .map(|u| kith::testing::graph::ids::user_id(*u).to_string())
            .collect(),
    );
    let tokens: Arc<Vec<String>> = Arc::new(users.iter().map(|u| t.token(*u)).collect());
    // Each commit holds its batch a little (per edge), so that batches are
    // in flight, locks held, when the process dies.
    t.delay_edge_commits(0.01).await;

    let port = free_port();
    let mut kith = KithProcess::start(
        &t,
        "serve",
        &[
            ("KITH_HTTP_ADDR", format!("127.0.0.1:{port}")),
            ("KITH_RATE_LIMIT_CAPACITY", "1000000".into()),
            ("KITH_RATE_LIMIT_PER_SEC", "100000".into()),
        ],
    );
    let up = Instant::now();
    while get(port, "/healthz").await.is_err() {
        assert!(
            up.elapsed() < Duration::from_secs(60),
            "kith did not start: {}",
            kith.log.display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Every writer follows distinct pairs until the process is gone.
    let acknowledged = Arc::new(Mutex::new(BTreeSet::<(i64, i64)>::new()));
    let unanswered = Arc::new(Mutex::new(0usize));
    let mut load = Vec::new();
    for w in 0..WRITERS {
        let (ids, tokens) = (ids.clone(), tokens.clone());
        let (acknowledged, unanswered) = (acknowledged.clone(), unanswered.clone());
        let users = users.clone();
        load.push(tokio::spawn(async move {
            for n in 0.. {
                let p = n * WRITERS + w;
                let actor = p % USERS;
                let target = (actor + 1 + p / USERS) % USERS;
                if p / USERS >= USERS - 1 {
                    break;
                }
                match graphql(port, &tokens[actor], FOLLOW, json!({ "id": ids[target] })).await {
                    Ok(answer) if answer["data"]["follow"]["changed"] == true => {
                        acknowledged
                            .lock()
                            .await
                            .insert((users[actor].get(), users[target].get()));
                    }
                    Ok(answer) if answer["errors"].is_array() => {
                        *unanswered.lock().await += 1;
                    }
                    Ok(answer) => panic!("a follow of a new pair changed nothing: {answer}"),
                    // The process died under this request.
                    Err(_) => {
                        *unanswered.lock().await += 1;
                        break;
                    }
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    kith.kill();
    for writer in load {
        writer.await.unwrap();
    }
    let acknowledged = acknowledged.lock().await.clone();
    let unanswered = *unanswered.lock().await;

    // One snapshot for the three reads: a backend of the killed process may
    // still be running a batch it had been sent whole, and commit it
    // between two reads (edges, events and counters commit together).
    let mut conn = t.conn().await;
    diesel_async::SimpleAsyncConnection::batch_execute(
        &mut *conn,
        "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
    )
    .await
    .unwrap();
    let edges: Vec<Edge> =
        diesel::sql_query("SELECT from_user_id, to_user_id, version FROM following WHERE active")
            .load(&mut *conn)
            .await
            .unwrap();
    let events: Vec<Event> = diesel::sql_query(
        "SELECT event_type, (payload->>'from')::BIGINT AS from_id,
                (payload->>'to')::BIGINT AS to_id, (payload->>'version')::BIGINT AS version,
                xmin::text AS tx
           FROM outbox",
    )
    .load(&mut *conn)
    .await
    .unwrap();
    let counts: Vec<Count> = diesel::sql_query(
        "SELECT s.user_id, s.followings FROM user_stats s
          WHERE s.user_id IN (SELECT id FROM users WHERE handle LIKE 'gc%')",
    )
    .load(&mut *conn)
    .await
    .unwrap();
    diesel_async::SimpleAsyncConnection::batch_execute(&mut *conn, "COMMIT")
        .await
        .unwrap();

    let truth: BTreeSet<(i64, i64)> = edges
        .iter()
        .map(|e| (e.from_user_id, e.to_user_id))
        .collect();
    let lost: Vec<_> = acknowledged.difference(&truth).collect();
    assert!(
        lost.is_empty(),
        "acknowledged follows not in the truth: {lost:?}"
    );
    // Whole or absent: each edge has exactly its one event, each event its
    // edge, and each actor's counter counts its edges.
    let mut by_edge: BTreeMap<(i64, i64), Vec<&Event>> = BTreeMap::new();
    for e in &events {
        assert_eq!(e.event_type, "FollowCreated");
        by_edge.entry((e.from_id, e.to_id)).or_default().push(e);
    }
    for edge in &edges {
        let found = by_edge.get(&(edge.from_user_id, edge.to_user_id));
        assert!(
            found.is_some_and(|f| f.len() == 1 && f[0].version == edge.version),
            "edge {}→{} without its one event",
            edge.from_user_id,
            edge.to_user_id
        );
    }
    assert_eq!(by_edge.len(), edges.len(), "events without their edge");
    let mut followings: BTreeMap<i64, i64> = BTreeMap::new();
    for edge in &edges {
        *followings.entry(edge.from_user_id).or_default() += 1;
    }
    for c in &counts {
        assert_eq!(
            c.followings,
            followings.get(&c.user_id).copied().unwrap_or(0),
            "user {}'s followings against its edges",
            c.user_id
        );
    }
    // The kill landed on a busy process, and changes were grouped.
    let transactions: BTreeSet<&str> = events.iter().map(|e| e.tx.as_str()).collect();
    eprintln!(
        "{} acknowledged, {} unanswered, {} committed in {} transactions",
        acknowledged.len(),
        unanswered,
        edges.len(),
        transactions.len()
    );
    assert!(unanswered > 0, "the kill cut no request short");
    assert!(
        acknowledged.len() > WRITERS,
        "too little was written before the kill"
    );
    assert!(
        transactions.len() < events.len(),
        "no batch held more than one change"
    );
}
