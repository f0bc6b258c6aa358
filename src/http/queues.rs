//! `/v1/queues`: create, list, get, pause, resume, retention.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::envelope::{
    check_len, check_queue_id, check_queue_id_len, present, ApiJson, ApiQuery, Bearer, Data, Page,
};
use super::error::{ApiError, ErrorEnvelope};
use super::App;
use crate::db::queues::{Queue, QueueCounts};

pub fn router() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(create_queue, list_queues))
        .routes(routes!(get_queue))
        .routes(routes!(pause_queue))
        .routes(routes!(resume_queue))
        .routes(routes!(set_queue_retention))
}

/// A queue as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueueView {
    /// 32 hex digits.
    pub id: String,
    pub namespace_id: u64,
    pub name: String,
    pub paused: bool,
    /// Queue permits (LEASED + RUNNING attempts at once); 0 = unlimited.
    pub max_active_attempts: u32,
    /// Seconds a finished task (SUCCEEDED, FAILED, CANCELLED, EXPIRED) is kept after it finished;
    /// then it is purged with its attempts, history and idempotency receipt.
    pub retention_seconds: u32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Live counts: in the answers of list and get, not of create, pause and resume.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counts: Option<QueueCountsView>,
}

/// A queue's unfinished tasks per state, and the worker sessions serving it.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueueCountsView {
    pub waiting: u64,
    pub leased: u64,
    pub running: u64,
    pub retry_wait: u64,
    pub needs_review: u64,
    /// Open (not draining) worker sessions consuming from the queue.
    pub sessions: u64,
    /// Their distinct worker ids.
    pub workers: u64,
}

impl From<QueueCounts> for QueueCountsView {
    fn from(c: QueueCounts) -> Self {
        QueueCountsView {
            waiting: c.waiting,
            leased: c.leased,
            running: c.running,
            retry_wait: c.retry_wait,
            needs_review: c.needs_review,
            sessions: c.sessions,
            workers: c.workers,
        }
    }
}

impl From<Queue> for QueueView {
    fn from(q: Queue) -> Self {
        QueueView {
            id: q.id,
            namespace_id: q.namespace_id,
            name: q.name,
            paused: q.paused,
            max_active_attempts: q.max_active_attempts,
            retention_seconds: q.retention_seconds,
            created_at: q.created_at,
            updated_at: q.updated_at,
            counts: q.counts.map(QueueCountsView::from),
        }
    }
}

/// `POST /v1/queues` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateQueue {
    /// 1-191 characters, unique in the namespace.
    #[schema(min_length = 1, max_length = 191)]
    pub name: String,
    /// Required when the credential reaches several namespaces.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false)]
    pub namespace_id: Option<u64>,
    /// Queue permits (0-1000000); 0 or omitted = unlimited.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, minimum = 0, maximum = 1000000)]
    pub max_active_attempts: Option<i64>,
    /// Seconds a finished task is kept (60-315360000); omitted = 604800 (7 days).
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, minimum = 60, maximum = 315360000)]
    pub retention_seconds: Option<i64>,
}

/// The retention bounds as a check of a request field: 400 outside them.
fn check_retention(field: &str, seconds: i64) -> Result<(), ApiError> {
    let c = &crate::codegen::CONSTS;
    if (i64::from(c.retention_min_seconds)..=i64::from(c.retention_max_seconds)).contains(&seconds)
    {
        Ok(())
    } else {
        Err(ApiError::bad_request(
            Some(field),
            format!(
                "{field} must be between {} and {}",
                c.retention_min_seconds, c.retention_max_seconds
            ),
        ))
    }
}

/// Create a queue (scope queues:manage on a whole namespace).
#[utoipa::path(
    post, path = "/v1/queues", tag = "queues", security(("bearer" = [])), request_body = CreateQueue,
    responses(
        (status = 201, body = QueueEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 409, description = "STATE_CONFLICT: name taken", body = ErrorEnvelope),
        (status = 413, body = ErrorEnvelope), (status = 503, body = ErrorEnvelope),
    )
)]
async fn create_queue(
    State(app): State<App>,
    Bearer(hash): Bearer,
    ApiJson(body): ApiJson<CreateQueue>,
) -> Result<Data<QueueView>, ApiError> {
    check_len("name", &body.name, 191, "1-191 characters")?;
    if let Some(seconds) = body.retention_seconds {
        check_retention("retention_seconds", seconds)?;
    }
    let id = crate::auth::new_queue_id();
    let q = app
        .db
        .queue_create_with(
            &hash,
            body.namespace_id,
            &body.name,
            body.max_active_attempts,
            body.retention_seconds,
            Some(&id),
        )
        .await?;
    Ok(Data(StatusCode::CREATED, q.into()))
}

