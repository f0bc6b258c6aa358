//! The operator console at `/console`: a static page, one vanilla JavaScript module and a style
//! sheet, built into the binary. They hold no data, so they need no token: the page asks for a
//! bearer token, keeps it in the tab's `sessionStorage`, and does everything through the public
//! `/v1` API with that token and its scopes (docs/operations.md, "The operator console").
//!
//! Every response carries a strict Content-Security-Policy (scripts, styles and connections from
//! this origin only; no inline script, no framing) and `X-Content-Type-Options: nosniff`. The
//! script builds its DOM with `textContent` and `createElement`, never from HTML strings, so
//! task payloads and keys render as text.

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

/// The page.
pub const INDEX_HTML: &str = include_str!("assets/index.html");
/// The application module.
pub const CONSOLE_JS: &str = include_str!("assets/console.js");
/// The style sheet.
pub const CONSOLE_CSS: &str = include_str!("assets/console.css");

/// The Content-Security-Policy of every console response.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The console's path, as `orbit serve` logs it and `orbit dev` prints it.
pub const PATH: &str = "/console";

/// The console's routes (no state, no token).
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/console",
            get(|| async { asset(INDEX_HTML, "text/html; charset=utf-8") }),
        )
        .route(
            "/console/",
            get(|| async { asset(INDEX_HTML, "text/html; charset=utf-8") }),
        )
        .route(
            "/console/console.js",
            get(|| async { asset(CONSOLE_JS, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/console/console.css",
            get(|| async { asset(CONSOLE_CSS, "text/css; charset=utf-8") }),
        )
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CONTENT_SECURITY_POLICY),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
            (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}
