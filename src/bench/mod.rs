//! `orbit bench`: reproducible measurements, reported as ratios against the same server's
//! physical limit measured in the same run (this machine's absolute speed drifts).
//!
//! Scenarios live one per file; every one prints a human summary, and with `--json` its last line
//! of stdout is one JSON object (`scenario`, `tasks`, `seconds`, `tasks_per_s`, `p50_ms`, `p99_ms`,
//! `baseline_commits_per_s`, `ratio`, `details` with scenario fields, and for the scenarios that
//! process tasks `server_cost`: the database server's work per task, [`server_cost::ServerCost`]).

pub mod baseline;
pub mod claim;
pub mod flow;
pub mod handoff;
pub mod plans;
pub mod purge;
pub mod serve;
pub mod server_cost;

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use sqlx::{Connection, MySqlConnection};

use crate::db::{Db, DbError};
use crate::migrate::{self, MigrateError};

/// Where a benchmark runs: a fresh database it created (dropped afterwards), or the DSN's own.
pub struct BenchDb {
    pub db: Db,
    pub dsn: String,
    /// The server's process and counters, for [`BenchDb::meter`].
    pub server: server_cost::Server,
    server_dsn: String,
    created: Option<String>,
}

impl BenchDb {
    /// With a DSN naming a database, use it (installing the extension if needed); with a DSN
    /// naming only a server, create `orbit_bench_<random>` there and drop it in [`BenchDb::finish`].
    pub async fn open(dsn: &str, pool_size: u32) -> Result<BenchDb, MigrateError> {
        let has_database = match migrate::parse_dsn(dsn) {
            Ok(_) => true,
            Err(MigrateError::NoDatabase) => false,
            Err(e) => return Err(e),
        };
        let (server_dsn, dsn, created) = if has_database {
            (dsn.to_string(), dsn.to_string(), None)
        } else {
            let name = format!("orbit_bench_{}", hex::encode(rand::random::<[u8; 4]>()));
            let mut admin =
                MySqlConnection::connect(dsn)
                    .await
                    .map_err(|e| MigrateError::Connect {
                        target: migrate::redact(dsn),
                        reason: migrate::describe(&e),
                    })?;
            sqlx::raw_sql(&format!("CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
                .execute(&mut admin)
                .await
                .map_err(|e| MigrateError::Database {
                    doing: "creating the benchmark database",
                    reason: migrate::describe(&e),
                })?;
            let _ = admin.close().await;
            (
                dsn.to_string(),
                format!("{}/{name}", dsn.trim_end_matches('/')),
                Some(name),
            )
        };
        let mut conn = migrate::connect(&dsn).await?;
        migrate::up_embedded(&mut conn).await?;
        let _ = conn.close().await;
        let pool = migrate::connect_pool(&dsn, pool_size).await?;
        let server =
            server_cost::Server::detect(&pool)
                .await
                .map_err(|e| MigrateError::Database {
                    doing: "finding the database server's process",
                    reason: e.to_string(),
                })?;
        Ok(BenchDb {
            db: Db::new(pool),
            dsn,
            server,
            server_dsn,
            created,
        })
    }

    /// Starts measuring the server's work (and `serve_pid`'s CPU) for a phase of a scenario.
    pub async fn meter(&self, serve_pid: Option<u32>) -> Result<server_cost::Meter, DbError> {
        server_cost::Meter::start(self.db.pool(), &self.server, serve_pid).await
    }

    /// Drops the database if this run created it.
    pub async fn finish(self) {
        self.db.close().await;
        if let Some(name) = self.created {
            if let Ok(mut admin) = MySqlConnection::connect(&self.server_dsn).await {
                let _ = sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS `{name}`"))
                    .execute(&mut admin)
                    .await;
            }
        }
    }
}

/// Latency percentiles over a set of samples.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Percentiles {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Percentiles {
    pub fn of(samples: &mut [Duration]) -> Percentiles {
        if samples.is_empty() {
            return Percentiles::default();
        }
        samples.sort();
        let at = |q: f64| {
            let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
            samples[i].as_secs_f64() * 1000.0
        };
        Percentiles {
            p50_ms: at(0.50),
            p99_ms: at(0.99),
            max_ms: at(1.0),
        }
    }
}

/// The fields every scenario reports.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub scenario: &'static str,
    pub tasks: u64,
    pub seconds: f64,
    pub tasks_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub baseline_commits_per_s: f64,
    pub ratio: f64,
    /// Scenario-specific figures.
    pub details: serde_json::Value,
    /// The database server's work per task in the measured phase (scenarios that process tasks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_cost: Option<server_cost::ServerCost>,
}

