//! PostgreSQL drops every pooled connection (as a restart or a failover
//! does): the requests that meet a dead connection answer `UNAVAILABLE`,
//! never `INTERNAL`, and the pool heals without a restart.

use diesel::sql_types::Text;
use diesel_async::{AsyncConnection as _, AsyncPgConnection};
use kith::testing::auth::Viewer;
use serde_json::json;

use crate::helpers::{error_code, spawn_app_with};

#[tokio::test]
async fn dropped_connections_answer_unavailable_and_the_pool_heals() {
    let name = format!("kith_outage_{}", uuid::Uuid::new_v4().simple());
    let t = spawn_app_with(|c| {
        c.database_url = format!("{}&application_name={name}", c.database_url);
        c.database_pool_size = 4;
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

    let base = kith::config::Config::from_env().unwrap().database_url;
    let mut admin = AsyncPgConnection::establish(&base).await.unwrap();
    diesel_async::RunQueryDsl::execute(
        diesel::sql_query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
        )
        .bind::<Text, _>(&name),
        &mut admin,
    )
    .await
    .unwrap();
    // Until the server has ended every one of them.
    let since = std::time::Instant::now();
    loop {
        #[derive(diesel::QueryableByName)]
        struct Left {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            n: i64,
        }
        let left: Left = diesel_async::RunQueryDsl::get_result(
            diesel::sql_query(
                "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1",
            )
            .bind::<Text, _>(&name),
            &mut admin,
        )
        .await
        .unwrap();
        if left.n == 0 {
            break;
        }
        assert!(since.elapsed() < std::time::Duration::from_secs(10));
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }

    let mut codes = Vec::new();
    for _ in 0..12 {
        let r = t
            .execute(Viewer::User(bob), query, json!({ "id": id }))
            .await;
        let code = error_code(&r).map(str::to_owned);
        if code.is_none() {
            assert_eq!(r["data"]["user"]["counters"]["followings"], 1, "{r}");
        }
        codes.push(code);
    }
    let follow = t.follow(bob, alice).await;
    codes.push(error_code(&follow).map(str::to_owned));
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
}
