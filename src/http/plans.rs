//! `/v1/plans`: schedules that fire tasks from immutable versions.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::envelope::{
    check_len, check_queue_id, check_queue_id_len, from_value, path_id, ApiJson, ApiQuery, Bearer,
    Data, Page,
};
use super::error::{ApiError, ErrorEnvelope};
use super::tasks::{json_text, TaskDefinition};
use super::App;
use crate::db::plans::{NewPlan, Plan};

pub fn router() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(create_plan, list_plans))
        .routes(routes!(get_plan))
        .routes(routes!(create_version))
        .routes(routes!(pause_plan))
        .routes(routes!(resume_plan))
}

/// When a plan fires.
#[derive(Clone, Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// Fire every N seconds (1-31536000); missed slots are skipped, not fired in a burst.
    #[schema(minimum = 1, maximum = 31536000)]
    pub interval_seconds: i64,
}

/// What a plan fires.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Definition {
    /// The same fields as a submit; `concurrency_key` is inherited verbatim by every fired task.
    /// Read as a value first, so its errors name `definition.task.<field>`.
    #[schema(value_type = TaskDefinition)]
    pub task: Value,
}

/// `POST /v1/plans` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreatePlan {
    /// 1-191 characters, unique in the namespace.
    #[schema(min_length = 1, max_length = 191)]
    pub name: String,
    /// 32 hex digits.
    pub queue_id: String,
    pub schedule: Schedule,
    pub definition: Definition,
}

/// `POST /v1/plans/{id}/versions` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateVersion {
    pub schedule: Schedule,
    pub definition: Definition,
}

/// A plan and its current version.
#[derive(Debug, Serialize, ToSchema)]
pub struct PlanView {
    pub id: u64,
    pub queue_id: String,
    pub name: String,
    pub current_version: u32,
    pub paused: bool,
    pub next_fire_at: DateTime<Utc>,
    pub schedule: Schedule,
    pub definition: DefinitionView,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DefinitionView {
    pub task: PlanTaskView,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PlanTaskView {
    pub handler: String,
    pub handler_version: String,
    pub payload_version: String,
    pub payload: Value,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub business_key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency_key: Option<String>,
    pub priority: u8,
    pub max_attempts: u32,
    pub retry_base_ms: u32,
    pub retry_max_ms: u32,
    pub retry_unknown: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_seconds: Option<u32>,
}

impl From<Plan> for PlanView {
    fn from(p: Plan) -> Self {
        let t = p.task;
        PlanView {
            id: p.id,
            queue_id: p.queue_id,
            name: p.name,
            current_version: p.current_version,
            paused: p.paused,
            next_fire_at: p.next_fire_at,
            schedule: Schedule {
                interval_seconds: p.schedule_spec.parse().unwrap_or(0),
            },
            definition: DefinitionView {
                task: PlanTaskView {
                    handler: t.handler,
                    handler_version: t.handler_version,
                    payload_version: t.payload_version,
                    payload: json_text(&t.payload),
                    business_key: t.business_key,
                    concurrency_key: t.concurrency_key,
                    priority: t.priority,
                    max_attempts: t.max_attempts,
                    retry_base_ms: t.retry_base_ms,
                    retry_max_ms: t.retry_max_ms,
                    retry_unknown: t.retry_unknown,
                    deadline_seconds: Some(t.deadline_seconds).filter(|d| *d != 0),
                },
            },
            created_at: p.created_at,
            updated_at: p.updated_at,
        }
    }
}

/// `{"data": Plan, "request_id"}`.
#[derive(Serialize, ToSchema)]
pub struct PlanEnvelope {
    pub data: PlanView,
    pub request_id: String,
}

fn definition(d: Definition) -> Result<TaskDefinition, ApiError> {
    let task: TaskDefinition = from_value(d.task, "definition.task.")?;
    task.check_lengths("definition.task.")?;
    Ok(task)
}

/// Create a plan (version 1) on a queue (scope queues:manage).
#[utoipa::path(
    post, path = "/v1/plans", tag = "plans", security(("bearer" = [])), request_body = CreatePlan,
    responses(
        (status = 201, body = PlanEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 409, description = "STATE_CONFLICT: name taken", body = ErrorEnvelope),
        (status = 413, body = ErrorEnvelope), (status = 503, body = ErrorEnvelope),
    )
)]
async fn create_plan(
    State(app): State<App>,
    Bearer(hash): Bearer,
    ApiJson(body): ApiJson<CreatePlan>,
) -> Result<Data<PlanView>, ApiError> {
    check_len("name", &body.name, 191, "1-191 characters")?;
    check_queue_id_len("queue_id", &body.queue_id)?;
    let task = definition(body.definition)?.to_new_task(body.queue_id);
    check_queue_id(&app.db, &hash, "queues:manage", &task.queue_id).await?;
    let plan = NewPlan {
        name: body.name,
        interval_seconds: body.schedule.interval_seconds,
        task,
    };
    Ok(Data(
        StatusCode::CREATED,
        app.db.plan_create(&hash, &plan).await?.into(),
    ))
}