impl Report {
    /// A throughput scenario's report: `tasks` in `seconds`, the latency percentiles of
    /// `latencies`, and `ratio` = tasks/s ÷ the same run's `baseline` commits/s.
    pub fn throughput(
        scenario: &'static str,
        tasks: u32,
        seconds: f64,
        latencies: &mut [Duration],
        baseline: f64,
        details: serde_json::Value,
    ) -> Report {
        let seconds = seconds.max(f64::EPSILON);
        let p = Percentiles::of(latencies);
        let tasks_per_s = f64::from(tasks) / seconds;
        Report {
            scenario,
            tasks: u64::from(tasks),
            seconds,
            tasks_per_s,
            p50_ms: p.p50_ms,
            p99_ms: p.p99_ms,
            baseline_commits_per_s: baseline,
            ratio: tasks_per_s / baseline,
            details,
            server_cost: None,
        }
    }

    /// The report with the measured phase's server cost.
    pub fn costing(self, cost: server_cost::ServerCost) -> Report {
        Report {
            server_cost: Some(cost),
            ..self
        }
    }
}

/// The capacity of the hot key's worker sessions (`hotkey`'s SDK workers, `handoff-sql`'s
/// session).
pub const HOTKEY_CAPACITY: u32 = 4;

/// A progress bar on stderr (hidden when stderr is not a terminal).
pub fn progress(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg:24} [{bar:30}] {pos}/{len} ({elapsed})")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

/// A bootstrapped tenant with every scope and raised quotas.
pub struct Tenant {
    pub token: String,
    pub hash: [u8; 32],
    pub queue_id: String,
    pub application_id: u64,
    pub namespace_id: u64,
}

pub fn sql_err(doing: &'static str) -> impl Fn(sqlx::Error) -> DbError {
    move |e| DbError::Internal(format!("{doing}: {e}"))
}

pub async fn tenant(db: &Db) -> Result<Tenant, DbError> {
    let (bootstrap, token) = crate::db::queues::Bootstrap::with_new_token(
        "bench",
        "bench",
        "default",
        &format!("bench-{}", crate::auth::new_queue_id()),
        &crate::testing::ALL_SCOPES,
        "bench",
    );
    let b = db.admin_bootstrap(&bootstrap).await?;
    sqlx::query("UPDATE orbit_application_quota SET max_active_attempts = 1000000, max_incomplete_tasks = 100000000 WHERE application_id = ?")
        .bind(b.application_id)
        .execute(db.pool())
        .await
        .map_err(sql_err("raising the bench quotas"))?;
    Ok(Tenant {
        hash: crate::auth::token_hash(&token),
        token,
        queue_id: b.queue_id,
        application_id: b.application_id,
        namespace_id: b.namespace_id,
    })
}

/// `details` with the fields of `more` added (both JSON objects).
pub fn with(mut details: serde_json::Value, more: serde_json::Value) -> serde_json::Value {
    if let (Some(d), serde_json::Value::Object(m)) = (details.as_object_mut(), more) {
        d.extend(m);
    }
    details
}

/// `--key-limit` and `--rate`: the key policy a scenario sets on every key it uses, through
/// `orbit_key_policy_set` before it submits anything (on_busy `queue`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyLimits {
    /// Holders a key may have at once; `None`: no `--key-limit` (one holder).
    pub limit: Option<u32>,
    pub rate: Option<crate::db::keys::Rate>,
}

