//! Persisted queries over HTTP: Apollo's Automatic Persisted Queries (hash
//! first, the text once when unknown; POST and GET) and the allow-list mode.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use kith::testing::graph::persisted::sha256_hex;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::helpers::{TestApp, error_code, spawn_app, spawn_app_with};

const ME: &str = "query Me { viewer { handle } }";

async fn send(t: &TestApp, request: Request<Body>) -> (StatusCode, Value) {
    let response = kith::testing::http::router(t.app.clone())
        .oneshot(request)
        .await
        .unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&body).unwrap())
}

fn persisted(hash: &str) -> Value {
    json!({ "persistedQuery": { "version": 1, "sha256Hash": hash } })
}

fn post(token: &str, body: Value) -> Request<Body> {
    Request::post("/graphql")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .body(Body::from(body.to_string()))
        .unwrap()
}

fn get(token: &str, hash: &str) -> Request<Body> {
    let escaped: String = persisted(hash)
        .to_string()
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    Request::get(format!("/graphql?extensions={escaped}"))
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .body(Body::empty())
        .unwrap()
}

#[tokio::test]
async fn automatic_persisted_queries_register_then_run_by_hash() {
    let t = spawn_app().await;
    let me = t.user("me").await;
    let token = t.token(me);
    let hash = sha256_hex(ME);

    // Unknown hash: the client is told to send the text once.
    let (status, body) = send(&t, post(&token, json!({ "extensions": persisted(&hash) }))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        error_code(&body),
        Some("PERSISTED_QUERY_NOT_FOUND"),
        "{body}"
    );
    assert_eq!(body["errors"][0]["message"], "PersistedQueryNotFound");
    let response = kith::testing::http::router(t.app.clone())
        .oneshot(get(&token, &hash))
        .await
        .unwrap();
    assert_eq!(
        response.headers()[header::CACHE_CONTROL],
        "private, no-cache, must-revalidate",
        "a refusal is never cached"
    );
    let body: Value =
        serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(
        error_code(&body),
        Some("PERSISTED_QUERY_NOT_FOUND"),
        "{body}"
    );

    // The text with its hash runs and is remembered…
    let (_, body) = send(
        &t,
        post(
            &token,
            json!({ "query": ME, "extensions": persisted(&hash) }),
        ),
    )
    .await;
    assert_eq!(body["data"]["viewer"]["handle"], "me", "{body}");
    // …so the hash alone runs, over POST and over GET.
    let (_, body) = send(&t, post(&token, json!({ "extensions": persisted(&hash) }))).await;
    assert_eq!(body["data"]["viewer"]["handle"], "me", "{body}");
    let (status, body) = send(&t, get(&token, &hash)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["data"]["viewer"]["handle"], "me", "{body}");
    // A browser's GET (`Accept: text/html`) of a persisted query runs it too.
    let mut browser = get(&token, &hash);
    browser.headers_mut().insert(
        header::ACCEPT,
        "text/html,application/json".parse().unwrap(),
    );
    let (_, body) = send(&t, browser).await;
    assert_eq!(body["data"]["viewer"]["handle"], "me", "{body}");

    // A text that does not have the hash is refused, and not learnt.
    let other = "query { viewer { id } }";
    let (_, body) = send(
        &t,
        post(
            &token,
            json!({ "query": other, "extensions": persisted(&hash) }),
        ),
    )
    .await;
    assert_eq!(error_code(&body), Some("INVALID_INPUT"), "{body}");
    let (_, body) = send(&t, post(&token, json!({ "extensions": persisted(&hash) }))).await;
    assert_eq!(body["data"]["viewer"]["handle"], "me");
    let (_, body) = send(
        &t,
        post(&token, json!({ "extensions": persisted("not-a-hash") })),
    )
    .await;
    assert_eq!(error_code(&body), Some("INVALID_INPUT"), "{body}");

    // A persisted mutation is still refused over GET.
    let mutation = "mutation { unfollow(input: {userId: \"VXNlcjox\"}) { changed } }";
    let mutation_hash = sha256_hex(mutation);
    send(
        &t,
        post(
            &token,
            json!({ "query": mutation, "extensions": persisted(&mutation_hash) }),
        ),
    )
    .await;
    let response = kith::testing::http::router(t.app.clone())
        .oneshot(get(&token, &mutation_hash))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn the_allow_list_mode_runs_only_the_manifest() {
    let manifest = std::env::temp_dir().join(format!("kith-manifest-{}.json", std::process::id()));
    let hash = sha256_hex(ME);
    std::fs::write(
        &manifest,
        json!({
            "format": "apollo-persisted-query-manifest", "version": 1,
            "operations": [{ "id": hash, "name": "Me", "type": "query", "body": ME }],
        })
        .to_string(),
    )
    .unwrap();
    // Read through the configuration, as `kith serve` reads it.
    let path = manifest.to_string_lossy().into_owned();
    let base = kith::config::Config::from_lookup(|name| match name {
        "KITH_PERSISTED_QUERIES_FILE" => Some(path.clone()),
        "KITH_PERSISTED_ONLY" => Some("true".into()),
        _ => None,
    })
    .unwrap();
    let t = spawn_app_with(|c| {
        c.limits.persisted_manifest = base.limits.persisted_manifest.clone();
        c.limits.persisted_only = base.limits.persisted_only;
    })
    .await;
    let me = t.user("me").await;
    let token = t.token(me);

    let (_, body) = send(&t, post(&token, json!({ "extensions": persisted(&hash) }))).await;
    assert_eq!(body["data"]["viewer"]["handle"], "me", "by hash: {body}");
    let (_, body) = send(&t, post(&token, json!({ "query": ME }))).await;
    assert_eq!(
        body["data"]["viewer"]["handle"], "me",
        "by its text: {body}"
    );

    let other = "query { viewer { id } }";
    let (_, body) = send(&t, post(&token, json!({ "query": other }))).await;
    assert_eq!(error_code(&body), Some("QUERY_NOT_IN_SAFELIST"), "{body}");
    let (_, body) = send(
        &t,
        post(
            &token,
            json!({ "query": other, "extensions": persisted(&sha256_hex(other)) }),
        ),
    )
    .await;
    assert_eq!(
        error_code(&body),
        Some("PERSISTED_QUERY_NOT_IN_LIST"),
        "{body}"
    );
    // Nothing was learnt from the client.
    let (_, body) = send(
        &t,
        post(
            &token,
            json!({ "extensions": persisted(&sha256_hex(other)) }),
        ),
    )
    .await;
    assert_eq!(
        error_code(&body),
        Some("PERSISTED_QUERY_NOT_IN_LIST"),
        "{body}"
    );
    assert!(body["data"].is_null());
    // Over GET the same.
    let (_, body) = send(&t, get(&token, &sha256_hex(other))).await;
    assert_eq!(
        error_code(&body),
        Some("PERSISTED_QUERY_NOT_IN_LIST"),
        "{body}"
    );
    let (_, body) = send(&t, get(&token, &hash)).await;
    assert_eq!(body["data"]["viewer"]["handle"], "me", "{body}");

    // A manifest whose ids are not the hashes of their texts is refused at
    // start (the configuration reads the file; the persisted queries check it).
    std::fs::write(&manifest, json!({ hash: other }).to_string()).unwrap();
    let mut config = t.app.config.clone();
    config.limits.persisted_manifest = kith::config::Config::from_lookup(|name| match name {
        "KITH_PERSISTED_QUERIES_FILE" => Some(path.clone()),
        _ => None,
    })
    .unwrap()
    .limits
    .persisted_manifest;
    match kith::app::App::start(config).await {
        Err(kith::app::StartError::Config(why)) => {
            assert!(why.contains("not the SHA-256"), "{why}")
        }
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(_) => panic!("a manifest with a wrong id was accepted"),
    }
    let _ = std::fs::remove_file(&manifest);
}

#[tokio::test]
async fn with_apq_off_a_hash_alone_is_not_supported() {
    let t = spawn_app_with(|c| c.limits.apq_cache_bytes = 0).await;
    let me = t.user("me").await;
    let token = t.token(me);
    let hash = sha256_hex(ME);
    let (_, body) = send(
        &t,
        post(
            &token,
            json!({ "query": ME, "extensions": persisted(&hash) }),
        ),
    )
    .await;
    assert_eq!(body["data"]["viewer"]["handle"], "me", "{body}");
    let (_, body) = send(&t, post(&token, json!({ "extensions": persisted(&hash) }))).await;
    assert_eq!(
        error_code(&body),
        Some("PERSISTED_QUERY_NOT_SUPPORTED"),
        "{body}"
    );
    assert_eq!(body["errors"][0]["message"], "PersistedQueryNotSupported");
}
