//! `claim`: claim latency with 0, 100,000 and 1,000,000 tasks blocked on busy keys, or (with
//! `--backlog delayed`) delayed tasks waiting for their run_at, or (with `--backlog
//! other-handler`) ready tasks of a handler the claimer does not run.
//!
//! Setup (not measured): 1,000 keys are held by a holder session; the backlog is bulk-loaded in
//! SQL as tasks blocked on those keys, as unkeyed tasks delayed by a day (lane 'scheduled', as
//! a submit with `delay_seconds` leaves them), or as ready unkeyed tasks of handler
//! `bench.other` (as the tasks of a fleet that is down pile up), in the same queue the claims
//! read. The claimer runs handler `bench.claim` only (its `hello` lists it, as the SDK's does). With
//! `--key-limit N` a key policy of N holders covers the busy and the free keys, and each busy key
//! is held by N real grants, so it is full: its resource row's `holders` and `holder_limit`, its
//! `orbit_key_slot` rows and the attempts' `key_slot` are what those grants wrote (checked before
//! the backlog loads), and the bulk-loaded tasks wait behind full keys. Measured: one
//! claimer session claiming one task at a time from a stream of tasks on free keys (each grant
//! takes a key permit and a token, through the same policy). `ratio` = claim p99 at the largest
//! backlog ÷ claim p99 with none; the goal is ≤ 1.5 (SPEC §10 for blocked tasks, issue 26 for
//! delayed ones), i.e. claim cost does not grow with tasks that cannot run yet.

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use super::server_cost::{ServerCost, Usage};
use super::{
    key_grants, progress, sql_err, tenant, with, BenchDb, KeyLimits, Percentiles, Report, Tenant,
};
use crate::db::tasks::NewTask;
use crate::db::workers::{Outcome, SessionOpen};
use crate::db::{Db, DbError};

/// Options of the claim scenario.
pub struct ClaimOptions {
    pub backlogs: Vec<u64>,
    pub samples: u32,
    pub busy_keys: u32,
    pub backlog: Backlog,
    /// `--key-limit`: the policy set on the busy and the free keys (no rate).
    pub limits: KeyLimits,
}

/// The policy patterns of the held keys (`busy-<i>`) and of the claimed ones (`free<round>-<i>`).
const POLICY: [(&str, &str); 2] = [("prefix", "busy-"), ("prefix", "free")];

/// What the claim scenario's backlog is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Backlog {
    /// Tasks blocked on the busy keys (lane 'blocked').
    Blocked,
    /// Unkeyed tasks delayed by a day (lane 'scheduled').
    Delayed,
    /// Ready unkeyed tasks of a handler the claimer does not run (lane 'ready', older than the
    /// claimed tasks, so in front of them).
    OtherHandler,
}

#[derive(Clone, Debug, Serialize)]
pub struct Level {
    /// Tasks in the backlog (blocked, delayed or of another handler, as the report's `backlog`
    /// says).
    pub backlog: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub setup_seconds: f64,
    /// The server's work per claimed task at this level (the claim and the attempt's finish).
    pub server_cost: ServerCost,
}

fn task(t: &Tenant, key: String) -> NewTask {
    NewTask {
        queue_id: t.queue_id.clone(),
        handler: "bench.claim".into(),
        handler_version: "v1".into(),
        payload_version: "v1".into(),
        payload: "{}".into(),
        concurrency_key: Some(key),
        ..Default::default()
    }
}

/// Submits `n` tasks over the keys `<prefix>-0` to `<prefix>-<keys - 1>`, in turn.
async fn submit_many(db: &Db, t: &Tenant, prefix: &str, n: u32, keys: u32) -> Result<(), DbError> {
    let mut handles = Vec::new();
    for part in 0..8u32 {
        let (db, hash, tasks) = (
            db.clone(),
            t.hash,
            (part..n)
                .step_by(8)
                .map(|i| task(t, format!("{prefix}-{}", i % keys)))
                .collect::<Vec<_>>(),
        );
        let prefix = prefix.to_string();
        handles.push(tokio::spawn(async move {
            for (i, nt) in tasks.iter().enumerate() {
                db.task_submit(&hash, &format!("{prefix}-{part}-{i}"), nt)
                    .await?;
            }
            Ok::<(), DbError>(())
        }));
    }
    for h in handles {
        h.await.map_err(|e| DbError::Internal(e.to_string()))??;
    }
    Ok(())
}

