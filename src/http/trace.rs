//! W3C trace context: every request's logs carry its trace id, and the
//! answer names the trace (with the `otlp` feature, spans are exported).

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;

/// W3C trace context: a request's `traceparent` (version 00) gives its trace
/// id, else a new one is made. Every log line of the request carries it (a
/// `request` span), and the answer's `traceparent` names it with this
/// request as the parent, so a caller can find Kith's logs of its trace.
pub(super) async fn trace_context(request: Request, next: Next) -> Response {
    use tracing::Instrument as _;
    let incoming = request
        .headers()
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .and_then(parse_traceparent);
    let ids = uuid::Uuid::new_v4().as_u128();
    let (trace_id, sampled) = incoming.unwrap_or_else(|| (format!("{:032x}", ids), false));
    let span_id = format!("{:016x}", (ids >> 64) as u64 | 1);
    let span = tracing::info_span!(
        "request",
        trace_id = %trace_id,
        method = %request.method(),
        path = %request.uri().path(),
    );
    #[cfg(feature = "otlp")]
    otlp::continue_trace(&span, request.headers());
    let mut response = next.run(request).instrument(span).await;
    let flags = if sampled { "01" } else { "00" };
    if let Ok(value) = HeaderValue::from_str(&format!("00-{trace_id}-{span_id}-{flags}")) {
        response.headers_mut().insert("traceparent", value);
    }
    response
}

/// With the `otlp` feature: the request's span continues the caller's trace.
#[cfg(feature = "otlp")]
mod otlp {
    use axum::http::HeaderMap;
    use opentelemetry::propagation::{Extractor, TextMapPropagator as _};
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;

    struct Headers<'a>(&'a HeaderMap);

    impl Extractor for Headers<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            self.0.get(key).and_then(|v| v.to_str().ok())
        }

        fn keys(&self) -> Vec<&str> {
            self.0.keys().map(|k| k.as_str()).collect()
        }
    }

    pub(super) fn continue_trace(span: &tracing::Span, headers: &HeaderMap) {
        let propagator = opentelemetry_sdk::propagation::TraceContextPropagator::new();
        let _ = span.set_parent(propagator.extract(&Headers(headers)));
    }
}

/// `(trace id, sampled)` of a valid version-00 `traceparent`.
fn parse_traceparent(value: &str) -> Option<(String, bool)> {
    let mut parts = value.trim().split('-');
    let (version, trace, parent, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let valid = version == "00"
        && parts.next().is_none()
        && hex(trace, 32)
        && hex(parent, 16)
        && hex(flags, 2)
        && trace.bytes().any(|b| b != b'0')
        && parent.bytes().any(|b| b != b'0');
    let sampled = u8::from_str_radix(flags, 16).ok()? & 1 == 1;
    valid.then(|| (trace.to_owned(), sampled))
}
