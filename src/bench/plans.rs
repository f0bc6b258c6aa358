//! `orbit bench plans`: the CPU that N cron plans firing every minute cost the scheduler.
//!
//! Creates `plans` cron plans (`* * * * *`, UTC, unkeyed tasks) through `orbit_plan_create`,
//! starts one `orbit serve` child (its scheduler fires them: `orbit_plan_fire_due`, then the
//! next fire times computed in Rust and stored by `orbit_plan_schedule_set`), waits until every
//! plan has fired once, then measures `minutes` whole minutes of firing, each followed by a
//! minute with every plan paused: the CPU of the serve process and of the database server
//! processes on this machine (`mariadbd`/`mysqld`: other clients of that server count too, which
//! the paused minutes show), the database server threads serving this benchmark database's
//! connections (MariaDB: `PROCESSLIST.TID`), as a percentage of one core, and each fire's lateness (`fired_at -
//! scheduled_for`). Every fire creates a task; nothing consumes them.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::json;

use super::serve::ServeProcess;
use super::server_cost::{process_cpu_seconds, thread_cpu_seconds, Server};
use super::{progress, sql_err, tenant, BenchDb, Report};
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

/// CPU seconds of serve and the database over measured windows.
#[derive(Default)]
struct Cpu {
    seconds: f64,
    serve: Option<f64>,
    database: Option<f64>,
    /// The database server threads of this benchmark database's connections.
    connections: Option<f64>,
}

/// CPU seconds of each database server thread serving a connection to this benchmark's
/// database (MariaDB's `information_schema.PROCESSLIST.TID`, one thread per connection, read
/// from `/proc/<mariadbd>/task/<tid>/stat`); empty when the server is not on this machine or not
/// MariaDB.
async fn connection_threads(bench: &BenchDb, server: Option<u32>) -> HashMap<u64, f64> {
    let Some(server) = server else {
        return HashMap::new();
    };
    let tids: Vec<u64> = sqlx::query_scalar(
        "SELECT CAST(TID AS UNSIGNED) FROM information_schema.PROCESSLIST WHERE DB = DATABASE()",
    )
    .fetch_all(bench.db.pool())
    .await
    .unwrap_or_default();
    tids.into_iter()
        .filter_map(|tid| Some((tid, thread_cpu_seconds(server, tid)?)))
        .collect()
}

impl Cpu {
    /// One window: `pid` is serve's process, `server` the database server's.
    async fn measure(
        &mut self,
        bench: &BenchDb,
        pid: Option<u32>,
        server: Option<u32>,
        window: Duration,
    ) {
        let database_cpu = || server.and_then(process_cpu_seconds);
        let (serve, database) = (pid.and_then(process_cpu_seconds), database_cpu());
        let threads = connection_threads(bench, server).await;
        let started = Instant::now();
        tokio::time::sleep(window).await;
        self.seconds += started.elapsed().as_secs_f64();
        let add = |sum: Option<f64>, before: Option<f64>, after: Option<f64>| {
            Some(sum.unwrap_or(0.0) + (after? - before?))
        };
        self.serve = add(self.serve, serve, pid.and_then(process_cpu_seconds));
        self.database = add(self.database, database, database_cpu());
        let after = connection_threads(bench, server).await;
        if !after.is_empty() {
            let used: f64 = after
                .iter()
                .filter_map(|(tid, cpu)| Some(cpu - threads.get(tid)?))
                .sum();
            self.connections = Some(self.connections.unwrap_or(0.0) + used);
        }
    }

    fn connections_percent(&self) -> Option<f64> {
        Some(self.connections? * 100.0 / self.seconds)
    }

    fn serve_percent(&self) -> Option<f64> {
        Some(self.serve? * 100.0 / self.seconds)
    }

    fn database_percent(&self) -> Option<f64> {
        Some(self.database? * 100.0 / self.seconds)
    }
}

/// Pauses or resumes every plan of the benchmark database, as orbit_plan_set_paused does (a
/// resumed cron plan goes on from now).
async fn set_paused(bench: &BenchDb, paused: bool) -> Result<(), DbError> {
    let sql = if paused {
        "UPDATE orbit_plan SET paused = 1"
    } else {
        "UPDATE orbit_plan SET paused = 0, next_fire_at = NULL, schedule_after = UTC_TIMESTAMP(6)"
    };
    sqlx::query(sql)
        .execute(bench.db.pool())
        .await
        .map_err(sql_err("pausing the plans"))?;
    Ok(())
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
    // Alternate whole minutes of firing with minutes of the same serve process with every plan
    // paused: the database server's CPU also counts its other clients, and the paused minutes
    // show that share (and serve's idle loop).
    let pid = serve.pid();
    let server = Server::detect(bench.db.pool()).await?.pid();
    let minute = Duration::from_secs(60);
    let mut active = Cpu::default();
    let mut idle = Cpu::default();
    let mut fires = 0i64;
    let since = chrono::Utc::now().naive_utc();
    for round in 1..=opts.minutes {
        // Start 5 s before a minute boundary, so the window holds one whole burst of fires.
        use chrono::Timelike;
        let now = chrono::Utc::now();
        let into = f64::from(now.second()) + f64::from(now.nanosecond()) / 1e9;
        tokio::time::sleep(Duration::from_secs_f64((55.0 - into).rem_euclid(60.0))).await;
        eprintln!("bench: minute {round}/{} firing…", opts.minutes);
        let before = count_fires(bench).await?;
        active.measure(bench, pid, server, minute).await;
        fires += count_fires(bench).await? - before;
        set_paused(bench, true).await?;
        eprintln!("bench: minute {round}/{} paused…", opts.minutes);
        idle.measure(bench, pid, server, minute).await;
        set_paused(bench, false).await?;
    }
    let seconds = active.seconds;
    let (serve_percent, database_percent) = (active.serve_percent(), active.database_percent());
    // Lateness of the fires in the firing minutes, in ms.
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
        "bench: {fires} fires in {seconds:.0} s; serve {:.2} % of one core (paused: {:.2} %), its database connections {:.2} % (paused: {:.2} %), the whole database server {:.2} % (paused: {:.2} %); lateness p50 {p50:.0} ms, p99 {p99:.0} ms, max {max:.0} ms",
        serve_percent.unwrap_or(f64::NAN),
        idle.serve_percent().unwrap_or(f64::NAN),
        active.connections_percent().unwrap_or(f64::NAN),
        idle.connections_percent().unwrap_or(f64::NAN),
        database_percent.unwrap_or(f64::NAN),
        idle.database_percent().unwrap_or(f64::NAN),
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
        server_cost: None,
        details: json!({
            "plans": opts.plans,
            "minutes": opts.minutes,
            "serve_cpu_percent_of_one_core": serve_percent,
            "database_cpu_percent_of_one_core": database_percent,
            "paused_serve_cpu_percent_of_one_core": idle.serve_percent(),
            "connections_cpu_percent_of_one_core": active.connections_percent(),
            "paused_connections_cpu_percent_of_one_core": idle.connections_percent(),
            "paused_database_cpu_percent_of_one_core": idle.database_percent(),
            "lateness_max_ms": max,
        }),
    })
}
