//! The `orbit` command line. Every subcommand prints a readable one-paragraph message and exits
//! non-zero on failure; exit codes: 0 success, 1 the command ran and found a problem (e.g.
//! `gen --check` drift), 2 bad usage or configuration, 3 a database error.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::{bench, codegen, migrate};

#[derive(Parser, Debug)]
#[command(
    name = "orbit",
    version = codegen::VERSION_LINE,
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
    /// Run everything locally: a private database (unless ORBIT_MYSQL_DSN), the extension, a server.
    ///
    /// Starts a private MariaDB/MySQL from the machine's server binary with its data under
    /// .orbit/dev/, installs the extension, writes a credential and serves; Ctrl-C stops the server
    /// and the database.
    #[command(after_help = "Example:\n  cargo run -- dev\n\n\
        Data lives in .orbit/dev/ (data/, credentials.json, mysqld.log); a second run reuses it.")]
    Dev(DevArgs),
    /// Serve the HTTP API and the worker WebSocket.
    #[command(
        after_help = "Example:\n  ORBIT_MYSQL_DSN=mysql://root@127.0.0.1:3306/orbit orbit serve --addr 127.0.0.1:8080\n\n\
        Refuses to start when the database's extension version is not the one this binary serves."
    )]
    Serve(ServeArgs),
    /// Tasks over the HTTP API: list, get, cancel, resolve (ORBIT_URL, ORBIT_TOKEN).
    #[command(
        after_help = "Example:\n  export ORBIT_URL=http://127.0.0.1:8080 ORBIT_CREDENTIALS_FILE=ops.json\n  orbit task list --state NEEDS_REVIEW\n  orbit task resolve 42 --resolution requeue\n\n\
        The token comes from ORBIT_TOKEN or the credentials file, never from the command line.\n\
        Exit codes: 0 done; 1 not found or not in a state that allows it; 2 usage, configuration,\n\
        401 or 403; 3 the server or its database is unavailable."
    )]
    Task {
        #[command(subcommand)]
        action: crate::operator::TaskAction,
        #[command(flatten)]
        api: crate::operator::ApiArgs,
    },
    /// Queues over the HTTP API: list, get, pause, resume (ORBIT_URL, ORBIT_TOKEN).
    #[command(
        after_help = "Example:\n  export ORBIT_URL=http://127.0.0.1:8080 ORBIT_CREDENTIALS_FILE=ops.json\n  orbit queue list\n  orbit queue pause 0f1e2d3c4b5a69788796a5b4c3d2e1f0\n\n\
        Exit codes as for `orbit task`."
    )]
    Queue {
        #[command(subcommand)]
        action: crate::operator::QueueAction,
        #[command(flatten)]
        api: crate::operator::ApiArgs,
    },
    /// Operator commands: bootstrap tenants and credentials.
    Admin {
        #[command(subcommand)]
        action: AdminAction,
    },
    /// Measure a scenario against the same server's durable-commit limit (see BENCHMARKS.md).
    #[command(
        after_help = "Examples:\n  orbit bench baseline\n  orbit bench claim --backlogs 0,100000,1000000 --json\n\n\
        With a DSN naming only a server (the default), a fresh database is created and dropped."
    )]
    Bench(BenchArgs),
    /// Prove the guarantees under faults: keyed workers, kills, pauses, restarts, and a checker.
    ///
    /// Starts a PRIVATE database from the machine's server binary (never a shared one), the façade
    /// and worker processes of this binary; injects faults on a seeded schedule it prints; drains;
    /// checks the history. The last line is the checker's summary; the exit code is 1 on any
    /// violation.
    #[command(
        after_help = "Examples:\n  orbit chaos --duration 60\n  orbit chaos --duration 600 --workers 8 --keys 6 --seed 7\n\n\
        Last line: tasks=N faults=N overlaps=N token_regressions=N lost_updates=N lost_tasks=N"
    )]
    Chaos(ChaosArgs),
    /// One worker process of a chaos run (started by `orbit chaos`).
    #[command(hide = true)]
    ChaosWorker(ChaosWorkerArgs),
}

#[derive(clap::Args, Debug)]
pub struct ChaosArgs {
    /// Seconds of submits and faults (a drain follows).
    #[arg(long, default_value_t = 60)]
    pub duration: u64,
    /// Worker processes.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub workers: u64,
    /// Concurrency keys the tasks share.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub keys: u32,
    /// Submits per second.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub rate: u32,
    /// The façade's lease in seconds; paused workers stay stopped longer than this.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..=60))]
    pub lease_seconds: u32,
    /// Mean seconds between faults.
    #[arg(long, default_value_t = 4.0)]
    pub fault_every: f64,
    /// Fault kinds to inject (repeat or comma-separate; default all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub faults: Vec<crate::chaos::FaultKind>,
    /// Seed of the fault schedule and the workload.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Seconds to wait after the faults for every task to end.
    #[arg(long, default_value_t = 120)]
    pub drain: u64,
    /// Directory for the private database and the logs (default: a fresh temporary one, removed
    /// after a clean run).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Every other worker process asks for start_on_assign (attempts start with the grant), so
    /// both kinds of holder share the keys.
    #[arg(long)]
    pub start_on_assign: bool,
}

