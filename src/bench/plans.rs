//! `orbit bench plans`: the CPU that N cron plans firing every minute cost the scheduler.
//!
//! Creates `plans` cron plans (`* * * * *`, UTC, unkeyed tasks) through `orbit_plan_create`,
//! starts one `orbit serve` child (its scheduler fires them: `orbit_plan_fire_due`, then the
//! next fire times computed in Rust and stored by `orbit_plan_schedule_set`), waits until every
//! plan has fired once, then measures whole minutes: the CPU of the serve process and of the
//! database server processes on this machine (`mariadbd`/`mysqld`: other clients of that server
//! count too), as a percentage of one core, and each fire's lateness (`fired_at -
//! scheduled_for`). Every fire creates a task; nothing consumes them.

use std::time::{Duration, Instant};

use serde_json::json;

use super::serve::ServeProcess;
use super::{
    database_cpu_seconds, process_cpu_seconds, progress, sql_err, tenant, BenchDb, Report,
};
use crate::db::plans::{NewPlan, PlanSchedule};
use crate::db::tasks::NewTask;
use crate::db::DbError;

pub struct PlanOptions {
    pub plans: u32,
    pub minutes: u32,
}

async fn count_fires(bench: &BenchDb) -> Result<i64, DbError> {
    sqlx::query_scalar("SELECT COUNT(*) FROM orbit_plan_fire")
        .fetch_one(bench.db.pool())
        .await
        .map_err(sql_err("counting fires"))
}

pub async fn run(bench: &BenchDb, opts: &PlanOptions, baseline: f64) -> Result<Report, DbError> {
    let t = tenant(&bench.db).await?;
    let bar = progress(u64::from(opts.plans), "creating plans");
    let mut next = 0u32;
    while next < opts.plans {
        let chunk: Vec<u32> = (next..opts.plans.min(next + 8)).collect();
        next += chunk.len() as u32;
        let calls = chunk.iter().map(|i| {
            let plan = NewPlan {
                name: format!("bench-{i}"),
                schedule: PlanSchedule::cron("* * * * *", "UTC"),
                task: NewTask {
                    queue_id: t.queue_id.clone(),
                    handler: "bench.plan".into(),
                    handler_version: "v1".into(),
                    payload_version: "v1".into(),
                    payload: "{}".into(),
                    concurrency_key: Some(String::new()),
                    ..Default::default()
                },
            };
            let db = bench.db.clone();
            let hash = t.hash;
            async move { db.plan_create(&hash, &plan).await }
        });
        for r in futures_util::future::join_all(calls).await {
            r?;
        }
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();

    let serve = ServeProcess::start(&bench.dsn).await?;
    // Warm-up: until every plan has fired once (the first minute boundary after creation).
    let warm_deadline = Instant::now() + Duration::from_secs(150);
    eprintln!(
        "bench: waiting for the first firing of {} plans…",
        opts.plans
    );
    while count_fires(bench).await? < i64::from(opts.plans) {
        if Instant::now() > warm_deadline {
            return Err(DbError::Internal(
                "the plans did not all fire within 150 s".into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let fires_before = count_fires(bench).await?;
    let pid = serve.pid();
    let (serve_before, db_before) = (pid.and_then(process_cpu_seconds), database_cpu_seconds());
    let started = Instant::now();
    let since = chrono::Utc::now().naive_utc();
    eprintln!("bench: measuring {} minute(s) of firing…", opts.minutes);
    tokio::time::sleep(Duration::from_secs(60 * u64::from(opts.minutes))).await;
    let seconds = started.elapsed().as_secs_f64();
    let (serve_after, db_after) = (pid.and_then(process_cpu_seconds), database_cpu_seconds());
    let fires = count_fires(bench).await? - fires_before;
    let percent =
        |before: Option<f64>, after: Option<f64>| Some((after? - before?) * 100.0 / seconds);
    let serve_percent = percent(serve_before, serve_after);
    let database_percent = percent(db_before, db_after);
    // Lateness of the fires in the window, in ms.
    let mut late: Vec<f64> = sqlx::query_scalar(
        "SELECT CAST(TIMESTAMPDIFF(MICROSECOND, scheduled_for, fired_at) AS DOUBLE) / 1000 FROM orbit_plan_fire WHERE fired_at >= ?",
    )
    .bind(since)
    .fetch_all(bench.db.pool())
    .await
    .map_err(sql_err("reading fire lateness"))?;
    late.sort_by(f64::total_cmp);
    let pick = |q: f64| {
        late.get(((late.len() as f64 * q) as usize).min(late.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
    };
    let (p50, p99, max) = (pick(0.5), pick(0.99), late.last().copied().unwrap_or(0.0));
    eprintln!(
        "bench: {fires} fires in {seconds:.0} s; serve {:.2} % of one core, database {:.2} %; lateness p50 {p50:.0} ms, p99 {p99:.0} ms, max {max:.0} ms",
        serve_percent.unwrap_or(f64::NAN),
        database_percent.unwrap_or(f64::NAN)
    );
    drop(serve);
    let fires = u64::try_from(fires).unwrap_or(0);
    Ok(Report {
        scenario: "plans",
        tasks: fires,
        seconds,
        tasks_per_s: fires as f64 / seconds,
        p50_ms: p50,
        p99_ms: p99,
        baseline_commits_per_s: baseline,
        ratio: fires as f64 / seconds / baseline,
        details: json!({
            "plans": opts.plans,
            "minutes": opts.minutes,
            "serve_cpu_percent_of_one_core": serve_percent,
            "database_cpu_percent_of_one_core": database_percent,
            "lateness_max_ms": max,
        }),
    })
}
