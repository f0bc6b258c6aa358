//! Operations endpoints: `/healthz`, `/readyz` and `/v1/openapi.json` (no token), and `/metrics`
//! (a token with the `metrics:read` scope: its gauges name every tenant's applications).

use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::envelope::{Bearer, Data};
use super::error::{ApiError, ErrorEnvelope};
use super::App;
use crate::db::DbError;

pub fn router() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics_text))
        .routes(routes!(openapi_json))
}

#[derive(Serialize, ToSchema)]
pub struct Health {
    /// "ok" (process up) or "ready" (database reachable at the expected schema version).
    pub status: String,
    /// The extension version the database has (readyz only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extension_version: Option<u32>,
}

#[derive(Serialize, ToSchema)]
pub struct HealthEnvelope {
    pub data: Health,
    pub request_id: String,
}

/// The process is up.
#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, body = HealthEnvelope)))]
async fn healthz() -> Data<Health> {
    Data(
        StatusCode::OK,
        Health {
            status: "ok".into(),
            extension_version: None,
        },
    )
}

/// The database is reachable and its schema is the version this server was built for.
#[utoipa::path(
    get, path = "/readyz", tag = "operations",
    responses((status = 200, body = HealthEnvelope), (status = 503, description = "UNAVAILABLE", body = ErrorEnvelope))
)]
async fn readyz(State(app): State<App>) -> Result<Data<Health>, ApiError> {
    let version = app.db.extension_version().await?;
    if version != crate::codegen::EXTENSION_VERSION {
        return Err(ApiError::Db(DbError::Unavailable(format!(
            "the database has extension version {version}; this server needs {}",
            crate::codegen::EXTENSION_VERSION
        ))));
    }
    Ok(Data(
        StatusCode::OK,
        Health {
            status: "ready".into(),
            extension_version: Some(version),
        },
    ))
}

/// Prometheus text (every family in [`crate::telemetry::FAMILIES`], with HELP and TYPE): HTTP,
/// claim, hand-off and result counters and histograms, plus task, permit and session gauges read
/// from the database at scrape time. The gauges name every application of the database, so
/// this needs a token whose credential holds the `metrics:read` scope (an operator's credential).
#[utoipa::path(
    get, path = "/metrics", tag = "operations", security(("bearer" = [])),
    responses(
        (status = 200, description = "Prometheus text format", content_type = "text/plain"),
        (status = 401, body = ErrorEnvelope), (status = 403, description = "PERMISSION_DENIED: no metrics:read scope", body = ErrorEnvelope),
        (status = 503, body = ErrorEnvelope),
    )
)]
async fn metrics_text(State(app): State<App>, Bearer(hash): Bearer) -> Result<Response, ApiError> {
    app.db.credential_check(&hash, "metrics:read").await?;
    let text = crate::telemetry::scrape(&app.db).await;
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response())
}

/// This document.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "operations", responses((status = 200, description = "OpenAPI 3.1 document", content_type = "application/json")))]
async fn openapi_json(State(app): State<App>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        app.openapi.as_str().to_owned(),
    )
        .into_response()
}

/// The `method` label of a request: one of the standard methods, or `OTHER`. A client can send any
/// token as a method; each distinct label would be a new time series kept for the life of the
/// process, so the label set must not depend on what clients send.
pub fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::PATCH => "PATCH",
        Method::TRACE => "TRACE",
        _ => "OTHER",
    }
}

/// Every scope a credential can hold (the `orbit_credential.scopes` SET), in the order
/// [`CredentialIds`] tries them.
pub const SCOPES: [&str; 6] = [
    "tasks:submit",
    "tasks:read",
    "workers:connect",
    "workers:consume",
    "queues:manage",
    "metrics:read",
];

/// The credential id of each token hash this process has seen, for the access log. A hash names
/// one credential for ever (the hash is unique and never reused), so entries never go stale; the
/// map is cleared when it reaches [`CredentialIds::CAPACITY`].
#[derive(Debug, Default)]
pub struct CredentialIds {
    known: std::sync::Mutex<std::collections::HashMap<[u8; 32], u64>>,
}

