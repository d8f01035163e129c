//! `Server-Timing` (W3C): an answer's time in Kith, when
//! `KITH_SERVER_TIMING` asks for it.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;

use crate::cost::Tally;

/// Times the request from the moment the router has its head to its
/// answer's head, and names the time `kith` in the answer's
/// `Server-Timing` (milliseconds). It includes reading the request's body
/// (a large upload's arrival too); what a client measures beyond it is the
/// network's and the client's own: a bench on a shared machine tells the
/// two apart. Beside it, `pg` and `redis`: the time and the number of the
/// statements and round trips made for the request ([`crate::cost`]), so
/// that a slow answer tells what it waited for.
pub(super) async fn server_timing(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let tally = Arc::new(Tally::default());
    let mut response = crate::cost::tallied(tally.clone(), next.run(request)).await;
    if let Ok(value) = HeaderValue::from_str(&tally.server_timing(started.elapsed())) {
        response.headers_mut().append("server-timing", value);
    }
    response
}