#[derive(clap::Args, Debug)]
pub struct ChaosWorkerArgs {
    #[arg(long)]
    pub url: String,
    #[arg(long, env = "ORBIT_TOKEN", hide_env_values = true)]
    pub token: String,
    #[arg(long)]
    pub worker_id: String,
    /// Queue ids, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub queues: Vec<String>,
    #[arg(long)]
    pub fence_dsn: String,
    #[arg(long, default_value_t = 2)]
    pub capacity: u32,
    #[arg(long)]
    pub start_on_assign: bool,
}

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Database DSN, e.g. mysql://root@127.0.0.1:3306/orbit; a comma-separated list names the
    /// servers of one cluster: writes go to one, and move to the next when it is gone.
    #[arg(long, env = "ORBIT_MYSQL_DSN", hide_env_values = true)]
    pub dsn: Option<String>,
    /// Address to listen on (port 0 picks a free port; the bound address is printed).
    #[arg(long, env = "ORBIT_HTTP_ADDR", default_value = "127.0.0.1:8080")]
    pub addr: String,
    /// Database connections in the pool.
    #[arg(long, default_value_t = 16)]
    pub pool_size: u32,
    /// Lease granted with each assignment; a holder silent this long loses its permit.
    #[arg(long, default_value_t = crate::http::ws::LEASE_SECONDS, value_parser = clap::value_parser!(u32).range(2..=3600))]
    pub lease_seconds: u32,
    /// Open client connections at once (WebSocket sessions included); at the limit new ones wait.
    #[arg(long, default_value_t = crate::http::MAX_CONNECTIONS as u64, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections: u64,
    /// Seconds a connection may take to send a request's headers, also the idle keep-alive limit.
    #[arg(long, default_value_t = crate::http::HEADER_TIMEOUT_SECONDS, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub header_timeout: u64,
    /// Seconds a JSON request body may take to arrive (then 408).
    #[arg(long, default_value_t = crate::http::BODY_TIMEOUT_SECONDS, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub body_timeout: u64,
    /// Seconds a request may take until its response (then 503); WebSocket sessions are not timed.
    #[arg(long, default_value_t = crate::http::REQUEST_TIMEOUT_SECONDS, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub request_timeout: u64,
    /// Log format on stderr (filter with RUST_LOG, default info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(clap::Args, Debug)]
pub struct DevArgs {
    /// Use this server instead of a private one.
    #[arg(long, env = "ORBIT_MYSQL_DSN", hide_env_values = true)]
    pub dsn: Option<String>,
    #[arg(long, env = "ORBIT_HTTP_ADDR", default_value = "127.0.0.1:8080")]
    pub addr: String,
    /// Where the private database and the credentials file live.
    #[arg(long, default_value = ".orbit/dev")]
    pub dir: PathBuf,
    /// Log format on stderr (filter with RUST_LOG, default info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
pub enum AdminAction {
    /// Create what is missing of application, environment, namespace and queue, and write a new
    /// credential (token, ids, scopes) to a JSON file with mode 0600.
    #[command(
        after_help = "Example:\n  orbit admin bootstrap --application shop --namespace default --environment prod \\\n    --queue emails --worker-access --output /tmp/orbit.credentials.json"
    )]
    Bootstrap(BootstrapArgs),
    /// Create or revoke credentials.
    Credential {
        #[command(subcommand)]
        action: CredentialAction,
    },
}

#[derive(Subcommand, Debug)]
pub enum CredentialAction {
    /// Create a credential in an existing namespace and write it to a JSON file (mode 0600).
    #[command(
        after_help = "Example:\n  orbit admin credential create --application shop --environment prod --namespace default \\\n    --scope tasks:read --scope tasks:submit --queue 0f1e… --output reader.json"
    )]
    Create(CredentialCreateArgs),
    /// List credentials (never their tokens: the hint they start with), in id order.
    #[command(
        after_help = "Example:\n  orbit admin credential list --application shop\n  orbit admin credential list --include-revoked --json"
    )]
    List {
        #[arg(long, env = "ORBIT_MYSQL_DSN", hide_env_values = true)]
        dsn: Option<String>,
        /// Only this application's credentials (its name).
        #[arg(long)]
        application: Option<String>,
        /// Also list revoked credentials.
        #[arg(long)]
        include_revoked: bool,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a credential by id (idempotent); its token stops working at once and its open
    /// worker sessions are closed (their next frame is refused).
    #[command(after_help = "Example:\n  orbit admin credential revoke --id 7")]
    Revoke {
        #[arg(long, env = "ORBIT_MYSQL_DSN", hide_env_values = true)]
        dsn: Option<String>,
        #[arg(long)]
        id: u64,
    },
}

