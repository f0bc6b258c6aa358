//! `orbit chaos-worker`: one worker OS process of a chaos run. An SDK worker whose handler is the
//! fenced append; each write the fence refuses is printed as one `fenced-off …` line on stdout,
//! which the harness counts.

use std::process::ExitCode;
use std::time::Duration;

use orbit_sdk::fence::mysql::MySqlFence;
use orbit_sdk::Worker;
use sqlx::mysql::MySqlPoolOptions;

use super::workload::{self, AppendError};

/// What a worker process is told on its command line.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    pub url: String,
    pub token: String,
    pub worker_id: String,
    pub queue_ids: Vec<String>,
    /// The resource database holding the fenced registers.
    pub fence_dsn: String,
    pub capacity: u32,
    /// Attempts start with the grant (`Worker::start_on_assign`).
    pub start_on_assign: bool,
}

/// Runs until killed (the harness ends every worker with a signal).
pub async fn run(cfg: WorkerConfig) -> ExitCode {
    let options = match crate::migrate::parse_dsn(&cfg.fence_dsn) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("chaos-worker: {e}");
            return ExitCode::from(2);
        }
    };
    // Lazy: the resource database may be restarting when this process starts.
    let pool = MySqlPoolOptions::new()
        .max_connections(cfg.capacity + 1)
        .acquire_timeout(Duration::from_secs(2))
        .connect_lazy_with(options);
    let fence = MySqlFence::new(pool, &cfg.worker_id);
    let mut worker = Worker::new(&cfg.url, &cfg.token, &cfg.worker_id)
        .capacity(cfg.capacity)
        .start_on_assign(cfg.start_on_assign);
    for q in &cfg.queue_ids {
        worker = worker.queue(q);
    }
    let worker = worker.handler(workload::HANDLER, "v1", move |ctx| {
        let fence = fence.clone();
        async move {
            match workload::fenced_append(&fence, &ctx).await {
                Ok(v) => Ok(v),
                Err(e) => {
                    if matches!(e, AppendError::FencedOff { .. }) {
                        println!("{}", workload::describe(&e, &ctx));
                    } else {
                        eprintln!("{}", workload::describe(&e, &ctx));
                    }
                    Err(e.into_handler_error())
                }
            }
        }
    });
    match worker.start().join().await {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("chaos-worker {}: {e}", cfg.worker_id);
            ExitCode::from(1)
        }
    }
}
