//! `GET /healthz` (the process is up) and `GET /readyz` (PostgreSQL answers;
//! Redis and the live-update listener are reported, not required).

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json};

use super::HttpState;

pub(super) async fn healthz() -> &'static str {
    "ok"
}

pub(super) async fn readyz(State(state): State<HttpState>) -> impl IntoResponse {
    const LIMIT: Duration = Duration::from_secs(2);
    let postgres = tokio::time::timeout(LIMIT, async {
        let mut conn = state.app.pg.get().await.ok()?;
        crate::store::pool::ping(&mut conn).await.ok()
    });
    let redis = tokio::time::timeout(LIMIT, async {
        let mut conn = state.app.redis.get().await.ok()?;
        redis::cmd("PING")
            .query_async::<String>(&mut *conn)
            .await
            .ok()
    });
    let (postgres, redis) = tokio::join!(postgres, redis);
    let postgres_ok = matches!(postgres, Ok(Some(_)));
    let redis_ok = matches!(redis, Ok(Some(_)));
    // Without Redis, reads are still served (from PostgreSQL) and writes are
    // refused fast; taking every instance out of rotation would turn a
    // degraded service into an outage. PostgreSQL decides readiness.
    let status = if postgres_ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let word = |ok: bool| if ok { "ok" } else { "unreachable" };
    // Informational: without it subscriptions here get no updates, but
    // queries and mutations are served.
    let live = if state.app.live.is_listening() {
        "listening"
    } else {
        "not listening"
    };
    (
        status,
        Json(serde_json::json!({
            "postgres": word(postgres_ok),
            "redis": word(redis_ok),
            "live": live,
        })),
    )
}
