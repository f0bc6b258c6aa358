//! Task procedures: submit, get, list, cancel, resolve (`orbit_task_*`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{Arg, Cols, Db, DbError};

/// Task states (SPEC §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TaskState {
    Waiting,
    Leased,
    Running,
    RetryWait,
    Succeeded,
    Failed,
    Cancelled,
    NeedsReview,
    Expired,
}

impl TaskState {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Waiting => "WAITING",
            TaskState::Leased => "LEASED",
            TaskState::Running => "RUNNING",
            TaskState::RetryWait => "RETRY_WAIT",
            TaskState::Succeeded => "SUCCEEDED",
            TaskState::Failed => "FAILED",
            TaskState::Cancelled => "CANCELLED",
            TaskState::NeedsReview => "NEEDS_REVIEW",
            TaskState::Expired => "EXPIRED",
        }
    }

    pub fn parse(s: &str) -> Result<TaskState, DbError> {
        serde_json::from_value(serde_json::Value::String(s.to_string()))
            .map_err(|_| DbError::Internal(format!("unknown task state {s:?}")))
    }

    /// SUCCEEDED, FAILED, CANCELLED and EXPIRED never change again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Succeeded | TaskState::Failed | TaskState::Cancelled | TaskState::Expired
        )
    }
}

/// A task as the procedures return it (the "task columns" of their headers).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Task {
    pub id: u64,
    pub queue_id: String,
    pub namespace_id: u64,
    pub state: TaskState,
    pub handler: String,
    pub handler_version: String,
    pub payload_version: String,
    /// The payload JSON text exactly as stored.
    pub payload: String,
    /// Empty = none.
    pub business_key: String,
    /// `None` when the task has no key.
    pub concurrency_key: Option<String>,
    pub priority: u8,
    pub max_attempts: u32,
    pub attempt_count: u32,
    pub retry_base_ms: u32,
    pub retry_max_ms: u32,
    pub retry_unknown: bool,
    pub run_at: DateTime<Utc>,
    pub deadline_at: Option<DateTime<Utc>>,
    /// Why a waiting task cannot be granted (e.g. `TOKEN_EXHAUSTED: …`); empty = nothing.
    pub blocked_reason: String,
    pub output: Option<String>,
    pub error: Option<String>,
    /// 0 = no attempt yet.
    pub current_attempt_id: u64,
    pub plan_id: u64,
    pub plan_version: u32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl Task {
    /// Reads the task columns from `c` onwards.
    pub(crate) fn read(c: &mut Cols<'_>) -> Result<Task, DbError> {
        Ok(Task {
            id: c.u64()?,
            queue_id: c.text()?,
            namespace_id: c.u64()?,
            state: TaskState::parse(&c.text()?)?,
            handler: c.text()?,
            handler_version: c.text()?,
            payload_version: c.text()?,
            payload: c.text()?,
            business_key: c.text()?,
            concurrency_key: Some(c.text()?).filter(|k| !k.is_empty()),
            priority: u8::try_from(c.u64()?).unwrap_or(u8::MAX),
            max_attempts: c.u32()?,
            attempt_count: c.u32()?,
            retry_base_ms: c.u32()?,
            retry_max_ms: c.u32()?,
            retry_unknown: c.bool()?,
            run_at: c.time()?,
            deadline_at: c.opt_time()?,
            blocked_reason: c.text()?,
            output: c.opt_text()?,
            error: c.opt_text()?,
            current_attempt_id: c.u64()?,
            plan_id: c.u64()?,
            plan_version: c.u32()?,
            created_at: c.time()?,
            updated_at: c.time()?,
            finished_at: c.opt_time()?,
        })
    }
}

