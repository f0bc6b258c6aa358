//! `/v1/tasks`: submit, list, get, cancel, resolve, and the task's attempts.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::envelope::{
    check_len, check_queue_id, check_queue_id_len, from_value, idempotency_key, path_id, present,
    valid_idempotency_key, ApiJson, ApiQuery, Bearer, Data, Page,
};
use super::error::{ApiError, ErrorEnvelope};
use super::App;
use crate::db::tasks::{NewTask, Resolution, Submitted, Task, TaskFilter, TaskState};

pub fn router() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(submit_task, list_tasks))
        .routes(routes!(submit_tasks))
        .routes(routes!(get_task))
        .routes(routes!(cancel_task))
        .routes(routes!(resolve_task))
}

/// A task as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct TaskView {
    pub id: u64,
    pub queue_id: String,
    pub state: TaskState,
    pub handler: String,
    pub handler_version: String,
    pub payload_version: String,
    /// The payload as submitted.
    pub payload: Value,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub business_key: String,
    /// The resource key frozen at acceptance; omitted when the task has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency_key: Option<String>,
    pub priority: u8,
    pub max_attempts: u32,
    pub attempt_count: u32,
    pub retry_base_ms: u32,
    pub retry_max_ms: u32,
    pub retry_unknown: bool,
    /// When the task may next be claimed (a delayed or debounced submit's time, a retry's
    /// backoff; otherwise its acceptance).
    pub run_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_at: Option<DateTime<Utc>>,
    /// Why a waiting task cannot be granted: `DELAYED: …` or `DEBOUNCED: …` until its `run_at`,
    /// `TOKEN_EXHAUSTED: …` for a key that granted its last token.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub blocked_reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The last failed or unknown attempt's error; for a debounced task replaced by a later
    /// submit, `{"code": "REPLACED", "message": …, "replaced_by": <task id>}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_attempt_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_version: Option<u32>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
}

