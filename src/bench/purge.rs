//! `purge`: claim latency while the scheduler's purge deletes N finished tasks.
//!
//! Setup (not measured): N finished tasks (SUCCEEDED, finished 8 days ago, past the default 7-day
//! retention) are bulk-loaded in SQL into the queue the claims read, each with what a real one
//! leaves behind: one attempt, two history events and its idempotency receipt. Ready unkeyed tasks
//! are bulk-loaded for the claimer. Measured: one claimer session claiming one task at a time
//! (and finishing it, untimed), first with no purge running, then while [`crate::scheduler::purge`]
//! runs as the scheduler runs it while there is more (a call, then [`crate::scheduler::PURGE_PAUSE`])
//! until the N tasks are gone. A claim that meets the 3 s call timeout is counted
//! (`claims_timed_out`) and recorded as 3 s, not a reason to stop. `ratio` = claim p99 during the purge ÷ claim p99 without; `tasks_per_s` is the purge's
//! rate; `innodb_row_lock_waits_during_purge` counts the server's row lock waits meanwhile (every
//! client of the server counts, so it is an upper bound on the claims' and purge's own).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::{progress, sql_err, tenant, BenchDb, Percentiles, Report, Tenant};
use crate::db::workers::{Outcome, SessionOpen};
use crate::db::{Db, DbError};

/// Options of the purge scenario.
pub struct PurgeOptions {
    /// Finished tasks to purge.
    pub tasks: u32,
    /// Timed claims without a purge (the reference).
    pub samples: u32,
}

const SEQ: &str = "CREATE TABLE IF NOT EXISTS orbit_bench_seq (n INT NOT NULL PRIMARY KEY COMMENT 'number') ENGINE=InnoDB COMMENT='orbit bench numbers'";
const SEQ_FILL: &str = "INSERT IGNORE INTO orbit_bench_seq (n) SELECT a.d * 100 + b.d * 10 + c.d FROM
   (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) a,
   (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) b,
   (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) c";

async fn max_task_id(db: &Db) -> Result<u64, DbError> {
    sqlx::query_scalar("SELECT CAST(COALESCE(MAX(id), 0) AS UNSIGNED) FROM orbit_task")
        .fetch_one(db.pool())
        .await
        .map_err(sql_err("reading the last task id"))
}

/// Bulk-loads `n` finished tasks (finished 8 days ago) with one attempt, two events and a
/// receipt each, in chunks of up to 100,000.
async fn load_finished(db: &Db, t: &Tenant, n: u32) -> Result<(), DbError> {
    let bar = progress(u64::from(n), "loading finished tasks");
    let mut have = 0u32;
    while have < n {
        let thousands = ((n - have) / 1000).clamp(1, 100);
        let before = max_task_id(db).await?;
        let loaded = sqlx::query(
            "INSERT INTO orbit_task (application_id, namespace_id, queue_id, handler, handler_version, payload_version, payload,
                                     state, lane, attempt_count, run_at, idempotency_key, created_at, updated_at, finished_at)
             SELECT ?, ?, ?, 'bench.finished', 'v1', 'v1', '{}', 'SUCCEEDED', 'none', 1,
                    UTC_TIMESTAMP(6) - INTERVAL 9 DAY, CONCAT('bench-purge-', ? + a.n + 1000 * b.n),
                    UTC_TIMESTAMP(6) - INTERVAL 9 DAY, UTC_TIMESTAMP(6) - INTERVAL 8 DAY,
                    UTC_TIMESTAMP(6) - INTERVAL 8 DAY + INTERVAL (a.n + 1000 * b.n) MICROSECOND
               FROM orbit_bench_seq a
               JOIN orbit_bench_seq b ON b.n < ?",
        )
        .bind(t.application_id)
        .bind(t.namespace_id)
        .bind(&t.queue_id)
        .bind(have)
        .bind(thousands)
        .execute(db.pool())
        .await
        .map_err(sql_err("bulk-loading finished tasks"))?
        .rows_affected();
        // The new tasks' ids lie in (before, after]; an INSERT ... SELECT may leave gaps in the
        // ids it reserves, so the count is the rows it inserted, not after - before.
        let after = max_task_id(db).await?;
        for (doing, sql) in [
            (
                "bulk-loading attempts",
                "INSERT INTO orbit_attempt (task_id, attempt_no, application_id, namespace_id, queue_id, session_id, worker_id,
                                            state, granted_at, lease_expires_at, started_at, released_at, outcome)
                 SELECT t.id, 1, t.application_id, t.namespace_id, t.queue_id, 0, 'bench', 'SUCCEEDED',
                        t.created_at, t.finished_at, t.created_at, t.finished_at, 'succeeded'
                   FROM orbit_task t WHERE t.id > ? AND t.id <= ?",
            ),
            (
                "bulk-loading history",
                "INSERT INTO orbit_task_event (task_id, event, from_state, to_state, created_at)
                 SELECT t.id, e.event, e.from_state, e.to_state, t.finished_at
                   FROM orbit_task t
                   JOIN (SELECT 'submitted' event, '' from_state, 'WAITING' to_state
                         UNION ALL SELECT 'finished', 'RUNNING', 'SUCCEEDED') e
                  WHERE t.id > ? AND t.id <= ?",
            ),
            (
                "bulk-loading receipts",
                "INSERT INTO orbit_idempotency (application_id, idempotency_key, request_hash, task_id, created_at)
                 SELECT t.application_id, t.idempotency_key, UNHEX(SHA2(t.idempotency_key, 256)), t.id, t.created_at
                   FROM orbit_task t WHERE t.id > ? AND t.id <= ?",
            ),
        ] {
            sqlx::query(sql)
                .bind(before)
                .bind(after)
                .execute(db.pool())
                .await
                .map_err(sql_err(doing))?;
        }
        let loaded = loaded as u32;
        have += loaded;
        bar.inc(u64::from(loaded));
    }
    bar.finish_and_clear();
    Ok(())
}

