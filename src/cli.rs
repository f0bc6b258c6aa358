//! The `orbit` command line. Every subcommand prints a readable one-paragraph message and exits
//! non-zero on failure; exit codes: 0 success, 1 the command ran and found a problem (e.g.
//! `gen --check` drift), 2 bad usage or configuration, 3 a database error.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::{bench, codegen, migrate};

#[derive(Parser, Debug)]
#[command(
    name = "orbit",
    version,
    about = "Durable keyed-concurrency tasks on MySQL/MariaDB stored procedures"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Render templates/ into generated-sql/ and migrations/ (and lint them).
    #[command(
        after_help = "Examples:\n  orbit gen            # write the files\n  orbit gen --check    # exit 1 and name every file that differs"
    )]
    Gen {
        /// Compare instead of writing; exit 1 naming each file that differs, is missing or extra.
        #[arg(long)]
        check: bool,
        /// The repository root holding templates/ (default: the current directory).
        #[arg(long, default_value = ".")]
        root: PathBuf,
    },
    /// Install or upgrade the extension in a database.
    Migrate {
        #[command(subcommand)]
        action: MigrateAction,
    },
    /// Measure a scenario against the same server's durable-commit limit (see BENCHMARKS.md).
    #[command(
        after_help = "Examples:\n  orbit bench baseline\n  orbit bench claim --backlogs 0,100000,1000000 --json\n\n\
        With a DSN naming only a server (the default), a fresh database is created and dropped."
    )]
    Bench(BenchArgs),
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// Durable single-row commits/s (16 connections): the physical limit.
    Baseline,
    /// Claim latency with growing backlogs of tasks blocked on busy keys.
    Claim,
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
    /// claim: blocked-task backlogs to measure at, ascending.
    #[arg(long, value_delimiter = ',', default_value = "0,100000,1000000")]
    pub backlogs: Vec<u64>,
    /// claim: timed claims per backlog level.
    #[arg(long, default_value_t = 1000)]
    pub samples: u32,
    /// claim: keys held busy (the backlog is spread over them).
    #[arg(long, default_value_t = 1000)]
    pub keys: u32,
    /// Seconds the baseline measurement runs.
    #[arg(long, default_value_t = 5)]
    pub baseline_seconds: u64,
}

#[derive(Subcommand, Debug)]
pub enum MigrateAction {
    /// Apply every pending migration in order (a no-op when current).
    #[command(
        after_help = "Example:\n  ORBIT_MYSQL_DSN=mysql://root@127.0.0.1:3306/orbit orbit migrate up"
    )]
    Up(MigrateArgs),
    /// Show the installed version, applied and pending migrations.
    #[command(
        after_help = "Example:\n  orbit migrate status --dsn mysql://root@127.0.0.1:3306/orbit"
    )]
    Status(MigrateArgs),
}

#[derive(clap::Args, Debug)]
pub struct MigrateArgs {
    /// Database DSN, e.g. mysql://root@127.0.0.1:3306/orbit.
    #[arg(long, env = "ORBIT_MYSQL_DSN", hide_env_values = true)]
    pub dsn: Option<String>,
    /// Read migrations from this folder instead of those built into the binary.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// Runs the CLI and turns the outcome into an exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(3);
        }
    };
    runtime.block_on(run(cli))
}

async fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Gen { check, root } => gen(check, &root),
        Command::Bench(args) => bench_cmd(args).await,
        Command::Migrate { action } => match migrate_cmd(action).await {
            Ok(code) => code,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(match e {
                    migrate::MigrateError::NoDsn
                    | migrate::MigrateError::BadDsn { .. }
                    | migrate::MigrateError::NoDatabase
                    | migrate::MigrateError::BadFileName(_)
                    | migrate::MigrateError::Io { .. } => 2,
                    _ => 3,
                })
            }
        },
    }
}

fn gen(check: bool, root: &std::path::Path) -> ExitCode {
    if let Err(unregistered) = codegen::unregistered_templates(root) {
        eprintln!("error: {unregistered}");
        return ExitCode::from(2);
    }
    let rendered = match codegen::render() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    if !rendered.unparsed.is_empty() {
        eprintln!(
            "lint: {} statement(s) sqlparser could not parse (checked by text rules only):",
            rendered.unparsed.len()
        );
        for u in &rendered.unparsed {
            eprintln!("  - {u}");
        }
    }
    if check {
        let drift = codegen::check(&rendered, root);
        if drift.is_empty() {
            println!(
                "gen --check: {} files match the templates",
                rendered.files.len()
            );
            ExitCode::SUCCESS
        } else {
            eprintln!("gen --check: the committed SQL differs from what the templates render (run `cargo run -- gen`):");
            for d in drift {
                eprintln!("  {d}");
            }
            ExitCode::from(1)
        }
    } else {
        match codegen::write(&rendered, root) {
            Ok(changed) => {
                for p in &changed {
                    println!("wrote {}", p.display());
                }
                println!(
                    "gen: {} files, {} changed",
                    rendered.files.len(),
                    changed.len()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(3)
            }
        }
    }
}

async fn migrate_cmd(action: MigrateAction) -> Result<ExitCode, migrate::MigrateError> {
    let (args, is_up) = match action {
        MigrateAction::Up(a) => (a, true),
        MigrateAction::Status(a) => (a, false),
    };
    let migrations = match &args.dir {
        Some(dir) => migrate::from_dir(dir)?,
        None => migrate::embedded(),
    };
    let dsn = args.dsn.ok_or(migrate::MigrateError::NoDsn)?;
    let mut conn = migrate::connect(&dsn).await?;
    if is_up {
        let applied = migrate::up(&mut conn, &migrations, |name, i, n| {
            if i == 0 {
                eprintln!("applying {name} ({n} statements)…");
            }
        })
        .await?;
        if applied.is_empty() {
            println!(
                "migrate up: already at version {}; nothing to do",
                migrations.last().map_or(0, |m| m.version)
            );
        } else {
            println!("migrate up: applied {}", applied.join(", "));
        }
        Ok(ExitCode::SUCCESS)
    } else {
        let s = migrate::status(&mut conn, &migrations).await?;
        println!("installed version: {}", s.version);
        for a in &s.applied {
            let mark = if s.changed.contains(&a.name) {
                "  CHANGED SINCE APPLIED"
            } else {
                ""
            };
            println!(
                "applied  {} (version {}, sha256 {}){mark}",
                a.name, a.version, a.checksum
            );
        }
        for p in &s.pending {
            println!("pending  {p}");
        }
        Ok(if s.changed.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }
}

async fn bench_cmd(args: BenchArgs) -> ExitCode {
    let bench_db = match bench::BenchDb::open(&args.dsn, 24).await {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(3);
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
            }),
            Scenario::Claim => {
                let opts = bench::claim::ClaimOptions {
                    backlogs: args.backlogs.clone(),
                    samples: args.samples,
                    busy_keys: args.keys,
                };
                bench::claim::run(&bench_db, &opts, baseline).await
            }
        }
    }
    .await;
    bench_db.finish().await;
    match result {
        Ok(report) => {
            println!(
                "{}: {} tasks, p50 {:.2} ms, p99 {:.2} ms, ratio {:.2} (baseline {:.0} commits/s)",
                report.scenario,
                report.tasks,
                report.p50_ms,
                report.p99_ms,
                report.ratio,
                report.baseline_commits_per_s
            );
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
