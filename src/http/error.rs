//! The HTTP error envelope. [`ApiError`] is the one error type of the façade: database errors
//! arrive as [`DbError`] (whose variants document their statuses), request-shape errors are made
//! here, and [`ApiError::status`] is the one place that maps codes onto HTTP statuses.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

use super::envelope::current_request_id;
use crate::db::DbError;

/// Everything a request can fail with.
#[derive(Debug)]
pub enum ApiError {
    /// A procedure refused or failed: the status follows the code (see [`DbError`]).
    Db(DbError),
    /// 400 `INVALID_ARGUMENT`: the request could not be read; `field` names the culprit.
    BadRequest {
        message: String,
        field: Option<String>,
    },
    /// 401 `UNAUTHENTICATED`: no usable `Authorization: Bearer` header.
    MissingToken,
    /// 413 `INVALID_ARGUMENT`: the body is larger than the limit.
    PayloadTooLarge { limit: usize },
    /// 404 `NOT_FOUND`: no such route.
    NoRoute,
    /// 405 `INVALID_ARGUMENT`: the route exists but not for this method.
    MethodNotAllowed,
    /// 408 `INVALID_ARGUMENT`: the body did not arrive within the body timeout.
    BodyTimeout { seconds: f64 },
    /// 503 `UNAVAILABLE`: no response within the request timeout.
    Timeout { seconds: f64 },
}

impl From<DbError> for ApiError {
    fn from(e: DbError) -> Self {
        ApiError::Db(e)
    }
}

impl ApiError {
    pub fn bad_request(field: Option<&str>, message: impl Into<String>) -> ApiError {
        ApiError::BadRequest {
            message: message.into(),
            field: field.map(str::to_string),
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            ApiError::Db(e) => e.code(),
            ApiError::BadRequest { .. }
            | ApiError::PayloadTooLarge { .. }
            | ApiError::BodyTimeout { .. }
            | ApiError::MethodNotAllowed => "INVALID_ARGUMENT",
            ApiError::Timeout { .. } => "UNAVAILABLE",
            ApiError::MissingToken => "UNAUTHENTICATED",
            ApiError::NoRoute => "NOT_FOUND",
        }
    }

    /// The one code → status mapping of the API (SPEC §3).
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            _ => match self.code() {
                "INVALID_ARGUMENT" => StatusCode::BAD_REQUEST,
                "UNAUTHENTICATED" => StatusCode::UNAUTHORIZED,
                "PERMISSION_DENIED" => StatusCode::FORBIDDEN,
                "NOT_FOUND" => StatusCode::NOT_FOUND,
                "IDEMPOTENCY_CONFLICT" | "STATE_CONFLICT" | "KEY_BUSY" => StatusCode::CONFLICT,
                "QUOTA_EXCEEDED" => StatusCode::TOO_MANY_REQUESTS,
                "UNAVAILABLE" => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            },
        }
    }

    fn message(&self) -> String {
        match self {
            ApiError::Db(DbError::Internal(_)) => {
                "internal error; see the server log for the request id".into()
            }
            ApiError::Db(e) => e.message().to_string(),
            ApiError::BadRequest { message, .. } => message.clone(),
            ApiError::MissingToken => "an Authorization: Bearer <token> header is required".into(),
            ApiError::PayloadTooLarge { limit } => {
                format!("the request body exceeds {limit} bytes")
            }
            ApiError::NoRoute => "no such route".into(),
            ApiError::MethodNotAllowed => "method not allowed on this route".into(),
            ApiError::BodyTimeout { seconds } => {
                format!("the request body did not arrive within {seconds} s")
            }
            ApiError::Timeout { seconds } => {
                format!("the request did not complete within {seconds} s; retry it")
            }
        }
    }

    fn details(&self) -> Value {
        match self {
            ApiError::BadRequest { field: Some(f), .. } => json!({ "field": f }),
            ApiError::Db(DbError::InvalidArgument(m)) => match field_of(m) {
                Some(field) => json!({ "field": field }),
                None => json!({}),
            },
            _ => json!({}),
        }
    }
}

/// The field a procedure's INVALID_ARGUMENT message names. Procedures start field errors with
/// the field name ("concurrency_key must …"); a batch task's errors start with its index
/// ("tasks[3]: handler must …" names `tasks[3].handler`; "tasks[3]: a task must …" names
/// `tasks[3]`).
fn field_of(message: &str) -> Option<String> {
    let is_name = |w: &str| {
        !w.is_empty()
            && w.chars()
                .all(|c| c.is_ascii_lowercase() || c == '_' || c == '-')
    };
    if let Some((item, rest)) = message
        .strip_prefix("tasks[")
        .and_then(|m| m.split_once("]: "))
        .filter(|(i, _)| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
    {
        let mut words = rest.split_whitespace();
        return Some(match (words.next(), words.next()) {
            (Some(name), Some("must")) if is_name(name) => format!("tasks[{item}].{name}"),
            _ => format!("tasks[{item}]"),
        });
    }
    let first = message.split_whitespace().next().unwrap_or("");
    is_name(first).then(|| first.to_string())
}

/// The error envelope: `{"error": {"code", "message", "details"}, "request_id"}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorEnvelope {
    pub error: ErrorBody,
    pub request_id: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// One of INVALID_ARGUMENT, UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND, IDEMPOTENCY_CONFLICT,
    /// STATE_CONFLICT, KEY_BUSY, QUOTA_EXCEEDED, INTERNAL, UNAVAILABLE.
    pub code: String,
    pub message: String,
    /// Extra facts, e.g. `{"field": "concurrency_key"}`.
    #[schema(value_type = Object)]
    pub details: Value,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let request_id = current_request_id();
        if status.is_server_error() {
            tracing::error!(request_id = %request_id, code = self.code(), error = ?self, "request failed");
        }
        let body = ErrorEnvelope {
            error: ErrorBody {
                code: self.code().to_string(),
                message: self.message(),
                details: self.details(),
            },
            request_id,
        };
        (status, axum::Json(body)).into_response()
    }
}
