//! Attempt history: `orbit_attempt_list`, `orbit_attempt_get`. Read-only: a token shown here
//! grants nothing.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize, Serializer};

use super::{Arg, Cols, Db, DbError};

/// One row of a task's history (`orbit_task_event`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TaskEvent {
    pub id: u64,
    /// 0 = none.
    pub attempt_id: u64,
    /// What happened, e.g. `released`, `cancelled`, `resolved`.
    pub event: String,
    pub from_state: String,
    pub to_state: String,
    /// 0 = none.
    pub concurrency_token: u64,
    pub detail: String,
    pub created_at: DateTime<Utc>,
}

/// Attempt states (SPEC §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AttemptState {
    Leased,
    Running,
    Succeeded,
    Failed,
    Cancelled,
    /// The lease ran out before Start.
    Expired,
    /// The lease ran out while running, or the worker reported an unknown outcome.
    Unknown,
}

impl AttemptState {
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptState::Leased => "LEASED",
            AttemptState::Running => "RUNNING",
            AttemptState::Succeeded => "SUCCEEDED",
            AttemptState::Failed => "FAILED",
            AttemptState::Cancelled => "CANCELLED",
            AttemptState::Expired => "EXPIRED",
            AttemptState::Unknown => "UNKNOWN",
        }
    }

    pub fn parse(s: &str) -> Result<AttemptState, DbError> {
        serde_json::from_value(serde_json::Value::String(s.to_string()))
            .map_err(|_| DbError::Internal(format!("unknown attempt state {s:?}")))
    }
}

/// An attempt (the "attempt columns" of the procedure headers).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Attempt {
    pub id: u64,
    pub task_id: u64,
    pub attempt_no: u32,
    pub queue_id: String,
    pub state: AttemptState,
    pub worker_id: String,
    pub session_id: u64,
    /// 0 when the task has no key. Serialised as a decimal string (a uint64 must not pass through
    /// a JSON float) and omitted when 0 (SPEC §3).
    #[serde(
        serialize_with = "token_as_string",
        skip_serializing_if = "is_no_token"
    )]
    pub concurrency_token: u64,
    pub granted_at: DateTime<Utc>,
    pub lease_expires_at: DateTime<Utc>,
    /// `None` = never started.
    pub started_at: Option<DateTime<Utc>>,
    /// `None` = still holds its permits.
    pub released_at: Option<DateTime<Utc>>,
    /// `None` while active; otherwise succeeded, failed, unknown, expired or cancelled.
    pub outcome: Option<String>,
    pub retryable: bool,
    pub output: Option<String>,
    pub error: Option<String>,
    /// An outcome reported after the attempt had already ended (recorded, never acted on).
    pub late_result: Option<String>,
}

fn token_as_string<S: Serializer>(token: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(token)
}

fn is_no_token(token: &u64) -> bool {
    *token == 0
}

impl Attempt {
    /// Reads the attempt columns from `c` onwards.
    pub(crate) fn read(c: &mut Cols<'_>) -> Result<Attempt, DbError> {
        let none_if_empty = |s: String| Some(s).filter(|s| !s.is_empty());
        Ok(Attempt {
            id: c.u64()?,
            task_id: c.u64()?,
            attempt_no: c.u32()?,
            queue_id: c.text()?,
            state: AttemptState::parse(&c.text()?)?,
            worker_id: c.text()?,
            session_id: c.u64()?,
            concurrency_token: c.u64()?,
            granted_at: c.time()?,
            lease_expires_at: c.time()?,
            started_at: c.opt_time()?,
            released_at: c.opt_time()?,
            outcome: none_if_empty(c.text()?),
            retryable: c.bool()?,
            output: c.opt_text()?,
            error: c.opt_text()?,
            late_result: none_if_empty(c.text()?),
        })
    }
}

impl Db {
    /// `orbit_attempt_list`: every attempt of a task, in attempt_no order (NOT_FOUND for a task
    /// outside the credential's reach).
    /// `orbit_task_event_list`: up to `limit` (1-1000) of a task's history events, oldest
    /// first, after the event `after_id` when given. NOT_FOUND outside the credential's reach.
    pub async fn task_event_list(
        &self,
        token_hash: &[u8],
        task_id: u64,
        limit: u32,
        after_id: Option<u64>,
    ) -> Result<Vec<TaskEvent>, DbError> {
        self.call(
            "orbit_task_event_list",
            &[
                Arg::Bytes(token_hash),
                task_id.into(),
                u64::from(limit).into(),
                after_id.map_or(Arg::Null, Arg::U64),
            ],
            |c| {
                Ok(TaskEvent {
                    id: c.u64()?,
                    attempt_id: c.u64()?,
                    event: c.text()?,
                    from_state: c.text()?,
                    to_state: c.text()?,
                    concurrency_token: c.u64()?,
                    detail: c.text()?,
                    created_at: c.time()?,
                })
            },
        )
        .await
    }

    pub async fn attempt_list(
        &self,
        token_hash: &[u8],
        task_id: u64,
    ) -> Result<Vec<Attempt>, DbError> {
        self.call(
            "orbit_attempt_list",
            &[Arg::Bytes(token_hash), task_id.into()],
            Attempt::read,
        )
        .await
    }

    /// `orbit_attempt_get` (NOT_FOUND for an attempt outside the credential's reach).
    pub async fn attempt_get(
        &self,
        token_hash: &[u8],
        attempt_id: u64,
    ) -> Result<Attempt, DbError> {
        self.call_one(
            "orbit_attempt_get",
            &[Arg::Bytes(token_hash), attempt_id.into()],
            Attempt::read,
        )
        .await
    }
}
