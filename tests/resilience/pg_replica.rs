//! A read replica — the pg_auto_failover formation's streaming standby
//! (`scripts/stack ha up`) — answers what the caches miss: pages past the
//! cached window land on it (its own scan counts say so), and user rows the
//! process does not hold; never older than
//! the viewer's own acknowledged write (with its replay paused, the viewer's
//! next page comes from the primary and shows the write), and reads keep
//! being answered when it dies.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bool, Text};
use diesel_async::{AsyncConnection as _, AsyncPgConnection};
use kith::model::UserId;
use kith::testing::auth::Viewer;
use kith::testing::metrics::ReplicaLabels;
use serde_json::{Value, json};

use crate::formation::{exclusive, up};
use crate::helpers::{TestApp, eventually, spawn_app_on};

const DEEP: &str = "query($id: ID!, $after: String) { user(id: $id) {
    following(first: 20, after: $after) { edges { cursor node { id } } } } }";

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// The formation's data nodes, `(port, in recovery)`.
async fn nodes(url: &str) -> Vec<(u16, bool)> {
    #[derive(QueryableByName)]
    struct Recovery {
        #[diesel(sql_type = Bool)]
        standby: bool,
    }
    let hosts = url.split('@').nth(1).unwrap().split('/').next().unwrap();
    let mut out = Vec::new();
    for host in hosts.split(',') {
        let port: u16 = host.rsplit(':').next().unwrap().parse().unwrap();
        let mut conn =
            AsyncPgConnection::establish(&format!("postgres://postgres@127.0.0.1:{port}/kith"))
                .await
                .unwrap();
        let r: Recovery = diesel_async::RunQueryDsl::get_result(
            diesel::sql_query("SELECT pg_is_in_recovery() AS standby"),
            &mut conn,
        )
        .await
        .unwrap();
        out.push((port, r.standby));
    }
    out
}