/// Bulk-loads `n` ready unkeyed tasks for the claimer (charged to quota slot 0, as claim.rs does).
async fn load_ready(db: &Db, t: &Tenant, n: u32) -> Result<(), DbError> {
    let thousands = (n / 1000).max(1);
    let loaded = sqlx::query(
        "INSERT INTO orbit_task (application_id, namespace_id, queue_id, handler, handler_version, payload_version, payload,
                                 state, lane, run_at, created_at, updated_at)
         SELECT ?, ?, ?, 'bench.ready', 'v1', 'v1', '{}', 'WAITING', 'ready',
                UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)
           FROM orbit_bench_seq a
           JOIN orbit_bench_seq b ON b.n < ?",
    )
    .bind(t.application_id)
    .bind(t.namespace_id)
    .bind(&t.queue_id)
    .bind(thousands)
    .execute(db.pool())
    .await
    .map_err(sql_err("bulk-loading ready tasks"))?
    .rows_affected();
    sqlx::query("UPDATE orbit_application_quota SET incomplete_tasks = incomplete_tasks + ? WHERE application_id = ? AND slot = 0")
        .bind(loaded)
        .bind(t.application_id)
        .execute(db.pool())
        .await
        .map_err(sql_err("counting the ready tasks"))?;
    Ok(())
}

/// One timed claim (refilling the ready lane, untimed, when it is empty), then its finish.
async fn claim_one(db: &Db, t: &Tenant, session: u64) -> Result<Duration, DbError> {
    loop {
        let started = Instant::now();
        let grants = db.task_claim(session, 1, 60_000).await?;
        let took = started.elapsed();
        match grants.into_iter().next() {
            Some(g) => {
                db.attempt_finish(session, g.attempt_id, Outcome::Succeeded, false, None, None)
                    .await?;
                return Ok(took);
            }
            None => load_ready(db, t, 10_000).await?,
        }
    }
}

/// InnoDB's row lock waits so far, server-wide (other clients of the server count too).
async fn row_lock_waits(db: &Db) -> Result<u64, DbError> {
    // SHOW, not information_schema.GLOBAL_STATUS, which MySQL does not have.
    let v: Option<(String, String)> =
        sqlx::query_as("SHOW GLOBAL STATUS LIKE 'Innodb_row_lock_waits'")
            .fetch_optional(db.pool())
            .await
            .map_err(sql_err("reading Innodb_row_lock_waits"))?;
    Ok(v.and_then(|(_, v)| v.parse().ok()).unwrap_or(0))
}

fn level(p: &Percentiles, n: usize) -> serde_json::Value {
    json!({ "claims": n, "p50_ms": p.p50_ms, "p99_ms": p.p99_ms, "max_ms": p.max_ms })
}