#[derive(clap::Args, Debug)]
pub struct CredentialCreateArgs {
    #[arg(long, env = "ORBIT_MYSQL_DSN", hide_env_values = true)]
    pub dsn: Option<String>,
    #[arg(long)]
    pub application: String,
    #[arg(long)]
    pub environment: String,
    #[arg(long)]
    pub namespace: String,
    /// A scope to grant (repeat): queues:manage, tasks:submit, tasks:read, workers:connect,
    /// workers:consume, metrics:read (GET /metrics, which names every application: for operators).
    #[arg(long = "scope", required = true)]
    pub scopes: Vec<String>,
    /// Restrict to these queue ids (repeat); default: every queue of the namespace.
    #[arg(long = "queue")]
    pub queues: Vec<String>,
    #[arg(long, default_value = "")]
    pub label: String,
    #[arg(long)]
    pub output: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct BootstrapArgs {
    #[arg(long, env = "ORBIT_MYSQL_DSN", hide_env_values = true)]
    pub dsn: Option<String>,
    #[arg(long)]
    pub application: String,
    #[arg(long)]
    pub environment: String,
    #[arg(long)]
    pub namespace: String,
    #[arg(long)]
    pub queue: String,
    /// Also grant workers:connect and workers:consume.
    #[arg(long)]
    pub worker_access: bool,
    /// Where to write the credentials JSON (created with mode 0600).
    #[arg(long)]
    pub output: PathBuf,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// Durable single-row commits/s (16 connections): the physical limit.
    Baseline,
    /// Claim latency with growing backlogs of tasks blocked on busy keys.
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
    /// claim: keys held busy (the backlog is spread over them); keys: keys the tasks use.
    #[arg(long, default_value_t = 1000)]
    pub keys: u32,
    /// e2e, keys, hotkey, submit: tasks; handoff-sql: calls; sessions: sessions.
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
    /// Compare every installed table, index and procedure with the catalog and this binary's
    /// definitions; exit 1 naming each one that is missing or changed.
    #[command(
        after_help = "Example:\n  orbit migrate verify --dsn mysql://root@127.0.0.1:3306/orbit\n\n\
Exit codes: 0 the install matches; 1 something is missing or changed (each printed);\n\
2 bad DSN; 3 database error. `orbit serve` runs the same check at start."
    )]
    Verify(VerifyArgs),
}

#[derive(clap::Args, Debug)]
pub struct VerifyArgs {
    /// Database DSN, e.g. mysql://root@127.0.0.1:3306/orbit.
    #[arg(long, env = "ORBIT_MYSQL_DSN", hide_env_values = true)]
    pub dsn: Option<String>,
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
        Command::Chaos(args) => chaos_cmd(args).await,
        Command::ChaosWorker(args) => {
            crate::chaos::worker::run(crate::chaos::worker::WorkerConfig {
                url: args.url,
                token: args.token,
                worker_id: args.worker_id,
                queue_ids: args.queues,
                fence_dsn: args.fence_dsn,
                capacity: args.capacity,
                start_on_assign: args.start_on_assign,
            })
            .await
        }
        Command::Serve(args) => serve_cmd(args).await,
        Command::Task { action, api } => crate::operator::task_cmd(action, api).await,
        Command::Queue { action, api } => crate::operator::queue_cmd(action, api).await,
        Command::Dev(args) => dev_cmd(args).await,
        Command::Admin {
            action: AdminAction::Bootstrap(args),
        } => bootstrap_cmd(args).await,
        Command::Admin {
            action: AdminAction::Credential { action },
        } => credential_cmd(action).await,
        Command::Migrate { action } => match migrate_cmd(action).await {
            Ok(code) => code,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(if e.is_usage() { 2 } else { 3 })
            }
        },
    }
}

fn gen(check: bool, root: &std::path::Path) -> ExitCode {
    if !root.join("templates").is_dir() {
        eprintln!(
            "error: {} holds no templates/ folder; run `orbit gen` in the repository root or pass --root DIR",
            root.display()
        );
        return ExitCode::from(2);
    }
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
    // Procedure bodies always have procedural statements sqlparser cannot parse: they are listed
    // in generated-sql/README.md. Anything else it could not parse is shown here too.
    let (procedural, other): (Vec<_>, Vec<_>) = rendered
        .unparsed
        .iter()
        .partition(|u| u.statement.starts_with("procedural statements"));
    eprintln!(
        "lint: ok; {} procedure bodies contain procedural statements sqlparser cannot parse (listed in generated-sql/README.md)",
        procedural.len()
    );
    for u in other {
        eprintln!("lint: not parsed: {u}");
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
                // A template changed since this binary was built, or a file cannot be written:
                // configuration, not the database.
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        }
    }
}

