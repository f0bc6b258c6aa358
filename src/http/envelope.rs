//! The success envelope, the request id every response carries, and the request extractors:
//! [`ApiJson`] (a JSON body whose errors name the field) and [`Bearer`] (the token's hash).

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::ApiError;
use crate::db::{Db, DbError};

tokio::task_local! {
    static REQUEST_ID: String;
}

/// The id of the request being handled ("-" outside a request).
pub fn current_request_id() -> String {
    REQUEST_ID
        .try_with(Clone::clone)
        .unwrap_or_else(|_| "-".to_string())
}

/// The longest `x-request-id` taken from a client; longer or non-printable ones are replaced.
pub const MAX_REQUEST_ID: usize = 64;

fn acceptable_request_id(v: &HeaderValue) -> bool {
    let b = v.as_bytes();
    !b.is_empty() && b.len() <= MAX_REQUEST_ID && b.iter().all(|c| c.is_ascii_graphic())
}

/// The trace id of a well-formed W3C `traceparent` header (`00-<32 hex>-<16 hex>-<2 hex>`, ids
/// not all zero), lower-case; `None` for anything else (which is then ignored).
pub fn traceparent_trace_id(headers: &axum::http::HeaderMap) -> Option<String> {
    let v = headers.get("traceparent")?.to_str().ok()?.trim();
    let mut parts = v.split('-');
    let (version, trace, parent, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    let lower = |s: &str| !s.bytes().any(|b| b.is_ascii_uppercase());
    // Version ff is invalid; version 00 has exactly four fields; later versions may add fields.
    if !hex(version, 2)
        || version.eq_ignore_ascii_case("ff")
        || (version == "00" && parts.next().is_some())
    {
        return None;
    }
    if !hex(trace, 32) || !hex(parent, 16) || !hex(flags, 2) || !lower(trace) || !lower(parent) {
        return None;
    }
    if trace.bytes().all(|b| b == b'0') || parent.bytes().all(|b| b == b'0') {
        return None;
    }
    Some(trace.to_string())
}

/// Runs before tower-http's `SetRequestIdLayer`: drops a client `x-request-id` that is empty,
/// longer than [`MAX_REQUEST_ID`] or not printable ASCII, so a new one is made instead.
pub fn screen_request_id<B>(mut req: axum::http::Request<B>) -> axum::http::Request<B> {
    if req
        .headers()
        .get("x-request-id")
        .is_some_and(|v| !acceptable_request_id(v))
    {
        req.headers_mut().remove("x-request-id");
    }
    req
}

/// tower-http's request-id maker for a request without an acceptable `x-request-id`: the trace
/// id of its `traceparent` when it has one (so logs of both systems share the id), else 16
/// random hex digits.
#[derive(Clone, Copy, Debug, Default)]
pub struct MakeId;

impl tower_http::request_id::MakeRequestId for MakeId {
    fn make_request_id<B>(
        &mut self,
        req: &axum::http::Request<B>,
    ) -> Option<tower_http::request_id::RequestId> {
        let id = traceparent_trace_id(req.headers())
            .unwrap_or_else(|| hex::encode(rand::random::<[u8; 8]>()));
        HeaderValue::from_str(&id)
            .ok()
            .map(tower_http::request_id::RequestId::new)
    }
}

/// The request's span (tower-http's `TraceLayer`): every log line of the request carries its
/// request id, method, route template and, with a `traceparent`, the W3C trace id.
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestSpan;

impl<B> tower_http::trace::MakeSpan<B> for RequestSpan {
    fn make_span(&mut self, req: &axum::http::Request<B>) -> tracing::Span {
        let request_id = req
            .extensions()
            .get::<tower_http::request_id::RequestId>()
            .and_then(|id| id.header_value().to_str().ok())
            .unwrap_or("-");
        let route = req
            .extensions()
            .get::<axum::extract::MatchedPath>()
            .map_or("unmatched", |p| p.as_str());
        let trace_id = traceparent_trace_id(req.headers());
        tracing::info_span!(
            "request",
            request_id = %request_id,
            method = %super::ops::method_label(req.method()),
            route = %route,
            trace_id = %trace_id.as_deref().unwrap_or("-"),
        )
    }
}

/// Middleware inside the request-id and trace layers: makes the request id (set by tower-http's
/// `SetRequestIdLayer`) visible to the envelopes built while handling the request, and echoes a
/// well-formed `traceparent` in the response.
pub async fn request_scope(req: Request, next: Next) -> Response {
    let id = req
        .extensions()
        .get::<tower_http::request_id::RequestId>()
        .and_then(|id| id.header_value().to_str().ok())
        .map_or_else(|| "-".to_string(), str::to_string);
    let traceparent =
        traceparent_trace_id(req.headers()).and_then(|_| req.headers().get("traceparent").cloned());
    let mut response = REQUEST_ID.scope(id, next.run(req)).await;
    if let Some(tp) = traceparent {
        response.headers_mut().insert("traceparent", tp);
    }
    response
}

/// The request and body timeouts (`serve --request-timeout`, `--body-timeout`).
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    pub request: std::time::Duration,
    pub body: std::time::Duration,
}