async fn session(db: &Db, t: &Tenant, worker: &str) -> Result<u64, DbError> {
    Ok(db
        .session_open(
            &t.hash,
            &SessionOpen {
                worker_id: worker.into(),
                node: "bench".into(),
                capacity: 10_000,
                concurrency_keys: true,
                handlers: vec!["bench.claim".into()],
                queue_ids: vec![t.queue_id.clone()],
                ..Default::default()
            },
        )
        .await?
        .session_id)
}

/// Adds tasks until the backlog holds `target`: blocked ones spread over the held keys, or
/// delayed ones.
async fn grow_backlog(
    db: &Db,
    t: &Tenant,
    have: u64,
    target: u64,
    keys: u32,
    backlog: Backlog,
) -> Result<(), DbError> {
    let bar = progress(target - have, "loading the backlog");
    let mut have = have;
    while have < target {
        let thousands = ((target - have) / 1000).clamp(1, 100);
        let insert = match backlog {
            Backlog::Blocked => sqlx::query(
                "INSERT INTO orbit_task (application_id, namespace_id, queue_id, handler, handler_version, payload_version, payload,
                                         concurrency_key, resource_id, state, lane, run_at, created_at, updated_at)
                 SELECT ?, ?, ?, 'bench.blocked', 'v1', 'v1', '{}', r.concurrency_key, r.id, 'WAITING', 'blocked',
                        UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)
                   FROM orbit_bench_seq a
                   JOIN orbit_bench_seq b ON b.n < ?
                   JOIN orbit_bench_busy k ON k.slot = (a.n + 1000 * b.n + ?) % ?
                   JOIN orbit_resource r ON r.id = k.resource_id",
            )
            .bind(t.application_id)
            .bind(t.namespace_id)
            .bind(&t.queue_id)
            .bind(thousands)
            .bind(have)
            .bind(keys),
            // Due over the next day, a second apart per 1,000 tasks, as many delayed submits
            // spread their run_at.
            Backlog::Delayed => sqlx::query(
                "INSERT INTO orbit_task (application_id, namespace_id, queue_id, handler, handler_version, payload_version, payload,
                                         concurrency_key, resource_id, state, lane, run_at, created_at, updated_at)
                 SELECT ?, ?, ?, 'bench.delayed', 'v1', 'v1', '{}', '', 0, 'WAITING', 'scheduled',
                        UTC_TIMESTAMP(6) + INTERVAL 1 DAY + INTERVAL ((a.n + 1000 * b.n + ?) % 86400) SECOND,
                        UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)
                   FROM orbit_bench_seq a
                   JOIN orbit_bench_seq b ON b.n < ?",
            )
            .bind(t.application_id)
            .bind(t.namespace_id)
            .bind(&t.queue_id)
            .bind(have)
            .bind(thousands),
            Backlog::OtherHandler => sqlx::query(
                "INSERT INTO orbit_task (application_id, namespace_id, queue_id, handler, handler_version, payload_version, payload,
                                         concurrency_key, resource_id, state, lane, run_at, created_at, updated_at)
                 SELECT ?, ?, ?, 'bench.other', 'v1', 'v1', '{}', '', 0, 'WAITING', 'ready',
                        UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)
                   FROM orbit_bench_seq a
                   JOIN orbit_bench_seq b ON b.n < ?",
            )
            .bind(t.application_id)
            .bind(t.namespace_id)
            .bind(&t.queue_id)
            .bind(thousands),
        };
        let n = insert
            .execute(db.pool())
            .await
            .map_err(sql_err("bulk-loading the backlog"))?
            .rows_affected();
        // The bulk-loaded tasks keep orbit_task.quota_slot's default, slot 0: charge that slot.
        sqlx::query("UPDATE orbit_application_quota SET incomplete_tasks = incomplete_tasks + ? WHERE application_id = ? AND slot = 0")
            .bind(n)
            .bind(t.application_id)
            .execute(db.pool())
            .await
            .map_err(sql_err("counting the backlog"))?;
        have += n;
        bar.inc(n);
    }
    bar.finish_and_clear();
    Ok(())
}