async fn migrate_cmd(action: MigrateAction) -> Result<ExitCode, migrate::MigrateError> {
    let (args, is_up) = match action {
        MigrateAction::Up(a) => (a, true),
        MigrateAction::Status(a) => (a, false),
        MigrateAction::Verify(a) => return verify_cmd(a).await,
    };
    let migrations = match &args.dir {
        Some(dir) => migrate::from_dir(dir)?,
        None => migrate::embedded(),
    };
    let dsn = args.dsn.ok_or(migrate::MigrateError::NoDsn)?;
    let mut conn = migrate::connect(&dsn).await?;
    if is_up {
        let mut bar: Option<indicatif::ProgressBar> = None;
        let applied = migrate::up(&mut conn, &migrations, |name, i, n| {
            if i == 0 {
                if let Some(done) = bar.take() {
                    done.finish_and_clear();
                }
                bar = Some(bench::progress(n as u64, &format!("applying {name}")));
            }
            if let Some(b) = &bar {
                b.set_position(i as u64 + 1);
            }
        })
        .await;
        if let Some(done) = bar.take() {
            done.finish_and_clear();
        }
        let applied = applied?;
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

async fn verify_cmd(args: VerifyArgs) -> Result<ExitCode, migrate::MigrateError> {
    let dsn = args.dsn.ok_or(migrate::MigrateError::NoDsn)?;
    let mut conn = migrate::connect(&dsn).await?;
    let report = crate::verify::verify(&mut conn).await?;
    for line in crate::verify::describe(&report) {
        println!("{line}");
    }
    if report.ok() && report.limits.is_empty() {
        println!(
            "migrate verify: version {}, {} tables and procedures match their definitions",
            report.version, report.checked
        );
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "migrate verify: {} problem(s) in the install of version {}{}",
            report.problems.len(),
            report.version,
            if report.limits.is_empty() {
                ""
            } else {
                "; this account cannot see everything: run it as the account that ran `migrate up`"
            }
        );
        Ok(ExitCode::from(1))
    }
}

async fn bench_cmd(args: BenchArgs) -> ExitCode {
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
            }),
            Scenario::Claim => {
                let opts = bench::claim::ClaimOptions {
                    backlogs: args.backlogs.clone(),
                    samples: args.samples,
                    busy_keys: args.keys,
                };
                bench::claim::run(&bench_db, &opts, baseline).await
            }
            scenario => {
                let opts = bench::flow::FlowOptions {
                    tasks: args.tasks,
                    workers: args.workers,
                    keys: args.keys,
                    start_on_assign: args.start_on_assign,
                    batch: args.batch,
                };
                match scenario {
                    Scenario::E2e => bench::flow::throughput(&bench_db, &opts, 0, baseline).await,
                    Scenario::Keys => {
                        bench::flow::throughput(&bench_db, &opts, args.keys, baseline).await
                    }
                    Scenario::Hotkey => bench::flow::hotkey(&bench_db, &opts, baseline).await,
                    Scenario::HandoffSql => {
                        bench::handoff::run(&bench_db, opts.tasks, baseline).await
                    }
                    Scenario::Submit => bench::flow::submit(&bench_db, &opts, baseline).await,
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

/// Logs to stderr, filtered by RUST_LOG (default `info`); ANSI colours only when stderr is a
/// terminal (never in a log file or a pipe).
pub fn init_logging(format: LogFormat) {
    use std::io::IsTerminal as _;
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

async fn chaos_cmd(args: ChaosArgs) -> ExitCode {
    if !(args.fault_every > 0.0 && args.fault_every.is_finite()) {
        eprintln!("error: --fault-every must be a positive number of seconds");
        return ExitCode::from(2);
    }
    let seed = args.seed.unwrap_or_else(rand::random);
    let (dir, temporary) = match args.dir {
        Some(d) => (d, false),
        None => (
            std::env::temp_dir().join(format!("orbit-chaos-{}-{seed:016x}", std::process::id())),
            true,
        ),
    };
    let cfg = crate::chaos::ChaosConfig {
        duration: Duration::from_secs(args.duration),
        workers: args.workers as usize,
        keys: args.keys,
        rate: args.rate,
        lease_seconds: args.lease_seconds,
        fault_every: Duration::from_secs_f64(args.fault_every),
        faults: if args.faults.is_empty() {
            crate::chaos::FaultKind::ALL.to_vec()
        } else {
            args.faults
        },
        seed,
        dir: dir.clone(),
        drain: Duration::from_secs(args.drain),
        start_on_assign: args.start_on_assign,
    };
    match crate::chaos::run(cfg).await {
        Ok(outcome) => {
            let ok = outcome.ok();
            if temporary && ok {
                let _ = std::fs::remove_dir_all(&dir);
            } else {
                eprintln!("chaos: data and logs kept in {}", dir.display());
            }
            println!("{}", outcome.summary);
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("error: chaos run failed: {e} (logs in {})", dir.display());
            ExitCode::from(match &e {
                crate::chaos::ChaosError::Dev(e) => e.exit_code(),
                crate::chaos::ChaosError::Migrate(e) if e.is_usage() => 2,
                _ => 3,
            })
        }
    }
}

async fn serve_cmd(args: ServeArgs) -> ExitCode {
    init_logging(args.log_format);
    let Some(dsn) = args.dsn else {
        eprintln!("error: {}", migrate::MigrateError::NoDsn);
        return ExitCode::from(2);
    };
    let cfg = crate::http::ServeConfig {
        dsn,
        addr: args.addr,
        pool_size: args.pool_size,
        lease_seconds: args.lease_seconds,
        limits: crate::http::ServeLimits {
            max_connections: args.max_connections as usize,
            header_timeout: std::time::Duration::from_secs(args.header_timeout),
            body_timeout: std::time::Duration::from_secs(args.body_timeout),
            request_timeout: std::time::Duration::from_secs(args.request_timeout),
        },
    };
    match crate::http::serve(cfg).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(serve_exit_code(&e))
        }
    }
}

/// 2 for a bad DSN, an address that cannot be bound (in use) or a database at another extension
/// version (run `migrate up`); 1 for a damaged install (see [`crate::verify`]); 3 when the
/// database fails.
fn serve_exit_code(e: &crate::http::ServeError) -> u8 {
    use crate::http::ServeError;
    match e {
        ServeError::Connect(e) if e.is_usage() => 2,
        ServeError::Connect(_) | ServeError::Version(_) => 3,
        ServeError::WrongVersion { .. } | ServeError::Bind { .. } => 2,
        ServeError::Damaged { .. } => 1,
    }
}

/// The credentials file `admin bootstrap` writes (and the SDK and examples read).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub struct CredentialsFile {
    pub token: String,
    pub application_id: u64,
    pub environment_id: u64,
    pub namespace_id: u64,
    pub queue_id: String,
    pub credential_id: u64,
    pub scopes: Vec<String>,
    /// The database the credential was created in, as `host:port/database` (never a password);
    /// `orbit dev` makes a new credential when it names another database.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
}

