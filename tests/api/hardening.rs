//! Every request has a bounded cost: hostile shapes are refused before any
//! PostgreSQL statement, requests past their deadline answer `TIMEOUT` and
//! give their connections back, root lookups are batched, and reads start
//! no more cache fills than allowed.

use std::time::Duration;

use kith::testing::auth::Viewer;
use kith::testing::paging::ListKey;
use kith::testing::paging::PageRequest;
use kith::testing::read::pages::{self, Source};
use serde_json::json;

use crate::helpers::{
    TestApp, assert_ok, error_code, eventually, seed_followers, spawn_app, spawn_app_with,
};

async fn celebrity(t: &TestApp, followers: i64) -> String {
    let star = t.user("star").await;
    seed_followers(t, star, "fan", followers, 1).await;
    kith::testing::graph::ids::user_id(star).to_string()
}

/// Runs `query` anonymously; returns the response and the PostgreSQL
/// statements it cost.
async fn statements_of(
    t: &TestApp,
    query: &str,
    variables: serde_json::Value,
) -> (serde_json::Value, u64) {
    let (before, _) = t.app.round_trips.snapshot();
    let r = t.execute(Viewer::Anonymous, query, variables).await;
    let (after, _) = t.app.round_trips.snapshot();
    (r, after - before)
}

