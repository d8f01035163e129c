//! GraphiQL, served by Kith itself from `assets/graphiql` (no CDN: the page
//! works without internet access).

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

pub(super) async fn graphiql() -> Html<&'static str> {
    Html(include_str!("../../assets/graphiql/index.html"))
}

/// GraphiQL's scripts and styles, vendored (`assets/graphiql`): the page
/// works without internet access. The names carry no version, so browsers
/// keep them an hour, not for good.
pub(super) async fn graphiql_asset(Path(name): Path<String>) -> Response {
    let (body, content_type): (&'static [u8], &'static str) = match name.as_str() {
        "graphiql.min.js" => (
            include_bytes!("../../assets/graphiql/graphiql.min.js"),
            "text/javascript; charset=utf-8",
        ),
        "graphiql.min.css" => (
            include_bytes!("../../assets/graphiql/graphiql.min.css"),
            "text/css; charset=utf-8",
        ),
        "react.production.min.js" => (
            include_bytes!("../../assets/graphiql/react.production.min.js"),
            "text/javascript; charset=utf-8",
        ),
        "react-dom.production.min.js" => (
            include_bytes!("../../assets/graphiql/react-dom.production.min.js"),
            "text/javascript; charset=utf-8",
        ),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        body,
    )
        .into_response()
}
