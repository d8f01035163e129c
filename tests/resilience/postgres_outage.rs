//! PostgreSQL ends Kith's sessions: every pooled connection (as a restart or
//! a failover does) — the writes that meet a dead connection answer
//! `UNAVAILABLE`, never `INTERNAL`, and the pool heals without a restart; a
//! follow's session while it commits — never answered done; the user
//! cache's listening session — the cache stops serving until it is back.

use diesel::sql_types::Text;
use diesel_async::{AsyncConnection as _, AsyncPgConnection};
use kith::testing::auth::Viewer;
use serde_json::json;

use crate::helpers::{
    error_code, eventually, read_user, spawn_app, spawn_app_with, user_row_cached,
};

#[tokio::test]
async fn dropped_connections_answer_unavailable_and_the_pool_heals() {
    let name = format!("kith_outage_{}", uuid::Uuid::new_v4().simple());
    let t = spawn_app_with(|c| {
        c.database.url = format!("{}&application_name={name}", c.database.url);
        c.database.pool_size = 4;
    })
    .await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    t.follow(alice, bob).await;
    let id = kith::testing::graph::ids::user_id(alice).to_string();
    let query = "query($id: ID!) { user(id: $id) { handle counters { followings }
        following(first: 5) { totalCount } viewerRelation { following } } }";
    // Open every connection of the pool.
    let warm: Vec<_> = (0..8)
        .map(|_| t.execute(Viewer::User(bob), query, json!({ "id": id })))
        .collect();
    for r in futures::future::join_all(warm).await {
        assert!(r["errors"].is_null(), "{r}");
    }

    end_sessions(&name).await;

    // Writes need PostgreSQL: each meets a connection of the pool.
    let mut codes = Vec::new();
    for i in 0..13 {
        let r = if i % 2 == 0 {
            t.follow(bob, alice).await
        } else {
            t.unfollow(bob, alice).await
        };
        codes.push(error_code(&r).map(str::to_owned));
    }
    eprintln!("answers after the connections dropped: {codes:?}");
    assert!(
        codes
            .iter()
            .all(|c| c.is_none() || c.as_deref() == Some("UNAVAILABLE")),
        "{codes:?}"
    );
    assert!(
        codes.iter().any(|c| c.as_deref() == Some("UNAVAILABLE")),
        "{codes:?}"
    );
    assert!(
        codes[codes.len() - 3..].iter().all(Option::is_none),
        "the pool did not heal: {codes:?}"
    );
    // A warm read needs nothing from PostgreSQL but its user rows, which
    // the cache held when its session (ended too) broke.
    let r = t
        .execute(Viewer::User(bob), query, json!({ "id": id }))
        .await;
    assert!(r["errors"].is_null(), "{r}");
    assert_eq!(r["data"]["user"]["counters"]["followings"], 1, "{r}");
}

