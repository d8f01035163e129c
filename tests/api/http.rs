//! The HTTP transport: bearer tokens from headers, GraphiQL, health, readiness.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::helpers::{TestApp, error_code, spawn_app};

async fn send(t: &TestApp, request: Request<Body>) -> (StatusCode, Vec<u8>) {
    let response = kith::http::router(t.app.clone())
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
    let expired = t.app.tokens.issue(alice, now - 600, 60);
    let foreign = kith::auth::TokenKeys::new("some-other-secret-entirely").issue(alice, now, 60);
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
        "variables": { "id": kith::graph::ids::user_id(bob).to_string() },
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
    let (status, body) = send(&t, Request::get("/graphql").body(Body::empty()).unwrap()).await;
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
    assert_eq!(body, json!({ "postgres": "ok", "redis": "ok" }));
}

#[tokio::test]
async fn readiness_fails_when_redis_is_unreachable() {
    let t = crate::helpers::spawn_app().await;
    let app = t.without_redis();
    let response = kith::http::router(app)
        .oneshot(Request::get("/readyz").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: Value =
        serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(body, json!({ "postgres": "ok", "redis": "unreachable" }));
}

#[tokio::test]
async fn metrics_are_served_in_prometheus_text() {
    let t = spawn_app().await;
    let (alice, bob) = (t.user("alice").await, t.user("bob").await);
    t.follow(alice, bob).await;
    let (status, body) = send(&t, Request::get("/metrics").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    let text = String::from_utf8(body).unwrap();
    for name in [
        "kith_events_relayed_total 0",
        "kith_events_applied_total 0",
        "kith_events_dead_lettered_total 0",
        "kith_relay_backlog 1",
        "kith_pipeline_lag_seconds_count 0",
    ] {
        assert!(text.contains(name), "{name} missing from:\n{text}");
    }
}