#[tokio::test]
async fn hostile_shapes_are_refused_before_any_statement() {
    let t = spawn_app().await;
    let id = celebrity(&t, 200).await;
    let many = |n: usize, field: &str| -> String {
        let fields: String = (0..n).map(|i| format!("f{i}: {field} ")).collect();
        format!("query($id: ID!) {{ user(id: $id) {{ {fields} }} }}")
    };
    let roots = |n: usize| -> String {
        let fields: String = (0..n)
            .map(|i| format!("u{i}: user(id: $id) {{ handle }} "))
            .collect();
        format!("query($id: ID!) {{ {fields} }}")
    };
    let hostile = [
        // The reported one: 2,000 deep offsets in one request.
        many(2000, "followers(first: 1, offset: 150000) { totalCount }"),
        // One offset past the bound, literal or in a variable.
        "query($id: ID!) { user(id: $id) { followers(first: 1, offset: 10001) { totalCount } } }"
            .to_owned(),
        // Offsets within the bound, but so many that the rows they skip add up.
        many(25, "followers(first: 1, offset: 10000) { totalCount }"),
        // Aliases and root fields past their limits.
        many(51, "handle"),
        roots(21),
    ];
    for query in &hostile {
        let (r, statements) = statements_of(&t, query, json!({ "id": id })).await;
        assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{r}");
        assert_eq!(statements, 0, "statements ran for a refused request: {r}");
    }
    // Offsets in variables, sent or defaulted. The first text is accepted
    // (and its parsed document cached) before it comes with a deep offset.
    let (r, _) = statements_of(
        &t,
        "query($id: ID!, $o: Int) { user(id: $id) { followers(first: 1, offset: $o) { totalCount } } }",
        json!({ "id": id, "o": 5 }),
    )
    .await;
    assert_ok(&r);
    for (query, variables) in [
        (
            "query($id: ID!, $o: Int) { user(id: $id) { followers(first: 1, offset: $o) { totalCount } } }",
            json!({ "id": id, "o": 50_000 }),
        ),
        (
            "query($id: ID!, $o: Int = 99999) { user(id: $id) { followers(first: 1, offset: $o) { totalCount } } }",
            json!({ "id": id }),
        ),
    ] {
        let (r, statements) = statements_of(&t, query, variables).await;
        assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{r}");
        assert_eq!(statements, 0);
    }
    let (r, _) = statements_of(
        &t,
        "query($id: ID!, $o: Int) { user(id: $id) { followers(first: 1, offset: $o) { totalCount } } }",
        json!({ "id": id, "o": 50_000 }),
    )
    .await;
    let message = r["errors"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("10000") && message.contains("after"),
        "{message}"
    );

    // What the limits allow still works.
    let (r, _) = statements_of(&t, &many(50, "handle"), json!({ "id": id })).await;
    assert_ok(&r);
    let (r, _) = statements_of(
        &t,
        "query($id: ID!) { user(id: $id) { followers(first: 2, offset: 150) { edges { node { handle } } } } }",
        json!({ "id": id }),
    )
    .await;
    assert_ok(&r);
    assert_eq!(
        r["data"]["user"]["followers"]["edges"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[tokio::test]
async fn a_fragment_bomb_is_refused_before_it_is_walked() {
    let t = spawn_app().await;
    let alice = t.user("alice").await;
    // Six levels of thirty spreads each: a few kilobytes that expand to
    // 30^6 fields — minutes of walking for a depth or complexity check.
    let mut query = String::from("query($id: ID!) { user(id: $id) { ...F1 } }\n");
    for level in 1..=6 {
        let body = if level == 6 {
            "handle".to_owned()
        } else {
            format!("...F{} ", level + 1).repeat(30)
        };
        query.push_str(&format!("fragment F{level} on User {{ {body} }}\n"));
    }
    assert!(query.len() < 8 * 1024);
    let id = kith::testing::graph::ids::user_id(alice).to_string();
    let (r, statements) = statements_of(&t, &query, json!({ "id": id })).await;
    assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{r}");
    assert!(
        r["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("fragments are spread"),
        "{r}"
    );
    assert_eq!(statements, 0);
}

#[tokio::test]
async fn user_by_handle_is_batched() {
    let t = spawn_app().await;
    let mut fields = String::new();
    for i in 0..10 {
        t.user(&format!("person{i}")).await;
        fields.push_str(&format!(
            "p{i}: userByHandle(handle: \"person{i}\") {{ handle }} "
        ));
    }
    fields.push_str("nobody: userByHandle(handle: \"nobody\") { handle }");
    let (r, statements) = statements_of(&t, &format!("{{ {fields} }}"), json!({})).await;
    assert_ok(&r);
    assert_eq!(r["data"]["p7"]["handle"], "person7");
    assert!(r["data"]["nobody"].is_null());
    assert_eq!(statements, 1, "ten handles, one statement");
}

/// Holds an `ACCESS EXCLUSIVE` lock on a table (so every statement on it
/// waits) until dropped.
struct TableLocked {
    _release: tokio::sync::oneshot::Sender<()>,
}

async fn lock_users(t: &TestApp) -> TableLocked {
    lock_table(t, "users").await
}

async fn lock_table(t: &TestApp, table: &'static str) -> TableLocked {
    use diesel_async::{AsyncConnection as _, RunQueryDsl as _};
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let (locked, is_locked) = tokio::sync::oneshot::channel::<()>();
    let url = t.app.config.session_url().to_owned();
    tokio::spawn(async move {
        let mut conn = diesel_async::AsyncPgConnection::establish(&url)
            .await
            .unwrap();
        conn.transaction::<_, diesel::result::Error, _>(async |conn| {
            diesel::sql_query(format!("LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"))
                .execute(conn)
                .await?;
            let _ = locked.send(());
            let _ = released.await;
            Ok(())
        })
        .await
        .unwrap();
    });
    is_locked.await.unwrap();
    TableLocked { _release: release }
}

async fn all_connections_idle(t: &TestApp, secs: u64) {
    eventually(
        "every PostgreSQL connection back in the pool",
        secs,
        || async {
            let state = t.app.pg.state();
            (state.connections == state.idle_connections).then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn a_request_past_its_deadline_times_out_and_frees_its_connections() {
    let t = spawn_app_with(|c| {
        c.limits.request_timeout_ms = 300;
        c.database.statement_timeout_ms = 1000;
    })
    .await;
    let alice = t.user("alice").await;
    let id = kith::testing::graph::ids::user_id(alice).to_string();
    let query = "query($id: ID!) { user(id: $id) { handle } }";
    let lock = lock_users(&t).await;
    let started = std::time::Instant::now();
    let r = t
        .execute(Viewer::Anonymous, query, json!({ "id": id }))
        .await;
    assert_eq!(error_code(&r), Some("TIMEOUT"), "{r}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // The statement still waiting on the lock is cancelled by PostgreSQL.
    all_connections_idle(&t, 10).await;
    drop(lock);
    let r = t
        .execute(Viewer::Anonymous, query, json!({ "id": id }))
        .await;
    assert_ok(&r);
    assert_eq!(r["data"]["user"]["handle"], "alice");
    let metrics = t.app.metrics.render(&Default::default());
    assert!(
        metrics.contains("kith_requests_timed_out_total 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_statement_past_statement_timeout_answers_timeout() {
    // The request deadline is far away: only PostgreSQL can stop this one.
    let t = spawn_app_with(|c| {
        c.database.statement_timeout_ms = 200;
        c.limits.request_timeout_ms = 60_000;
    })
    .await;
    let alice = t.user("alice").await;
    let id = kith::testing::graph::ids::user_id(alice).to_string();
    let lock = lock_users(&t).await;
    let r = t
        .execute(
            Viewer::Anonymous,
            "query($id: ID!) { user(id: $id) { handle } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(error_code(&r), Some("TIMEOUT"), "{r}");
    let metrics = t.app.metrics.render(&Default::default());
    assert!(
        metrics.contains("kith_requests_timed_out_total 0"),
        "{metrics}"
    );
    drop(lock);
    all_connections_idle(&t, 10).await;
}

#[tokio::test]
async fn reads_start_no_fill_for_empty_pages_nor_past_the_fill_limit() {
    let t = spawn_app().await;
    let star = t.user("star").await;
    seed_followers(&t, star, "fan", 30, 1).await;
    let list = ListKey::Followers(star);
    // `first: 0` (a count) never fills.
    let (_, source) = pages::page(&t.app, list, PageRequest::After(None, 0), Some(30))
        .await
        .unwrap();
    assert_eq!(source, Source::Postgres);
    // A fill is registered before `page` returns; none was.
    assert_eq!(t.app.read.fills_in_flight(), 0);
    assert_eq!(t.cached_list(list).await, None, "a count filled the cache");
    // A real page does fill, in this same setting.
    pages::page(&t.app, list, PageRequest::After(None, 10), Some(30))
        .await
        .unwrap();
    eventually("the list to be filled", 10, || async {
        t.cached_list(list).await
    })
    .await;

    // With no fill permits, pages are served from PostgreSQL and nothing fills.
    let t = spawn_app_with(|c| c.caches.max_concurrent_fills = 0).await;
    let star = t.user("star").await;
    seed_followers(&t, star, "fan", 30, 1).await;
    let list = ListKey::Followers(star);
    for _ in 0..3 {
        let (page, source) = pages::page(&t.app, list, PageRequest::After(None, 10), Some(30))
            .await
            .unwrap();
        assert_eq!((page.items.len(), source), (10, Source::Postgres));
        assert_eq!(t.app.read.fills_in_flight(), 0);
    }
    assert_eq!(t.cached_list(list).await, None);
}

#[tokio::test]
async fn counts_past_int_range_are_exact() {
    let t = spawn_app().await;
    let star = t.user("star").await;
    t.sql(&format!(
        "UPDATE user_stats SET likes_received = 3000000000, version = kith_next_version(version)
          WHERE user_id = {star}"
    ))
    .await;
    let id = kith::testing::graph::ids::user_id(star).to_string();
    let r = t
        .execute(
            Viewer::Anonymous,
            "query($id: ID!) { user(id: $id) { counters { likesReceived } followers(first: 0) { totalCount } } }",
            json!({ "id": id }),
        )
        .await;
    assert_ok(&r);
    assert_eq!(
        r["data"]["user"]["counters"]["likesReceived"],
        3_000_000_000_u64
    );
    // The schema does not promise a 32-bit `Int` it could not keep.
    let r = t
        .execute(
            Viewer::Anonymous,
            "{ counters: __type(name: \"Counters\") { fields { type { ofType { name } } } }
               page: __type(name: \"FollowConnection\") { fields { name type { ofType { name } } } } }",
            json!({}),
        )
        .await;
    for field in r["data"]["counters"]["fields"].as_array().unwrap() {
        assert_eq!(field["type"]["ofType"]["name"], "Count", "{r}");
    }
    let total = r["data"]["page"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "totalCount")
        .unwrap();
    assert_eq!(total["type"]["ofType"]["name"], "Count");
}

#[tokio::test]
async fn the_dev_secret_is_refused_on_a_public_address() {
    let output = tokio::task::spawn_blocking(|| {
        std::process::Command::new(env!("CARGO_BIN_EXE_kith"))
            .arg("serve")
            .env_remove("KITH_JWT_SECRET")
            .env("KITH_HTTP_ADDR", "0.0.0.0:0")
            .env("KITH_AUTO_MIGRATE", "false")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("KITH_JWT_SECRET") && stderr.contains("loopback"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_follow_holds_no_postgres_connection_while_it_waits_for_redis() {
    use diesel::sql_types::Text;
    use diesel_async::{AsyncConnection as _, RunQueryDsl as _};
    #[derive(diesel::QueryableByName)]
    struct Waiting {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let name = format!("kith_pools_{}", uuid::Uuid::new_v4().simple());
    let t = std::sync::Arc::new(
        spawn_app_with(|c| {
            let separator = if c.database.url.contains('?') {
                '&'
            } else {
                '?'
            };
            c.database.url = format!("{}{separator}application_name={name}", c.database.url);
            c.database.pool_size = 1;
            c.redis.pool_size = 1;
            c.redis.timeout_ms = 3000;
        })
        .await,
    );
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    // The follow's transaction stops at the outbox, holding the one PostgreSQL connection.
    let lock = lock_table(&t, "outbox").await;
    let follow = tokio::spawn({
        let t = t.clone();
        async move { t.follow(alice, bob).await }
    });
    let base = kith::config::Config::from_env().unwrap().database.url;
    let mut admin = diesel_async::AsyncPgConnection::establish(&base)
        .await
        .unwrap();
    let waiting_since = std::time::Instant::now();
    loop {
        let row: Waiting = diesel::sql_query(
            "SELECT count(*) AS n FROM pg_stat_activity
              WHERE application_name = $1 AND wait_event_type = 'Lock'",
        )
        .bind::<Text, _>(&name)
        .get_result(&mut admin)
        .await
        .unwrap();
        if row.n > 0 {
            break;
        }
        assert!(
            waiting_since.elapsed() < Duration::from_secs(10),
            "the follow never reached the outbox"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    // Its rate-limit token is taken; now the one Redis connection is busy.
    let redis = t.app.redis.get().await.unwrap();
    drop(lock);
    // The follow commits, then waits for Redis to write its caches through.
    let committed_since = std::time::Instant::now();
    while t.outbox().await.is_empty() {
        assert!(
            committed_since.elapsed() < Duration::from_secs(10),
            "the follow never committed"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    // Committed and waiting for Redis (it holds no other resource):
    // the PostgreSQL connection must be free for everyone else meanwhile.
    let pg = tokio::time::timeout(Duration::from_millis(1000), t.app.pg.get()).await;
    assert!(
        matches!(pg, Ok(Ok(_))),
        "the follow kept its PostgreSQL connection while waiting for Redis"
    );
    drop(pg);
    drop(redis);
    let r = follow.await.unwrap();
    assert_eq!(r["data"]["follow"]["changed"], true, "{r}");
}

/// The peak resident memory of process `pid` (`VmHWM`), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// Sets the peak resident memory of process `pid` back to its resident
/// memory now: a later peak is that of what comes after.
fn reset_peak_rss(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
}

/// Query texts are measured before they are parsed, and only documents
/// that passed validation are kept, as a real `kith serve` shows in its
/// peak memory. 16 concurrent 1 MB texts cost their bodies, not a parse:
/// under 160 MB in all (parsed, they took about 725 MB, two at a time). 500
/// distinct 16 KiB texts that fail validation leave nothing behind: past
/// the first 100 (by then every concurrent parse has been seen) the peak
/// grows by less than 64 MB (kept without a bound, the 400 documents took
/// about 680 MB). Each gets a coded refusal.
#[tokio::test]
async fn long_and_invalid_query_texts_cost_little_memory() {
    let t = spawn_app().await;
    let port = crate::http_client::free_port();
    let server = crate::helpers::KithProcess::start(
        &t,
        "serve",
        &[("KITH_HTTP_ADDR", format!("127.0.0.1:{port}"))],
    );
    eventually("the server", 60, || async {
        crate::http_client::get(port, "/healthz").await.ok()
    })
    .await;
    let ask = |query: String| async move {
        let body = json!({ "query": query }).to_string();
        let (status, body) = crate::http_client::request(
            port,
            "POST",
            "/graphql",
            &[("Content-Type", "application/json")],
            body.as_bytes(),
        )
        .await
        .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        (status, error_code(&body).map(str::to_owned))
    };
    assert_eq!(ask("{ __typename }".into()).await, (200, None));
    let before = peak_rss(server.pid());

    let huge = format!("{{ {}}}", "a ".repeat(500_000));
    let answers = futures::future::join_all((0..16).map(|_| ask(huge.clone()))).await;
    for answer in answers {
        assert_eq!(answer, (200, Some("INVALID_INPUT".into())));
    }
    let grown = |since: u64| peak_rss(server.pid()).saturating_sub(since);
    let mb = |bytes: u64| bytes / (1024 * 1024);
    let huge_grown = grown(before);
    eprintln!("16 texts of 1 MB: peak RSS grew by {} MB", mb(huge_grown));
    assert!(
        huge_grown < 160 * 1024 * 1024,
        "16 texts of 1 MB: peak RSS grew by {} MB",
        mb(huge_grown)
    );
    let mut settled = None;
    for chunk in (0..500).collect::<Vec<_>>().chunks(10) {
        if chunk[0] == 100 {
            // Measured from here, not from the 1 MB texts' peak: memory
            // kept now would hide under that peak until it passed it.
            reset_peak_rss(server.pid());
            settled = Some(peak_rss(server.pid()));
        }
        let answers = futures::future::join_all(
            chunk
                .iter()
                .map(|i| ask(format!("{{ nope{i} {}}}", "a ".repeat(8_000)))),
        )
        .await;
        for answer in answers {
            assert_eq!(answer, (200, Some("INVALID_INPUT".into())));
        }
    }
    let settled = settled.expect("a chunk starts at 100");
    let invalid_grown = grown(settled);
    eprintln!(
        "invalid texts: peak RSS grew by {} MB after the 100th",
        mb(invalid_grown)
    );
    assert!(
        invalid_grown < 64 * 1024 * 1024,
        "400 invalid texts after the first 100: peak RSS grew by {} MB",
        mb(invalid_grown)
    );
}
