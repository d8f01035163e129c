//! `Server-Timing` (W3C): an answer's time in Kith, when
//! `KITH_SERVER_TIMING` asks for it.

use std::time::Instant;

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;

/// Times the request from the moment the router has its head to its
/// answer's head, and names the time `kith` in the answer's
/// `Server-Timing` (milliseconds). It includes reading the request's body
/// (a large upload's arrival too); what a client measures beyond it is the
/// network's and the client's own: a bench on a shared machine tells the
/// two apart.
pub(super) async fn server_timing(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let mut response = next.run(request).await;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    if let Ok(value) = HeaderValue::from_str(&format!("kith;dur={ms:.3}")) {
        response.headers_mut().append("server-timing", value);
    }
    response
}