/// A submit request. `None` fields take the procedure's defaults.
#[derive(Clone, Debug, Default)]
pub struct NewTask {
    pub queue_id: String,
    pub handler: String,
    pub handler_version: String,
    pub payload_version: String,
    /// JSON text.
    pub payload: String,
    pub business_key: Option<String>,
    /// `Some("")` = no key; `None` is passed on as SQL NULL, which the procedure rejects (a JSON
    /// `null` is not the same as omitting the field).
    pub concurrency_key: Option<String>,
    pub priority: Option<i64>,
    pub max_attempts: Option<i64>,
    pub retry_base_ms: Option<i64>,
    pub retry_max_ms: Option<i64>,
    pub retry_unknown: Option<bool>,
    pub deadline_seconds: Option<i64>,
    /// When a submitted task may first be claimed. A plan's definition carries none (its tasks
    /// run when their slot fires), and plans ignore it.
    pub timing: Timing,
}

/// A submit's timing (`orbit_task_submit`'s `p_run_at` .. `p_debounce_max_seconds`); `None` = not
/// given. The procedures check the rules (one of run_at and delay_seconds; debounce only with a
/// concurrency key, and not with either).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Timing {
    /// Not claimed before this time; a past time runs at once; at most 365 days ahead.
    pub run_at: Option<DateTime<Utc>>,
    /// Not claimed before acceptance + this many seconds (0-31536000).
    pub delay_seconds: Option<i64>,
    /// Runs this long after acceptance unless a later debounced submit for its key and queue
    /// replaces it first.
    pub debounce_seconds: Option<i64>,
    /// The latest a burst of replacements may push run_at, from the burst's first submit.
    pub debounce_max_seconds: Option<i64>,
}

impl Timing {
    /// `run_at` as the procedures take it: UTC, `YYYY-MM-DD HH:MM:SS.ffffff`.
    pub fn run_at_sql(&self) -> Option<String> {
        self.run_at
            .map(|t| t.naive_utc().format("%Y-%m-%d %H:%M:%S%.6f").to_string())
    }
}

impl NewTask {
    /// The task definition arguments (handler .. deadline_seconds) in the order
    /// `orbit_task_submit`, `orbit_plan_create` and `orbit_plan_version_create` take them.
    pub(crate) fn definition_args(&self) -> [Arg<'_>; 12] {
        [
            self.handler.as_str().into(),
            self.handler_version.as_str().into(),
            self.payload_version.as_str().into(),
            self.payload.as_str().into(),
            self.business_key.as_deref().into(),
            self.concurrency_key
                .as_deref()
                .map_or(Arg::Null, |k| Arg::Bytes(k.as_bytes())),
            self.priority.into(),
            self.max_attempts.into(),
            self.retry_base_ms.into(),
            self.retry_max_ms.into(),
            self.retry_unknown.map(i64::from).into(),
            self.deadline_seconds.into(),
        ]
    }
}

impl NewTask {
    /// This task as one element of `orbit_task_submit_many`'s `p_tasks`: the payload as a string
    /// holding its JSON text (stored and hashed byte for byte, as `orbit_task_submit` does), the
    /// defaultable fields omitted when `None`, and a `None` concurrency_key as `null` (which the
    /// procedure rejects, as `orbit_task_submit` rejects SQL NULL).
    pub fn batch_item(&self, idempotency_key: &str) -> serde_json::Value {
        let mut item = serde_json::json!({
            "idempotency_key": idempotency_key,
            "queue_id": self.queue_id,
            "handler": self.handler,
            "handler_version": self.handler_version,
            "payload_version": self.payload_version,
            "payload": self.payload,
            "concurrency_key": self.concurrency_key,
        });
        let optional: [(&str, Option<serde_json::Value>); 7] = [
            ("business_key", self.business_key.clone().map(Into::into)),
            ("priority", self.priority.map(Into::into)),
            ("max_attempts", self.max_attempts.map(Into::into)),
            ("retry_base_ms", self.retry_base_ms.map(Into::into)),
            ("retry_max_ms", self.retry_max_ms.map(Into::into)),
            ("retry_unknown", self.retry_unknown.map(Into::into)),
            ("deadline_seconds", self.deadline_seconds.map(Into::into)),
        ];
        let timing: [(&str, Option<serde_json::Value>); 4] = [
            ("run_at", self.timing.run_at_sql().map(Into::into)),
            ("delay_seconds", self.timing.delay_seconds.map(Into::into)),
            (
                "debounce_seconds",
                self.timing.debounce_seconds.map(Into::into),
            ),
            (
                "debounce_max_seconds",
                self.timing.debounce_max_seconds.map(Into::into),
            ),
        ];
        let optional = optional.into_iter().chain(timing);
        for (name, value) in optional {
            if let Some(v) = value {
                item[name] = v;
            }
        }
        item
    }
}