#[tokio::test]
async fn a_follow_whose_commit_dies_is_never_answered_done() {
    use diesel_async::RunQueryDsl as _;
    let t = spawn_app().await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    // The commit of a follow waits two seconds: the function's row is sent,
    // the commit has not happened yet.
    t.delay_edge_commits(2.0).await;
    // The server ends that session while it commits.
    let kill = async {
        #[derive(diesel::QueryableByName)]
        struct Killed {
            #[diesel(sql_type = diesel::sql_types::Bool)]
            killed: bool,
        }
        crate::helpers::eventually("the follow is committing", 10, || async {
            let killed: Vec<Killed> = diesel::sql_query(
                "SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity
                  WHERE wait_event = 'PgSleep' AND query LIKE '%kith_change_edge%'
                    AND pid <> pg_backend_pid()",
            )
            .load(&mut *t.conn().await)
            .await
            .unwrap();
            killed.iter().any(|k| k.killed).then_some(())
        })
        .await;
    };
    let (answer, ()) = tokio::join!(t.follow(alice, bob), kill);
    assert!(
        answer["data"]["follow"]["changed"].is_null(),
        "a follow that never committed was answered: {answer}"
    );
    assert_eq!(
        crate::helpers::error_code(&answer),
        Some("UNAVAILABLE"),
        "{answer}"
    );
    // Read on a session of its own: the pooled connection the server ended
    // may still be handed out once before the pool sees it closed.
    #[derive(diesel::QueryableByName)]
    struct Active {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let mut fresh = <diesel_async::AsyncPgConnection as diesel_async::AsyncConnection>::establish(
        &t.app.config.database.url,
    )
    .await
    .unwrap();
    let active: Active = diesel::sql_query(
        "SELECT count(*) AS n FROM following WHERE from_user_id = $1 AND to_user_id = $2 AND active",
    )
    .bind::<diesel::sql_types::BigInt, _>(alice.get())
    .bind::<diesel::sql_types::BigInt, _>(bob.get())
    .get_result(&mut fresh)
    .await
    .unwrap();
    assert_eq!(active.n, 0, "the edge is not there");
}

#[tokio::test]
async fn a_lost_listening_session_empties_the_cache_until_it_is_back() {
    let t = spawn_app().await;
    let bob = t.user("bob").await;
    user_row_cached(&t, bob).await;

    // Cut the listening session: the cache must stop serving before it is
    // back (a notice sent meanwhile would be lost), so a change made then
    // shows on the very next read.
    let name = t.app.read.users().session_name().to_owned();
    t.sql_elsewhere(&format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '{name}'"
    ))
    .await;
    eventually("the cache stops serving", 5, || async {
        (!t.app.read.users().is_serving()).then_some(())
    })
    .await;
    t.sql_elsewhere(&format!(
        "UPDATE users SET handle = 'bob2' WHERE id = {bob}"
    ))
    .await;
    assert_eq!(read_user(&t, bob).await["handle"], "bob2");
    // It listens again by itself and serves from the cache again.
    user_row_cached(&t, bob).await;
    t.sql_elsewhere(&format!(
        "UPDATE users SET handle = 'bob3' WHERE id = {bob}"
    ))
    .await;
    eventually("a change after the reconnection shows", 5, || async {
        (read_user(&t, bob).await["handle"] == "bob3").then_some(())
    })
    .await;
}

#[tokio::test]
async fn reads_are_answered_when_every_pooled_session_has_ended() {
    // No user rows held in process: every read asks PostgreSQL, as a miss
    // does right after a failover, when the pool still lends sessions of
    // the server that went away.
    let name = format!("kith_ended_{}", uuid::Uuid::new_v4().simple());
    let t = spawn_app_with(|c| {
        c.database.url = format!("{}&application_name={name}", c.database.url);
        c.database.pool_size = 4;
        c.caches.user_cache_capacity = 0;
    })
    .await;
    let bob = t.user("bob").await;
    let reads: Vec<_> = (0..8).map(|_| read_user(&t, bob)).collect();
    futures::future::join_all(reads).await;
    end_sessions(&name).await;
    // Each read meets closed sessions first: asked again, never failed.
    for _ in 0..3 {
        assert_eq!(read_user(&t, bob).await["handle"], "bob");
    }
}

/// Ends every session named `name` from a session of its own, and waits
/// until the server has ended them all.
async fn end_sessions(name: &str) {
    #[derive(diesel::QueryableByName)]
    struct Left {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let base = kith::config::Config::from_env().unwrap().database.url;
    let mut admin = AsyncPgConnection::establish(&base).await.unwrap();
    diesel_async::RunQueryDsl::execute(
        diesel::sql_query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
        )
        .bind::<Text, _>(name),
        &mut admin,
    )
    .await
    .unwrap();
    let since = std::time::Instant::now();
    loop {
        let left: Left = diesel_async::RunQueryDsl::get_result(
            diesel::sql_query(
                "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1",
            )
            .bind::<Text, _>(name),
            &mut admin,
        )
        .await
        .unwrap();
        if left.n == 0 {
            return;
        }
        assert!(
            since.elapsed() < std::time::Duration::from_secs(10),
            "sessions left: {}",
            left.n
        );
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}
