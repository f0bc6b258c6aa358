//! Plan procedures (SPEC §3 Plans): create, new version, pause/resume, get, and the scheduler's
//! `orbit_plan_fire_due`, with the cron plans' next fire times (`orbit_plan_schedule_due`,
//! `orbit_plan_schedule_set`).

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::schedule::{interval_upcoming, CatchUp, CronSchedule, OnBusy};

use super::maintenance::Swept;
use super::tasks::NewTask;
use super::{Arg, Cols, Db, DbError};

/// A new plan: it fires `task` into `task.queue_id` on `schedule`.
#[derive(Clone, Debug, Default)]
pub struct NewPlan {
    /// Unique within the queue's namespace.
    pub name: String,
    pub schedule: PlanSchedule,
    /// The task definition, with the same fields and rules as a submit; `queue_id` is the
    /// plan's queue.
    pub task: NewTask,
}

/// When a plan fires, and what its slots do about downtime and a busy key. Exactly one of
/// `interval_seconds` and `cron` (the procedures refuse anything else).
#[derive(Clone, Debug, Default)]
pub struct PlanSchedule {
    /// An interval plan: 1-31536000 seconds.
    pub interval_seconds: Option<i64>,
    /// A cron plan: the expression (checked by [`CronSchedule::parse`] before it gets here).
    pub cron: Option<String>,
    /// A cron plan's IANA time zone; `None` = UTC.
    pub timezone: Option<String>,
    /// `None` = [`CatchUp::One`].
    pub catch_up: Option<CatchUp>,
    /// `None` = [`OnBusy::Queue`].
    pub on_busy: Option<OnBusy>,
}

impl PlanSchedule {
    /// Every `seconds` seconds, with the defaults.
    pub fn every(seconds: i64) -> PlanSchedule {
        PlanSchedule {
            interval_seconds: Some(seconds),
            ..PlanSchedule::default()
        }
    }

    /// On the cron expression `expr` read in `timezone`, with the defaults.
    pub fn cron(expr: &str, timezone: &str) -> PlanSchedule {
        PlanSchedule {
            cron: Some(expr.into()),
            timezone: Some(timezone.into()),
            ..PlanSchedule::default()
        }
    }

    fn args(&self) -> [Arg<'_>; 5] {
        [
            self.interval_seconds.into(),
            self.cron.as_deref().into(),
            self.timezone.as_deref().into(),
            self.catch_up.map(CatchUp::as_str).into(),
            self.on_busy.map(OnBusy::as_str).into(),
        ]
    }
}

/// A cron plan waiting for its next fire time (`orbit_plan_schedule_due`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanToSchedule {
    pub plan_id: u64,
    /// The next fire time is the first one after this.
    pub schedule_after: DateTime<Utc>,
    pub cron: String,
    pub timezone: String,
    pub catch_up: String,
}

/// A computed next fire time for `orbit_plan_schedule_set`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NextFire {
    pub plan_id: u64,
    /// The `schedule_after` it was computed from.
    #[serde(with = "mysql_time")]
    pub after: DateTime<Utc>,
    #[serde(with = "mysql_time")]
    pub next: DateTime<Utc>,
}

/// `YYYY-MM-DD HH:MM:SS.ffffff`, the form JSON_TABLE reads into a DATETIME(6).
mod mysql_time {
    use chrono::{DateTime, Utc};
    use serde::Serializer;

    pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&t.format("%Y-%m-%d %H:%M:%S%.6f").to_string())
    }
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
    /// `None` while the server computes a cron plan's next fire time (see [`Plan::upcoming`]).
    pub next_fire_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// `interval` or `cron`.
    pub schedule_kind: String,
    /// For `interval`: the interval in seconds; for `cron`: the expression.
    pub schedule_spec: String,
    pub task: PlanTask,
    /// A cron plan's anchor: its next slot is the first fire time after it.
    pub schedule_after: Option<DateTime<Utc>>,
    /// A cron plan's IANA time zone; empty for interval plans.
    pub timezone: String,
    /// `none`, `one` or `all`.
    pub catch_up: String,
    /// `queue`, `skip` or `replace_waiting`.
    pub on_busy: String,
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
            next_fire_at: c.opt_time()?,
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
            schedule_after: c.opt_time()?,
            timezone: c.text()?,
            catch_up: c.text()?,
            on_busy: c.text()?,
        })
    }

    /// The plan's next `n` fire times (UTC) as of `now`: from its stored next slot, or, while the
    /// scheduler has yet to store a cron plan's, from the one it will store. A paused plan lists
    /// the times it would have once resumed now (resuming skips what was missed). Empty only for
    /// a cron plan whose stored expression does not parse (a server checks it before storing).
    pub fn upcoming(&self, now: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
        if self.schedule_kind == "cron" {
            let Ok(cron) = CronSchedule::parse(&self.schedule_spec, &self.timezone) else {
                return Vec::new();
            };
            let catch_up = self.catch_up.parse().unwrap_or_default();
            let first = match (self.paused, self.next_fire_at) {
                (true, Some(next)) if next > now => Some(next),
                (true, _) => cron.after(now),
                (false, Some(next)) => Some(next),
                (false, None) => self
                    .schedule_after
                    .and_then(|after| cron.next(after, now, catch_up)),
            };
            first.map_or_else(Vec::new, |f| cron.upcoming(f, n))
        } else {
            let seconds: i64 = self.schedule_spec.parse().unwrap_or(1).max(1);
            let Some(mut first) = self.next_fire_at else {
                return Vec::new();
            };
            if self.paused && first <= now {
                // As orbit_plan_set_paused resumes: the first whole interval after now.
                let missed =
                    (now - first).num_microseconds().unwrap_or(i64::MAX) / (seconds * 1_000_000);
                first += chrono::Duration::seconds(seconds * (missed + 1));
            }
            interval_upcoming(first, seconds, n)
        }
    }
}

