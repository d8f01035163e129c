//! The HTTP transport: bearer tokens from headers, GraphiQL, health, readiness.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::helpers::{TestApp, error_code, spawn_app, spawn_app_with};

async fn send(t: &TestApp, request: Request<Body>) -> (StatusCode, Vec<u8>) {
    let response = kith::testing::http::router(t.app.clone())
        .oneshot(request)
        .await
        .unwrap();
    let status = response.status();
    (
        status,
        response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
}

async fn post_graphql(t: &TestApp, authorization: Option<&str>, body: Value) -> Value {
    let mut request = Request::post("/graphql").header(header::CONTENT_TYPE, "application/json");
    if let Some(value) = authorization {
        request = request.header(header::AUTHORIZATION, value);
    }
    let (status, body) = send(t, request.body(Body::from(body.to_string())).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    serde_json::from_slice(&body).unwrap()
}

#[tokio::test]
async fn bearer_token_identifies_the_viewer() {
    let t = spawn_app().await;
    let alice = t.user("alice").await;
    let query = json!({ "query": "{ viewer { handle counters { followings } followers(first: 5) { totalCount } viewerRelation { following } } }" });
    let r = post_graphql(
        &t,
        Some(&format!("Bearer {}", t.token(alice))),
        query.clone(),
    )
    .await;
    assert_eq!(r["data"]["viewer"]["handle"], "alice", "{r}");
    let r = post_graphql(&t, None, query).await;
    assert!(
        r["data"]["viewer"].is_null() && r["errors"].is_null(),
        "{r}"
    );
}

#[tokio::test]
async fn bad_tokens_cannot_follow() {
    let t = spawn_app().await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    let now = chrono::Utc::now().timestamp();
    let expired = t.app.auth.tokens.issue(alice, now - 600, 60);
    let foreign =
        kith::testing::auth::TokenKeys::new("some-other-secret-entirely").issue(alice, now, 60);
    let claims = URL_SAFE_NO_PAD.encode(format!(r#"{{"sub":"{alice}","exp":{}}}"#, now + 60));
    let alg_none = format!(
        "{}.{claims}.",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#)
    );
    let valid = t.token(alice);
    let mut parts: Vec<&str> = valid.split('.').collect();
    let other_claims = URL_SAFE_NO_PAD.encode(format!(r#"{{"sub":"{bob}","exp":{}}}"#, now + 60));
    parts[1] = &other_claims;
    let impersonation = parts.join(".");

    let follow = json!({
        "query": "mutation($id: ID!) { follow(input: {userId: $id}) { changed } }",
        "variables": { "id": kith::testing::graph::ids::user_id(bob).to_string() },
    });
    let before = t.snapshot().await;
    for authorization in [
        None,
        Some(format!("Bearer {expired}")),
        Some(format!("Bearer {foreign}")),
        Some(format!("Bearer {alg_none}")),
        Some(format!("Bearer {impersonation}")),
        Some("Bearer".to_owned()),
        Some(format!("Basic {valid}")),
    ] {
        let r = post_graphql(&t, authorization.as_deref(), follow.clone()).await;
        assert_eq!(
            error_code(&r),
            Some("UNAUTHENTICATED"),
            "{authorization:?}: {r}"
        );
    }
    assert_eq!(t.snapshot().await, before);

    let r = post_graphql(&t, Some(&format!("Bearer {valid}")), follow).await;
    assert_eq!(r["data"]["follow"]["changed"], true, "{r}");
}

#[tokio::test]
async fn graphiql_health_and_readiness() {
    let t = spawn_app().await;
    let (status, body) = send(
        &t,
        Request::get("/graphql")
            .header(header::ACCEPT, "text/html,application/xhtml+xml,*/*;q=0.8")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        String::from_utf8_lossy(&body)
            .to_lowercase()
            .contains("graphiql")
    );

    let (status, body) = send(&t, Request::get("/healthz").body(Body::empty()).unwrap()).await;
    assert_eq!(
        (status, body.as_slice()),
        (StatusCode::OK, b"ok".as_slice())
    );

    let (status, body) = send(&t, Request::get("/readyz").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    let body: Value = serde_json::from_slice(&body).unwrap();
    // No listener runs in this in-process app (`kith serve` starts one).
    assert_eq!(
        body,
        json!({ "postgres": "ok", "redis": "ok", "live": "not listening" })
    );
}

#[tokio::test]
async fn readiness_reports_redis_but_stays_ready_without_it() {
    let t = crate::helpers::spawn_app().await;
    let app = t.without_redis();
    let response = kith::testing::http::router(app)
        .oneshot(Request::get("/readyz").body(Body::empty()).unwrap())
        .await
        .unwrap();
    // Reads are served from PostgreSQL while Redis is away.
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value =
        serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(
        body,
        json!({ "postgres": "ok", "redis": "unreachable", "live": "not listening" })
    );
}

/// `GET /metrics` from the metrics router (what `KITH_METRICS_ADDR` serves).
async fn scrape(t: &TestApp) -> (StatusCode, Vec<u8>) {
    let response = kith::testing::http::metrics_router(t.app.clone())
        .oneshot(Request::get("/metrics").body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, body.to_vec())
}

/// Metrics are not the API's: strangers who reach the API do not see them,
/// they are served on a listener of their own (loopback by default), and a
/// scrape costs no statement — the backlog is what a background task last
/// sampled.
#[tokio::test]
async fn metrics_have_their_own_listener_and_a_scrape_runs_no_statement() {
    let port = crate::http_client::free_port();
    let t = crate::helpers::spawn_app_with(|c| {
        c.http.metrics_addr = Some(format!("127.0.0.1:{port}").parse().unwrap());
    })
    .await;
    let (status, _) = send(&t, Request::get("/metrics").body(Body::empty()).unwrap()).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "metrics on the API's listener"
    );
    assert_eq!(
        kith::config::Config::from_lookup(|_| None)
            .unwrap()
            .http
            .metrics_addr
            .map(|a| a.ip().is_loopback()),
        Some(true)
    );

    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    t.follow(alice, bob).await;
    let (trigger, shutdown) = kith::testing::shutdown::Shutdown::new();
    let served = tokio::spawn(kith::testing::http::serve_metrics(t.app.clone(), shutdown));
    // The backlog is sampled in the background: wait for its first sample.
    crate::helpers::eventually("the metrics listener's backlog sample", 10, || async {
        let body = crate::http_client::get(port, "/metrics").await.ok()?;
        let text = String::from_utf8(body).ok()?;
        text.contains("kith_relay_backlog 1\n").then_some(())
    })
    .await;
    let statements = || t.app.round_trips.snapshot().0;
    let before = statements();
    for _ in 0..20 {
        crate::http_client::get(port, "/metrics").await.unwrap();
    }
    assert_eq!(statements(), before, "a scrape ran statements");
    trigger.trigger();
    served.await.unwrap();
}

/// After a scripted workload — follows through the pipeline, a named
/// profile query, a refused request, a rate-limited follow — `/metrics`
/// holds the standard set with its labels, in the OpenMetrics text format.
#[tokio::test]
async fn metrics_are_served_in_openmetrics_text() {
    let t = crate::helpers::spawn_app_with(|c| {
        c.writes.rate_limit_capacity = 3;
        c.writes.rate_limit_per_sec = 0.01;
    })
    .await;
    let (alice, bob, carol) = (
        t.user("alice").await,
        t.user("bob").await,
        t.user("carol").await,
    );
    t.follow(alice, bob).await;
    // One sample of the backlog, as the metrics listener's task takes them.
    let (trigger, shutdown) = kith::testing::shutdown::Shutdown::new();
    trigger.trigger();
    kith::testing::http::sample_backlog(t.app.clone(), shutdown).await;
    let (status, response) = scrape(&t).await;
    assert_eq!(status, StatusCode::OK);
    let text = String::from_utf8(response).unwrap();
    assert!(text.contains("kith_relay_backlog 1\n"), "{text}");

    let relay = t.start_relay();
    let projector = t.start_projector(std::sync::Arc::new(
        kith::testing::pipeline::projector::ProjectorHooks::default(),
    ));
    t.follow(alice, carol).await;
    t.follow(bob, carol).await;
    crate::helpers::settled(&t, &[alice, bob, carol], 60).await;
    let profile = "query Profile($id: ID!) { user(id: $id) { handle counters { followers }
        followers(first: 5) { edges { node { handle } } } } }";
    for _ in 0..2 {
        let r = t
            .execute(
                kith::testing::auth::Viewer::Anonymous,
                profile,
                json!({ "id": kith::testing::graph::ids::user_id(carol).to_string() }),
            )
            .await;
        crate::helpers::assert_ok(&r);
    }
    t.execute(
        kith::testing::auth::Viewer::Anonymous,
        "{ nope }",
        json!({}),
    )
    .await;
    for _ in 0..3 {
        t.follow(alice, carol).await;
        t.unfollow(alice, carol).await;
    }
    // The consumer-lag reading comes with the lease keeper's next tick.
    let text = crate::helpers::eventually("the consumer lag to be measured", 30, || async {
        let (_, body) = scrape(&t).await;
        let text = String::from_utf8(body).unwrap();
        text.contains("kith_consumer_lag_messages{").then_some(text)
    })
    .await;
    relay.stop().await.unwrap();
    projector.stop().await.unwrap();
    for line in [
        "# TYPE kith_graphql_requests counter",
        "kith_graphql_requests_total{operation=\"Profile\",outcome=\"ok\"} 2\n",
        "kith_graphql_requests_total{operation=\"refused\",outcome=\"INVALID_INPUT\"} 1\n",
        "kith_graphql_request_duration_seconds_bucket{le=\"+Inf\",operation=\"Profile\",outcome=\"ok\"} 2\n",
        "kith_graphql_requests_total{operation=\"anonymous\",outcome=\"RATE_LIMITED\"}",
        "kith_rate_limited_total ",
        "kith_cache_lookups_total{cache=\"counter_record\",result=\"hit\"}",
        "kith_cache_lookups_total{cache=\"list\",result=",
        "kith_pool_connections{pool=\"postgres\"}",
        "kith_pool_connections{pool=\"redis\"}",
        "kith_pool_checkouts_total{pool=\"postgres\",result=\"direct\"}",
        "kith_pool_wait_seconds_total{pool=\"redis\"}",
        "kith_list_fills_in_flight ",
        "kith_consumer_lag_messages{topic=",
        "kith_events_relayed_total ",
        "kith_events_applied_total ",
        "kith_postgres_statements_total ",
        "kith_read_redis_round_trips_total ",
        "kith_pipeline_lag_seconds_count ",
        "# EOF",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
    assert!(
        !text.contains("kith_pipeline_lag_seconds_count 0\n"),
        "{text}"
    );
    assert!(!text.contains("kith_rate_limited_total 0\n"), "{text}");
}

/// Serves `t`'s API on a free local port for clients outside the process.
async fn serve(t: &TestApp) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = kith::testing::http::router(t.app.clone());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

#[tokio::test]
async fn the_graphql_over_http_audit_passes() {
    let t = spawn_app().await;
    let addr = serve(&t).await;
    let report = crate::helpers::js_client(
        "audit.mjs",
        "graphql-http",
        vec![format!("http://{addr}/graphql")],
    )
    .await;
    eprintln!("{report}");
    assert!(report.contains("MUST 13/13"), "{report}");
    // Every level, MAY included, passes whole: "LEVEL passed/all".
    let tallies: Vec<(&str, &str)> = report
        .lines()
        .filter(|l| {
            ["MUST ", "SHOULD ", "MAY "]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .filter_map(|l| l.split_once(' ')?.1.split_once('/'))
        .collect();
    assert_eq!(tallies.len(), 3, "{report}");
    assert!(tallies.iter().all(|(ok, all)| ok == all), "{report}");
}

/// GraphiQL in a real browser (headless Chromium, `tests/http-audit/graphiql.mjs`)
/// with every request outside the server refused: the page loads, its docs
/// explorer lists `User`'s fields and its editor completes `{ viewer { fol`
/// (both from the schema it introspects), and a query typed into it with a
/// token in the Headers tab shows its answer. A screenshot is left in
/// `target/screenshots/graphiql.png`.
#[tokio::test]
async fn graphiql_runs_a_query_in_chromium_without_internet() {
    let t = spawn_app().await;
    let me = t.user("graphiql_user").await;
    let addr = serve(&t).await;
    let shots = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target dir")
        .join("screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    crate::helpers::js_client(
        "graphiql.mjs",
        "playwright-core",
        vec![
            format!("http://{addr}"),
            t.token(me),
            "graphiql_user".to_owned(),
            shots.join("graphiql.png").to_string_lossy().into_owned(),
        ],
    )
    .await;
}

fn post(content_type: Option<&str>, accept: Option<&str>, body: impl Into<Body>) -> Request<Body> {
    let mut request = Request::post("/graphql");
    if let Some(value) = content_type {
        request = request.header(header::CONTENT_TYPE, value);
    }
    if let Some(value) = accept {
        request = request.header(header::ACCEPT, value);
    }
    request.body(body.into()).unwrap()
}

async fn exchange(
    t: &TestApp,
    request: Request<Body>,
) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let response = kith::testing::http::router(t.app.clone())
        .oneshot(request)
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    (
        parts.status,
        parts.headers,
        body.collect().await.unwrap().to_bytes().to_vec(),
    )
}

#[tokio::test]
async fn bodies_past_the_limit_get_413_while_streaming() {
    let t = spawn_app_with(|c| c.limits.max_body_bytes = 64 * 1024).await;
    let padding = " ".repeat(100 * 1024);
    let body = format!(r#"{{"query": "{{ __typename }}"{padding}}}"#);
    let (status, _, _) = exchange(&t, post(Some("application/json"), None, body.clone())).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);

    // No content-length: the limit holds while the chunks arrive, and the
    // rest of the stream is never read.
    let read = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = read.clone();
    let chunks = futures::stream::iter((0..1000).map(move |_| {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok::<_, std::io::Error>(vec![b' '; 16 * 1024])
    }));
    let (status, _, _) = exchange(
        &t,
        post(Some("application/json"), None, Body::from_stream(chunks)),
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        read.load(std::sync::atomic::Ordering::Relaxed) < 10,
        "read the whole stream"
    );

    let (status, _, body) = exchange(
        &t,
        post(
            Some("application/json"),
            None,
            r#"{"query": "{ __typename }"}"#,
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
}

#[tokio::test]
async fn only_json_posts_run_and_get_runs_queries_only() {
    let t = spawn_app().await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    let follow = json!({
        "query": "mutation($id: ID!) { follow(input: {userId: $id}) { changed } }",
        "variables": { "id": kith::testing::graph::ids::user_id(bob).to_string() },
    })
    .to_string();
    let before = t.snapshot().await;
    let token = format!("Bearer {}", t.token(alice));
    // Requests a browser sends cross-site without a CORS preflight.
    for content_type in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        Some("application/json; charset=latin1"),
    ] {
        let mut request = post(content_type, None, follow.clone());
        request
            .headers_mut()
            .insert(header::AUTHORIZATION, token.parse().unwrap());
        let (status, headers, _) = exchange(&t, request).await;
        assert_eq!(
            status,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "{content_type:?}"
        );
        // A refusal varies with the request's headers as an answer does.
        assert_eq!(headers[header::VARY], "Accept, Authorization");
    }
    // A mutation through GET is refused, whatever the operation's name.
    let encoded = |s: &str| s.bytes().map(|b| format!("%{b:02X}")).collect::<String>();
    for (query, operation) in [
        (
            "mutation { follow(input: {userId: \"x\"}) { changed } }",
            "",
        ),
        (
            "query A { __typename } mutation B { __typename }",
            "&operationName=B",
        ),
    ] {
        let uri = format!("/graphql?query={}{operation}", encoded(query));
        let mut request = Request::get(uri).body(Body::empty()).unwrap();
        request
            .headers_mut()
            .insert(header::AUTHORIZATION, token.parse().unwrap());
        let (status, headers, _) = exchange(&t, request).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{query}");
        assert_eq!(headers[header::ALLOW], "POST");
    }
    assert_eq!(t.snapshot().await, before);

    // A GET query runs, with variables.
    let uri = format!(
        "/graphql?query={}&variables={}",
        encoded("query($h: String!) { userByHandle(handle: $h) { handle } }"),
        encoded(r#"{"h":"alice"}"#)
    );
    let (status, headers, body) =
        exchange(&t, Request::get(uri).body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let r: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(r["data"]["userByHandle"]["handle"], "alice", "{r}");
}

#[tokio::test]
async fn the_response_type_follows_accept() {
    let t = spawn_app().await;
    let ok = r#"{"query": "{ __typename }"}"#;
    let bad = r#"{"query": "{ noSuchField }"}"#;
    let cases = [
        (None, ok, StatusCode::OK, "application/json"),
        (
            Some("application/json"),
            ok,
            StatusCode::OK,
            "application/json",
        ),
        (Some("*/*"), ok, StatusCode::OK, "application/json"),
        (
            Some("application/graphql-response+json"),
            ok,
            StatusCode::OK,
            "application/graphql-response+json",
        ),
        (
            Some("application/json"),
            bad,
            StatusCode::OK,
            "application/json",
        ),
        (
            Some("application/graphql-response+json"),
            bad,
            StatusCode::BAD_REQUEST,
            "application/graphql-response+json",
        ),
    ];
    for (accept, body, status, content_type) in cases {
        let (got, headers, body) = exchange(&t, post(Some("application/json"), accept, body)).await;
        assert_eq!(got, status, "{accept:?}");
        assert!(
            headers[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with(content_type),
            "{accept:?}: {:?}",
            headers[header::CONTENT_TYPE]
        );
        let r: Value = serde_json::from_slice(&body).unwrap();
        if status == StatusCode::BAD_REQUEST {
            assert!(r.get("data").is_none(), "{r}");
            assert_eq!(error_code(&r), Some("INVALID_INPUT"));
        }
    }
    let (status, _, _) = exchange(&t, post(Some("application/json"), None, "{ \"not json")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // A subscription sent as a plain request: refused like any document when
    // it does not validate; when it does, it runs and is told the transport
    // cannot serve it (a GraphQL answer, not a bad request).
    let strict = Some("application/graphql-response+json");
    let invalid = r#"{"query": "subscription { noSuchField }"}"#;
    let (status, _, body) = exchange(&t, post(Some("application/json"), strict, invalid)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let r: Value = serde_json::from_slice(&body).unwrap();
    assert!(r.get("data").is_none(), "{r}");
    let valid =
        r#"{"query": "subscription { followerEvents(userId: \"VXNlcjox\") { __typename } }"}"#;
    let (status, _, body) = exchange(&t, post(Some("application/json"), strict, valid)).await;
    let r: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status, StatusCode::OK, "{r}");
    assert!(
        r["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("transport"),
        "{r}"
    );
}

#[tokio::test]
async fn cors_allows_only_the_configured_origins() {
    let preflight = |origin: &str| {
        Request::builder()
            .method("OPTIONS")
            .uri("/graphql")
            .header(header::ORIGIN, origin)
            .header(header::ACCESS_CONTROL_REQUEST_METHOD, "POST")
            .header(
                header::ACCESS_CONTROL_REQUEST_HEADERS,
                "authorization, content-type",
            )
            .body(Body::empty())
            .unwrap()
    };
    let with_origin = |origin: &str| {
        let mut request = post(
            Some("application/json"),
            None,
            r#"{"query": "{ __typename }"}"#,
        );
        request
            .headers_mut()
            .insert(header::ORIGIN, origin.parse().unwrap());
        request
    };
    // None by default.
    let t = spawn_app().await;
    let (_, headers, _) = exchange(&t, preflight("https://app.example")).await;
    assert!(headers.get(header::ACCESS_CONTROL_ALLOW_ORIGIN).is_none());
    let (_, headers, _) = exchange(&t, with_origin("https://app.example")).await;
    assert!(headers.get(header::ACCESS_CONTROL_ALLOW_ORIGIN).is_none());

    let t = spawn_app_with(|c| c.http.cors_origins = vec!["https://app.example".into()]).await;
    let (status, headers, _) = exchange(&t, preflight("https://app.example")).await;
    assert!(status.is_success());
    assert_eq!(
        headers[header::ACCESS_CONTROL_ALLOW_ORIGIN],
        "https://app.example"
    );
    let methods = headers[header::ACCESS_CONTROL_ALLOW_METHODS]
        .to_str()
        .unwrap();
    assert!(methods.contains("POST") && methods.contains("GET"));
    let allowed = headers[header::ACCESS_CONTROL_ALLOW_HEADERS]
        .to_str()
        .unwrap();
    assert!(allowed.contains("authorization") && allowed.contains("content-type"));
    let (_, headers, _) = exchange(&t, with_origin("https://app.example")).await;
    assert_eq!(
        headers[header::ACCESS_CONTROL_ALLOW_ORIGIN],
        "https://app.example"
    );
    assert!(
        headers
            .get(header::ACCESS_CONTROL_ALLOW_CREDENTIALS)
            .is_none()
    );
    let (_, headers, _) = exchange(&t, with_origin("https://evil.example")).await;
    assert!(headers.get(header::ACCESS_CONTROL_ALLOW_ORIGIN).is_none());
    let vary: Vec<_> = headers
        .get_all(header::VARY)
        .iter()
        .flat_map(|v| v.to_str().unwrap().split(','))
        .map(|v| v.trim().to_ascii_lowercase())
        .collect();
    assert!(
        ["origin", "authorization", "accept"]
            .iter()
            .all(|v| vary.iter().any(|got| got == v)),
        "{vary:?}"
    );
}

/// `Server-Timing` names an answer's time in Kith only when
/// `KITH_SERVER_TIMING` asks for it, in milliseconds, within the time the
/// caller waited; beside it, the time and number of the PostgreSQL
/// statements and Redis round trips made for the request, its loaders'
/// included.
#[tokio::test]
async fn server_timing_is_sent_only_when_asked_for() {
    let query = |body: String| post(Some("application/json"), None, body);
    let typename = || query(r#"{"query":"{ __typename }"}"#.to_owned());
    let t = spawn_app().await;
    let (status, headers, _) = exchange(&t, typename()).await;
    assert!(status.is_success());
    assert!(headers.get("server-timing").is_none());

    let t = spawn_app_with(|c| c.http.server_timing = true).await;
    let alice = t.user("alice").await;
    let profile = || {
        let id = kith::testing::graph::ids::user_id(alice).to_string();
        query(
            json!({
                "query": "query($id: ID!) { user(id: $id) { handle counters { followers } } }",
                "variables": { "id": id },
            })
            .to_string(),
        )
    };
    // Each answer's metrics: name -> (ms, count in `desc`).
    let timed = async |request| {
        let sent = std::time::Instant::now();
        let (status, headers, body) = exchange(&t, request).await;
        let waited_ms = sent.elapsed().as_secs_f64() * 1000.0;
        assert!(status.is_success(), "{}", String::from_utf8_lossy(&body));
        let timing = headers["server-timing"].to_str().unwrap().to_owned();
        let metrics: std::collections::HashMap<String, (f64, u64)> = timing
            .split(", ")
            .map(|metric| {
                let mut parts = metric.split(';');
                let name = parts.next().unwrap().to_owned();
                let (mut ms, mut count) = (f64::NAN, 0);
                for part in parts {
                    if let Some(v) = part.strip_prefix("dur=") {
                        ms = v.parse().unwrap_or_else(|_| panic!("{timing}"));
                    } else if let Some(v) = part.strip_prefix("desc=") {
                        count = v
                            .trim_matches('"')
                            .split(' ')
                            .next()
                            .unwrap()
                            .parse()
                            .unwrap();
                    }
                }
                (name, (ms, count))
            })
            .collect();
        let kith = metrics["kith"].0;
        assert!(
            kith > 0.0 && kith <= waited_ms,
            "{timing}, waited {waited_ms} ms"
        );
        assert!(
            metrics["pg"].0 >= 0.0 && metrics["redis"].0 >= 0.0,
            "{timing}"
        );
        metrics
    };
    // A readiness check pings each once, in the request's own task.
    let ready = timed(Request::get("/readyz").body(Body::empty()).unwrap()).await;
    assert!(ready["pg"].1 >= 1 && ready["redis"].1 == 1, "{ready:?}");
    assert_eq!(timed(typename()).await["redis"].1, 0);
    // A cold profile reads the row from PostgreSQL and the counters from
    // Redis (in the loaders' tasks); a warm one only the counters.
    t.users_cached().await;
    let cold = timed(profile()).await;
    assert!(cold["pg"].1 >= 1 && cold["pg"].0 > 0.0, "{cold:?}");
    assert!(cold["redis"].1 >= 1 && cold["redis"].0 > 0.0, "{cold:?}");
    t.fills_finished().await;
    let warm = timed(profile()).await;
    assert_eq!(warm["pg"], (0.0, 0), "{warm:?}");
    assert!(warm["redis"].1 >= 1, "{warm:?}");
}

/// W3C trace context: the caller's trace id comes back in `traceparent`
/// (with this request as the parent); without a valid one, a new trace.
#[tokio::test]
async fn trace_context_is_carried_through() {
    let t = spawn_app().await;
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let response = kith::testing::http::router(t.app.clone())
        .oneshot(
            Request::get("/healthz")
                .header("traceparent", format!("00-{trace}-00f067aa0ba902b7-01"))
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let back = response.headers()["traceparent"]
        .to_str()
        .unwrap()
        .to_owned();
    let parts: Vec<&str> = back.split('-').collect();
    assert_eq!(
        (parts[0], parts[1], parts[3]),
        ("00", trace, "01"),
        "{back}"
    );
    assert_ne!(
        parts[2], "00f067aa0ba902b7",
        "this request is the new parent"
    );
    assert_eq!(parts[2].len(), 16);

    for bad in [
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "garbage",
    ] {
        let response = kith::testing::http::router(t.app.clone())
            .oneshot(
                Request::get("/healthz")
                    .header("traceparent", bad)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        let back = response.headers()["traceparent"]
            .to_str()
            .unwrap()
            .to_owned();
        let new_trace = back.split('-').nth(1).unwrap().to_owned();
        assert_eq!(new_trace.len(), 32, "{bad}: {back}");
        assert_ne!(new_trace, trace, "{bad}: a new trace");
        assert!(back.ends_with("-00"), "{bad}: {back}");
    }
}

/// The introspection queries tools send (graphql-js's, with and without its
/// options, over POST and GET) answer, and the schema they learn is
/// `schema.graphql` (`tests/http-audit/introspection.mjs`).
#[tokio::test]
async fn every_tool_can_introspect_the_schema() {
    let t = spawn_app().await;
    let addr = serve(&t).await;
    let report = crate::helpers::js_client(
        "introspection.mjs",
        "graphql",
        vec![
            format!("http://{addr}/graphql"),
            concat!(env!("CARGO_MANIFEST_DIR"), "/schema.graphql").to_owned(),
        ],
    )
    .await;
    eprintln!("{report}");
}

#[tokio::test]
async fn introspection_gets_no_way_around_the_limits_and_can_be_switched_off() {
    let t = spawn_app().await;
    let code = |r: &Value| error_code(r).map(str::to_owned);
    let run = |query: String| {
        let t = &t;
        async move {
            t.execute(kith::testing::auth::Viewer::Anonymous, &query, json!({}))
                .await
        }
    };
    let of_type = |levels: usize| {
        let mut selection = "name".to_owned();
        for _ in 0..levels {
            selection = format!("ofType {{ {selection} }}");
        }
        format!("{{ __type(name: \"User\") {{ {selection} }} }}")
    };
    // 20 levels of `ofType` under `__type`: an introspection query, allowed.
    let r = run(of_type(20)).await;
    assert!(r["errors"].is_null(), "{r}");
    // The same depth with an ordinary field beside it is no introspection query.
    let r = run(of_type(20).replacen("{ __type", "{ viewer { handle } __type", 1)).await;
    assert_eq!(code(&r).as_deref(), Some("INVALID_INPUT"), "{r}");
    // Past 24 levels, even introspection is refused.
    let r = run(of_type(30)).await;
    assert_eq!(code(&r).as_deref(), Some("INVALID_INPUT"), "{r}");
    // Lists inside lists multiply the answer: at most three, never aliased.
    let r = run(
        "{ __schema { types { fields { type { fields { type { fields { name } } } } } } } }".into(),
    )
    .await;
    assert_eq!(code(&r).as_deref(), Some("INVALID_INPUT"), "{r}");
    let r = run("{ __schema { a: types { name } b: types { name } } }".into()).await;
    assert_eq!(code(&r).as_deref(), Some("INVALID_INPUT"), "{r}");
    let r = run("{ __schema { types { fields { args { name } } } } }".into()).await;
    assert!(r["errors"].is_null(), "{r}");

    // Switched off: introspection is refused with its own code, anywhere
    // in a document; `__typename` is not introspection.
    let off = spawn_app_with(|c| c.limits.introspection = false).await;
    for query in [
        "{ __schema { types { name } } }",
        "{ __type(name: \"User\") { name } }",
        "query { ...F } fragment F on Query { __schema { queryType { name } } }",
    ] {
        let r = off
            .execute(kith::testing::auth::Viewer::Anonymous, query, json!({}))
            .await;
        assert_eq!(
            error_code(&r),
            Some("INTROSPECTION_DISABLED"),
            "{query}: {r}"
        );
    }
    let r = off
        .execute(
            kith::testing::auth::Viewer::Anonymous,
            "{ __typename }",
            json!({}),
        )
        .await;
    assert!(r["errors"].is_null(), "{r}");
}

/// Only what anyone would be answered may sit in a shared cache: an
/// anonymous `GET` without errors is public for `KITH_PUBLIC_CACHE_SECS`;
/// an answer to a token (GET or POST) is private; every answer varies by
/// `Authorization` and `Accept`.
#[tokio::test]
async fn only_anonymous_get_answers_are_publicly_cacheable() {
    let t = spawn_app_with(|c| c.limits.public_cache_secs = 7).await;
    let alice = t.user("alice").await;
    let bearer = format!("Bearer {}", t.token(alice));
    let headers = async |method: &str, authorization: Option<&str>, query: &str| {
        let mut request = match method {
            "GET" => Request::get(format!("/graphql?query={}", url_escape(query))),
            _ => Request::post("/graphql").header(header::CONTENT_TYPE, "application/json"),
        };
        if let Some(value) = authorization {
            request = request.header(header::AUTHORIZATION, value);
        }
        let body = match method {
            "GET" => Body::empty(),
            _ => Body::from(json!({ "query": query }).to_string()),
        };
        let response = kith::testing::http::router(t.app.clone())
            .oneshot(request.body(body).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let header = |name| {
            response
                .headers()
                .get_all(name)
                .iter()
                .map(|v| v.to_str().unwrap().to_owned())
                .collect::<Vec<_>>()
                .join(", ")
        };
        (header(header::CACHE_CONTROL), header(header::VARY))
    };
    let query = "{ userByHandle(handle: \"alice\") { handle } }";
    let (cache, vary) = headers("GET", None, query).await;
    assert_eq!(cache, "public, max-age=7");
    assert!(
        vary.contains("Authorization") && vary.contains("Accept"),
        "{vary}"
    );
    for (method, authorization) in [
        ("GET", Some(bearer.as_str())),
        ("POST", Some(&bearer)),
        ("POST", None),
    ] {
        let (cache, vary) = headers(method, authorization, query).await;
        assert_eq!(cache, "private, no-cache", "{method} {authorization:?}");
        assert!(vary.contains("Authorization"), "{vary}");
    }
    // A rejected token and an answer with errors are private too.
    let (cache, _) = headers("GET", Some("Bearer nonsense"), query).await;
    assert_eq!(cache, "private, no-cache");
    let (cache, _) = headers("GET", None, "{ user(id: \"nope\") { handle } }").await;
    assert_eq!(cache, "private, no-cache");
}

fn url_escape(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