/// `GET /v1/queues` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct QueueListQuery {
    /// 1-500; default 100.
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// List the queues the credential reaches.
#[utoipa::path(
    get, path = "/v1/queues", tag = "queues", security(("bearer" = [])), params(QueueListQuery),
    responses(
        (status = 200, body = QueueList),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 503, body = ErrorEnvelope),
    )
)]
async fn list_queues(
    State(app): State<App>,
    Bearer(hash): Bearer,
    ApiQuery(q): ApiQuery<QueueListQuery>,
) -> Result<Page<QueueView>, ApiError> {
    let limit = q.limit.unwrap_or(100);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::bad_request(
            Some("limit"),
            "limit must be between 1 and 500",
        ));
    }
    // A cursor is a queue id (32 ASCII characters); anything else was never a `next_cursor`.
    if q.cursor
        .as_deref()
        .is_some_and(|c| !c.is_ascii() || c.len() > 32)
    {
        return Err(ApiError::bad_request(
            Some("cursor"),
            "cursor is not a next_cursor of this list",
        ));
    }
    let mut queues = app
        .db
        .queue_list(&hash, limit + 1, q.cursor.as_deref())
        .await?;
    let next = (queues.len() > limit as usize).then(|| {
        queues.truncate(limit as usize);
        queues.last().map(|q| q.id.clone()).unwrap_or_default()
    });
    Ok(Page(
        queues.into_iter().map(QueueView::from).collect(),
        next,
    ))
}

/// Read one queue.
#[utoipa::path(
    get, path = "/v1/queues/{id}", tag = "queues", security(("bearer" = [])), params(("id" = String, Path, max_length = 32, description = "32 hex digits")),
    responses(
        (status = 200, body = QueueEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope),
        (status = 503, body = ErrorEnvelope),
    )
)]
async fn get_queue(
    State(app): State<App>,
    Bearer(hash): Bearer,
    Path(id): Path<String>,
) -> Result<Data<QueueView>, ApiError> {
    check_queue_id_len("id", &id)?;
    check_queue_id(&app.db, &hash, "tasks:read", &id).await?;
    Ok(Data(
        StatusCode::OK,
        app.db.queue_get(&hash, &id).await?.into(),
    ))
}

/// Stop granting tasks from a queue (in-flight attempts continue; nothing is released).
#[utoipa::path(
    post, path = "/v1/queues/{id}/pause", tag = "queues", security(("bearer" = [])), params(("id" = String, Path, max_length = 32, description = "32 hex digits")),
    responses(
        (status = 200, body = QueueEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope),
        (status = 503, body = ErrorEnvelope),
    )
)]
async fn pause_queue(
    State(app): State<App>,
    Bearer(hash): Bearer,
    Path(id): Path<String>,
) -> Result<Data<QueueView>, ApiError> {
    check_queue_id_len("id", &id)?;
    check_queue_id(&app.db, &hash, "queues:manage", &id).await?;
    Ok(Data(
        StatusCode::OK,
        app.db.queue_set_paused(&hash, &id, true).await?.into(),
    ))
}

/// Resume granting tasks from a queue.
#[utoipa::path(
    post, path = "/v1/queues/{id}/resume", tag = "queues", security(("bearer" = [])), params(("id" = String, Path, max_length = 32, description = "32 hex digits")),
    responses(
        (status = 200, body = QueueEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope),
        (status = 503, body = ErrorEnvelope),
    )
)]
async fn resume_queue(
    State(app): State<App>,
    Bearer(hash): Bearer,
    Path(id): Path<String>,
) -> Result<Data<QueueView>, ApiError> {
    check_queue_id_len("id", &id)?;
    check_queue_id(&app.db, &hash, "queues:manage", &id).await?;
    let q = app.db.queue_set_paused(&hash, &id, false).await?;
    app.dispatch.notify_queues([q.id.clone()].into());
    Ok(Data(StatusCode::OK, q.into()))
}

/// `POST /v1/queues/{id}/retention` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetRetention {
    /// Seconds a finished task is kept after it finished: 60 (one minute) to 315360000 (3650
    /// days).
    #[schema(minimum = 60, maximum = 315360000)]
    pub retention_seconds: i64,
}

/// Set how long the queue's finished tasks are kept. It applies to tasks that finished before the
/// change too: the scheduler's next purges delete those past the new retention.
#[utoipa::path(
    post, path = "/v1/queues/{id}/retention", tag = "queues", security(("bearer" = [])),
    params(("id" = String, Path, max_length = 32, description = "32 hex digits")), request_body = SetRetention,
    responses(
        (status = 200, body = QueueEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope), (status = 404, body = ErrorEnvelope),
        (status = 413, body = ErrorEnvelope), (status = 503, body = ErrorEnvelope),
    )
)]
async fn set_queue_retention(
    State(app): State<App>,
    Bearer(hash): Bearer,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<SetRetention>,
) -> Result<Data<QueueView>, ApiError> {
    check_queue_id_len("id", &id)?;
    check_queue_id(&app.db, &hash, "queues:manage", &id).await?;
    check_retention("retention_seconds", body.retention_seconds)?;
    Ok(Data(
        StatusCode::OK,
        app.db
            .queue_set_retention(&hash, &id, body.retention_seconds)
            .await?
            .into(),
    ))
}

// Envelopes for the OpenAPI document: each names the concrete shape a route returns.

/// `{"data": Queue, "request_id"}`.
#[derive(Serialize, ToSchema)]
pub struct QueueEnvelope {
    pub data: QueueView,
    pub request_id: String,
}

/// `{"data": [Queue], "next_cursor", "request_id"}`.
#[derive(Serialize, ToSchema)]
pub struct QueueList {
    pub data: Vec<QueueView>,
    pub next_cursor: Option<String>,
    pub request_id: String,
}