/// Stored JSON text back to a value (the procedures only store valid JSON).
pub(super) fn json_text(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

impl From<Task> for TaskView {
    fn from(t: Task) -> Self {
        TaskView {
            id: t.id,
            queue_id: t.queue_id,
            state: t.state,
            handler: t.handler,
            handler_version: t.handler_version,
            payload_version: t.payload_version,
            payload: json_text(&t.payload),
            business_key: t.business_key,
            concurrency_key: t.concurrency_key,
            priority: t.priority,
            max_attempts: t.max_attempts,
            attempt_count: t.attempt_count,
            retry_base_ms: t.retry_base_ms,
            retry_max_ms: t.retry_max_ms,
            retry_unknown: t.retry_unknown,
            run_at: t.run_at,
            deadline_at: t.deadline_at,
            blocked_reason: t.blocked_reason,
            output: t.output.as_deref().map(json_text),
            error: t.error.as_deref().map(json_text),
            current_attempt_id: Some(t.current_attempt_id).filter(|v| *v != 0),
            plan_id: Some(t.plan_id).filter(|v| *v != 0),
            plan_version: Some(t.plan_version).filter(|v| *v != 0),
            created_at: t.created_at,
            updated_at: t.updated_at,
            finished_at: t.finished_at,
        }
    }
}

/// The task fields of a submit (and of a plan's `definition.task`).
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskDefinition {
    /// 1-191 characters.
    #[schema(min_length = 1, max_length = 191)]
    pub handler: String,
    /// 1-64 characters.
    #[schema(min_length = 1, max_length = 64)]
    pub handler_version: String,
    /// 1-64 characters.
    #[schema(min_length = 1, max_length = 64)]
    pub payload_version: String,
    /// Any JSON value.
    pub payload: Value,
    /// Tracking only: no dedupe, no concurrency effect. 0-191 characters.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, max_length = 191)]
    pub business_key: Option<String>,
    /// The resource key: tasks with the same key in a namespace share one execution permit.
    /// Omitted or "" = none; null is invalid; 1-191 characters, no control characters, no
    /// leading or trailing whitespace; matched by exact bytes.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, max_length = 191)]
    pub concurrency_key: Option<String>,
    /// 0 (runs first) to 9; default 5.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, minimum = 0, maximum = 9)]
    pub priority: Option<i32>,
    /// 1-1000; default 3.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, minimum = 1, maximum = 1000)]
    pub max_attempts: Option<i32>,
    /// First retry delay in ms (doubles per attempt), 0-86400000; default 1000.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, minimum = 0, maximum = 86400000)]
    pub retry_base_ms: Option<i64>,
    /// Largest retry delay in ms, 0-604800000; default 300000.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, minimum = 0, maximum = 604800000)]
    pub retry_max_ms: Option<i64>,
    /// Safe to retry after an unknown outcome (RETRY_WAIT instead of NEEDS_REVIEW); default false.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false)]
    pub retry_unknown: Option<bool>,
    /// Total deadline in seconds from acceptance (1-315360000; 0 or omitted = none); the task
    /// expires if not granted by then.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, minimum = 0, maximum = 315360000)]
    pub deadline_seconds: Option<i64>,
}

impl TaskDefinition {
    /// Refuses a string longer than its column with a 400 naming `{prefix}{field}`, with the
    /// procedures' own rule (they check it too, but cannot bind a parameter of 64 KiB or more).
    pub fn check_lengths(&self, prefix: &str) -> Result<(), ApiError> {
        let key_max = crate::codegen::CONSTS.key_max_chars as usize;
        let key_rule = format!("at most {key_max} characters");
        let fields: [(&str, Option<&str>, usize, &str); 5] = [
            ("handler", Some(&self.handler), 191, "1-191 characters"),
            (
                "handler_version",
                Some(&self.handler_version),
                64,
                "1-64 characters",
            ),
            (
                "payload_version",
                Some(&self.payload_version),
                64,
                "1-64 characters",
            ),
            (
                "business_key",
                self.business_key.as_deref(),
                191,
                "at most 191 characters",
            ),
            (
                "concurrency_key",
                self.concurrency_key.as_deref(),
                key_max,
                &key_rule,
            ),
        ];
        for (name, value, max, rule) in fields {
            if let Some(value) = value {
                check_len(&format!("{prefix}{name}"), value, max, rule)?;
            }
        }
        Ok(())
    }

    pub fn to_new_task(&self, queue_id: String) -> NewTask {
        NewTask {
            queue_id,
            handler: self.handler.clone(),
            handler_version: self.handler_version.clone(),
            payload_version: self.payload_version.clone(),
            payload: self.payload.to_string(),
            business_key: self.business_key.clone(),
            // Omitted means "no key"; null never gets here (rejected while reading the body).
            concurrency_key: Some(self.concurrency_key.clone().unwrap_or_default()),
            // i32 in the body: a larger number is a 400 naming the field, not an INT overflow in
            // the procedure (a 500).
            priority: self.priority.map(i64::from),
            max_attempts: self.max_attempts.map(i64::from),
            retry_base_ms: self.retry_base_ms,
            retry_max_ms: self.retry_max_ms,
            retry_unknown: self.retry_unknown,
            deadline_seconds: self.deadline_seconds,
            timing: Default::default(),
        }
    }
}

/// When a submitted task may first be claimed: the submit's fields beside its definition (a
/// plan's definition has none: its tasks run when their slot fires).
#[derive(Clone, Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskTiming {
    /// RFC 3339 time before which the task is not claimed (it waits with `blocked_reason`
    /// `DELAYED`); a past time runs at once; at most 365 days ahead. Not with `delay_seconds`.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, value_type = String, format = DateTime)]
    pub run_at: Option<DateTime<Utc>>,
    /// Not claimed before acceptance + this many seconds, 0-31536000 (365 days).
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, minimum = 0, maximum = 31536000)]
    pub delay_seconds: Option<i64>,
    /// Keyed tasks only: run this many seconds after acceptance (1-31536000) unless a later
    /// debounced submit for the same `concurrency_key` and queue arrives first. That submit
    /// replaces this task, which ends `CANCELLED` with error code `REPLACED` naming its
    /// successor, so only the last of a burst runs. Not with `run_at` or `delay_seconds`.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, minimum = 0, maximum = 31536000)]
    pub debounce_seconds: Option<i64>,
    /// With `debounce_seconds`: the latest a burst of replacements may push the run time,
    /// counted from the burst's first submit (at least `debounce_seconds`); omitted = no bound.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, minimum = 0, maximum = 31536000)]
    pub debounce_max_seconds: Option<i64>,
}

