//! Attempt history: `GET /v1/tasks/{id}/attempts`, `GET /v1/attempts/{id}`. History only: a token
//! shown here grants nothing.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::envelope::{path_id, ApiQuery, Bearer, Data, Page};
use super::error::{ApiError, ErrorEnvelope};
use super::tasks::json_text;
use super::App;
use crate::db::attempts::{Attempt, TaskEvent};

pub fn router() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(list_attempts))
        .routes(routes!(get_attempt))
        .routes(routes!(list_events))
}

/// An attempt as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttemptView {
    pub id: u64,
    pub task_id: u64,
    pub attempt_no: u32,
    pub queue_id: String,
    /// LEASED, RUNNING, SUCCEEDED, FAILED, CANCELLED, EXPIRED or UNKNOWN.
    pub state: String,
    pub worker_id: String,
    pub session_id: u64,
    /// The key's token granted with this attempt, as a decimal string; omitted without a key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency_token: Option<String>,
    pub granted_at: DateTime<Utc>,
    pub lease_expires_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub released_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    pub retryable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    /// An outcome reported after the attempt had already ended (recorded, never acted on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late_result: Option<String>,
}

impl From<Attempt> for AttemptView {
    fn from(a: Attempt) -> Self {
        AttemptView {
            id: a.id,
            task_id: a.task_id,
            attempt_no: a.attempt_no,
            queue_id: a.queue_id,
            state: a.state.as_str().to_string(),
            worker_id: a.worker_id,
            session_id: a.session_id,
            concurrency_token: (a.concurrency_token != 0).then(|| a.concurrency_token.to_string()),
            granted_at: a.granted_at,
            lease_expires_at: a.lease_expires_at,
            started_at: a.started_at,
            released_at: a.released_at,
            outcome: a.outcome,
            retryable: a.retryable,
            output: a.output.as_deref().map(json_text),
            error: a.error.as_deref().map(json_text),
            late_result: a.late_result,
        }
    }
}

/// `{"data": Attempt, "request_id"}`.
#[derive(Serialize, ToSchema)]
pub struct AttemptEnvelope {
    pub data: AttemptView,
    pub request_id: String,
}

/// `{"data": [Attempt], "next_cursor": null, "request_id"}`.
#[derive(Serialize, ToSchema)]
pub struct AttemptList {
    pub data: Vec<AttemptView>,
    pub next_cursor: Option<String>,
    pub request_id: String,
}

/// Every attempt of a task, in order.
#[utoipa::path(
    get, path = "/v1/tasks/{id}/attempts", tag = "attempts", security(("bearer" = [])), params(("id" = u64, Path, minimum = 1)),
    responses(
        (status = 200, body = AttemptList),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 503, body = ErrorEnvelope),
    )
)]
async fn list_attempts(
    State(app): State<App>,
    Bearer(hash): Bearer,
    Path(id): Path<String>,
) -> Result<Page<AttemptView>, ApiError> {
    let attempts = app.db.attempt_list(&hash, path_id(&id, "id")?).await?;
    Ok(Page(
        attempts.into_iter().map(AttemptView::from).collect(),
        None,
    ))
}

/// One attempt.
#[utoipa::path(
    get, path = "/v1/attempts/{id}", tag = "attempts", security(("bearer" = [])), params(("id" = u64, Path, minimum = 1)),
    responses(
        (status = 200, body = AttemptEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 503, body = ErrorEnvelope),
    )
)]
async fn get_attempt(
    State(app): State<App>,
    Bearer(hash): Bearer,
    Path(id): Path<String>,
) -> Result<Data<AttemptView>, ApiError> {
    Ok(Data(
        StatusCode::OK,
        app.db.attempt_get(&hash, path_id(&id, "id")?).await?.into(),
    ))
}

/// One event of a task's history.
#[derive(Debug, Serialize, ToSchema)]
pub struct TaskEventView {
    pub id: u64,
    /// The attempt involved; omitted when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt_id: Option<u64>,
    /// What happened, e.g. `released`, `cancelled`, `resolved`, `expired`.
    pub event: String,
    /// The task's state before ("" when none).
    pub from_state: String,
    /// The task's state after ("" when none).
    pub to_state: String,
    /// The key's token involved, as a decimal string; omitted when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency_token: Option<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detail: String,
    pub created_at: DateTime<Utc>,
}

impl From<TaskEvent> for TaskEventView {
    fn from(e: TaskEvent) -> Self {
        TaskEventView {
            id: e.id,
            attempt_id: Some(e.attempt_id).filter(|v| *v != 0),
            event: e.event,
            from_state: e.from_state,
            to_state: e.to_state,
            concurrency_token: (e.concurrency_token != 0).then(|| e.concurrency_token.to_string()),
            detail: e.detail,
            created_at: e.created_at,
        }
    }
}

/// `{"data": [TaskEvent], "next_cursor", "request_id"}`.
#[derive(Serialize, ToSchema)]
pub struct TaskEventList {
    pub data: Vec<TaskEventView>,
    pub next_cursor: Option<String>,
    pub request_id: String,
}

/// `GET /v1/tasks/{id}/events` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EventListQuery {
    /// 1-1000; default 100.
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// A task's history events, oldest first (scope tasks:read): attempt ends with their outcome and
/// token, cancel, resolve, expiry. The acceptance is the task's `created_at`, and each grant and
/// start are its attempts' `granted_at` and `started_at`: a timeline reads all three. One `CALL
/// orbit_task_event_list`.
#[utoipa::path(
    get, path = "/v1/tasks/{id}/events", tag = "attempts", security(("bearer" = [])),
    params(("id" = u64, Path, minimum = 1), EventListQuery),
    responses(
        (status = 200, body = TaskEventList),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 503, body = ErrorEnvelope),
    )
)]
async fn list_events(
    State(app): State<App>,
    Bearer(hash): Bearer,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<EventListQuery>,
) -> Result<Page<TaskEventView>, ApiError> {
    let task_id = path_id(&id, "id")?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::bad_request(
            Some("limit"),
            "limit must be between 1 and 1000",
        ));
    }
    let after = q
        .cursor
        .as_deref()
        .map(|c| path_id(c, "cursor"))
        .transpose()?;
    // One row more than asked tells whether a next page exists (at most 1,000 are asked).
    let mut events = app
        .db
        .task_event_list(&hash, task_id, (limit + 1).min(1000), after)
        .await?;
    let next = (events.len() > limit as usize || events.len() == 1000).then(|| {
        events.truncate(limit as usize);
        events.last().map(|e| e.id.to_string()).unwrap_or_default()
    });
    Ok(Page(
        events.into_iter().map(TaskEventView::from).collect(),
        next,
    ))
}
