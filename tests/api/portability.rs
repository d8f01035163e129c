//! Export and import of the viewer's lists as CSV files, in Mastodon's
//! formats: `GET /export/*.csv` streams them; `importGraph` takes them back.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use kith::model::{UserId, UserStatus};
use kith::testing::auth::Viewer;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::helpers::{TestApp, assert_ok, error_code, seed_followers, spawn_app, spawn_app_with};

fn gid(user: UserId) -> String {
    kith::testing::graph::ids::user_id(user).to_string()
}

/// `GET path` with `token`: the status, the headers that matter, the body
/// and how many chunks it came in.
async fn get(
    t: &TestApp,
    path: &str,
    token: Option<&str>,
) -> (StatusCode, Option<String>, String, usize) {
    let mut request = Request::get(path);
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let response = kith::testing::http::router(t.app.clone())
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_owned());
    let mut body = response.into_body();
    let (mut text, mut chunks) = (Vec::new(), 0);
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.unwrap().into_data() {
            chunks += 1;
            text.extend_from_slice(&data);
        }
    }
    (
        status,
        content_type,
        String::from_utf8(text).unwrap(),
        chunks,
    )
}

async fn act(t: &TestApp, actor: UserId, mutation: &str, target: UserId) {
    let r = t
        .execute(
            Viewer::User(actor),
            &format!("mutation($id: ID!) {{ {mutation}(input: {{userId: $id}}) {{ changed }} }}"),
            json!({ "id": gid(target) }),
        )
        .await;
    assert_ok(&r);
}

#[tokio::test]
async fn the_viewers_lists_export_in_mastodons_formats() {
    let t = spawn_app_with(|c| {
        c.writes.rate_limit_capacity = 1000;
        c.portability.account_domain = "kith.example".into();
    })
    .await;
    let me = t.user("me").await;
    let (a, b, fan, foe, bore) = (
        t.user("a").await,
        t.user("b,with \"quotes\"").await,
        t.user("fan").await,
        t.user("foe").await,
        t.user("bore").await,
    );
    let gone = t.user("gone").await;
    for target in [a, b, gone] {
        assert_ok(&t.follow(me, target).await);
    }
    assert_ok(&t.follow(fan, me).await);
    act(&t, me, "block", foe).await;
    act(&t, me, "mute", bore).await;
    kith::testing::write::lifecycle::set_status(&t.app, gone, UserStatus::Suspended)
        .await
        .unwrap();
    let token = t.token(me);
    let nobody = t.token(UserId::new(987_654_321).unwrap());

    let (status, content_type, body, _) = get(&t, "/export/following.csv", Some(&token)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type.as_deref(), Some("text/csv; charset=utf-8"));
    assert_eq!(
        body,
        "Account address,Show boosts,Notify on new posts,Languages\n\
         a@kith.example,true,false,\n\
         \"b,with \"\"quotes\"\"@kith.example\",true,false,\n",
        "a suspended account is set aside"
    );
    let (_, _, body, _) = get(&t, "/export/followers.csv", Some(&token)).await;
    assert_eq!(
        body,
        "Account address,Show boosts,Notify on new posts,Languages\nfan@kith.example,true,false,\n"
    );
    let (_, _, body, _) = get(&t, "/export/blocks.csv", Some(&token)).await;
    assert_eq!(body, "foe@kith.example\n");
    let (_, _, body, _) = get(&t, "/export/mutes.csv", Some(&token)).await;
    assert_eq!(body, "Account address\nbore@kith.example\n");

    // Refusals are JSON with a code and the status it calls for.
    for (path, token, status, code) in [
        (
            "/export/following.csv",
            None,
            StatusCode::UNAUTHORIZED,
            "UNAUTHENTICATED",
        ),
        (
            "/export/following.csv",
            Some("not-a-token"),
            StatusCode::UNAUTHORIZED,
            "UNAUTHENTICATED",
        ),
        (
            "/export/lists.csv",
            Some(token.as_str()),
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
        ),
        (
            "/export/blocks.csv",
            Some(nobody.as_str()),
            StatusCode::UNAUTHORIZED,
            "UNAUTHENTICATED",
        ),
    ] {
        let (got, content_type, body, _) = get(&t, path, token).await;
        assert_eq!(got, status, "{path}: {body}");
        assert_eq!(content_type.as_deref(), Some("application/json"));
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["errors"][0]["extensions"]["code"], code, "{body}");
    }
}

/// A long list streams in batches, each read after the last member sent:
/// every member once, in more than one chunk.
#[tokio::test]
async fn a_long_list_streams_in_batches() {
    let t = spawn_app().await;
    let me = t.user("me").await;
    seed_followers(&t, me, "fan", 2_500, 7).await;
    let (status, _, body, chunks) = get(&t, "/export/followers.csv", Some(&t.token(me))).await;
    assert_eq!(status, StatusCode::OK);
    let lines: Vec<&str> = body.lines().skip(1).collect();
    assert_eq!(lines.len(), 2_500);
    let distinct: std::collections::HashSet<&str> = lines.iter().copied().collect();
    assert_eq!(distinct.len(), 2_500, "no member twice");
    assert!(chunks >= 3, "{chunks} chunks");
}

const IMPORT: &str = "mutation($kind: ImportKind!, $mode: ImportMode, $csv: String!) {
    importGraph(input: {kind: $kind, mode: $mode, csv: $csv, clientMutationId: \"i\"}) {
        clientMutationId job { id state total } } }";