impl TaskTiming {
    /// The four timing members taken out of a submit's flat object (`rest`), read strictly; the
    /// rest is the task definition.
    fn take(rest: &mut serde_json::Map<String, Value>, prefix: &str) -> Result<Self, ApiError> {
        let mut timing = serde_json::Map::new();
        for name in [
            "run_at",
            "delay_seconds",
            "debounce_seconds",
            "debounce_max_seconds",
        ] {
            if let Some(v) = rest.remove(name) {
                timing.insert(name.to_string(), v);
            }
        }
        from_value(Value::Object(timing), prefix)
    }

    fn into_timing(self) -> crate::db::tasks::Timing {
        crate::db::tasks::Timing {
            run_at: self.run_at,
            delay_seconds: self.delay_seconds,
            debounce_seconds: self.debounce_seconds,
            debounce_max_seconds: self.debounce_max_seconds,
        }
    }
}

/// `POST /v1/tasks` body (documentation only): one flat object, `queue_id` beside the fields of a
/// [`TaskDefinition`], as [`SubmitBody`] reads it.
pub struct SubmitTask;

impl utoipa::PartialSchema for SubmitTask {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        flat_task_schema(
            "`POST /v1/tasks` body: `queue_id` and the fields of a task definition.",
            utoipa::openapi::ObjectBuilder::new(),
        )
    }
}

/// A flat task object: the properties already in `body`, then `queue_id` and the fields of a
/// [`TaskDefinition`]; nothing else.
fn flat_task_schema(
    description: &str,
    body: utoipa::openapi::ObjectBuilder,
) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Schema, Type};
    use utoipa::openapi::RefOr;
    let RefOr::T(Schema::Object(definition)) = <TaskDefinition as utoipa::PartialSchema>::schema()
    else {
        unreachable!("TaskDefinition documents an object")
    };
    let mut body = body
        .description(Some(description))
        .property(
            "queue_id",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .description(Some("32 hex digits.")),
        )
        .required("queue_id");
    let RefOr::T(Schema::Object(timing)) = <TaskTiming as utoipa::PartialSchema>::schema() else {
        unreachable!("TaskTiming documents an object")
    };
    for (name, property) in definition.properties.into_iter().chain(timing.properties) {
        body = body.property(name, property);
    }
    for name in definition.required {
        body = body.required(name);
    }
    body.additional_properties(Some(AdditionalProperties::FreeForm(false)))
        .into()
}

impl ToSchema for SubmitTask {
    fn schemas(
        schemas: &mut Vec<(
            String,
            utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        )>,
    ) {
        TaskDefinition::schemas(schemas);
        TaskTiming::schemas(schemas);
    }
}

/// How a submit body is read: the queue, and the rest checked strictly as a [`TaskDefinition`]
/// (serde cannot deny unknown fields through `flatten`, so the two steps are explicit).
#[derive(Debug, Deserialize)]
struct SubmitBody {
    queue_id: String,
    #[serde(flatten)]
    rest: serde_json::Map<String, Value>,
}

