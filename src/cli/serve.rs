//! `orbit serve`.

use std::process::ExitCode;

use crate::migrate;

use super::{init_logging, LogFormat};

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

pub(super) async fn serve_cmd(args: ServeArgs) -> ExitCode {
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
pub(super) fn serve_exit_code(e: &crate::http::ServeError) -> u8 {
    use crate::http::ServeError;
    match e {
        ServeError::Connect(e) if e.is_usage() => 2,
        ServeError::Connect(_) | ServeError::Version(_) => 3,
        ServeError::WrongVersion { .. } | ServeError::Bind { .. } => 2,
        ServeError::Damaged { .. } => 1,
    }
}