impl PlanToSchedule {
    /// The next fire time as of `now`; `None` when the stored expression or zone does not parse
    /// or never fires again.
    pub fn next(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let cron = CronSchedule::parse(&self.cron, &self.timezone).ok()?;
        cron.next(
            self.schedule_after,
            now,
            self.catch_up.parse().unwrap_or_default(),
        )
    }
}

impl Db {
    async fn plan_call(&self, procedure: &str, args: &[Arg<'_>]) -> Result<Plan, DbError> {
        self.call_one(procedure, args, Plan::read).await
    }

    /// `orbit_plan_create`: version 1; an interval plan first fires at now + interval, a cron
    /// plan's first fire time is computed by the scheduler (`next_fire_at` is `None` until then).
    pub async fn plan_create(&self, token_hash: &[u8], p: &NewPlan) -> Result<Plan, DbError> {
        let args: Vec<Arg<'_>> = [
            Arg::Bytes(token_hash),
            p.task.queue_id.as_str().into(),
            p.name.as_str().into(),
        ]
        .into_iter()
        .chain(p.schedule.args())
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
        schedule: &PlanSchedule,
        task: &NewTask,
    ) -> Result<Plan, DbError> {
        let args: Vec<Arg<'_>> = [Arg::Bytes(token_hash), plan_id.into()]
            .into_iter()
            .chain(schedule.args())
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

    /// `orbit_plan_schedule_due`: up to `limit` cron plans waiting for their next fire time.
    pub async fn plan_schedule_due(&self, limit: u32) -> Result<Vec<PlanToSchedule>, DbError> {
        self.call("orbit_plan_schedule_due", &[u64::from(limit).into()], |c| {
            Ok(PlanToSchedule {
                plan_id: c.u64()?,
                schedule_after: c.time()?,
                cron: c.text()?,
                timezone: c.text()?,
                catch_up: c.text()?,
            })
        })
        .await
    }

    /// `orbit_plan_schedule_set`: store computed next fire times (each only if its plan still
    /// waits for it from the same `after`). `count` is the number stored, `next_due_at` the
    /// earliest next slot of an active plan.
    pub async fn plan_schedule_set(&self, items: &[NextFire]) -> Result<Swept, DbError> {
        let json = serde_json::to_string(items)
            .map_err(|e| DbError::Internal(format!("next fire times as JSON: {e}")))?;
        self.call_one("orbit_plan_schedule_set", &[json.as_str().into()], |c| {
            Ok(Swept {
                count: c.u64()?,
                next_due_at: c.opt_time()?,
            })
        })
        .await
    }

    /// One round of cron scheduling: reads up to `limit` cron plans waiting for their next fire
    /// time, computes each as of now (src/schedule.rs) and stores them. A plan whose stored
    /// expression cannot be read is left waiting (and logged).
    pub async fn plan_schedule_round(&self, limit: u32) -> Result<Swept, DbError> {
        let due = self.plan_schedule_due(limit).await?;
        if due.is_empty() {
            return Ok(Swept {
                count: 0,
                next_due_at: None,
            });
        }
        let now = Utc::now();
        let items: Vec<NextFire> = due
            .iter()
            .filter_map(|p| match p.next(now) {
                Some(next) => Some(NextFire {
                    plan_id: p.plan_id,
                    after: p.schedule_after,
                    next,
                }),
                None => {
                    tracing::warn!(plan_id = p.plan_id, cron = %p.cron, timezone = %p.timezone,
                        "cron plan has no next fire time; it stays unscheduled");
                    None
                }
            })
            .collect();
        if items.is_empty() {
            return Ok(Swept {
                count: 0,
                next_due_at: None,
            });
        }
        self.plan_schedule_set(&items).await
    }
}