/// Middleware: a request whose response is not ready within the request timeout gets a 503; the
/// body timeout travels with the request for [`ApiJson`]. A WebSocket upgrade's request ends
/// with its 101 answer: the session that follows is not timed.
pub async fn request_timeout(
    axum::extract::State(t): axum::extract::State<Timeouts>,
    mut req: Request,
    next: Next,
) -> Response {
    req.extensions_mut().insert(t);
    match tokio::time::timeout(t.request, next.run(req)).await {
        Ok(response) => response,
        Err(_) => ApiError::Timeout {
            seconds: t.request.as_secs_f64(),
        }
        .into_response(),
    }
}

/// `{"data": …, "request_id": …}` with a status.
pub struct Data<T>(pub StatusCode, pub T);

#[derive(Serialize, ToSchema)]
pub struct DataEnvelope<T> {
    pub data: T,
    pub request_id: String,
}

/// `{"data": […], "next_cursor": …, "request_id": …}`.
#[derive(Serialize, ToSchema)]
pub struct ListEnvelope<T> {
    pub data: Vec<T>,
    /// Pass as `cursor` to get the next page; null on the last page.
    pub next_cursor: Option<String>,
    pub request_id: String,
}

impl<T: Serialize> IntoResponse for Data<T> {
    fn into_response(self) -> Response {
        (
            self.0,
            axum::Json(DataEnvelope {
                data: self.1,
                request_id: current_request_id(),
            }),
        )
            .into_response()
    }
}

/// A page of a list.
pub struct Page<T>(pub Vec<T>, pub Option<String>);

impl<T: Serialize> IntoResponse for Page<T> {
    fn into_response(self) -> Response {
        axum::Json(ListEnvelope {
            data: self.0,
            next_cursor: self.1,
            request_id: current_request_id(),
        })
        .into_response()
    }
}

/// The largest request body accepted.
pub const BODY_LIMIT: usize = 1024 * 1024;

/// How much of an oversized body is still read (and dropped) before answering 413: a client that
/// is still sending when the answer comes would otherwise see a reset instead of the envelope.
/// Beyond this the connection is cut.
pub const BODY_READ_CAP: usize = 8 * BODY_LIMIT;

/// A JSON body. Unlike `axum::Json`, every failure is a 400 (413 when too large) in the error
/// envelope, and the message names the field that failed (`payload.items[2]`, …).
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| {
                ct.split(';')
                    .next()
                    .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
            });
        if !json {
            return Err(ApiError::bad_request(
                None,
                "the body must be JSON with Content-Type: application/json",
            ));
        }
        let body_timeout = req.extensions().get::<Timeouts>().map_or(
            std::time::Duration::from_secs(super::BODY_TIMEOUT_SECONDS),
            |t| t.body,
        );
        let bytes = tokio::time::timeout(body_timeout, Bytes::from_request(req, state))
            .await
            .map_err(|_| ApiError::BodyTimeout {
                seconds: body_timeout.as_secs_f64(),
            })?
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::PayloadTooLarge { limit: BODY_LIMIT }
                } else {
                    ApiError::bad_request(None, format!("cannot read the body: {rejection}"))
                }
            })?;
        if bytes.len() > BODY_LIMIT {
            return Err(ApiError::PayloadTooLarge { limit: BODY_LIMIT });
        }
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let path = e.path().to_string();
            let field = (path != ".").then_some(path);
            let inner = e.into_inner();
            let message = match &field {
                Some(f) => format!("{f}: {inner}"),
                None => format!("invalid JSON body: {inner}"),
            };
            ApiError::BadRequest { message, field }
        })?;
        de.end()
            .map_err(|e| ApiError::bad_request(None, format!("invalid JSON body: {e}")))?;
        Ok(ApiJson(value))
    }
}

/// The SHA-256 of the request's bearer token (the procedures authenticate it).
pub struct Bearer(pub [u8; 32]);

impl<S: Send + Sync> FromRequestParts<S> for Bearer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let token = bearer_token(&parts.headers).ok_or(ApiError::MissingToken)?;
        Ok(Bearer(crate::auth::token_hash(token)))
    }
}

/// The token of an `Authorization: Bearer …` header, if there is a non-empty one.
pub fn bearer_token(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// Query parameters, with the same 400 envelope as [`ApiJson`] for anything malformed.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or("");
        let de = serde_urlencoded::Deserializer::new(form_urlencoded_parse(query));
        serde_path_to_error::deserialize(de)
            .map(ApiQuery)
            .map_err(|e| {
                let field = e.path().to_string();
                let inner = e.into_inner();
                ApiError::BadRequest {
                    message: format!("query {field}: {inner}"),
                    field: Some(field),
                }
            })
    }
}