const JOB: &str = "query($id: ID!) { importJob(id: $id) {
    id kind mode state total applied skipped failed removed failure
    errors(first: 20) { totalCount edges { node { row handle reason } } } } }";

/// Imports `csv` as `owner` and waits for the job to end (an import runner
/// runs meanwhile, as in every serving process); its last state.
async fn import(t: &TestApp, owner: UserId, kind: &str, mode: &str, csv: &str) -> Value {
    let runner = t.start_imports();
    let r = t
        .execute(
            Viewer::User(owner),
            IMPORT,
            json!({ "kind": kind, "mode": mode, "csv": csv }),
        )
        .await;
    assert_ok(&r);
    assert_eq!(r["data"]["importGraph"]["clientMutationId"], "i");
    let id = r["data"]["importGraph"]["job"]["id"].clone();
    let job = crate::helpers::eventually("the import to end", 60, || async {
        let r = t
            .execute(Viewer::User(owner), JOB, json!({ "id": id }))
            .await;
        assert_ok(&r);
        let job = r["data"]["importJob"].clone();
        matches!(job["state"].as_str(), Some("DONE" | "FAILED")).then_some(job)
    })
    .await;
    runner.stop().await.unwrap();
    job
}

/// Seeds users `<prefix>0` … `<prefix>{n-1}` and returns an import file
/// naming each.
async fn seeded_file(t: &TestApp, prefix: &str, n: i64) -> String {
    kith::testing::store::users::seed(&mut *t.conn().await, prefix, n)
        .await
        .unwrap();
    assert_eq!(
        t.count(&format!(
            "SELECT count(*) AS n FROM users WHERE handle LIKE '{prefix}%'"
        ))
        .await,
        n
    );
    (0..n)
        .map(|i| format!("{prefix}{i}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `owner`'s `n` imported follows each wrote one event and counted once.
async fn applied_once(t: &TestApp, owner: UserId, n: i64) {
    let events = t
        .count(&format!(
            "SELECT count(*) AS n FROM outbox WHERE event_type = 'FollowCreated'
              AND (payload->>'from')::BIGINT = {owner}"
        ))
        .await;
    assert_eq!(events, n, "one event per follow");
    assert_eq!(t.stats(owner).await.0, n, "followings counted once each");
}

async fn following_handles(t: &TestApp, user: UserId) -> Vec<String> {
    let (_, _, body, _) = get(t, "/export/following.csv", Some(&t.token(user))).await;
    let mut handles: Vec<String> = body
        .lines()
        .skip(1)
        .map(|l| l.split('@').next().unwrap().to_owned())
        .collect();
    handles.sort();
    handles
}

#[tokio::test]
async fn an_import_applies_its_rows_and_reports_each_bad_one() {
    let t = spawn_app_with(|c| {
        c.writes.rate_limit_capacity = 1000;
        c.portability.account_domain = "kith.example".into();
        c.portability.import_rows_per_sec = 1000;
    })
    .await;
    let me = t.user("me").await;
    let (a, b, locked, foe) = (
        t.user("a").await,
        t.user("b").await,
        t.user("locked").await,
        t.user("foe").await,
    );
    assert_ok(&t.follow(me, b).await);
    act(&t, foe, "block", me).await;
    t.sql(&format!(
        "UPDATE users SET locked = TRUE WHERE id = {locked}"
    ))
    .await;
    let before = t.outbox_payloads().await.len();
    let csv = "Account address,Show boosts,Notify on new posts,Languages\n\
               a@kith.example,true,false,\n\
               @b,true,false,\n\
               nobody@kith.example,true,false,\n\
               a@mastodon.social,true,false,\n\
               me@kith.example,true,false,\n\
               \"x\"y,true\n\
               foe,true,false,\n\
               locked@KITH.example\n\
               a\n";
    let job = import(&t, me, "FOLLOWING", "MERGE", csv).await;
    assert_eq!(
        json!({ "state": job["state"], "total": job["total"], "applied": job["applied"],
                "skipped": job["skipped"], "failed": job["failed"] }),
        json!({ "state": "DONE", "total": 9, "applied": 2, "skipped": 2, "failed": 5 })
    );
    assert_eq!(
        job["errors"],
        json!({ "totalCount": 5, "edges": [
            { "node": { "row": 4, "handle": "nobody@kith.example", "reason": "NOT_FOUND" } },
            { "node": { "row": 5, "handle": "a@mastodon.social", "reason": "NOT_FOUND" } },
            { "node": { "row": 6, "handle": "me@kith.example", "reason": "SELF_TARGET" } },
            { "node": { "row": 7, "handle": "", "reason": "MALFORMED" } },
            { "node": { "row": 8, "handle": "foe", "reason": "BLOCKED" } },
        ] })
    );
    // The deprecated field answers the first release's names until it goes.
    let id = job["id"].clone();
    let old = t
        .execute(
            Viewer::User(me),
            "query($id: ID!) { importJob(id: $id) { errors(first: 3) { edges { node { code } } } } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(
        old["data"]["importJob"]["errors"]["edges"],
        json!([{ "node": { "code": "UNKNOWN_ACCOUNT" } }, { "node": { "code": "UNKNOWN_ACCOUNT" } },
               { "node": { "code": "SELF" } }]),
        "{old}"
    );
    // Through the write path: the edge, the request, their events.
    assert_eq!(t.edge(me, a).await.map(|e| e.0), Some(true));
    assert_eq!(t.edge(me, locked).await, None, "a request, not a follow");
    let types: Vec<String> = t.outbox_payloads().await[before..]
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(types, ["FollowCreated", "FollowRequested"]);
    let _ = b;
}

#[tokio::test]
async fn an_overwrite_undoes_what_the_file_does_not_name() {
    let t = spawn_app_with(|c| {
        c.writes.rate_limit_capacity = 1000;
        c.portability.import_rows_per_sec = 1000;
    })
    .await;
    let me = t.user("me").await;
    let (x, y, z) = (t.user("x").await, t.user("y").await, t.user("z").await);
    assert_ok(&t.follow(me, x).await);
    assert_ok(&t.follow(me, y).await);
    let job = import(
        &t,
        me,
        "FOLLOWING",
        "OVERWRITE",
        "y@localhost\nz@localhost\n",
    )
    .await;
    assert_eq!(
        json!([job["state"], job["applied"], job["skipped"], job["removed"]]),
        json!(["DONE", 1, 1, 1])
    );
    assert_eq!(following_handles(&t, me).await, ["y", "z"]);
    let _ = (x, z);

    // A file whose rows name no account of Kith's removes nothing.
    let job = import(&t, me, "FOLLOWING", "OVERWRITE", "y@elsewhere.social\n").await;
    assert_eq!(json!([job["failed"], job["removed"]]), json!([1, 0]));
    assert_eq!(following_handles(&t, me).await, ["y", "z"]);

    act(&t, me, "block", x).await;
    act(&t, me, "mute", y).await;
    let job = import(&t, me, "BLOCKS", "OVERWRITE", "z@localhost\n").await;
    assert_eq!(json!([job["applied"], job["removed"]]), json!([1, 1]));
    let (_, _, blocks, _) = get(&t, "/export/blocks.csv", Some(&t.token(me))).await;
    assert_eq!(blocks, "z@localhost\n");
    let job = import(&t, me, "MUTES", "MERGE", "Account address\nx@localhost\n").await;
    assert_eq!(job["applied"], 1);
    let (_, _, mutes, _) = get(&t, "/export/mutes.csv", Some(&t.token(me))).await;
    assert_eq!(mutes, "Account address\nx@localhost\ny@localhost\n");
}

/// What Mastodon users do when they move: export from one account, import
/// into another; the lists match, less what cannot apply, each reported.
#[tokio::test]
async fn an_export_imports_into_another_account() {
    let t = spawn_app_with(|c| {
        c.writes.rate_limit_capacity = 1000;
        c.portability.import_rows_per_sec = 1000;
    })
    .await;
    let (old, new) = (t.user("old").await, t.user("new").await);
    let mut followed = Vec::new();
    for i in 0..30 {
        let user = t.user(&format!("f{i:02}")).await;
        assert_ok(&t.follow(old, user).await);
        followed.push(format!("f{i:02}"));
    }
    assert_ok(&t.follow(old, new).await);
    // One of them blocks the new account: that row cannot apply.
    let grudge = t.user("grudge").await;
    assert_ok(&t.follow(old, grudge).await);
    act(&t, grudge, "block", new).await;

    let (_, _, csv, _) = get(&t, "/export/following.csv", Some(&t.token(old))).await;
    let job = import(&t, new, "FOLLOWING", "MERGE", &csv).await;
    assert_eq!(
        json!([job["total"], job["applied"], job["failed"]]),
        json!([32, 30, 2])
    );
    let codes: Vec<&str> = job["errors"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node"]["reason"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["SELF_TARGET", "BLOCKED"]);
    assert_eq!(following_handles(&t, new).await, followed);
}

#[tokio::test]
async fn imports_are_the_viewers_own_one_at_a_time_and_bounded() {
    let t = spawn_app_with(|c| {
        c.portability.import_max_rows = 10;
        c.portability.import_rows_per_sec = 1;
    })
    .await;
    let (me, other) = (t.user("me").await, t.user("other").await);
    let ask = |viewer: Viewer, csv: &str| {
        t.execute(viewer, IMPORT, json!({ "kind": "FOLLOWING", "csv": csv }))
    };
    let r = ask(Viewer::Anonymous, "other").await;
    assert_eq!(
        crate::helpers::error_code(&r),
        Some("UNAUTHENTICATED"),
        "{r}"
    );
    let eleven = "other\n".repeat(11);
    let r = ask(Viewer::User(me), &eleven).await;
    assert_eq!(crate::helpers::error_code(&r), Some("INVALID_INPUT"), "{r}");
    for empty in ["", "Account address\n"] {
        let r = ask(Viewer::User(me), empty).await;
        assert_eq!(crate::helpers::error_code(&r), Some("INVALID_INPUT"), "{r}");
    }
    // Paced at one row a second (batches of four), ten rows keep the job
    // open a while.
    let first = ask(Viewer::User(me), &"other\n".repeat(10)).await;
    assert_ok(&first);
    let r = ask(Viewer::User(me), "other").await;
    assert_eq!(
        crate::helpers::error_code(&r),
        Some("IMPORT_RUNNING"),
        "{r}"
    );
    let id = first["data"]["importGraph"]["job"]["id"].clone();
    let r = t
        .execute(Viewer::User(other), JOB, json!({ "id": id }))
        .await;
    // Another account's job reads as a missing one: nobody learns it exists.
    assert!(r["errors"].is_null(), "{r}");
    assert_eq!(r["data"]["importJob"], Value::Null, "{r}");
}

/// An import outlives the process running it: `kill -9` mid-way, and a
/// process started afterwards takes the job over once its lease lapses and
/// goes on from the last batch that committed — every row applied once,
/// one event per follow, the counters right — while a subscriber watches
/// it end.
#[tokio::test]
async fn an_import_survives_its_process_being_killed() {
    use crate::helpers::{KithProcess, LiveClient, auth, eventually};
    use crate::http_client;

    let t = spawn_app().await;
    let me = t.user("me").await;
    let csv = seeded_file(&t, "idol", 200).await;
    let serve = |port: u16| {
        KithProcess::start(
            &t,
            "serve",
            &[
                ("KITH_HTTP_ADDR", format!("127.0.0.1:{port}")),
                // A batch of 50 at once, then one every 2.5 s.
                ("KITH_IMPORT_ROWS_PER_SEC", "20".into()),
            ],
        )
    };
    let up = |port: u16| async move {
        eventually("the server", 60, || async {
            http_client::get(port, "/healthz").await.ok()
        })
        .await;
    };
    let port = http_client::free_port();
    let mut first = serve(port);
    up(port).await;
    let r = http_client::graphql(
        port,
        &t.token(me),
        IMPORT,
        json!({ "kind": "FOLLOWING", "csv": csv }),
    )
    .await
    .unwrap();
    assert_ok(&r);
    let id = r["data"]["importGraph"]["job"]["id"].clone();
    let applied = || t.count("SELECT applied::BIGINT AS n FROM import_job");
    eventually("a first batch", 30, || async {
        (applied().await >= 50).then_some(())
    })
    .await;
    first.kill();
    let at_kill = applied().await;
    assert!(at_kill < 200, "killed before the end ({at_kill} applied)");

    let port = http_client::free_port();
    let _second = serve(port);
    up(port).await;
    let mut client = LiveClient::connect(port, auth(&t, me)).await.unwrap();
    client
        .subscribe(
            "j",
            "subscription($id: ID!) { importJobChanged(id: $id) { state applied } }",
            json!({ "id": id }),
        )
        .await;
    let mut last = Value::Null;
    while last["state"] != "DONE" {
        last = client.next_of("j").await["importJobChanged"].clone();
    }
    assert_eq!(last["applied"], 200);
    let job = t.execute(Viewer::User(me), JOB, json!({ "id": id })).await;
    assert_eq!(
        json!([
            job["data"]["importJob"]["applied"],
            job["data"]["importJob"]["skipped"]
        ]),
        json!([200, 0]),
        "each row applied once"
    );
    applied_once(&t, me, 200).await;
}

/// An overwrite walks the whole list, batch after batch; a follow past the
/// cap is one reported row, and the rows after it still apply.
#[tokio::test]
async fn an_overwrite_walks_a_long_list_and_a_refused_row_stops_nothing() {
    let t = spawn_app_with(|c| {
        c.writes.rate_limit_capacity = 1000;
        c.portability.import_rows_per_sec = 1000;
    })
    .await;
    let me = t.user("me").await;
    kith::testing::store::users::seed(&mut *t.conn().await, "mm", 120)
        .await
        .unwrap();
    t.sql(&format!(
        "INSERT INTO following (from_user_id, to_user_id, active, followed_at, version)
         SELECT {me}, id, TRUE, date_trunc('milliseconds', now()), 1 FROM users WHERE handle LIKE 'mm%'"
    ))
    .await;
    t.sql(&format!(
        "UPDATE user_stats SET followings = 120 WHERE user_id = {me}"
    ))
    .await;
    let job = import(&t, me, "FOLLOWING", "OVERWRITE", "mm7\n").await;
    assert_eq!(
        json!([job["state"], job["skipped"], job["removed"]]),
        json!(["DONE", 1, 119])
    );
    assert_eq!(following_handles(&t, me).await, ["mm7"]);

    // The cap: past 2 followings, a follow needs followers (ratio 0: none do).
    let t = spawn_app_with(|c| {
        c.writes.rate_limit_capacity = 1000;
        c.portability.import_rows_per_sec = 1000;
        c.writes.max_followings = 2;
        c.writes.followings_ratio = 0.0;
    })
    .await;
    let me = t.user("me").await;
    for name in ["a", "b", "c", "d"] {
        t.user(name).await;
    }
    let job = import(&t, me, "FOLLOWING", "MERGE", "a\nb\nc\nd\n").await;
    assert_eq!(
        json!([
            job["applied"],
            job["failed"],
            job["errors"]["edges"][0]["node"]
        ]),
        json!([2, 2, { "row": 3, "handle": "c", "reason": "FOLLOW_LIMIT" }])
    );
    assert_eq!(following_handles(&t, me).await, ["a", "b"]);
}

/// A process that stops gracefully gives its job's lease up: the job waits,
/// claimable at once, where its last batch left it.
#[tokio::test]
async fn a_stopping_process_gives_its_import_up() {
    use crate::helpers::eventually;
    use crate::http_client;

    let t = spawn_app().await;
    let me = t.user("me").await;
    let csv = seeded_file(&t, "idol", 200).await;
    let (mut server, port) = serve(&t, &[("KITH_IMPORT_ROWS_PER_SEC", "20".into())]).await;
    let r = http_client::graphql(
        port,
        &t.token(me),
        IMPORT,
        json!({ "kind": "FOLLOWING", "csv": csv }),
    )
    .await
    .unwrap();
    assert_ok(&r);
    let applied = || t.count("SELECT applied::BIGINT AS n FROM import_job");
    eventually("a first batch", 30, || async {
        (applied().await >= 50).then_some(())
    })
    .await;
    server.terminate();
    let held = t
        .count(
            "SELECT count(*) AS n FROM import_job
              WHERE state = 'running' AND lease_token IS NULL AND lease_until IS NULL",
        )
        .await;
    assert_eq!(held, 1, "the lease was given up");
    assert!(applied().await < 200);
}

/// Two runners over one job whose lease keeps lapsing (as when its runner
/// stalls past it): the job changes hands, and still every row applies
/// exactly once — each batch is fenced by the lease inside its own
/// transaction.
#[tokio::test]
async fn runners_racing_over_one_job_apply_each_row_once() {
    let t = spawn_app_with(|c| {
        c.portability.import_rows_per_sec = 1000;
        c.portability.import_follows_per_day = 10_000;
    })
    .await;
    let me = t.user("me").await;
    let csv = seeded_file(&t, "star", 1500).await;
    let (first, second) = (t.start_imports(), t.start_imports());
    let r = t
        .execute(
            Viewer::User(me),
            IMPORT,
            json!({ "kind": "FOLLOWING", "csv": csv }),
        )
        .await;
    assert_ok(&r);
    let id = r["data"]["importGraph"]["job"]["id"].clone();

    // Lapse the lease again and again while the job runs, waking the idle
    // runner each time, and note each holder seen.
    let mut holders = std::collections::HashSet::new();
    let state = || {
        t.count("SELECT CASE state WHEN 'done' THEN 1 WHEN 'failed' THEN 2 ELSE 0 END::BIGINT AS n FROM import_job")
    };
    let started = std::time::Instant::now();
    while state().await == 0 {
        assert!(started.elapsed().as_secs() < 60, "the import ends");
        holders.insert(
            t.count(
                "SELECT coalesce(('x' || substr(lease_token::TEXT, 1, 8))::BIT(32)::BIGINT, 0) AS n
                   FROM import_job",
            )
            .await,
        );
        t.sql("UPDATE import_job SET lease_until = now() - interval '1 second' WHERE state = 'running'")
            .await;
        t.app.wakes.imports.notify_one();
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    first.stop().await.unwrap();
    second.stop().await.unwrap();
    holders.remove(&0);
    assert!(
        holders.len() >= 2,
        "the job changed hands ({} holders seen)",
        holders.len()
    );
    assert_eq!(state().await, 1, "the job is done");
    let job = t.execute(Viewer::User(me), JOB, json!({ "id": id })).await;
    let job = &job["data"]["importJob"];
    assert_eq!(
        json!([job["applied"], job["skipped"], job["failed"]]),
        json!([1500, 0, 0]),
        "each row applied once"
    );
    applied_once(&t, me, 1500).await;
}

/// The state and counts of job `id` as its owner reads it.
async fn job_of(t: &TestApp, owner: UserId, id: &Value) -> Value {
    let r = t
        .execute(Viewer::User(owner), JOB_NOW, json!({ "id": id }))
        .await;
    assert_ok(&r);
    r["data"]["importJob"].clone()
}

const JOB_NOW: &str = "query($id: ID!) { importJob(id: $id) {
    state total applied skipped failed deferred resumesAt
    errors(first: 20) { totalCount edges { node { row handle reason } } } } }";

/// Queues an import of `csv` as `owner`; the job's id.
async fn queue(t: &TestApp, owner: UserId, csv: &str) -> Value {
    let r = t
        .execute(
            Viewer::User(owner),
            IMPORT,
            json!({ "kind": "FOLLOWING", "csv": csv }),
        )
        .await;
    assert_ok(&r);
    r["data"]["importGraph"]["job"]["id"].clone()
}

/// A file is bounded before it is read: one `importGraph` per operation
/// (refused whole before anything runs), the rate-limit token taken before
/// the file is looked at, rows counted before they are parsed, and a file
/// that names no account refused rather than stored.
#[tokio::test]
async fn an_import_is_bounded_before_it_is_read() {
    let t = spawn_app_with(|c| {
        c.portability.import_max_rows = 10;
        c.writes.rate_limit_capacity = 3;
        c.writes.rate_limit_per_sec = 0.001;
    })
    .await;
    let me = t.user("me").await;
    t.user("friend").await;
    let twice = "mutation($csv: String!) {
        a: importGraph(input: {kind: FOLLOWING, csv: $csv}) { job { id } }
        b: importGraph(input: {kind: FOLLOWING, csv: $csv}) { job { id } } }";
    let r = t
        .execute(Viewer::User(me), twice, json!({ "csv": "friend" }))
        .await;
    assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{r}");
    assert!(r["data"].is_null(), "nothing ran: {r}");
    let spread = "mutation($csv: String!) { ...I ...I }
        fragment I on Mutation { importGraph(input: {kind: FOLLOWING, csv: $csv}) { job { id } } }";
    let r = t
        .execute(Viewer::User(me), spread, json!({ "csv": "friend" }))
        .await;
    assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{r}");
    assert_eq!(t.count("SELECT count(*) AS n FROM import_job").await, 0);

    // One line too many, and a file whose one line names no account (a
    // line far longer than any address): refused, each for a token.
    let long_line = "x".repeat(262_145);
    for csv in ["friend\n".repeat(11), long_line.clone()] {
        let r = t
            .execute(
                Viewer::User(me),
                IMPORT,
                json!({ "kind": "FOLLOWING", "csv": csv }),
            )
            .await;
        assert_eq!(error_code(&r), Some("INVALID_INPUT"), "{r}");
    }
    let r = t
        .execute(
            Viewer::User(me),
            IMPORT,
            json!({ "kind": "FOLLOWING", "csv": format!("friend\n{long_line}") }),
        )
        .await;
    assert_ok(&r);
    // The three tokens are spent: the bucket refuses before any reading.
    let r = t
        .execute(
            Viewer::User(me),
            IMPORT,
            json!({ "kind": "FOLLOWING", "csv": "friend\n".repeat(11) }),
        )
        .await;
    assert_eq!(error_code(&r), Some("RATE_LIMITED"), "{r}");

    // The long line is kept only as far as its report needs.
    let longest = t
        .count("SELECT max(length(address))::BIGINT AS n FROM import_row")
        .await;
    assert!(longest <= 65, "{longest} characters kept of a row");
}

/// One account's long import does not starve another's: the runner takes
/// the open imports of all accounts in turn, a batch each. An owner cancels
/// its import; what it applied stays.
#[tokio::test]
async fn imports_take_turns_and_can_be_canceled() {
    let t = spawn_app_with(|c| {
        c.portability.import_rows_per_sec = 10;
        c.portability.import_follows_per_day = 100_000;
    })
    .await;
    let (big, small, other) = (
        t.user("big").await,
        t.user("small").await,
        t.user("other").await,
    );
    let csv = seeded_file(&t, "crowd", 400).await;
    let runner = t.start_imports();
    let long = queue(&t, big, &csv).await;
    crate::helpers::eventually("the long import to start", 30, || async {
        (job_of(&t, big, &long).await["applied"].as_i64() > Some(0)).then_some(())
    })
    .await;
    let started = std::time::Instant::now();
    let short = queue(&t, small, "crowd7").await;
    let done = crate::helpers::eventually("the short import to end", 30, || async {
        let job = job_of(&t, small, &short).await;
        (job["state"] == "DONE").then_some(job)
    })
    .await;
    assert_eq!(done["applied"], 1, "{done}");
    let waited = started.elapsed();
    let behind = job_of(&t, big, &long).await;
    assert_eq!(
        behind["state"], "RUNNING",
        "the long one still runs: {behind}"
    );
    // At 10 rows a second, in batches of 40, the long one alone would
    // take 40 s: the short one went in its turn.
    assert!(waited < std::time::Duration::from_secs(15), "{waited:?}");

    let cancel = "mutation($id: ID!) { cancelImportJob(input: {id: $id}) {
        changed job { state applied } } }";
    let r = t
        .execute(Viewer::User(other), cancel, json!({ "id": long }))
        .await;
    assert_eq!(error_code(&r), Some("NOT_FOUND"), "{r}");
    let r = t
        .execute(Viewer::User(big), cancel, json!({ "id": long }))
        .await;
    assert_ok(&r);
    assert_eq!(r["data"]["cancelImportJob"]["changed"], true, "{r}");
    assert_eq!(
        r["data"]["cancelImportJob"]["job"]["state"], "CANCELED",
        "{r}"
    );
    let applied = r["data"]["cancelImportJob"]["job"]["applied"]
        .as_i64()
        .unwrap();
    assert!(applied < 400, "{r}");
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let after = job_of(&t, big, &long).await;
    assert_eq!(
        after["applied"].as_i64(),
        Some(applied),
        "nothing after the cancel: {after}"
    );
    assert_eq!(
        t.count(&format!(
            "SELECT count(*) AS n FROM following WHERE from_user_id = {big} AND active"
        ))
        .await,
        applied
    );
    let r = t
        .execute(Viewer::User(big), cancel, json!({ "id": long }))
        .await;
    assert_eq!(r["data"]["cancelImportJob"]["changed"], false, "{r}");
    // A new import may start now; only what a report needs was kept.
    assert_eq!(
        t.count(&format!("SELECT count(*) AS n FROM import_row r JOIN import_job j ON j.id = r.job_id WHERE j.owner_id = {big}"))
            .await,
        0
    );
    runner.stop().await.unwrap();
    // Past KITH_IMPORT_RETENTION_SECS, a finished job goes with its rows.
    t.sql("UPDATE import_job SET finished_at = now() - interval '8 days' WHERE state = 'canceled'")
        .await;
    let runner = t.start_imports();
    crate::helpers::eventually("the old job to be deleted", 30, || async {
        (job_of(&t, big, &long).await.is_null()).then_some(())
    })
    .await;
    assert_eq!(job_of(&t, small, &short).await["state"], "DONE");
    runner.stop().await.unwrap();
}

