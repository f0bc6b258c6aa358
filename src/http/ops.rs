//! Operations endpoints: `/healthz`, `/readyz` and `/v1/openapi.json` (no token), and `/metrics`
//! (a token with the `metrics:read` scope: its gauges name every tenant's applications).

use std::time::Instant;

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

/// Prometheus text: HTTP requests and latencies by route, plus task, permit and session gauges
/// read from the database at scrape time. The gauges name every application of the database, so
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
    let mut text = app.metrics.render();
    match app.db.metrics_snapshot().await {
        Ok(rows) => {
            let mut last = String::new();
            for (metric, label, value) in rows {
                let name = format!("orbit_{metric}");
                if name != last {
                    text.push_str(&format!("# TYPE {name} gauge\n"));
                    last = name.clone();
                }
                let label = label
                    .replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('\n', "\\n");
                if label.is_empty() {
                    text.push_str(&format!("{name} {value}\n"));
                } else {
                    text.push_str(&format!("{name}{{label=\"{label}\"}} {value}\n"));
                }
            }
            text.push_str(&super::keys::key_metrics_text(&app.db).await);
            text.push_str("# TYPE orbit_database_up gauge\norbit_database_up 1\n");
        }
        Err(_) => text.push_str("# TYPE orbit_database_up gauge\norbit_database_up 0\n"),
    }
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

/// Middleware: request counts by route and status, and latency histograms by route. Every label
/// comes from a fixed set: the route is the matched route's template (`/v1/tasks/{id}`, never the
/// raw path) or `unmatched`, the method is [`method_label`]'s, the status is a number.
pub async fn record(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched".to_string(), |p| p.as_str().to_string());
    let method = method_label(req.method());
    let started = Instant::now();
    let response = next.run(req).await;
    let status = response.status().as_u16().to_string();
    metrics::counter!("orbit_http_requests_total", "route" => route.clone(), "method" => method, "status" => status).increment(1);
    metrics::histogram!("orbit_http_request_duration_seconds", "route" => route, "method" => method)
        .record(started.elapsed().as_secs_f64());
    response
}