/// Runs `sql` as the superuser on the server at `port`.
async fn superuser<T: QueryableByName<diesel::pg::Pg> + Send + 'static>(port: u16, sql: &str) -> T {
    let mut conn =
        AsyncPgConnection::establish(&format!("postgres://postgres@127.0.0.1:{port}/kith"))
            .await
            .unwrap();
    diesel_async::RunQueryDsl::get_result(diesel::sql_query(sql), &mut conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Scans of the test schema's `following` table on the server at `port`.
async fn scans(port: u16, schema: &str) -> i64 {
    let mut conn =
        AsyncPgConnection::establish(&format!("postgres://postgres@127.0.0.1:{port}/kith"))
            .await
            .unwrap();
    let c: Count = diesel_async::RunQueryDsl::get_result(
        diesel::sql_query(
            "SELECT coalesce(sum(seq_scan + coalesce(idx_scan, 0)), 0)::bigint AS n
               FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'following'",
        )
        .bind::<Text, _>(schema),
        &mut conn,
    )
    .await
    .unwrap();
    c.n
}

fn answered(t: &TestApp, by: &'static str, reason: &'static str) -> u64 {
    t.app
        .metrics
        .replica_reads
        .get_or_create(&ReplicaLabels {
            answered_by: by,
            reason,
        })
        .get()
}

/// The ids on `viewer`'s following page after `after`.
async fn page(t: &TestApp, viewer: Viewer, owner: UserId, after: &Value) -> Vec<String> {
    let id = kith::testing::graph::ids::user_id(owner).to_string();
    let r = t
        .execute(viewer, DEEP, json!({ "id": id, "after": after }))
        .await;
    assert!(r["errors"].is_null(), "{r}");
    r["data"]["user"]["following"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node"]["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_misses_read_the_replica_never_before_the_viewers_write() {
    let _formation = exclusive().await;
    let url = up().await;
    let t = spawn_app_on(&url, |c| {
        c.database.replica_url = Some(c.database.url.replace(
            "target_session_attrs=read-write",
            "target_session_attrs=read-only",
        ));
        // Pages past the 5 newest come from PostgreSQL.
        c.caches.list_cache_size = 5;
        c.caches.following_cache_size = 5;
    })
    .await;
    let standby = nodes(&url)
        .await
        .into_iter()
        .find_map(|(port, standby)| standby.then_some(port))
        .expect("the formation has a standby");
    #[derive(QueryableByName)]
    struct Schema {
        #[diesel(sql_type = Text)]
        schema: String,
    }
    let schema: Schema = diesel_async::RunQueryDsl::get_result(
        diesel::sql_query("SELECT current_schema() AS schema"),
        &mut *t.conn().await,
    )
    .await
    .unwrap();
    let schema = schema.schema;
    // A run that failed halfway may have left its replay paused.
    let _: Count = superuser(
        standby,
        "SELECT 0::bigint AS n FROM (SELECT pg_wal_replay_resume()) AS p",
    )
    .await;

    let viewer = t.user("viewer").await;
    let mut followed = Vec::new();
    for i in 0..20 {
        let u = t.user(&format!("f{i}")).await;
        assert!(t.follow(viewer, u).await["errors"].is_null());
        followed.push(u);
    }
    let first = {
        let id = kith::testing::graph::ids::user_id(viewer).to_string();
        t.execute(Viewer::User(viewer), DEEP, json!({ "id": id }))
            .await
    };
    let after = first["data"]["user"]["following"]["edges"][4]["cursor"].clone();
    assert!(after.is_string(), "{first}");

    // Once the replica has replayed the viewer's follows, their pages past
    // the window are read there.
    eventually("the replica to answer a page", 30, || async {
        let before = answered(&t, "replica", "caught_up");
        page(&t, Viewer::User(viewer), viewer, &after).await;
        (answered(&t, "replica", "caught_up") > before).then_some(())
    })
    .await;
    let (replica_before, scans_before) = (
        answered(&t, "replica", "caught_up"),
        scans(standby, &schema).await,
    );
    for _ in 0..20 {
        assert_eq!(
            page(&t, Viewer::User(viewer), viewer, &after).await.len(),
            15
        );
    }
    assert!(answered(&t, "replica", "caught_up") >= replica_before + 20);
    // The standby's own statistics (flushed within seconds) count the scans.
    eventually("the standby to count the scans", 30, || async {
        (scans(standby, &schema).await >= scans_before + 20).then_some(())
    })
    .await;

    // User rows missing from the process are read there too, once it has
    // replayed past the moment the cache dropped them.
    let f3 = kith::testing::graph::ids::user_id(followed[3]).to_string();
    eventually("a user row read from the replica", 30, || async {
        t.app.read.users().clear();
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let before = answered(&t, "replica", "caught_up");
        let r = t
            .execute(
                Viewer::Anonymous,
                "query($id: ID!) { user(id: $id) { handle } }",
                json!({ "id": f3 }),
            )
            .await;
        assert_eq!(r["data"]["user"]["handle"], "f3", "{r}");
        (answered(&t, "replica", "caught_up") > before).then_some(())
    })
    .await;

    // The replica stops replaying; the viewer unfollows its oldest follow,
    // which the page past the window shows.
    let oldest = kith::testing::graph::ids::user_id(followed[0]).to_string();
    assert!(
        page(&t, Viewer::User(viewer), viewer, &after)
            .await
            .contains(&oldest)
    );
    let _: Count = superuser(
        standby,
        "SELECT 0::bigint AS n FROM (SELECT pg_wal_replay_pause()) AS p",
    )
    .await;
    // A pause takes effect between records: until it has, a write may
    // still be replayed.
    eventually("the replay to pause", 10, || async {
        let paused: Count = superuser(
            standby,
            "SELECT (pg_get_wal_replay_pause_state() = 'paused')::int::bigint AS n",
        )
        .await;
        (paused.n == 1).then_some(())
    })
    .await;
    let own = answered(&t, "primary", "own_write");
    assert!(t.unfollow(viewer, followed[0]).await["errors"].is_null());
    let ids = page(&t, Viewer::User(viewer), viewer, &after).await;
    assert!(
        !ids.contains(&oldest),
        "a page older than the viewer's own write: {ids:?}"
    );
    assert!(answered(&t, "primary", "own_write") > own);
    // Once the pause is past the lag bound, nobody's read goes there (an
    // anonymous read within the bound may still see the replica's page).
    eventually(
        "an anonymous read past the lag bound on the primary",
        10,
        || async {
            let lagging = answered(&t, "primary", "lagging");
            let ids = page(&t, Viewer::Anonymous, viewer, &after).await;
            (answered(&t, "primary", "lagging") > lagging).then(|| {
                assert!(!ids.contains(&oldest), "{ids:?}");
            })
        },
    )
    .await;
    let _: Count = superuser(
        standby,
        "SELECT 0::bigint AS n FROM (SELECT pg_wal_replay_resume()) AS p",
    )
    .await;

    // The replica dies (SIGKILL to its postmaster): reads keep being answered.
    eventually("the replica to answer again", 30, || async {
        let before = answered(&t, "replica", "caught_up");
        page(&t, Viewer::Anonymous, viewer, &after).await;
        (answered(&t, "replica", "caught_up") > before).then_some(())
    })
    .await;
    #[derive(QueryableByName)]
    struct Dir {
        #[diesel(sql_type = Text)]
        data_directory: String,
    }
    let dir: Dir = superuser(
        standby,
        "SELECT current_setting('data_directory') AS data_directory",
    )
    .await;
    let pid = std::fs::read_to_string(format!("{}/postmaster.pid", dir.data_directory)).unwrap();
    let pid = pid.lines().next().unwrap().trim().to_owned();
    assert!(
        std::process::Command::new("kill")
            .args(["-9", &pid])
            .status()
            .unwrap()
            .success()
    );
    for _ in 0..20 {
        assert_eq!(page(&t, Viewer::Anonymous, viewer, &after).await.len(), 14);
    }
    assert!(answered(&t, "primary", "failed") + answered(&t, "primary", "down") > 0);
    // The keeper restarts it; the formation is whole again for the next test.
    up().await;
}
