//! `orbit dev`: a private database and server for local use.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::migrate;

use super::admin::{bootstrap_as, db_exit, operator_db, BootstrapArgs, CredentialsFile};
use super::serve::serve_exit_code;
use super::{init_logging, LogFormat};

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

pub(super) async fn dev_cmd(args: DevArgs) -> ExitCode {
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
        migrate::up_embedded(&mut conn).await
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
    let existing = match CredentialsFile::load(&creds_path).ok() {
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
            match CredentialsFile::load(&creds_path).ok() {
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
             \x20 console:      {url}{console}  (sign in with the token from the credentials file)\n\
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
            creds.queue_id,
            console = crate::http::console::PATH,
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
