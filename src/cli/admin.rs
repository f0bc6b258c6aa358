//! `orbit admin bootstrap` and `orbit admin credential …`, and the credentials file they write.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use crate::migrate;

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

/// The credentials file `admin bootstrap` writes: the SDK's, which the SDK and examples read.
pub use orbit_sdk::credentials::Credentials as CredentialsFile;

/// Connects for an operator command, or says why not (with the exit code to use); also returns
/// the DSN's target (`host:port/database`, see [`migrate::dsn_target`]).
pub(super) async fn operator_db(dsn: Option<String>) -> Result<(crate::db::Db, String), ExitCode> {
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
pub(super) fn db_exit(what: &str, e: &crate::db::DbError) -> ExitCode {
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

pub(super) async fn credential_cmd(action: CredentialAction) -> ExitCode {
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
                super::operator::print_table(
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

pub(super) async fn bootstrap_cmd(args: BootstrapArgs) -> ExitCode {
    bootstrap_as(args, None).await
}

/// `admin bootstrap`, recording `database` in the file (default: the DSN's target).
pub(super) async fn bootstrap_as(args: BootstrapArgs, database: Option<String>) -> ExitCode {
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