/// `{"data": [Plan], "next_cursor", "request_id"}`.
#[derive(Serialize, ToSchema)]
pub struct PlanList {
    pub data: Vec<PlanView>,
    pub next_cursor: Option<String>,
    pub request_id: String,
}

/// `GET /v1/plans` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PlanListQuery {
    /// Only this queue's plans (32 hex digits).
    pub queue_id: Option<String>,
    /// 1-500; default 100.
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// List the plans of the queues the credential reaches (scope tasks:read), in id order, each
/// with its current version. One `CALL orbit_plan_list`.
#[utoipa::path(
    get, path = "/v1/plans", tag = "plans", security(("bearer" = [])), params(PlanListQuery),
    responses(
        (status = 200, body = PlanList),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 503, body = ErrorEnvelope),
    )
)]
async fn list_plans(
    State(app): State<App>,
    Bearer(hash): Bearer,
    ApiQuery(q): ApiQuery<PlanListQuery>,
) -> Result<Page<PlanView>, ApiError> {
    let limit = q.limit.unwrap_or(100);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::bad_request(
            Some("limit"),
            "limit must be between 1 and 500",
        ));
    }
    if let Some(queue_id) = &q.queue_id {
        check_queue_id_len("queue_id", queue_id)?;
        check_queue_id(&app.db, &hash, "tasks:read", queue_id).await?;
    }
    let after = q
        .cursor
        .as_deref()
        .map(|c| path_id(c, "cursor"))
        .transpose()?;
    let mut plans = app
        .db
        .plan_list(&hash, q.queue_id.as_deref(), limit + 1, after)
        .await?;
    let next = (plans.len() > limit as usize).then(|| {
        plans.truncate(limit as usize);
        plans.last().map(|p| p.id.to_string()).unwrap_or_default()
    });
    Ok(Page(plans.into_iter().map(PlanView::from).collect(), next))
}

/// Read a plan and its current version.
#[utoipa::path(
    get, path = "/v1/plans/{id}", tag = "plans", security(("bearer" = [])), params(("id" = u64, Path, minimum = 1)),
    responses(
        (status = 200, body = PlanEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 503, body = ErrorEnvelope),
    )
)]
async fn get_plan(
    State(app): State<App>,
    Bearer(hash): Bearer,
    Path(id): Path<String>,
) -> Result<Data<PlanView>, ApiError> {
    Ok(Data(
        StatusCode::OK,
        app.db.plan_get(&hash, path_id(&id, "id")?).await?.into(),
    ))
}

/// Add an immutable version; it becomes current.
#[utoipa::path(
    post, path = "/v1/plans/{id}/versions", tag = "plans", security(("bearer" = [])), params(("id" = u64, Path, minimum = 1)),
    request_body = CreateVersion,
    responses(
        (status = 201, body = PlanEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 413, body = ErrorEnvelope), (status = 503, body = ErrorEnvelope),
    )
)]
async fn create_version(
    State(app): State<App>,
    Bearer(hash): Bearer,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<CreateVersion>,
) -> Result<Data<PlanView>, ApiError> {
    let task = definition(body.definition)?.to_new_task(String::new());
    let plan = app
        .db
        .plan_version_create(
            &hash,
            path_id(&id, "id")?,
            body.schedule.interval_seconds,
            &task,
        )
        .await?;
    Ok(Data(StatusCode::CREATED, plan.into()))
}

/// Stop firing.
#[utoipa::path(
    post, path = "/v1/plans/{id}/pause", tag = "plans", security(("bearer" = [])), params(("id" = u64, Path, minimum = 1)),
    responses(
        (status = 200, body = PlanEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 503, body = ErrorEnvelope),
    )
)]
async fn pause_plan(
    State(app): State<App>,
    Bearer(hash): Bearer,
    Path(id): Path<String>,
) -> Result<Data<PlanView>, ApiError> {
    Ok(Data(
        StatusCode::OK,
        app.db
            .plan_set_paused(&hash, path_id(&id, "id")?, true)
            .await?
            .into(),
    ))
}

/// Fire again from the next slot (missed slots are not fired).
#[utoipa::path(
    post, path = "/v1/plans/{id}/resume", tag = "plans", security(("bearer" = [])), params(("id" = u64, Path, minimum = 1)),
    responses(
        (status = 200, body = PlanEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 503, body = ErrorEnvelope),
    )
)]
async fn resume_plan(
    State(app): State<App>,
    Bearer(hash): Bearer,
    Path(id): Path<String>,
) -> Result<Data<PlanView>, ApiError> {
    Ok(Data(
        StatusCode::OK,
        app.db
            .plan_set_paused(&hash, path_id(&id, "id")?, false)
            .await?
            .into(),
    ))
}
