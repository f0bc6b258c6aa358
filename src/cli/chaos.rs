//! `orbit chaos` and the hidden `orbit chaos-worker` it starts.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

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
    /// Key policies on the first keys: key-0 cancels its running holder on every submit
    /// (cancel_running), key-1 keeps only its newest waiting task (replace_waiting), key-2 has
    /// two holders at once, key-3 two holders and at most 2 grants a second. Needs --keys 4 or
    /// more.
    #[arg(long)]
    pub policies: bool,
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

pub(super) async fn chaos_cmd(args: ChaosArgs) -> ExitCode {
    if !(args.fault_every > 0.0 && args.fault_every.is_finite()) {
        eprintln!("error: --fault-every must be a positive number of seconds");
        return ExitCode::from(2);
    }
    if args.policies && (args.keys as usize) < crate::chaos::POLICIES.len() {
        eprintln!(
            "error: --policies sets policies on key-0 to key-{}: it needs --keys {} or more",
            crate::chaos::POLICIES.len() - 1,
            crate::chaos::POLICIES.len()
        );
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
        policies: args.policies,
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
