//! `orbit bench`: one scenario against the same run's durable-commit baseline.

use std::process::ExitCode;

use crate::bench;
use crate::db::keys::Rate;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// Durable single-row commits/s (16 connections): the physical limit.
    Baseline,
    /// Claim latency with growing backlogs of tasks blocked on busy keys (or, with --backlog
    /// delayed, of delayed tasks; with --backlog other-handler, of ready tasks of a handler the
    /// claimer does not run).
    Claim,
    /// Unkeyed tasks/s from the first HTTP submit to the last result ack (SDK workers).
    E2e,
    /// Tasks/s with N tasks spread over K keys.
    Keys,
    /// One key across two queues: serialised tasks/s and hand-off latency.
    Hotkey,
    /// The hot key's hand-off in SQL alone: a loop of orbit_attempt_finish calls, each ending
    /// the key's holder and granting its next task (no façade; --tasks sets the calls).
    HandoffSql,
    /// HTTP submits/s with Idempotency-Keys.
    Submit,
    /// Resident memory of serve with 1,000 idle worker sessions (--tasks sets the count).
    Sessions,
    /// CPU of serve and the database while --plans cron plans fire every minute, over
    /// --minutes whole minutes.
    Plans,
    /// Claim latency while the scheduler's purge deletes --tasks finished tasks (with their
    /// attempts, history and receipts), against claims with no purge (--samples of them).
    Purge,
    /// How late --tasks delayed tasks, due evenly over --spread-seconds, reach idle SDK workers
    /// after their run_at.
    Delayed,
}

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    pub scenario: Scenario,
    /// Server or database DSN; a server-only DSN gets a fresh database.
    #[arg(
        long,
        env = "ORBIT_MYSQL_DSN",
        hide_env_values = true,
        default_value = "mysql://root@127.0.0.1:3306"
    )]
    pub dsn: String,
    /// Print one JSON object as the last line of stdout.
    #[arg(long)]
    pub json: bool,
    /// claim: backlogs to measure at, ascending.
    #[arg(long, value_delimiter = ',', default_value = "0,100000,1000000")]
    pub backlogs: Vec<u64>,
    /// claim: what the backlog is: tasks blocked on busy keys, delayed tasks (a day ahead)
    /// waiting for their run_at, or ready tasks of a handler the claimer does not run.
    #[arg(long, value_enum, default_value_t = bench::claim::Backlog::Blocked)]
    pub backlog: bench::claim::Backlog,
    /// claim: timed claims per backlog level; purge: timed claims without a purge.
    #[arg(long, default_value_t = 1000)]
    pub samples: u32,
    /// claim: keys held busy (the backlog is spread over them); keys: keys the tasks use.
    #[arg(long, default_value_t = 1000)]
    pub keys: u32,
    /// e2e, keys, hotkey, submit: tasks; handoff-sql: calls; sessions: sessions; purge: finished
    /// tasks to purge.
    #[arg(long, default_value_t = 2000)]
    pub tasks: u32,
    /// e2e, keys, hotkey: SDK workers (capacity 16 each; hotkey uses at least 2).
    #[arg(long, default_value_t = 4)]
    pub workers: u32,
    /// Seconds the baseline measurement runs.
    #[arg(long, default_value_t = 5)]
    pub baseline_seconds: u64,
    /// e2e, keys, hotkey: workers ask the server to start attempts with the grant (SDK
    /// `Worker::start_on_assign`): no task.start round trip, one durable commit less per task.
    #[arg(long)]
    pub start_on_assign: bool,
    /// e2e, keys, submit: tasks per HTTP submit; above 1 each request is one
    /// `POST /v1/tasks/batch` (one transaction, an Idempotency-Key per task).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub batch: u32,
    /// e2e, keys: submit every task first (through --batch), then start the workers and time the
    /// processing alone (a burn-down); the submit phase's tasks/s is reported on its own.
    #[arg(long)]
    pub preload: bool,
    /// plans: cron plans (`* * * * *`) firing every minute.
    #[arg(long, default_value_t = 10_000)]
    pub plans: u32,
    /// delayed: the seconds over which the tasks' run_at are spread.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub spread_seconds: u32,
    /// plans: minutes of firing measured.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=60))]
    pub minutes: u32,
    /// claim, keys, hotkey: a key policy lets N attempts hold each key the scenario uses at once
    /// (claim: the busy keys are held N times each, and the claimed keys get it too). Without it
    /// the keys meet no policy: one holder.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::codegen::CONSTS.key_limit_max)))]
    pub key_limit: Option<u32>,
    /// handoff-sql: unkeyed tasks left ready in the hot key's first queue beside it, which the
    /// calls never take.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub ready_backlog: u64,
    /// keys, hotkey: a key policy lets at most GRANTS grants of each key through in any SECONDS
    /// (e.g. 1000/1), with --key-limit's holders (or one).
    #[arg(long, value_name = "GRANTS/SECONDS", value_parser = parse_rate)]
    pub rate: Option<Rate>,
}

/// `--rate GRANTS/SECONDS`: grants 1-1000, seconds 1-86400 (the key policy's bounds).
fn parse_rate(s: &str) -> Result<Rate, String> {
    let (max_grants, max_seconds) = (
        crate::codegen::CONSTS.rate_grants_max,
        crate::codegen::CONSTS.rate_window_max_seconds,
    );
    let usage = || {
        format!("expected GRANTS/SECONDS, e.g. 1000/1, with GRANTS 1-{max_grants} and SECONDS 1-{max_seconds}")
    };
    let (grants, seconds) = s.split_once('/').ok_or_else(usage)?;
    let (grants, per_seconds) = match (grants.trim().parse::<u32>(), seconds.trim().parse::<u32>())
    {
        (Ok(g), Ok(p)) => (g, p),
        _ => return Err(usage()),
    };
    if !(1..=max_grants).contains(&grants) || !(1..=max_seconds).contains(&per_seconds) {
        return Err(usage());
    }
    Ok(Rate {
        grants,
        per_seconds,
    })
}