/// Submit a task (201 first acceptance, 200 replay of the same Idempotency-Key and body).
#[utoipa::path(
    post, path = "/v1/tasks", tag = "tasks", security(("bearer" = [])),
    params(("Idempotency-Key" = String, Header, min_length = 1, max_length = 255, pattern = "^[!-~]{1,255}$",
        description = "One accepted command: same key + same body replays the original receipt. 1-255 visible ASCII characters (0x21-0x7E: no spaces or control characters).")),
    request_body = SubmitTask,
    responses(
        (status = 201, description = "Accepted", body = TaskEnvelope),
        (status = 200, description = "Replay of the original acceptance", body = TaskEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 409, description = "IDEMPOTENCY_CONFLICT, or KEY_BUSY (the key policy rejects a busy key)", body = ErrorEnvelope),
        (status = 413, body = ErrorEnvelope), (status = 429, body = ErrorEnvelope), (status = 503, body = ErrorEnvelope),
    )
)]
async fn submit_task(
    State(app): State<App>,
    Bearer(hash): Bearer,
    headers: HeaderMap,
    ApiJson(body): ApiJson<SubmitBody>,
) -> Result<Data<TaskView>, ApiError> {
    let mut rest = body.rest;
    let timing = TaskTiming::take(&mut rest, "")?;
    let task: TaskDefinition = from_value(Value::Object(rest), "")?;
    let key = idempotency_key(&headers)?;
    check_queue_id_len("queue_id", &body.queue_id)?;
    task.check_lengths("")?;
    check_queue_id(&app.db, &hash, "tasks:submit", &body.queue_id).await?;
    let new_task = NewTask {
        timing: timing.into_timing(),
        ..task.to_new_task(body.queue_id)
    };
    let submitted = app.db.task_submit(&hash, key, &new_task).await?;
    let status = if submitted.replayed {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    if !submitted.replayed {
        if let Some(c) = submitted.cancelled {
            app.dispatch.cancel_attempt(c.session_id, c.attempt_id);
        }
        app.dispatch
            .notify_queues([submitted.task.queue_id.clone()].into());
    }
    Ok(Data(status, submitted.task.into()))
}

/// One task of `POST /v1/tasks/batch` (documentation only): a [`SubmitTask`] with its own
/// `idempotency_key`, as [`BatchTaskBody`] reads it.
pub struct BatchTask;

/// The rule of the `Idempotency-Key` header, for the document (header and batch tasks alike).
const IDEMPOTENCY_KEY_PATTERN: &str = "^[!-~]{1,255}$";

impl utoipa::PartialSchema for BatchTask {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        flat_task_schema(
            "One task of `POST /v1/tasks/batch`: its `idempotency_key`, `queue_id` and the fields of a task definition.",
            ObjectBuilder::new()
                .property(
                    "idempotency_key",
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .min_length(Some(1))
                        .max_length(Some(255))
                        .pattern(Some(IDEMPOTENCY_KEY_PATTERN))
                        .description(Some(
                            "This task's Idempotency-Key, with the header's rule: 1-255 visible ASCII characters (0x21-0x7E: no spaces or control characters).",
                        )),
                )
                .required("idempotency_key"),
        )
    }
}

impl ToSchema for BatchTask {
    fn schemas(
        schemas: &mut Vec<(
            String,
            utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        )>,
    ) {
        TaskDefinition::schemas(schemas);
        TaskTiming::schemas(schemas);
    }
}

/// `POST /v1/tasks/batch` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitBatch {
    /// 1-1000 tasks, accepted or refused together, each once per its own `idempotency_key`.
    #[schema(value_type = Vec<BatchTask>, min_items = 1, max_items = 1000)]
    tasks: Vec<BatchTaskBody>,
}

/// How a batch task is read: like [`SubmitBody`], with the task's key.
#[derive(Debug, Deserialize)]
struct BatchTaskBody {
    idempotency_key: String,
    queue_id: String,
    #[serde(flatten)]
    rest: serde_json::Map<String, Value>,
}

/// What the batch answers for one task.
#[derive(Debug, Serialize, ToSchema)]
pub struct SubmittedView {
    /// `true` when this `idempotency_key` had already been accepted with this request: `task`
    /// is the original.
    pub replayed: bool,
    pub task: TaskView,
}

impl From<Submitted> for SubmittedView {
    fn from(s: Submitted) -> Self {
        SubmittedView {
            replayed: s.replayed,
            task: s.task.into(),
        }
    }
}

