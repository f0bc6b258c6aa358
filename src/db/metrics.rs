//! `orbit_metrics_snapshot`: gauges for operators and `GET /metrics`.

use super::{Cols, Db, DbError};

impl Db {
    /// `orbit_metrics_snapshot`: `(metric, label, value)` rows, e.g. `("tasks", "WAITING", 3)`,
    /// `("queue_permits", "", 1)`, `("application_active_attempts", "app", 1)`. Rows of one metric
    /// are adjacent (ordered by metric, then label).
    pub async fn metrics_snapshot(&self) -> Result<Vec<(String, String, i64)>, DbError> {
        self.call("orbit_metrics_snapshot", &[], |c: &mut Cols<'_>| {
            let (metric, label, value) = (c.text()?, c.text()?, c.u64()?);
            let value = i64::try_from(value)
                .map_err(|_| DbError::Internal(format!("metric {metric} overflows i64")))?;
            Ok((metric, label, value))
        })
        .await
    }
}