/// Imports spend a daily follow budget of their own: rows past it wait,
/// reported as `FOLLOW_BUDGET`, and the job resumes them when the day is
/// over, while the account's own follows go on.
#[tokio::test]
async fn imports_spend_a_daily_follow_budget_and_resume_the_next_day() {
    let t = spawn_app_with(|c| c.portability.import_follows_per_day = 3).await;
    let me = t.user("me").await;
    let csv = seeded_file(&t, "pal", 5).await;
    let runner = t.start_imports();
    let id = queue(&t, me, &csv).await;
    let waiting = crate::helpers::eventually("the budget to be spent", 30, || async {
        let job = job_of(&t, me, &id).await;
        (job["deferred"] == 2).then_some(job)
    })
    .await;
    assert_eq!(waiting["applied"], 3, "{waiting}");
    assert_eq!(waiting["state"], "RUNNING", "{waiting}");
    assert!(waiting["resumesAt"].is_string(), "{waiting}");
    let codes: Vec<&Value> = waiting["errors"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["node"]["reason"])
        .collect();
    assert_eq!(codes, [&json!("FOLLOW_BUDGET"), &json!("FOLLOW_BUDGET")]);
    // The budget is the imports' own: a follow of the account's still goes.
    let other = t.user("other").await;
    assert_eq!(t.follow(me, other).await["data"]["follow"]["changed"], true);
    // A day later.
    t.sql("UPDATE import_follow_budget SET window_start = now() - interval '1 day'")
        .await;
    t.sql("UPDATE import_turn SET due_at = now()").await;
    t.app.wakes.imports.notify_one();
    let done = crate::helpers::eventually("the import to resume and end", 30, || async {
        let job = job_of(&t, me, &id).await;
        (job["state"] == "DONE").then_some(job)
    })
    .await;
    assert_eq!(
        json!([
            done["applied"],
            done["deferred"],
            done["failed"],
            done["errors"]["totalCount"]
        ]),
        json!([5, 0, 0, 0]),
        "{done}"
    );
    assert!(done["resumesAt"].is_null(), "{done}");
    runner.stop().await.unwrap();
}