/// Submit up to 1000 tasks in one transaction, each with its own `idempotency_key` (201 when at
/// least one task was created, 200 when every task replays an earlier acceptance).
///
/// All or nothing: one invalid task, one `idempotency_key` used before with a different request
/// (409), a queue outside the credential's scope, or a full quota (429) refuses the whole batch,
/// and the error message starts with the task's index (`tasks[3]: …`). Each task gets exactly what
/// `POST /v1/tasks` with its key as `Idempotency-Key` would give it, so the two replay each other;
/// a key used twice in one batch replays (or conflicts with) its first use. `data` lists the
/// tasks in request order.
#[utoipa::path(
    post, path = "/v1/tasks/batch", tag = "tasks", security(("bearer" = [])),
    request_body = SubmitBatch,
    responses(
        (status = 201, description = "Accepted: at least one task was created", body = SubmittedList),
        (status = 200, description = "Every task replays its original acceptance", body = SubmittedList),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 409, description = "IDEMPOTENCY_CONFLICT, or KEY_BUSY (the key policy rejects a busy key)", body = ErrorEnvelope),
        (status = 413, body = ErrorEnvelope), (status = 429, body = ErrorEnvelope), (status = 503, body = ErrorEnvelope),
    )
)]
async fn submit_tasks(
    State(app): State<App>,
    Bearer(hash): Bearer,
    ApiJson(body): ApiJson<SubmitBatch>,
) -> Result<Data<Vec<SubmittedView>>, ApiError> {
    // The count (1-1000) is the procedure's rule: it answers 400 naming `tasks`.
    let mut items = Vec::with_capacity(body.tasks.len());
    for (i, t) in body.tasks.into_iter().enumerate() {
        if !valid_idempotency_key(&t.idempotency_key) {
            let field = format!("tasks[{i}].idempotency_key");
            return Err(ApiError::BadRequest {
                message: format!(
                    "{field} must be 1-255 visible ASCII characters (no spaces or control characters)"
                ),
                field: Some(field),
            });
        }
        let mut rest = t.rest;
        let timing = TaskTiming::take(&mut rest, &format!("tasks[{i}]."))?;
        let task: TaskDefinition = from_value(Value::Object(rest), &format!("tasks[{i}]."))?;
        check_queue_id_len(&format!("tasks[{i}].queue_id"), &t.queue_id)?;
        task.check_lengths(&format!("tasks[{i}]."))?;
        // Queue ids travel inside the JSON text, not as an ASCII parameter: a non-ASCII id is an
        // unknown queue to the procedure (404), never a conversion error.
        let new_task = NewTask {
            timing: timing.into_timing(),
            ..task.to_new_task(t.queue_id)
        };
        items.push((t.idempotency_key, new_task));
    }
    let submitted = app.db.task_submit_many(&hash, &items).await?;
    let created: std::collections::HashSet<String> = submitted
        .iter()
        .filter(|s| !s.replayed)
        .map(|s| s.task.queue_id.clone())
        .collect();
    let status = if submitted.iter().any(|s| !s.replayed) {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    for c in submitted.iter().filter_map(|s| s.cancelled) {
        app.dispatch.cancel_attempt(c.session_id, c.attempt_id);
    }
    app.dispatch.notify_queues(created);
    Ok(Data(
        status,
        submitted.into_iter().map(SubmittedView::from).collect(),
    ))
}

/// `GET /v1/tasks` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only this queue's tasks (32 hex digits).
    pub queue_id: Option<String>,
    pub state: Option<TaskState>,
    pub business_key: Option<String>,
    /// Exact bytes, as submitted.
    pub concurrency_key: Option<String>,
    /// 1-500; default 100.
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// List tasks, newest first.
#[utoipa::path(
    get, path = "/v1/tasks", tag = "tasks", security(("bearer" = [])), params(ListQuery),
    responses(
        (status = 200, body = TaskList),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 503, body = ErrorEnvelope),
    )
)]
async fn list_tasks(
    State(app): State<App>,
    Bearer(hash): Bearer,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Page<TaskView>, ApiError> {
    let limit = q.limit.unwrap_or(100);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::bad_request(
            Some("limit"),
            "limit must be between 1 and 500",
        ));
    }
    if let Some(business_key) = &q.business_key {
        check_len("business_key", business_key, 191, "at most 191 characters")?;
    }
    if let Some(key) = &q.concurrency_key {
        let max = crate::codegen::CONSTS.key_max_chars as usize;
        check_len(
            "concurrency_key",
            key,
            max,
            &format!("at most {max} characters"),
        )?;
    }
    if let Some(queue_id) = &q.queue_id {
        check_queue_id_len("queue_id", queue_id)?;
        check_queue_id(&app.db, &hash, "tasks:read", queue_id).await?;
    }
    let before = q
        .cursor
        .as_deref()
        .map(|c| path_id(c, "cursor"))
        .transpose()?;
    let filter = TaskFilter {
        queue_id: q.queue_id,
        state: q.state,
        business_key: q.business_key,
        concurrency_key: q.concurrency_key,
    };
    let mut tasks = app.db.task_list(&hash, &filter, limit + 1, before).await?;
    let next = (tasks.len() > limit as usize).then(|| {
        tasks.truncate(limit as usize);
        tasks.last().map(|t| t.id.to_string()).unwrap_or_default()
    });
    Ok(Page(tasks.into_iter().map(TaskView::from).collect(), next))
}