impl KeyLimits {
    /// Whether the scenario sets a policy at all: without either flag its keys meet none.
    pub fn is_set(&self) -> bool {
        self.limit.is_some() || self.rate.is_some()
    }

    /// The limit every key has: the policy's, or 1 (no policy).
    pub fn holders(&self) -> u32 {
        self.limit.unwrap_or(1)
    }

    /// Sets one policy per `(match_kind, pattern)` in the tenant's namespace when a flag was
    /// given; nothing otherwise.
    pub async fn apply(
        &self,
        db: &Db,
        t: &Tenant,
        patterns: &[(&str, &str)],
    ) -> Result<(), DbError> {
        if !self.is_set() {
            return Ok(());
        }
        for (match_kind, pattern) in patterns {
            let mut spec = crate::db::keys::KeyPolicySpec::new(match_kind, pattern, "queue")
                .limit(self.holders());
            if let Some(r) = self.rate {
                spec = spec.rate(r.grants, r.per_seconds);
            }
            db.key_policy_set(&t.hash, t.namespace_id, &spec).await?;
        }
        Ok(())
    }

    /// The report's fields: `key_limit`, `rate` ("GRANTS/SECONDS" or null) and `key_policies`
    /// (the patterns set, e.g. "prefix key-"; empty without a flag).
    pub fn details(&self, patterns: &[(&str, &str)]) -> serde_json::Value {
        let policies: Vec<String> = if self.is_set() {
            patterns.iter().map(|(m, p)| format!("{m} {p}")).collect()
        } else {
            Vec::new()
        };
        serde_json::json!({
            "key_limit": self.holders(),
            "rate": self.rate.map(|r| format!("{}/{}", r.grants, r.per_seconds)),
            "key_policies": policies,
        })
    }
}

/// How the application's keyed grants used the key slots, read after the measured phase:
/// `max_holders` (the most attempts that held one key at once: a grant takes the lowest free
/// slot, so that is the largest `orbit_attempt.key_slot` + 1), `grants_above_slot_0` (grants that
/// shared their key with an earlier holder) and `keyed_grants`. With a `rate`, also
/// `rate_max_window_grants`: the most grants of one key less than `per_seconds` apart (from
/// `orbit_attempt.granted_at`); below `grants`, the rate never held a grant back.
pub async fn key_grants(
    db: &Db,
    application_id: u64,
    rate: Option<crate::db::keys::Rate>,
) -> Result<serde_json::Value, DbError> {
    let (keyed, max_slot, above): (i64, i64, i64) = sqlx::query_as(
        "SELECT COUNT(*), CAST(COALESCE(MAX(a.key_slot), 0) AS SIGNED),
                CAST(COALESCE(SUM(a.key_slot > 0), 0) AS SIGNED)
           FROM orbit_attempt a
          WHERE a.application_id = ? AND a.resource_id <> 0",
    )
    .bind(application_id)
    .fetch_one(db.pool())
    .await
    .map_err(sql_err("reading the grants' key slots"))?;
    let mut report = serde_json::json!({
        "keyed_grants": keyed,
        "max_holders": if keyed > 0 { max_slot + 1 } else { 0 },
        "grants_above_slot_0": above,
    });
    if let Some(rate) = rate {
        let grants: Vec<(u64, chrono::NaiveDateTime)> = sqlx::query_as(
            "SELECT a.resource_id, a.granted_at FROM orbit_attempt a
              WHERE a.application_id = ? AND a.resource_id <> 0
              ORDER BY a.resource_id, a.granted_at",
        )
        .bind(application_id)
        .fetch_all(db.pool())
        .await
        .map_err(sql_err("reading the grants' times"))?;
        let window = chrono::Duration::seconds(i64::from(rate.per_seconds));
        let (mut most, mut first) = (0usize, 0usize);
        for (i, (key, at)) in grants.iter().enumerate() {
            while grants[first].0 != *key || *at - grants[first].1 >= window {
                first += 1;
            }
            most = most.max(i + 1 - first);
        }
        report = with(
            report,
            serde_json::json!({ "rate_max_window_grants": most }),
        );
    }
    Ok(report)
}
