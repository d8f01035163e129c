//! `GET /metrics` (OpenMetrics text, which Prometheus scrapes) on a listener
//! of its own, `KITH_METRICS_ADDR` — loopback by default, so strangers who
//! reach the API do not see it. A scrape reads only what the process holds:
//! counters, pool states, and the outbox backlog as a background task last
//! sampled it ([`sample_backlog`]); it never runs a statement itself.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::app::App;
use crate::shutdown::Shutdown;

/// How often the outbox backlog is sampled.
pub(super) const BACKLOG_EVERY: Duration = Duration::from_secs(10);

/// The metrics routes.
pub fn metrics_router(app: Arc<App>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(app)
}

/// Serves `/metrics` on `KITH_METRICS_ADDR` until `shutdown`, and samples
/// the backlog meanwhile. An address that cannot be bound is logged and
/// left alone: the service runs without its metrics rather than not at all.
/// Returns only at `shutdown`, like every job of a process.
pub async fn serve_metrics(app: Arc<App>, mut shutdown: Shutdown) {
    let Some(addr) = app.config.http.metrics_addr else {
        return shutdown.wait().await;
    };
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(listener) => listener,
        Err(error) => {
            tracing::warn!(%addr, %error, "metrics not served: the address cannot be bound");
            return shutdown.wait().await;
        }
    };
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "serving metrics at /metrics");
    }
    let sampler = tokio::spawn(sample_backlog(app.clone(), shutdown.clone()));
    let mut stop = shutdown.clone();
    let served = axum::serve(listener, metrics_router(app))
        .with_graceful_shutdown(async move { stop.wait().await })
        .await;
    if let Err(error) = served {
        tracing::warn!(%error, "metrics listener stopped");
    }
    shutdown.wait().await;
    sampler.abort();
}

/// Keeps `kith_relay_backlog` up to date: every [`BACKLOG_EVERY`], one
/// bounded statement (exact up to 10,000 rows, estimated past it).
pub async fn sample_backlog(app: Arc<App>, mut shutdown: Shutdown) {
    loop {
        let sampled = async {
            let mut conn = app.pg.get().await.ok()?;
            crate::store::outbox::backlog(&mut conn).await.ok()
        };
        match tokio::time::timeout(Duration::from_secs(2), sampled).await {
            Ok(Some(backlog)) => {
                app.metrics.outbox_backlog.set(backlog);
            }
            _ => tracing::debug!("outbox backlog not sampled"),
        }
        if !shutdown.sleep(BACKLOG_EVERY).await {
            return;
        }
    }
}

async fn metrics(State(app): State<Arc<App>>) -> impl IntoResponse {
    let (postgres_statements, read_redis_round_trips) = app.round_trips.snapshot();
    let scrape = crate::metrics::Scrape {
        postgres_statements,
        read_redis_round_trips,
        postgres_pool: app.pg.state().into(),
        redis_pool: app.redis.state().into(),
        fills_in_flight: app.read.fills_in_flight(),
        user_cache_held_answers: app.read.users().held_answers(),
    };
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        app.metrics.render(&scrape),
    )
}
