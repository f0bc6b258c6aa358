//! Plan procedures (SPEC §3 Plans): create, new version, pause/resume, get, and the scheduler's
//! `orbit_plan_fire_due`.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::maintenance::Swept;
use super::tasks::NewTask;
use super::{Arg, Cols, Db, DbError};

/// A new plan: it fires `task` into `task.queue_id` every `interval_seconds`.
#[derive(Clone, Debug, Default)]
pub struct NewPlan {
    /// Unique within the queue's namespace.
    pub name: String,
    /// 1-31536000.
    pub interval_seconds: i64,
    /// The task definition, with the same fields and rules as a submit; `queue_id` is the
    /// plan's queue.
    pub task: NewTask,
}

/// The task definition of a plan version (the effective values, defaults applied).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlanTask {
    pub handler: String,
    pub handler_version: String,
    pub payload_version: String,
    /// JSON text.
    pub payload: String,
    /// Empty = none.
    pub business_key: String,
    /// Inherited verbatim by every fired task; `None` = no key.
    pub concurrency_key: Option<String>,
    pub priority: u8,
    pub max_attempts: u32,
    pub retry_base_ms: u32,
    pub retry_max_ms: u32,
    pub retry_unknown: bool,
    /// 0 = none.
    pub deadline_seconds: u32,
}

/// A plan with its current version (the "plan columns" of the procedure headers).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub id: u64,
    pub queue_id: String,
    pub namespace_id: u64,
    pub name: String,
    pub current_version: u32,
    pub paused: bool,
    pub next_fire_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// `interval` (the only kind so far).
    pub schedule_kind: String,
    /// For `interval`: the interval in seconds.
    pub schedule_spec: String,
    pub task: PlanTask,
}

impl Plan {
    fn read(c: &mut Cols<'_>) -> Result<Plan, DbError> {
        Ok(Plan {
            id: c.u64()?,
            queue_id: c.text()?,
            namespace_id: c.u64()?,
            name: c.text()?,
            current_version: c.u32()?,
            paused: c.bool()?,
            next_fire_at: c.time()?,
            created_at: c.time()?,
            updated_at: c.time()?,
            schedule_kind: c.text()?,
            schedule_spec: c.text()?,
            task: PlanTask {
                handler: c.text()?,
                handler_version: c.text()?,
                payload_version: c.text()?,
                payload: c.text()?,
                business_key: c.text()?,
                concurrency_key: Some(c.text()?).filter(|k| !k.is_empty()),
                priority: u8::try_from(c.u64()?).unwrap_or(u8::MAX),
                max_attempts: c.u32()?,
                retry_base_ms: c.u32()?,
                retry_max_ms: c.u32()?,
                retry_unknown: c.bool()?,
                deadline_seconds: c.u32()?,
            },
        })
    }
}

impl Db {
    async fn plan_call(&self, procedure: &str, args: &[Arg<'_>]) -> Result<Plan, DbError> {
        self.call_one(procedure, args, Plan::read).await
    }

    /// `orbit_plan_create`: version 1, first fire at now + interval.
    pub async fn plan_create(&self, token_hash: &[u8], p: &NewPlan) -> Result<Plan, DbError> {
        let args: Vec<Arg<'_>> = [
            Arg::Bytes(token_hash),
            p.task.queue_id.as_str().into(),
            p.name.as_str().into(),
            Some(p.interval_seconds).into(),
        ]
        .into_iter()
        .chain(p.task.definition_args())
        .collect();
        self.plan_call("orbit_plan_create", &args).await
    }

    /// `orbit_plan_version_create`: a new immutable version becomes current. `task.queue_id` is
    /// ignored (a plan's queue is fixed).
    pub async fn plan_version_create(
        &self,
        token_hash: &[u8],
        plan_id: u64,
        interval_seconds: i64,
        task: &NewTask,
    ) -> Result<Plan, DbError> {
        let args: Vec<Arg<'_>> = [
            Arg::Bytes(token_hash),
            plan_id.into(),
            Some(interval_seconds).into(),
        ]
        .into_iter()
        .chain(task.definition_args())
        .collect();
        self.plan_call("orbit_plan_version_create", &args).await
    }

    /// `orbit_plan_set_paused`: pause, or resume without firing the slots missed meanwhile.
    pub async fn plan_set_paused(
        &self,
        token_hash: &[u8],
        plan_id: u64,
        paused: bool,
    ) -> Result<Plan, DbError> {
        self.plan_call(
            "orbit_plan_set_paused",
            &[Arg::Bytes(token_hash), plan_id.into(), paused.into()],
        )
        .await
    }

    /// `orbit_plan_get`.
    pub async fn plan_get(&self, token_hash: &[u8], plan_id: u64) -> Result<Plan, DbError> {
        self.plan_call("orbit_plan_get", &[Arg::Bytes(token_hash), plan_id.into()])
            .await
    }

    /// `orbit_plan_list`: up to `limit` (1-1000) plans the credential reaches, in id order, after
    /// `after_id`; only `queue_id`'s when given.
    pub async fn plan_list(
        &self,
        token_hash: &[u8],
        queue_id: Option<&str>,
        limit: u32,
        after_id: Option<u64>,
    ) -> Result<Vec<Plan>, DbError> {
        self.call(
            "orbit_plan_list",
            &[
                Arg::Bytes(token_hash),
                queue_id.into(),
                u64::from(limit).into(),
                after_id.map_or(Arg::Null, Arg::U64),
            ],
            Plan::read,
        )
        .await
    }

    /// `orbit_plan_fire_due`: fire up to `limit` due plans (the scheduler loop). `count` is the
    /// number of tasks created, `next_due_at` the earliest next slot of an active plan.
    pub async fn plan_fire_due(&self, limit: u32) -> Result<Swept, DbError> {
        self.call_one("orbit_plan_fire_due", &[u64::from(limit).into()], |c| {
            Ok(Swept {
                count: c.u64()?,
                next_due_at: c.opt_time()?,
            })
        })
        .await
    }
}
