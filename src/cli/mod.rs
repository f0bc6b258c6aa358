//! The `orbit` command line. Every subcommand prints a readable one-paragraph message and exits
//! non-zero on failure; exit codes: 0 success, 1 the command ran and found a problem (e.g.
//! `gen --check` drift), 2 bad usage or configuration, 3 a database error.
//!
//! This module declares the command tree and dispatches it; each subcommand's arguments and code
//! live in a module of their own: `gen`, `migrate` (`up`, `status`, `verify`), `serve`,
//! `dev`, `admin` (`bootstrap`, `credential …`), `bench`, `chaos` (and `chaos-worker`).
//! `orbit task …` and `orbit queue …` are [`operator`]: one module for both, over the HTTP API.

mod admin;
mod bench;
mod chaos;
mod dev;
mod gen;
mod migrate;
pub mod operator;
mod serve;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::codegen;

pub use admin::{
    AdminAction, BootstrapArgs, CredentialAction, CredentialCreateArgs, CredentialsFile,
};
pub use bench::{BenchArgs, Scenario};
pub use chaos::{ChaosArgs, ChaosWorkerArgs};
pub use dev::DevArgs;
pub use migrate::{MigrateAction, MigrateArgs, VerifyArgs};
pub use serve::ServeArgs;

use admin::{bootstrap_cmd, credential_cmd};
use bench::bench_cmd;
use chaos::chaos_cmd;
use dev::dev_cmd;
use migrate::migrate_cmd;
use serve::serve_cmd;

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
        action: operator::TaskAction,
        #[command(flatten)]
        api: operator::ApiArgs,
    },
    /// Queues over the HTTP API: list, get, pause, resume, set-retention (ORBIT_URL, ORBIT_TOKEN).
    #[command(
        after_help = "Example:\n  export ORBIT_URL=http://127.0.0.1:8080 ORBIT_CREDENTIALS_FILE=ops.json\n  orbit queue list\n  orbit queue pause 0f1e2d3c4b5a69788796a5b4c3d2e1f0\n\n\
        Exit codes as for `orbit task`."
    )]
    Queue {
        #[command(subcommand)]
        action: operator::QueueAction,
        #[command(flatten)]
        api: operator::ApiArgs,
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

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
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
        Command::Gen { check, root } => gen::gen(check, &root),
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
        Command::Task { action, api } => operator::task_cmd(action, api).await,
        Command::Queue { action, api } => operator::queue_cmd(action, api).await,
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