/// A row that only changes the options of a follow that stands is applied
/// but makes no follow: it spends none of the day's follow budget.
#[tokio::test]
async fn new_options_of_standing_follows_spend_no_follow_budget() {
    let t = spawn_app_with(|c| c.portability.import_follows_per_day = 3).await;
    let me = t.user("me").await;
    let mut csv = "Account address,Show boosts,Notify on new posts,Languages\n".to_owned();
    for i in 0..4 {
        let handle = format!("old{i}");
        let user = t.user(&handle).await;
        assert_ok(&t.follow(me, user).await);
        csv.push_str(&format!("{handle},true,true,\n"));
    }
    let job = import(&t, me, "FOLLOWING", "MERGE", &csv).await;
    assert_eq!(
        json!([job["state"], job["applied"], job["errors"]["totalCount"]]),
        json!(["DONE", 4, 0]),
        "{job}"
    );
    // The whole budget is left for follows.
    let new = seeded_file(&t, "new", 3).await;
    let job = import(&t, me, "FOLLOWING", "MERGE", &new).await;
    assert_eq!(
        json!([job["state"], job["applied"], job["errors"]["totalCount"]]),
        json!(["DONE", 3, 0]),
        "{job}"
    );
}

/// A handle a spreadsheet would take for a formula is exported behind a
/// `'` (OWASP's advice), and an import takes the guard off again: the round
/// trip is exact.
#[tokio::test]
async fn exported_cells_are_never_formulas_and_import_back_exactly() {
    let t = spawn_app().await;
    let (me, copy) = (t.user("me").await, t.user("copy").await);
    let mut hostile = Vec::new();
    for handle in [
        "=HYPERLINK(\"http://x\",\"y\")",
        "+1",
        "-2",
        "@sum",
        "\tpad",
        "plain",
    ] {
        let user = kith::testing::store::users::create(
            &mut *t.conn().await,
            handle,
            handle,
            UserStatus::Active,
        )
        .await
        .unwrap();
        t.follow(me, user).await;
        hostile.push(user);
    }
    let (status, _, body, _) = get(&t, "/export/following.csv", Some(&t.token(me))).await;
    assert_eq!(status, StatusCode::OK);
    for line in body.lines().skip(1) {
        let cell = line.trim_start_matches('"');
        assert!(
            !cell.starts_with(['=', '+', '-', '@', '\t', '\r']),
            "a formula cell: {line:?}"
        );
    }
    assert!(
        body.contains("\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")@"),
        "{body}"
    );
    assert!(body.contains("'+1@") && body.contains("'\tpad@"), "{body}");
    let job = import(&t, copy, "FOLLOWING", "MERGE", &body).await;
    assert_eq!(job["applied"], 6, "{job}");
    let followed = t
        .count(&format!(
            "SELECT count(*) AS n FROM following WHERE from_user_id = {copy} AND active
                AND to_user_id IN ({})",
            hostile
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ))
        .await;
    assert_eq!(followed, 6);
}