/// Connects for an operator command, or says why not (with the exit code to use); also returns
/// the DSN's target (`host:port/database`, see [`migrate::dsn_target`]).
async fn operator_db(dsn: Option<String>) -> Result<(crate::db::Db, String), ExitCode> {
    let Some(dsn) = dsn else {
        eprintln!("error: {}", migrate::MigrateError::NoDsn);
        return Err(ExitCode::from(2));
    };
    let connected = match migrate::dsn_target(&dsn) {
        Ok(target) => migrate::connect_pool(&dsn, 2).await.map(|p| (p, target)),
        Err(e) => Err(e),
    };
    match connected {
        Ok((p, target)) => Ok((crate::db::Db::new(p), target)),
        Err(e) => {
            eprintln!("error: {e}");
            Err(ExitCode::from(if e.is_usage() { 2 } else { 3 }))
        }
    }
}

/// 3 when the database failed (unreachable, or an internal error); 2 when it refused what was
/// asked (unknown names, a bad argument, a conflict).
fn db_exit(what: &str, e: &crate::db::DbError) -> ExitCode {
    eprintln!("error: {what} {}: {}", e.code(), e.message());
    ExitCode::from(match e {
        crate::db::DbError::Unavailable(_) | crate::db::DbError::Internal(_) => 3,
        _ => 2,
    })
}

/// A credentials file on its way to `path`: a temporary file (mode 0600) next to it, created
/// before the credential is, so a path that cannot be written stops the command before anything
/// exists in the database; [`PendingFile::commit`] writes it and renames it into place.
struct PendingFile {
    tmp: PathBuf,
    path: PathBuf,
    file: std::fs::File,
}

impl PendingFile {
    fn create(path: &std::path::Path) -> std::io::Result<PendingFile> {
        if path.is_dir() {
            return Err(std::io::Error::other("it is a directory"));
        }
        let name = path
            .file_name()
            .ok_or_else(|| std::io::Error::other("it names no file"))?;
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let tmp = dir.join(format!(
            ".{}.{}.tmp",
            name.to_string_lossy(),
            std::process::id()
        ));
        let _ = std::fs::remove_file(&tmp); // left by a run that died with this pid
        let file = open_private(&tmp)?;
        Ok(PendingFile {
            tmp,
            path: path.to_path_buf(),
            file,
        })
    }