pub(super) async fn bench_cmd(args: BenchArgs) -> ExitCode {
    if args.preload && !matches!(args.scenario, Scenario::E2e | Scenario::Keys) {
        eprintln!("error: --preload applies to e2e and keys (hotkey always submits first)");
        return ExitCode::from(2);
    }
    if args.key_limit.is_some()
        && !matches!(
            args.scenario,
            Scenario::Claim | Scenario::Keys | Scenario::Hotkey
        )
    {
        eprintln!("error: --key-limit applies to claim, keys and hotkey");
        return ExitCode::from(2);
    }
    if args.rate.is_some() && !matches!(args.scenario, Scenario::Keys | Scenario::Hotkey) {
        eprintln!("error: --rate applies to keys and hotkey");
        return ExitCode::from(2);
    }
    if args.ready_backlog > 0 && args.scenario != Scenario::HandoffSql {
        eprintln!("error: --ready-backlog applies to handoff-sql");
        return ExitCode::from(2);
    }
    let limits = bench::KeyLimits {
        limit: args.key_limit,
        rate: args.rate,
    };
    let bench_db = match bench::BenchDb::open(&args.dsn, 24).await {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(if e.is_usage() { 2 } else { 3 });
        }
    };
    eprintln!(
        "bench: measuring the baseline ({} s, {} connections)…",
        args.baseline_seconds,
        bench::baseline::CONNECTIONS
    );
    let result = async {
        let baseline = bench::baseline::measure(
            &bench_db.db,
            std::time::Duration::from_secs(args.baseline_seconds),
        )
        .await?;
        eprintln!("bench: baseline {baseline:.0} durable commits/s");
        match args.scenario {
            Scenario::Baseline => Ok(bench::Report {
                scenario: "baseline",
                tasks: 0,
                seconds: args.baseline_seconds as f64,
                tasks_per_s: 0.0,
                p50_ms: 0.0,
                p99_ms: 0.0,
                baseline_commits_per_s: baseline,
                ratio: 1.0,
                details: serde_json::json!({ "connections": bench::baseline::CONNECTIONS }),
                server_cost: None,
            }),
            Scenario::Claim => {
                let opts = bench::claim::ClaimOptions {
                    backlogs: args.backlogs.clone(),
                    samples: args.samples,
                    busy_keys: args.keys,
                    backlog: args.backlog,
                    limits,
                };
                bench::claim::run(&bench_db, &opts, baseline).await
            }
            Scenario::Plans => {
                let opts = bench::plans::PlanOptions {
                    plans: args.plans,
                    minutes: args.minutes,
                };
                bench::plans::run(&bench_db, &opts, baseline).await
            }
            Scenario::Purge => {
                let opts = bench::purge::PurgeOptions {
                    tasks: args.tasks,
                    samples: args.samples,
                };
                bench::purge::run(&bench_db, &opts, baseline).await
            }
            scenario => {
                let opts = bench::flow::FlowOptions {
                    tasks: args.tasks,
                    workers: args.workers,
                    keys: args.keys,
                    start_on_assign: args.start_on_assign,
                    batch: args.batch,
                    preload: args.preload,
                    limits,
                };
                match scenario {
                    Scenario::E2e => bench::flow::throughput(&bench_db, &opts, 0, baseline).await,
                    Scenario::Keys => {
                        bench::flow::throughput(&bench_db, &opts, args.keys, baseline).await
                    }
                    Scenario::Hotkey => bench::flow::hotkey(&bench_db, &opts, baseline).await,
                    Scenario::HandoffSql => {
                        bench::handoff::run(&bench_db, opts.tasks, args.ready_backlog, baseline)
                            .await
                    }
                    Scenario::Submit => bench::flow::submit(&bench_db, &opts, baseline).await,
                    Scenario::Delayed => {
                        bench::flow::delayed(&bench_db, &opts, args.spread_seconds, baseline).await
                    }
                    _ => bench::flow::sessions(&bench_db, &opts, baseline).await,
                }
            }
        }
    }
    .await;
    bench_db.finish().await;
    match result {
        Ok(report) => {
            println!(
                "{}: {} tasks, {:.0} tasks/s, p50 {:.2} ms, p99 {:.2} ms, ratio {:.2} (baseline {:.0} commits/s)",
                report.scenario,
                report.tasks,
                report.tasks_per_s,
                report.p50_ms,
                report.p99_ms,
                report.ratio,
                report.baseline_commits_per_s
            );
            if let Some(submit) = report.details["submit_tasks_per_s"].as_f64() {
                println!("submit phase: {submit:.0} tasks/s; the figures above are the processing phase's");
            }
            if let Some(n) = report.details["submit_retries"].as_u64().filter(|&n| n > 0) {
                println!("submit requests sent again after a 503 (the server's call timeout): {n}");
            }
            if let Some(cost) = &report.server_cost {
                println!("{}", cost.summary());
            }
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string(&report).expect("report serialises")
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: bench {}: {e}", e.code());
            ExitCode::from(3)
        }
    }
}