fn form_urlencoded_parse(query: &str) -> form_urlencoded::Parse<'_> {
    form_urlencoded::parse(query.as_bytes())
}

/// A numeric id from the path; anything else is a 400 naming the parameter.
/// The required `namespace` query parameter (a namespace id): a 400 naming it when missing or
/// not a positive signed 64-bit integer (ids are int64 in the document).
pub fn namespace_param(raw: Option<&str>) -> Result<u64, ApiError> {
    let Some(n) = raw else {
        return Err(ApiError::bad_request(
            Some("namespace"),
            "namespace is required (a namespace id)",
        ));
    };
    n.parse::<i64>()
        .ok()
        .filter(|v| *v > 0)
        .map(|v| v as u64)
        .ok_or_else(|| {
            ApiError::bad_request(Some("namespace"), "namespace must be a positive integer")
        })
}

pub fn path_id(raw: &str, name: &str) -> Result<u64, ApiError> {
    raw.parse::<u64>().ok().filter(|v| *v > 0).ok_or_else(|| {
        ApiError::bad_request(Some(name), format!("{name} must be a positive integer"))
    })
}

/// Checks a queue id from the path, the body or the query before it reaches a procedure. Queue
/// ids are 32 hex digits and the procedures take them as ASCII text, which MariaDB refuses to
/// convert anything else into (error 1366, a 500). A non-ASCII id names no queue, so it gets the
/// procedures' own answer for an unknown queue, in their order: the token and `scope` first (401,
/// 403), then 404. ASCII ids, valid or not, go on to the procedure unchanged.
pub async fn check_queue_id(
    db: &Db,
    token_hash: &[u8; 32],
    scope: &str,
    id: &str,
) -> Result<(), ApiError> {
    if id.is_ascii() {
        return Ok(());
    }
    db.credential_check(token_hash, scope).await?;
    Err(ApiError::Db(DbError::NotFound("queue not found".into())))
}

/// Refuses a string longer than `max` characters (the size of its column) with a 400 naming
/// `field`, before it reaches a procedure. The procedures check the same limits, but a parameter
/// of 64 KiB or more does not even bind (MySQL error 1406, "Data too long"). `rule` is the
/// message's rule, e.g. "1-191 characters".
pub fn check_len(field: &str, value: &str, max: usize, rule: &str) -> Result<(), ApiError> {
    // Bytes first: a string of at most `max` bytes has at most `max` characters.
    if value.len() <= max || value.chars().count() <= max {
        return Ok(());
    }
    Err(ApiError::bad_request(
        Some(field),
        format!("{field} must be {rule}"),
    ))
}

/// Checks a queue id from the request's `field` (body, path or query) for length: a queue id is
/// 32 hex digits, so a longer string names no queue and is a 400 rather than a parameter the
/// procedure cannot bind.
pub fn check_queue_id_len(field: &str, id: &str) -> Result<(), ApiError> {
    check_len(field, id, 32, "a queue id (32 hex digits)")
}

/// The rule of the `Idempotency-Key` header and of a batch task's `idempotency_key`: 1-255
/// visible ASCII characters (0x21-0x7E: no spaces, tabs or control characters).
pub fn valid_idempotency_key(key: &str) -> bool {
    (1..=255).contains(&key.len()) && key.bytes().all(|b| (b'!'..=b'~').contains(&b))
}

/// The request's `Idempotency-Key` header, checked against [`valid_idempotency_key`]; anything
/// else is a 400 naming the header.
pub fn idempotency_key(headers: &axum::http::HeaderMap) -> Result<&str, ApiError> {
    const FIELD: &str = "Idempotency-Key";
    let value = headers.get("idempotency-key").ok_or_else(|| {
        ApiError::bad_request(Some(FIELD), "the Idempotency-Key header is required")
    })?;
    value
        .to_str()
        .ok()
        .filter(|k| valid_idempotency_key(k))
        .ok_or_else(|| {
            ApiError::bad_request(
                Some(FIELD),
                "Idempotency-Key must be 1-255 visible ASCII characters (no spaces or control characters)",
            )
        })
}

/// Deserializes a field that may be omitted but, when present, must not be `null`.
pub fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// Deserializes a JSON value already read from the body, naming failing fields under `prefix`.
pub fn from_value<T: DeserializeOwned>(
    value: serde_json::Value,
    prefix: &str,
) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            prefix.trim_end_matches('.').to_string()
        } else {
            format!("{prefix}{path}")
        };
        let inner = e.into_inner();
        let message = if field.is_empty() {
            format!("invalid body: {inner}")
        } else {
            format!("{field}: {inner}")
        };
        ApiError::BadRequest {
            message,
            field: Some(field).filter(|f| !f.is_empty()),
        }
    })
}