/// Runs the scenario; `baseline` is the same run's durable commits/s.
pub async fn run(bench: &BenchDb, opts: &PurgeOptions, baseline: f64) -> Result<Report, DbError> {
    let db = &bench.db;
    let t = tenant(db).await?;
    for sql in [SEQ, SEQ_FILL] {
        sqlx::raw_sql(sql)
            .execute(db.pool())
            .await
            .map_err(sql_err("bench setup"))?;
    }
    let setup = Instant::now();
    load_finished(db, &t, opts.tasks).await?;
    load_ready(db, &t, 20_000).await?;
    let setup_seconds = setup.elapsed().as_secs_f64();
    eprintln!(
        "loaded {} finished tasks (with attempts, history, receipts) in {setup_seconds:.0} s",
        opts.tasks
    );
    let session = db
        .session_open(
            &t.hash,
            &SessionOpen {
                worker_id: "bench-claimer".into(),
                node: "bench".into(),
                capacity: 10_000,
                queue_ids: vec![t.queue_id.clone()],
                ..Default::default()
            },
        )
        .await?
        .session_id;

    // Without a purge.
    let mut quiet = Vec::with_capacity(opts.samples as usize);
    let bar = progress(u64::from(opts.samples), "claims, no purge");
    for _ in 0..opts.samples {
        quiet.push(claim_one(db, &t, session).await?);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let quiet_p = Percentiles::of(&mut quiet);
    eprintln!(
        "  no purge:     claim p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms",
        quiet_p.p50_ms, quiet_p.p99_ms, quiet_p.max_ms
    );

    // During the purge: the scheduler's purge call, back to back until nothing is left.
    let waits_before = row_lock_waits(db).await?;
    let done = Arc::new(AtomicBool::new(false));
    let purger = {
        let (db, done) = (db.clone(), done.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            let (mut purged, mut calls, mut failed) = (0u64, 0u64, 0u64);
            let result = loop {
                match crate::scheduler::purge(&db).await {
                    Ok(p) => {
                        purged += p.count;
                        calls += 1;
                        if !p.more {
                            break Ok(());
                        }
                        tokio::time::sleep(crate::scheduler::PURGE_PAUSE).await;
                    }
                    // As the scheduler does, a failed call (e.g. past the 3 s call timeout) is
                    // retried; a failure that persists ends the run.
                    Err(e) if failed < 100 => {
                        failed += 1;
                        eprintln!("  purge call failed ({failed}), retrying: {e}");
                    }
                    Err(e) => break Err(DbError::Internal(format!("a purge call failed: {e}"))),
                }
            };
            done.store(true, Ordering::SeqCst);
            result.map(|()| (purged, calls, failed, started.elapsed()))
        })
    };
    let bar = progress(u64::from(opts.tasks), "claims during the purge");
    let mut during = Vec::new();
    let mut timed_out = 0u64;
    while !done.load(Ordering::SeqCst) {
        match claim_one(db, &t, session).await {
            Ok(took) => during.push(took),
            Err(DbError::Unavailable(e)) if timed_out < 1000 => {
                timed_out += 1;
                eprintln!("  a claim or its finish failed ({timed_out}): {e}");
                during.push(crate::db::CALL_TIMEOUT);
            }
            Err(e) => {
                return Err(DbError::Internal(format!(
                    "a claim during the purge failed: {e}"
                )))
            }
        }
        if during.len() % 100 == 0 {
            bar.set_message(format!("claims during the purge: {}", during.len()));
        }
    }
    bar.finish_and_clear();
    let (purged, calls, failed_calls, took) = purger
        .await
        .map_err(|e| DbError::Internal(e.to_string()))??;
    let lock_waits = row_lock_waits(db).await?.saturating_sub(waits_before);
    let during_n = during.len();
    let during_p = Percentiles::of(&mut during);
    eprintln!(
        "  during purge: claim p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms ({during_n} claims)",
        during_p.p50_ms, during_p.p99_ms, during_p.max_ms
    );
    let seconds = took.as_secs_f64().max(f64::EPSILON);
    eprintln!(
        "  purged {purged} tasks in {seconds:.1} s ({:.0} tasks/s, {calls} calls, {failed_calls} failed and retried); InnoDB row lock waits meanwhile, server-wide: {lock_waits}",
        purged as f64 / seconds
    );
    if purged < u64::from(opts.tasks) {
        return Err(DbError::Internal(format!(
            "purged {purged} of {} finished tasks",
            opts.tasks
        )));
    }
    Ok(Report {
        scenario: "purge",
        tasks: purged,
        seconds,
        tasks_per_s: purged as f64 / seconds,
        p50_ms: during_p.p50_ms,
        p99_ms: during_p.p99_ms,
        baseline_commits_per_s: baseline,
        ratio: if quiet_p.p99_ms > 0.0 {
            during_p.p99_ms / quiet_p.p99_ms
        } else {
            0.0
        },
        server_cost: None,
        details: json!({
            "claims_without_purge": level(&quiet_p, quiet.len()),
            "claims_during_purge": level(&during_p, during_n),
            "claims_timed_out": timed_out,
            "purge_calls": calls,
            "purge_calls_failed": failed_calls,
            "innodb_row_lock_waits_during_purge": lock_waits,
            "purge_limit_per_call": crate::scheduler::PURGE_LIMIT,
            "purge_budget_ms_per_call": crate::scheduler::PURGE_BUDGET.as_millis() as u64,
            "purge_pause_ms": crate::scheduler::PURGE_PAUSE.as_millis() as u64,
            "setup_seconds": setup_seconds,
        }),
    })
}