    fn commit(mut self, text: &str) -> std::io::Result<()> {
        use std::io::Write;
        let written = self
            .file
            .write_all(text.as_bytes())
            .and_then(|()| self.file.write_all(b"\n"))
            .and_then(|()| self.file.sync_all())
            .and_then(|()| std::fs::rename(&self.tmp, &self.path));
        if written.is_err() {
            let _ = std::fs::remove_file(&self.tmp);
        }
        written
    }

    fn abandon(self) {
        let _ = std::fs::remove_file(&self.tmp);
    }
}

/// Opens the credentials file for `output` before anything is created, or says why not (exit 2).
fn pending_output(output: &std::path::Path) -> Result<PendingFile, ExitCode> {
    PendingFile::create(output).map_err(|e| {
        eprintln!(
            "error: cannot write the credentials file {}: {e}; nothing was created",
            output.display()
        );
        ExitCode::from(2)
    })
}

/// Writes `file` into `pending`; when that fails, revokes the credential (its token would be lost)
/// and says so (exit 2).
async fn finish_output(
    db: &crate::db::Db,
    pending: PendingFile,
    file: &CredentialsFile,
) -> Result<(), ExitCode> {
    let path = pending.path.clone();
    let json = serde_json::to_string_pretty(file).expect("credentials serialise");
    let Err(e) = pending.commit(&json) else {
        return Ok(());
    };
    let revoked = match db.credential_revoke(file.credential_id).await {
        Ok(_) => "it was revoked".to_string(),
        Err(r) => format!(
            "revoking it failed too ({}): revoke it by hand",
            r.message()
        ),
    };
    eprintln!(
        "error: cannot write the credentials file {}: {e}; credential {} was created, and {revoked}",
        path.display(),
        file.credential_id
    );
    Err(ExitCode::from(2))
}

async fn credential_cmd(action: CredentialAction) -> ExitCode {
    match action {
        CredentialAction::List {
            dsn,
            application,
            include_revoked,
            json,
        } => {
            let (db, _) = match operator_db(dsn).await {
                Ok(db) => db,
                Err(code) => return code,
            };
            let mut all = Vec::new();
            let mut after = None;
            loop {
                match db
                    .credential_list(application.as_deref(), include_revoked, 1000, after)
                    .await
                {
                    Ok(page) => {
                        let full = page.len() == 1000;
                        after = page.last().map(|c| c.credential_id);
                        all.extend(page);
                        if !full {
                            break;
                        }
                    }
                    Err(e) => return db_exit("credential list", &e),
                }
            }
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&all).expect("credentials serialise")
                );
            } else {
                let dash = |s: String| if s.is_empty() { "-".to_string() } else { s };
                crate::operator::print_table(
                    &[
                        "ID",
                        "APPLICATION",
                        "ENVIRONMENT",
                        "LABEL",
                        "TOKEN",
                        "SCOPES",
                        "NAMESPACES",
                        "QUEUES",
                        "CREATED",
                        "REVOKED",
                    ],
                    &all.iter()
                        .map(|c| {
                            vec![
                                c.credential_id.to_string(),
                                c.application.clone(),
                                c.environment.clone(),
                                dash(c.label.clone()),
                                format!("{}…", c.token_hint),
                                c.scopes.join(","),
                                dash(c.namespaces.join(",")),
                                if c.queue_ids.is_empty() {
                                    "all".to_string()
                                } else {
                                    c.queue_ids.join(",")
                                },
                                c.created_at.format("%Y-%m-%d %H:%M:%S").to_string(),
                                c.revoked_at.map_or("-".to_string(), |t| {
                                    t.format("%Y-%m-%d %H:%M:%S").to_string()
                                }),
                            ]
                        })
                        .collect::<Vec<_>>(),
                );
            }
            ExitCode::SUCCESS
        }
        CredentialAction::Revoke { dsn, id } => {
            let (db, _) = match operator_db(dsn).await {
                Ok(db) => db,
                Err(code) => return code,
            };
            match db.credential_revoke(id).await {
                Ok(r) => {
                    println!("credential {} revoked at {}", r.credential_id, r.revoked_at);
                    ExitCode::SUCCESS
                }
                Err(e) => db_exit("revoke", &e),
            }
        }
        CredentialAction::Create(args) => {
            let (db, target) = match operator_db(args.dsn).await {
                Ok(db) => db,
                Err(code) => return code,
            };
            let pending = match pending_output(&args.output) {
                Ok(p) => p,
                Err(code) => return code,
            };
            let token = crate::auth::generate_token();
            let created = db
                .credential_create(&crate::db::credentials::NewCredential {
                    application: args.application,
                    environment: args.environment,
                    namespace: args.namespace,
                    queue_ids: args.queues.clone(),
                    token_hash: crate::auth::token_hash(&token).to_vec(),
                    token_hint: crate::auth::token_hint(&token),
                    scopes: args.scopes.clone(),
                    label: args.label,
                })
                .await;
            let c = match created {
                Ok(c) => c,
                Err(e) => {
                    pending.abandon();
                    return db_exit("credential create", &e);
                }
            };
            let file = CredentialsFile {
                token,
                application_id: c.application_id,
                environment_id: c.environment_id,
                namespace_id: c.namespace_id,
                queue_id: args.queues.first().cloned().unwrap_or_default(),
                credential_id: c.credential_id,
                scopes: args.scopes,
                database: Some(target),
            };
            if let Err(code) = finish_output(&db, pending, &file).await {
                return code;
            }
            println!(
                "credential {} written to {}",
                c.credential_id,
                args.output.display()
            );
            ExitCode::SUCCESS
        }
    }
}