impl CredentialIds {
    pub const CAPACITY: usize = 10_000;
    /// How long a lookup on a cache miss may take before the line is logged without the id.
    pub const LOOKUP_TIMEOUT: Duration = Duration::from_millis(500);

    fn get(&self, hash: &[u8; 32]) -> Option<u64> {
        self.known.lock().ok()?.get(hash).copied()
    }

    fn put(&self, hash: [u8; 32], id: u64) {
        if let Ok(mut known) = self.known.lock() {
            if known.len() >= Self::CAPACITY {
                known.clear();
            }
            known.insert(hash, id);
        }
    }

    /// The credential id of an active token: `orbit_credential_check` with each scope until one
    /// is granted (every credential has at least one). Once per token and process.
    async fn lookup(&self, db: &crate::db::Db, hash: [u8; 32]) -> Option<u64> {
        if let Some(id) = self.get(&hash) {
            return Some(id);
        }
        let find = async {
            for scope in SCOPES {
                match db.credential_check(&hash, scope).await {
                    Ok(id) => return Some(id),
                    Err(DbError::PermissionDenied(_)) => continue,
                    Err(_) => return None,
                }
            }
            None
        };
        let id = tokio::time::timeout(Self::LOOKUP_TIMEOUT, find)
            .await
            .ok()
            .flatten()?;
        self.put(hash, id);
        Some(id)
    }
}

/// The credential id of a request, put in the response's extensions by [`observe`] for the access
/// log ([`AccessLog`]).
#[derive(Clone, Copy, Debug)]
pub struct CredentialId(pub u64);

/// Middleware: request counts by route and status, and latency histograms by route, and the
/// request's credential id for the access log. Every metric label comes from a fixed set: the
/// route is the matched route's template (`/v1/tasks/{id}`, never the raw path) or `unmatched`,
/// the method is [`method_label`]'s, the status is a number.
pub async fn observe(State(app): State<App>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched".to_string(), |p| p.as_str().to_string());
    let method = method_label(req.method());
    let token_hash = super::envelope::bearer_token(req.headers()).map(crate::auth::token_hash);
    let started = Instant::now();
    let mut response = next.run(req).await;
    let status = response.status();
    metrics::counter!("orbit_http_requests_total", "route" => route.clone(), "method" => method, "status" => status.as_u16().to_string()).increment(1);
    metrics::histogram!("orbit_http_request_duration_seconds", "route" => route, "method" => method)
        .record(started.elapsed().as_secs_f64());
    if let Some(hash) = token_hash {
        // Looked up only when the procedure authenticated the token (a success, or a 403 / 409
        // that comes after its check): a request with a made-up token (a 401, or a 400 / 404
        // answered before any check) never costs a database call.
        let authenticated = status.is_success()
            || status == StatusCode::SWITCHING_PROTOCOLS
            || matches!(status.as_u16(), 403 | 409);
        let id = if authenticated {
            app.credential_ids.lookup(&app.db, hash).await
        } else {
            app.credential_ids.get(&hash)
        };
        if let Some(id) = id {
            response.extensions_mut().insert(CredentialId(id));
        }
    }
    response
}

/// tower-http `OnResponse`: the access log, one line per request at INFO (target
/// `orbit::access`): status, latency, credential id (never the token), inside the request span
/// that carries the request id, method, route and trace id.
#[derive(Clone, Copy, Debug, Default)]
pub struct AccessLog;

impl<B> tower_http::trace::OnResponse<B> for AccessLog {
    fn on_response(
        self,
        response: &axum::http::Response<B>,
        latency: Duration,
        _span: &tracing::Span,
    ) {
        let status = response.status().as_u16();
        let latency_ms = (latency.as_secs_f64() * 1_000_000.0).round() / 1000.0;
        match response.extensions().get::<CredentialId>() {
            Some(CredentialId(id)) => tracing::info!(
                target: "orbit::access",
                status,
                latency_ms,
                credential_id = id,
                "request"
            ),
            None => tracing::info!(
                target: "orbit::access",
                status,
                latency_ms,
                credential_id = %"-",
                "request"
            ),
        }
    }
}