/// Checks that every busy key is full as `per_key` real grants left it: its resource row has
/// `per_key` holders and that holder limit, `per_key - 1` held `orbit_key_slot` rows, and the
/// holder session's live attempts take each slot 0 to `per_key - 1` of each key once.
async fn check_full(
    db: &Db,
    t: &Tenant,
    holder: u64,
    busy_keys: u32,
    per_key: u32,
) -> Result<(), DbError> {
    let (keys, full, slot_rows, held_slots): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT COUNT(*), CAST(COALESCE(SUM(r.holders = ? AND r.holder_limit = ? AND r.holder_attempt_id <> 0), 0) AS SIGNED),
                (SELECT COUNT(*) FROM orbit_key_slot s JOIN orbit_resource k ON k.id = s.resource_id
                  WHERE k.namespace_id = ? AND k.concurrency_key LIKE 'busy-%' AND s.attempt_id <> 0),
                (SELECT COUNT(DISTINCT a.resource_id, a.key_slot) FROM orbit_attempt a
                  WHERE a.session_id = ? AND a.released_at IS NULL AND a.key_slot < ?)
           FROM orbit_resource r
          WHERE r.namespace_id = ? AND r.concurrency_key LIKE 'busy-%'",
    )
    .bind(per_key)
    .bind(per_key)
    .bind(t.namespace_id)
    .bind(holder)
    .bind(per_key)
    .bind(t.namespace_id)
    .fetch_one(db.pool())
    .await
    .map_err(sql_err("checking the busy keys"))?;
    let (busy, per) = (i64::from(busy_keys), i64::from(per_key));
    if (keys, full, slot_rows, held_slots) != (busy, busy, busy * (per - 1), busy * per) {
        return Err(DbError::Internal(format!(
            "the busy keys are not full: {keys} keys, {full} with {per_key} holders, \
             {slot_rows} held slot rows, {held_slots} held slots (want {busy}, {busy}, {}, {})",
            busy * (per - 1),
            busy * per
        )));
    }
    Ok(())
}