/// Read one task.
#[utoipa::path(
    get, path = "/v1/tasks/{id}", tag = "tasks", security(("bearer" = [])), params(("id" = u64, Path, minimum = 1)),
    responses(
        (status = 200, body = TaskEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 503, body = ErrorEnvelope),
    )
)]
async fn get_task(
    State(app): State<App>,
    Bearer(hash): Bearer,
    Path(id): Path<String>,
) -> Result<Data<TaskView>, ApiError> {
    let task = app.db.task_get(&hash, path_id(&id, "id")?).await?;
    Ok(Data(StatusCode::OK, task.into()))
}

/// Cancel a task that has not started (a granted, unstarted attempt releases its permits).
#[utoipa::path(
    post, path = "/v1/tasks/{id}/cancel", tag = "tasks", security(("bearer" = [])), params(("id" = u64, Path, minimum = 1)),
    responses(
        (status = 200, body = TaskEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 409, description = "STATE_CONFLICT: running or finished", body = ErrorEnvelope),
        (status = 503, body = ErrorEnvelope),
    )
)]
async fn cancel_task(
    State(app): State<App>,
    Bearer(hash): Bearer,
    Path(id): Path<String>,
) -> Result<Data<TaskView>, ApiError> {
    let (task, ready) = app
        .db
        .task_cancel_and_wake(&hash, path_id(&id, "id")?)
        .await?;
    app.dispatch.notify_queues(ready.into_iter().collect());
    Ok(Data(StatusCode::OK, task.into()))
}

/// `POST /v1/tasks/{id}/resolve` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolveTask {
    /// succeeded, failed, or requeue (a new attempt with a larger token).
    pub resolution: Resolution,
    /// Kept as the task's output (succeeded) or error (failed).
    #[serde(default, deserialize_with = "present")]
    pub note: Option<Value>,
}

/// Settle a NEEDS_REVIEW task.
#[utoipa::path(
    post, path = "/v1/tasks/{id}/resolve", tag = "tasks", security(("bearer" = [])), params(("id" = u64, Path, minimum = 1)),
    request_body = ResolveTask,
    responses(
        (status = 200, body = TaskEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 409, description = "STATE_CONFLICT: not in NEEDS_REVIEW", body = ErrorEnvelope),
        (status = 413, body = ErrorEnvelope), (status = 503, body = ErrorEnvelope),
    )
)]
async fn resolve_task(
    State(app): State<App>,
    Bearer(hash): Bearer,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<ResolveTask>,
) -> Result<Data<TaskView>, ApiError> {
    let note = body.note.map(|n| n.to_string());
    let (task, ready) = app
        .db
        .task_resolve_and_wake(&hash, path_id(&id, "id")?, body.resolution, note.as_deref())
        .await?;
    app.dispatch.notify_queues(ready.into_iter().collect());
    Ok(Data(StatusCode::OK, task.into()))
}

// Envelopes for the OpenAPI document: each names the concrete shape a route returns.

/// `{"data": Task, "request_id"}`.
#[derive(Serialize, ToSchema)]
pub struct TaskEnvelope {
    pub data: TaskView,
    pub request_id: String,
}

/// `{"data": [{"replayed", "task"}], "request_id"}`: a batch submit's tasks, in request order.
#[derive(Serialize, ToSchema)]
pub struct SubmittedList {
    pub data: Vec<SubmittedView>,
    pub request_id: String,
}

/// `{"data": [Task], "next_cursor", "request_id"}`.
#[derive(Serialize, ToSchema)]
pub struct TaskList {
    pub data: Vec<TaskView>,
    pub next_cursor: Option<String>,
    pub request_id: String,
}