impl CredentialsFile {
    fn load(path: &std::path::Path) -> Option<CredentialsFile> {
        serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
    }
}

async fn bootstrap_cmd(args: BootstrapArgs) -> ExitCode {
    bootstrap_as(args, None).await
}

/// `admin bootstrap`, recording `database` in the file (default: the DSN's target).
async fn bootstrap_as(args: BootstrapArgs, database: Option<String>) -> ExitCode {
    let (db, target) = match operator_db(args.dsn).await {
        Ok(db) => db,
        Err(code) => return code,
    };
    let pending = match pending_output(&args.output) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let mut scopes = vec!["queues:manage", "tasks:submit", "tasks:read"];
    if args.worker_access {
        scopes.extend(["workers:connect", "workers:consume"]);
    }
    let (bootstrap, token) = crate::db::queues::Bootstrap::with_new_token(
        &args.application,
        &args.environment,
        &args.namespace,
        &args.queue,
        &scopes,
        "admin bootstrap",
    );
    let scopes = bootstrap.scopes.clone();
    let result = db.admin_bootstrap(&bootstrap).await;
    let b = match result {
        Ok(b) => b,
        Err(e) => {
            pending.abandon();
            return db_exit("bootstrap", &e);
        }
    };
    let file = CredentialsFile {
        token,
        application_id: b.application_id,
        environment_id: b.environment_id,
        namespace_id: b.namespace_id,
        queue_id: b.queue_id.clone(),
        credential_id: b.credential_id,
        scopes,
        database: Some(database.unwrap_or(target)),
    };
    if let Err(code) = finish_output(&db, pending, &file).await {
        return code;
    }
    println!(
        "queue {} ready; credentials written to {}",
        b.queue_id,
        args.output.display()
    );
    ExitCode::SUCCESS
}

/// Creates a new file only its owner can read (mode 0600 from creation, no window where it is
/// wider).
fn open_private(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(0o600);
        let f = options.open(path)?;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        Ok(f)
    }
    #[cfg(not(unix))]
    {
        options.open(path)
    }
}

async fn dev_cmd(args: DevArgs) -> ExitCode {
    init_logging(args.log_format);
    // Everything the operator passed is checked before a database is built or started.
    let target = match args.dsn.as_deref().map(migrate::dsn_target).transpose() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(if e.is_usage() { 2 } else { 3 });
        }
    };
    if let Err(message) = check_addr_free(&args.addr) {
        eprintln!("error: {message}");
        return ExitCode::from(2);
    }
    let (_lock, mut private) = match &args.dsn {
        Some(_) => (None, None),
        None => {
            let started = async {
                let lock = crate::dev::lock_dir(&args.dir)?;
                let server = crate::dev::start_private_server(&args.dir).await?;
                Ok::<_, crate::dev::DevError>((Some(lock), Some(server)))
            };
            match started.await {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(e.exit_code());
                }
            }
        }
    };
    let (dsn, database) = match (&private, target) {
        (Some(server), _) => {
            // Its port changes from run to run: the data directory names this database.
            let data = std::fs::canonicalize(&args.dir).unwrap_or_else(|_| args.dir.clone());
            (
                server.dsn.clone(),
                format!("private database in {}", data.join("data").display()),
            )
        }
        (None, target) => (
            args.dsn.clone().expect("a DSN without a private server"),
            target.expect("the DSN's target"),
        ),
    };
    let code = match &mut private {
        None => dev_serve(&args, &dsn, &database).await,
        Some(server) => tokio::select! {
            code = dev_serve(&args, &dsn, &database) => code,
            why = server.exited() => {
                eprintln!("error: {why}");
                ExitCode::from(3)
            }
        },
    };
    drop(private); // stops the private database cleanly
    code
}

