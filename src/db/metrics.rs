//! `orbit_metrics_snapshot`: gauges for operators and `GET /metrics` (see [`crate::telemetry`]).

use super::{Cols, Db, DbError};

/// One row of `orbit_metrics_snapshot`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GaugeRow {
    /// e.g. `tasks`, `queue_permits`, `sessions`.
    pub metric: String,
    /// The queue the gauge is about; empty when it is not per queue.
    pub queue_id: String,
    /// A state, a queue or application name, or empty.
    pub label: String,
    pub value: i64,
}

impl Db {
    /// `orbit_metrics_snapshot`: e.g. `(tasks, <queue id>, WAITING, 3)`, `(key_permits, "", "",
    /// 1)`, `(application_active_attempts, "", <application name>, 1)`, ordered by metric, queue,
    /// label. Its cost grows with queues, sessions, applications and unfinished tasks only.
    pub async fn metrics_snapshot(&self) -> Result<Vec<GaugeRow>, DbError> {
        self.call("orbit_metrics_snapshot", &[], |c: &mut Cols<'_>| {
            let (metric, queue_id, label, value) = (c.text()?, c.text()?, c.text()?, c.u64()?);
            let value = i64::try_from(value)
                .map_err(|_| DbError::Internal(format!("metric {metric} overflows i64")))?;
            Ok(GaugeRow {
                metric,
                queue_id,
                label,
                value,
            })
        })
        .await
    }
}
