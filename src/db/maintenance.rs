//! Background procedures the scheduler loop calls: lease recovery, retry promotion, deadlines,
//! retention.

use chrono::{DateTime, Utc};

use super::{Db, DbError};

/// How much one maintenance call did, and when something next falls due (`None` = nothing pending).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Swept {
    pub count: u64,
    pub next_due_at: Option<DateTime<Utc>>,
}

/// What one `orbit_task_purge` call did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Purged {
    /// Tasks deleted.
    pub count: u64,
    /// It stopped at its limit or time budget: there may be more to purge now.
    pub more: bool,
}

impl Db {
    async fn sweep(&self, procedure: &str, limit: u32) -> Result<Swept, DbError> {
        self.call_one(procedure, &[u64::from(limit).into()], |c| {
            Ok(Swept {
                count: c.u64()?,
                next_due_at: c.opt_time()?,
            })
        })
        .await
    }

    /// `orbit_lease_recover`: end up to `limit` attempts whose lease ran out.
    pub async fn lease_recover(&self, limit: u32) -> Result<Swept, DbError> {
        self.sweep("orbit_lease_recover", limit).await
    }

    /// `orbit_task_promote_due`: move up to `limit` due retries into their lanes.
    pub async fn task_promote_due(&self, limit: u32) -> Result<Swept, DbError> {
        self.sweep("orbit_task_promote_due", limit).await
    }

    /// `orbit_task_expire_due`: expire up to `limit` waiting tasks past their deadline.
    pub async fn task_expire_due(&self, limit: u32) -> Result<Swept, DbError> {
        self.sweep("orbit_task_expire_due", limit).await
    }

    /// `orbit_task_purge`: delete up to `limit` (1-10000) finished tasks kept longer than their
    /// queue's retention, as of `now` (`None` = the database's clock), with their attempts,
    /// history and idempotency receipts; no new batch (of 50) is started after `budget`.
    pub async fn task_purge(
        &self,
        now: Option<DateTime<Utc>>,
        limit: u32,
        budget: std::time::Duration,
    ) -> Result<Purged, DbError> {
        let now = now.map(|t| t.format("%Y-%m-%d %H:%M:%S%.6f").to_string());
        let budget_ms = u64::try_from(budget.as_millis()).unwrap_or(u64::MAX);
        self.call_one(
            "orbit_task_purge",
            &[
                now.as_deref().into(),
                u64::from(limit).into(),
                budget_ms.into(),
            ],
            |c| {
                Ok(Purged {
                    count: c.u64()?,
                    more: c.bool()?,
                })
            },
        )
        .await
    }
}

impl Db {
    /// `orbit_task_ready_queues`: unpaused queues that have claimable work.
    pub async fn task_ready_queues(&self, limit: u32) -> Result<Vec<String>, DbError> {
        self.call("orbit_task_ready_queues", &[u64::from(limit).into()], |c| {
            c.text()
        })
        .await
    }

    /// `orbit_session_sweep`: close up to `limit` open sessions not heard from for `idle_ms`.
    pub async fn session_sweep(&self, idle_ms: u32, limit: u32) -> Result<Swept, DbError> {
        self.call_one(
            "orbit_session_sweep",
            &[u64::from(idle_ms).into(), u64::from(limit).into()],
            |c| {
                Ok(Swept {
                    count: c.u64()?,
                    next_due_at: c.opt_time()?,
                })
            },
        )
        .await
    }
}