/// Whether `addr` can be listened on now; otherwise a message naming it and what to do.
fn check_addr_free(addr: &str) -> Result<(), String> {
    match std::net::TcpListener::bind(addr) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Err(format!(
            "cannot listen on {addr}: the address is already in use (another `orbit dev` or \
             `orbit serve`?); stop it, or pass --addr HOST:PORT (port 0 picks a free port)"
        )),
        Err(e) => Err(format!("cannot listen on {addr}: {e}")),
    }
}

/// Whether the credential in `file` belongs to `database` and still authenticates there.
async fn dev_credentials_valid(
    dsn: &str,
    file: &CredentialsFile,
    database: &str,
) -> Result<Result<(), String>, ExitCode> {
    if file.database.as_deref() != Some(database) {
        return Ok(Err(format!(
            "it was made for {}",
            file.database.as_deref().unwrap_or("an unrecorded database")
        )));
    }
    let (db, _) = operator_db(Some(dsn.to_string())).await?;
    let hash = crate::auth::token_hash(&file.token);
    let checked = db.queue_get(&hash, &file.queue_id).await;
    db.close().await;
    match checked {
        Ok(_) => Ok(Ok(())),
        Err(
            e @ (crate::db::DbError::Unauthenticated(_)
            | crate::db::DbError::PermissionDenied(_)
            | crate::db::DbError::NotFound(_)),
        ) => Ok(Err(format!(
            "its token no longer works there ({})",
            e.code()
        ))),
        Err(e) => Err(db_exit("checking the dev credential", &e)),
    }
}

async fn dev_serve(args: &DevArgs, dsn: &str, database: &str) -> ExitCode {
    let installed = async {
        let mut conn = migrate::connect(dsn).await?;
        migrate::up(&mut conn, &migrate::embedded(), |_, _, _| {}).await
    };
    if let Err(e) = installed.await {
        eprintln!("error: {e}");
        return ExitCode::from(if e.is_usage() { 2 } else { 3 });
    }
    if let Err(e) = std::fs::create_dir_all(&args.dir) {
        eprintln!("error: cannot create {}: {e}", args.dir.display());
        return ExitCode::from(2);
    }
    let creds_path = args.dir.join("credentials.json");
    let existing = match CredentialsFile::load(&creds_path) {
        Some(c) => match dev_credentials_valid(dsn, &c, database).await {
            Ok(Ok(())) => Some(c),
            Ok(Err(why)) => {
                eprintln!(
                    "dev: not reusing {}: {why}; writing a new credential for {database}",
                    creds_path.display()
                );
                None
            }
            Err(code) => return code,
        },
        None => None,
    };
    let creds = match existing {
        Some(c) => c,
        None => {
            let code = bootstrap_as(
                BootstrapArgs {
                    dsn: Some(dsn.to_string()),
                    application: "dev".into(),
                    environment: "dev".into(),
                    namespace: "default".into(),
                    queue: "default".into(),
                    worker_access: true,
                    output: creds_path.clone(),
                },
                Some(database.to_string()),
            )
            .await;
            match CredentialsFile::load(&creds_path) {
                Some(c) if c.database.as_deref() == Some(database) => c,
                _ => return code,
            }
        }
    };
    let cfg = crate::http::ServeConfig {
        dsn: dsn.to_string(),
        addr: args.addr.clone(),
        pool_size: 8,
        lease_seconds: crate::http::ws::LEASE_SECONDS,
        limits: Default::default(),
    };
    let creds_shown = creds_path.display().to_string();
    let result = crate::http::serve_with(cfg, |addr| {
        let url = format!("http://{addr}");
        println!(
            "\nOrbit dev is running.\n\
             \x20 API:          {url}  (document: {url}/v1/openapi.json)\n\
             \x20 credentials:  {creds_shown}  (token, queue id; mode 0600)\n\
             \x20 database:     {}\n\n\
             Submit a task:\n\
             \x20 export ORBIT_URL={url}\n\
             \x20 export ORBIT_TOKEN=$(python3 -c 'import json;print(json.load(open(\"{creds_shown}\"))[\"token\"])')\n\
             \x20 curl -s $ORBIT_URL/v1/tasks -H \"Authorization: Bearer $ORBIT_TOKEN\" -H 'Content-Type: application/json' \\\n\
             \x20   -H 'Idempotency-Key: hello-1' --data '{{\"queue_id\":\"{}\",\"handler\":\"object.update\",\"handler_version\":\"v1\",\"payload_version\":\"v1\",\"payload\":{{}},\"concurrency_key\":\"object/42\"}}'\n\
             Run workers (the keyed-concurrency example):\n\
             \x20 ORBIT_URL={url} ORBIT_CREDENTIALS_FILE={creds_shown} cargo run --example keyed-concurrency\n\
             Ctrl-C stops the server and the database.",
            crate::migrate::redact(dsn),
            creds.queue_id
        );
    })
    .await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(serve_exit_code(&e))
        }
    }
}