/// Runs the scenario; `baseline` is the same run's durable commits/s.
pub async fn run(bench: &BenchDb, opts: &ClaimOptions, baseline: f64) -> Result<Report, DbError> {
    let db = &bench.db;
    let t = tenant(db).await?;
    for sql in [
        "CREATE TABLE IF NOT EXISTS orbit_bench_seq (n INT NOT NULL PRIMARY KEY COMMENT 'number') ENGINE=InnoDB COMMENT='orbit bench numbers'",
        "INSERT IGNORE INTO orbit_bench_seq (n) SELECT a.d * 100 + b.d * 10 + c.d FROM
           (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) a,
           (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) b,
           (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) c",
        "CREATE TABLE IF NOT EXISTS orbit_bench_busy (slot INT NOT NULL PRIMARY KEY COMMENT 'slot', resource_id BIGINT UNSIGNED NOT NULL COMMENT 'held key') ENGINE=InnoDB COMMENT='orbit bench held keys'",
    ] {
        sqlx::raw_sql(sql).execute(db.pool()).await.map_err(sql_err("bench setup"))?;
    }

    opts.limits.apply(db, &t, &POLICY).await?;
    // Hold the busy keys: as many granted (never finished) attempts each as the key's limit, so
    // each is full. A claim readies a key's next task once it grants one, so the holder claims
    // until every task is granted.
    let per_key = opts.limits.holders();
    let holds = opts
        .busy_keys
        .checked_mul(per_key)
        .ok_or_else(|| DbError::Internal("--keys × --key-limit is too many holders".into()))?;
    eprintln!("holding {} keys, {per_key} holders each…", opts.busy_keys);
    submit_many(db, &t, "busy", holds, opts.busy_keys).await?;
    let holder = session(db, &t, "bench-holder").await?;
    let mut held = 0;
    while held < holds {
        let n = db.task_claim(holder, 1000, 3_600_000).await?.len() as u32;
        if n == 0 {
            return Err(DbError::Internal(format!(
                "could not hold every busy key: {held} of {holds} grants"
            )));
        }
        held += n;
    }
    check_full(db, &t, holder, opts.busy_keys, per_key).await?;
    sqlx::query(
        "INSERT INTO orbit_bench_busy (slot, resource_id)
         SELECT ROW_NUMBER() OVER (ORDER BY r.id) - 1, r.id FROM orbit_resource r WHERE r.concurrency_key LIKE 'busy-%'",
    )
    .execute(db.pool())
    .await
    .map_err(sql_err("numbering the held keys"))?;

    let claimer = session(db, &t, "bench-claimer").await?;
    let mut levels = Vec::new();
    let mut have = 0;
    let mut all = Vec::new();
    let mut usage = Usage::default();
    for (round, &target) in opts.backlogs.iter().enumerate() {
        let setup = Instant::now();
        grow_backlog(db, &t, have, target.max(have), opts.busy_keys, opts.backlog).await?;
        have = have.max(target);
        submit_many(db, &t, &format!("free{round}"), opts.samples, opts.samples).await?;
        let setup_seconds = setup.elapsed().as_secs_f64();
        // Warm up the claim path, then measure each claim call.
        let bar = progress(u64::from(opts.samples), &format!("claims, backlog {have}"));
        let mut samples: Vec<Duration> = Vec::with_capacity(opts.samples as usize);
        let meter = bench.meter(None).await?;
        loop {
            let started = Instant::now();
            let grants = db.task_claim(claimer, 1, 60_000).await?;
            let took = started.elapsed();
            let Some(g) = grants.into_iter().next() else {
                break;
            };
            samples.push(took);
            bar.inc(1);
            db.attempt_finish(claimer, g.attempt_id, Outcome::Succeeded, false, None, None)
                .await?;
        }
        bar.finish_and_clear();
        let used = meter.stop().await?;
        usage.add(&used);
        if samples.len() < opts.samples as usize {
            return Err(DbError::Internal(format!(
                "only {} of {} free tasks were claimable",
                samples.len(),
                opts.samples
            )));
        }
        all.extend(samples.iter().copied());
        let p = Percentiles::of(&mut samples);
        eprintln!(
            "  {have:>9} {:?}: claim p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms",
            opts.backlog, p.p50_ms, p.p99_ms, p.max_ms
        );
        levels.push(Level {
            backlog: have,
            p50_ms: p.p50_ms,
            p99_ms: p.p99_ms,
            max_ms: p.max_ms,
            setup_seconds,
            server_cost: used.per_task(&bench.server, samples.len() as u64),
        });
    }
    let first = levels.first().map_or(0.0, |l| l.p99_ms);
    let last = levels.last().map_or(0.0, |l| l.p99_ms);
    let total = Percentiles::of(&mut all);
    let seconds: f64 = all.iter().map(Duration::as_secs_f64).sum();
    let details = with(
        json!({ "backlog": opts.backlog, "levels": levels, "busy_keys": opts.busy_keys, "samples_per_level": opts.samples,
                "busy_key_holders": per_key }),
        opts.limits.details(&POLICY),
    );
    let details = with(details, key_grants(db, t.application_id, None).await?);
    Ok(Report {
        scenario: "claim",
        tasks: all.len() as u64,
        seconds,
        tasks_per_s: all.len() as f64 / seconds.max(f64::EPSILON),
        p50_ms: total.p50_ms,
        p99_ms: total.p99_ms,
        baseline_commits_per_s: baseline,
        ratio: if first > 0.0 { last / first } else { 0.0 },
        details,
        server_cost: Some(usage.per_task(&bench.server, all.len() as u64)),
    })
}