/// Filters of `orbit_task_list`; `None` = no filter. They combine with AND.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskFilter {
    /// One queue (it must be in the credential's scope); `None` = every queue in scope.
    pub queue_id: Option<String>,
    pub state: Option<TaskState>,
    pub business_key: Option<String>,
    /// Exact bytes; `Some("")` = tasks without a key.
    pub concurrency_key: Option<String>,
}

/// What a submit returns.
#[derive(Clone, Debug)]
pub struct Submitted {
    /// `true` when the Idempotency-Key had already been accepted with this request.
    pub replayed: bool,
    pub task: Task,
    /// The key's holder a `cancel_running` key policy ended for this submit: tell its worker.
    pub cancelled: Option<CancelledHolder>,
}

/// An attempt a submit ended under a `cancel_running` key policy, and its worker session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CancelledHolder {
    pub attempt_id: u64,
    pub session_id: u64,
}

impl CancelledHolder {
    /// The result's cancelled_attempt_id and cancelled_session_id (0 = none).
    fn read(c: &mut Cols<'_>) -> Result<Option<CancelledHolder>, DbError> {
        let attempt_id = c.u64()?;
        let session_id = c.u64()?;
        Ok((attempt_id != 0).then_some(CancelledHolder {
            attempt_id,
            session_id,
        }))
    }
}

/// How a NEEDS_REVIEW task is settled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    Succeeded,
    Failed,
    Requeue,
}

impl Resolution {
    fn as_str(self) -> &'static str {
        match self {
            Resolution::Succeeded => "succeeded",
            Resolution::Failed => "failed",
            Resolution::Requeue => "requeue",
        }
    }
}

impl Db {
    /// `orbit_task_submit`.
    pub async fn task_submit(
        &self,
        token_hash: &[u8],
        idempotency_key: &str,
        t: &NewTask,
    ) -> Result<Submitted, DbError> {
        let run_at = t.timing.run_at_sql();
        let submitted = self
            .call_one(
                "orbit_task_submit",
                &[
                    Arg::Bytes(token_hash),
                    Arg::Bytes(idempotency_key.as_bytes()),
                    t.queue_id.as_str().into(),
                ]
                .into_iter()
                .chain(t.definition_args())
                .chain([
                    run_at.as_deref().into(),
                    t.timing.delay_seconds.into(),
                    t.timing.debounce_seconds.into(),
                    t.timing.debounce_max_seconds.into(),
                ])
                .collect::<Vec<_>>(),
                |c| {
                    Ok(Submitted {
                        replayed: c.bool()?,
                        task: Task::read(c)?,
                        cancelled: CancelledHolder::read(c)?,
                    })
                },
            )
            .await?;
        if !submitted.replayed {
            crate::telemetry::submitted(&submitted.task.queue_id, 1);
        }
        Ok(submitted)
    }

    /// `orbit_task_submit_many`: up to 1000 tasks, each with its own Idempotency-Key, in one
    /// transaction; all or nothing. Returns one [`Submitted`] per item, in input order.
    pub async fn task_submit_many(
        &self,
        token_hash: &[u8],
        items: &[(String, NewTask)],
    ) -> Result<Vec<Submitted>, DbError> {
        let tasks =
            serde_json::Value::Array(items.iter().map(|(key, t)| t.batch_item(key)).collect());
        let tasks = tasks.to_string();
        let submitted = self
            .call_with(
                "orbit_task_submit_many",
                &[Arg::Bytes(token_hash), Arg::Text(&tasks)],
                |rows| {
                    if rows.len() != items.len() {
                        return Err(DbError::Internal(format!(
                            "orbit_task_submit_many returned {} rows for {} tasks",
                            rows.len(),
                            items.len()
                        )));
                    }
                    rows.iter()
                        .enumerate()
                        .map(|(i, row)| {
                            let mut c = Cols::new(row);
                            let item = c.u64()?;
                            if item != i as u64 {
                                return Err(DbError::Internal(format!(
                                    "orbit_task_submit_many returned item {item} in row {i}"
                                )));
                            }
                            Ok(Submitted {
                                replayed: c.bool()?,
                                task: Task::read(&mut c)?,
                                cancelled: CancelledHolder::read(&mut c)?,
                            })
                        })
                        .collect::<Result<Vec<_>, DbError>>()
                },
            )
            .await?;
        for s in submitted.iter().filter(|s| !s.replayed) {
            crate::telemetry::submitted(&s.task.queue_id, 1);
        }
        Ok(submitted)
    }