/// One account streams one export at a time: a second is refused while the
/// first streams, and another account is served meanwhile.
#[tokio::test]
async fn an_account_streams_one_export_at_a_time() {
    let t = spawn_app().await;
    let (me, other) = (t.user("me").await, t.user("other").await);
    seed_followers(&t, me, "fan", 3_000, 7).await;
    let router = kith::testing::http::router(t.app.clone());
    let ask = |token: String| {
        let router = router.clone();
        async move {
            router
                .oneshot(
                    Request::get("/export/followers.csv")
                        .header(header::AUTHORIZATION, format!("Bearer {token}"))
                        .body(Body::empty())
                        .unwrap(),
                )
                .await
                .unwrap()
        }
    };
    // Opened, not read: its place is held.
    let first = ask(t.token(me)).await;
    assert_eq!(first.status(), StatusCode::OK);
    let second = ask(t.token(me)).await;
    assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(ask(t.token(other)).await.status(), StatusCode::OK);
    drop(first);
    assert_eq!(ask(t.token(me)).await.status(), StatusCode::OK);
}

/// A client that opens an export and stops reading holds its place only
/// until a write has waited `KITH_WRITE_TIMEOUT_SECS`: the server drops it,
/// and the account may export again. Over real sockets, with a file far
/// larger than the sockets' buffers.
#[tokio::test]
async fn a_client_that_stops_reading_is_dropped() {
    use crate::helpers::eventually;
    use crate::http_client;
    use tokio::io::AsyncWriteExt as _;

    let t = spawn_app().await;
    let me = t.user("me").await;
    seed_followers(&t, me, "reader", 300_000, 7).await;
    let (_server, port) = serve(&t, &[("KITH_WRITE_TIMEOUT_SECS", "2".into())]).await;
    let token = t.token(me);
    // A client that asks and never reads, with a small receive buffer.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stalled = socket.connect(([127, 0, 0, 1], port).into()).await.unwrap();
    stalled
        .write_all(
            format!(
                "GET /export/followers.csv HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let export = || async {
        http_client::request(
            port,
            "GET",
            "/export/mutes.csv",
            &[("Authorization", &format!("Bearer {token}"))],
            b"",
        )
        .await
        .map(|(status, _)| status)
    };
    // Its place is held while the server can still write…
    eventually("the stalled export to hold its place", 30, || async {
        (export().await == Ok(429)).then_some(())
    })
    .await;
    // …and given back once a write has waited past the deadline (however
    // long the server takes to fill the sockets' buffers first: a loaded
    // machine streams the file slowly).
    eventually("the stalled client to be dropped", 120, || async {
        (export().await == Ok(200)).then_some(())
    })
    .await;
    drop(stalled);
}

/// A `kith serve` of the test app's configuration and `extra` on a free
/// port, once it answers `/healthz`.
async fn serve(t: &TestApp, extra: &[(&str, String)]) -> (crate::helpers::KithProcess, u16) {
    let port = crate::http_client::free_port();
    let mut env = vec![("KITH_HTTP_ADDR", format!("127.0.0.1:{port}"))];
    env.extend(extra.iter().cloned());
    let server = crate::helpers::KithProcess::start(t, "serve", &env);
    crate::helpers::eventually("the server to listen", 60, || async {
        crate::http_client::get(port, "/healthz").await.ok()
    })
    .await;
    (server, port)
}

#[tokio::test]
async fn follow_options_export_and_import_back() {
    let t = spawn_app_with(|c| {
        c.writes.rate_limit_capacity = 1000;
        c.portability.import_rows_per_sec = 1000;
        c.portability.account_domain = "kith.example".into();
    })
    .await;
    let (old, new, a, b) = (
        t.user("old").await,
        t.user("new").await,
        t.user("a").await,
        t.user("b").await,
    );
    assert_ok(&t.follow(old, a).await);
    assert_ok(&t.follow(new, old).await);
    let r = t
        .execute(
            Viewer::User(old),
            "mutation($id: ID!) { follow(input: {userId: $id, notify: true, showReposts: false,
                                                  languages: [\"en\", \"de\"]}) { changed } }",
            json!({ "id": gid(b) }),
        )
        .await;
    assert_ok(&r);
    let (_, _, csv, _) = get(&t, "/export/following.csv", Some(&t.token(old))).await;
    assert_eq!(
        csv,
        "Account address,Show boosts,Notify on new posts,Languages\n\
         a@kith.example,true,false,\n\
         b@kith.example,false,true,\"en, de\"\n"
    );
    // A follower's options are its own: old's followers list says nothing of them.
    let (_, _, followers, _) = get(&t, "/export/followers.csv", Some(&t.token(old))).await;
    assert!(
        followers.ends_with("new@kith.example,true,false,\n"),
        "{followers}"
    );

    // Imported: the follows with their options; a follow that stands takes
    // the file's options (applied), and a bad option cell is a malformed row.
    assert_ok(&t.follow(new, a).await);
    let file = format!("{csv}a@kith.example,TRUE,true,fr\nold@kith.example,maybe,false,\n");
    let file = file.replacen("a@kith.example,true,false,\n", "", 1);
    let job = import(&t, new, "FOLLOWING", "MERGE", &file).await;
    assert_eq!(
        json!([job["total"], job["applied"], job["failed"]]),
        json!([3, 2, 1]),
        "{job}"
    );
    let (_, _, exported, _) = get(&t, "/export/following.csv", Some(&t.token(new))).await;
    assert_eq!(
        exported,
        "Account address,Show boosts,Notify on new posts,Languages\n\
         old@kith.example,true,false,\n\
         a@kith.example,true,true,fr\n\
         b@kith.example,false,true,\"en, de\"\n"
    );
}