    /// `orbit_task_get`.
    pub async fn task_get(&self, token_hash: &[u8], task_id: u64) -> Result<Task, DbError> {
        self.call_one(
            "orbit_task_get",
            &[Arg::Bytes(token_hash), task_id.into()],
            Task::read,
        )
        .await
    }

    /// `orbit_task_list`: up to `limit` (1-1000) tasks newest first, only ids below `before_id`
    /// when given (pass the last id of a page to get the next one).
    pub async fn task_list(
        &self,
        token_hash: &[u8],
        filter: &TaskFilter,
        limit: u32,
        before_id: Option<u64>,
    ) -> Result<Vec<Task>, DbError> {
        self.call(
            "orbit_task_list",
            &[
                Arg::Bytes(token_hash),
                filter.queue_id.as_deref().into(),
                filter.state.map(TaskState::as_str).into(),
                filter.business_key.as_deref().into(),
                filter
                    .concurrency_key
                    .as_deref()
                    .map_or(Arg::Null, |k| Arg::Bytes(k.as_bytes())),
                u64::from(limit).into(),
                before_id.map_or(Arg::Null, Arg::U64),
            ],
            Task::read,
        )
        .await
    }

    /// `orbit_task_cancel`.
    pub async fn task_cancel(&self, token_hash: &[u8], task_id: u64) -> Result<Task, DbError> {
        Ok(self.task_cancel_and_wake(token_hash, task_id).await?.0)
    }

    /// `orbit_task_cancel`: the task, and the queues where the cancel readied work (whose worker
    /// sessions should be woken; never another application's).
    pub async fn task_cancel_and_wake(
        &self,
        token_hash: &[u8],
        task_id: u64,
    ) -> Result<(Task, Vec<String>), DbError> {
        self.call_one(
            "orbit_task_cancel",
            &[Arg::Bytes(token_hash), task_id.into()],
            |c| Ok((Task::read(c)?, wake_queues(c, "orbit_task_cancel")?)),
        )
        .await
    }

    /// `orbit_task_resolve`.
    pub async fn task_resolve(
        &self,
        token_hash: &[u8],
        task_id: u64,
        resolution: Resolution,
        note: Option<&str>,
    ) -> Result<Task, DbError> {
        Ok(self
            .task_resolve_and_wake(token_hash, task_id, resolution, note)
            .await?
            .0)
    }

    /// `orbit_task_resolve`: the task, and its queue when a requeue left it ready (see
    /// [`Db::task_cancel_and_wake`]).
    pub async fn task_resolve_and_wake(
        &self,
        token_hash: &[u8],
        task_id: u64,
        resolution: Resolution,
        note: Option<&str>,
    ) -> Result<(Task, Vec<String>), DbError> {
        self.call_one(
            "orbit_task_resolve",
            &[
                Arg::Bytes(token_hash),
                task_id.into(),
                resolution.as_str().into(),
                note.into(),
            ],
            |c| Ok((Task::read(c)?, wake_queues(c, "orbit_task_resolve")?)),
        )
        .await
    }
}

/// Reads a `wake_queues` column: a JSON array of queue ids.
pub(crate) fn wake_queues(c: &mut Cols<'_>, procedure: &str) -> Result<Vec<String>, DbError> {
    serde_json::from_str(&c.text()?)
        .map_err(|e| DbError::Internal(format!("{procedure} wake_queues: {e}")))
}
