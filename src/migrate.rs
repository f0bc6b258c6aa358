//! `orbit migrate up|status`: installs and upgrades the extension from the numbered migrations.
//!
//! A database without the extension gets the newest version's full install
//! (`generated-sql/install.sql`, [`embedded_install`]) in one script, as PostgreSQL creates an
//! extension from its version's script rather than by replaying every upgrade: the script writes
//! the same schema and catalog rows as the migrations applied in order (the `upgrade` tests compare
//! the two), and it is the install that runs on MySQL, where the frozen 0.1.0 migration does not
//! (it calls `JSON_VALUE` with a computed path, which only MariaDB accepts). A database at an
//! older version gets the numbered migrations after its version, in order.
//!
//! Each migration file is applied statement by statement (split like the `mariadb` client does, see
//! [`crate::sqlscript`]) on one connection under a named lock, so two `migrate up` runs never
//! interleave. MySQL commits DDL implicitly, so a migration cannot be one transaction; instead every
//! file writes its catalog rows last (see [`crate::codegen::CATALOG_MARKER`]), and a file that fails
//! part-way never claims its version. Objects are created idempotently (`CREATE TABLE IF NOT
//! EXISTS`, `DROP PROCEDURE IF EXISTS` + `CREATE`), so running the failed file again after fixing the
//! cause completes it.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use sqlx::{Connection, MySqlConnection, MySqlPool, Row};

use crate::codegen::{migration_checksum, EXTENSION_VERSION};
use crate::sqlscript;

/// One numbered migration file.
#[derive(Clone, Debug)]
pub struct Migration {
    pub version: u32,
    /// The file name without `.sql`, e.g. `000001_install`.
    pub name: String,
    pub text: String,
}

impl Migration {
    fn parse(file_name: &str, text: String) -> Result<Self, MigrateError> {
        let name = file_name
            .strip_suffix(".sql")
            .unwrap_or(file_name)
            .to_string();
        let version = name
            .split('_')
            .next()
            .filter(|v| v.len() == 6)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| MigrateError::BadFileName(file_name.to_string()))?;
        Ok(Migration {
            version,
            name,
            text,
        })
    }

    /// The checksum the catalog records for this file.
    pub fn checksum(&self) -> String {
        migration_checksum(&self.text)
    }
}

/// The migrations compiled into this binary (the committed `migrations/` folder).
pub fn embedded() -> Vec<Migration> {
    [
        (
            "000001_install.sql",
            include_str!("../migrations/000001_install.sql"),
        ),
        (
            "000002_upgrade.sql",
            include_str!("../migrations/000002_upgrade.sql"),
        ),
    ]
    .into_iter()
    .map(|(file, text)| {
        Migration::parse(file, text.to_string()).expect("embedded migration names are valid")
    })
    .collect()
}

/// The name [`up`] reports for [`embedded_install`] when it applies it.
pub const INSTALL_NAME: &str = "install";

/// The full install of the newest embedded migration's version (`generated-sql/install.sql`,
/// rendered by `orbit gen` with the catalog rows of every migration up to it), which [`up`]
/// applies to a database that has no version yet.
pub fn embedded_install() -> Migration {
    Migration {
        version: crate::codegen::EXTENSION_VERSION,
        name: INSTALL_NAME.to_string(),
        text: include_str!("../generated-sql/install.sql").to_string(),
    }
}

/// Reads `*.sql` migrations from a folder, in version order.
pub fn from_dir(dir: &Path) -> Result<Vec<Migration>, MigrateError> {
    let io = |source| MigrateError::Io {
        path: dir.display().to_string(),
        source,
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let file = entry.file_name().to_string_lossy().to_string();
        if file.ends_with(".sql") {
            let text = std::fs::read_to_string(entry.path()).map_err(io)?;
            out.push(Migration::parse(&file, text)?);
        }
    }
    out.sort_by_key(|m| m.version);
    for pair in out.windows(2) {
        if pair[0].version == pair[1].version {
            return Err(MigrateError::BadFileName(format!(
                "{} and {} share a version",
                pair[0].name, pair[1].name
            )));
        }
    }
    Ok(out)
}

/// Why a migration command failed; each message is one readable paragraph.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("no database DSN: pass --dsn or set ORBIT_MYSQL_DSN (e.g. mysql://root@127.0.0.1:3306/orbit)")]
    NoDsn,
    #[error("the DSN {dsn:?} is not a valid MySQL URL ({reason}); expected mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE")]
    BadDsn { dsn: String, reason: String },
    #[error(
        "the DSN {dsn:?} is a {scheme}:// URL, but Orbit runs only on MySQL or MariaDB; \
             expected mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE (or mariadb://)"
    )]
    WrongScheme { dsn: String, scheme: String },
    #[error(
        "the DSN names no database; add one after the host, e.g. mysql://root@127.0.0.1:3306/orbit"
    )]
    NoDatabase,
    #[error("cannot connect to the database at {target}: {reason}")]
    Connect { target: String, reason: String },
    #[error("the DSN list names two databases ({first:?} and {other:?}); every DSN of a list must be a server of the same cluster and name the same database")]
    MixedDatabases { first: String, other: String },
    #[error("migration file name {0:?} is not of the form NNNNNN_title.sql")]
    BadFileName(String),
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "migration {name} was applied with checksum {recorded} but the file now has {current}; \
         an applied migration must never change. Restore the file, or add a new migration for the change"
    )]
    Changed {
        name: String,
        recorded: String,
        current: String,
    },
    #[error(
        "the database has migration {name} applied, which this orbit binary does not know; \
         the database is newer than this binary: use the orbit release that installed it"
    )]
    Unknown { name: String },
    #[error(
        "migration {name} failed at line {line} ({statement}): {reason}. Nothing after this statement \
         ran and the catalog does not claim version {version}; fix the cause and run `migrate up` again"
    )]
    Statement {
        name: String,
        version: u32,
        line: usize,
        statement: String,
        reason: String,
    },
    #[error("migration {name} ran but did not record version {version} in orbit_extension; the file is incomplete")]
    NotRecorded { name: String, version: u32 },
    #[error("another `orbit migrate` holds the migration lock on this database; try again when it has finished")]
    Locked,
    #[error(
        "the database server is {version}, which Orbit does not run on: it needs MariaDB 10.6 or \
         later, or MySQL 8.0.4 or later (JSON_TABLE, SKIP LOCKED); nothing was changed"
    )]
    UnsupportedServer { version: String },
    #[error("database error while {doing}: {reason}")]
    Database { doing: &'static str, reason: String },
}

impl MigrateError {
    /// A mistake in what the operator passed (DSN, files), not a failure of the database: the
    /// CLI exits 2 for these and 3 for the others.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            MigrateError::NoDsn
                | MigrateError::BadDsn { .. }
                | MigrateError::WrongScheme { .. }
                | MigrateError::NoDatabase
                | MigrateError::MixedDatabases { .. }
                | MigrateError::BadFileName(_)
                | MigrateError::Io { .. }
        )
    }
}

fn db_err(doing: &'static str) -> impl Fn(sqlx::Error) -> MigrateError {
    move |e| MigrateError::Database {
        doing,
        reason: describe(&e),
    }
}

/// A short description of a driver error: the server's message when there is one.
pub fn describe(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Database(d) => match d.code() {
            Some(code) => format!("{} (SQLSTATE {code})", d.message()),
            None => d.message().to_string(),
        },
        other => other.to_string(),
    }
}

/// The URL schemes a DSN may use: the driver speaks the MySQL protocol only.
pub const DSN_SCHEMES: [&str; 2] = ["mysql", "mariadb"];

/// Parses a DSN that may name only a server (no database): a `mysql://` or `mariadb://` URL.
/// Every DSN Orbit takes goes through here, so another scheme (`postgres://`, …) is refused
/// with one message everywhere.
pub fn parse_server_dsn(dsn: &str) -> Result<MySqlConnectOptions, MigrateError> {
    if let Some((scheme, _)) = dsn.trim().split_once("://") {
        if !DSN_SCHEMES.iter().any(|s| scheme.eq_ignore_ascii_case(s)) {
            return Err(MigrateError::WrongScheme {
                dsn: redact(dsn),
                scheme: scheme.to_string(),
            });
        }
    }
    MySqlConnectOptions::from_str(dsn).map_err(|e| MigrateError::BadDsn {
        dsn: redact(dsn),
        reason: e.to_string(),
    })
}

/// Parses a DSN ([`parse_server_dsn`]) and insists that it names a database.
pub fn parse_dsn(dsn: &str) -> Result<MySqlConnectOptions, MigrateError> {
    let options = parse_server_dsn(dsn)?;
    if options.get_database().is_none_or(str::is_empty) {
        return Err(MigrateError::NoDatabase);
    }
    Ok(options)
}

/// `host:port/database` of every server of a DSN list, comma-separated (never a password): what
/// a credentials file records as the database it belongs to.
pub fn dsn_target(list: &str) -> Result<String, MigrateError> {
    Ok(parse_dsn_list(list)?
        .iter()
        .map(target)
        .collect::<Vec<_>>()
        .join(","))
}

/// Splits a DSN list: `DSN[,DSN…]`, one per server of a cluster, in failover order (the first is
/// used first). A comma starts a new DSN only when a URL scheme follows it, so a password may
/// contain commas. Blank entries are ignored.
pub fn split_dsn_list(list: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for piece in list.split(',') {
        let trimmed = piece.trim();
        let starts_dsn = trimmed.split_once("://").is_some_and(|(scheme, _)| {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        });
        match out.last_mut() {
            Some(last) if !starts_dsn => {
                last.push(',');
                last.push_str(piece);
            }
            _ if trimmed.is_empty() => {}
            _ => out.push(trimmed.to_string()),
        }
    }
    // Blank entries (`a,,b`, a trailing comma) leave commas at the end of a DSN: drop them.
    for dsn in &mut out {
        *dsn = dsn
            .trim_end_matches(|c: char| c == ',' || c.is_whitespace())
            .to_string();
    }
    out
}

/// Parses a DSN list (see [`split_dsn_list`]): every entry must be valid and name the same
/// database (they are the servers of one cluster, not different databases).
pub fn parse_dsn_list(list: &str) -> Result<Vec<MySqlConnectOptions>, MigrateError> {
    let dsns = split_dsn_list(list);
    if dsns.is_empty() {
        return Err(MigrateError::NoDsn);
    }
    let options = dsns
        .iter()
        .map(|d| parse_dsn(d))
        .collect::<Result<Vec<_>, _>>()?;
    let first = options[0].get_database().unwrap_or("");
    if let Some(other) = options
        .iter()
        .find(|o| o.get_database().unwrap_or("") != first)
    {
        return Err(MigrateError::MixedDatabases {
            first: first.to_string(),
            other: other.get_database().unwrap_or("").to_string(),
        });
    }
    Ok(options)
}

/// The DSN with any password replaced, for messages.
pub fn redact(dsn: &str) -> String {
    match (dsn.find("://"), dsn.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &dsn[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &dsn[..scheme + 3], &dsn[at..]),
                None => dsn.to_string(),
            }
        }
        _ => dsn.to_string(),
    }
}

/// `host:port/database` of a server, for messages and logs (never the password).
pub fn target(options: &MySqlConnectOptions) -> String {
    format!(
        "{}:{}/{}",
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or("")
    )
}

/// Opens one connection for migrating; with a DSN list, to the first server that answers. On a
/// Galera node the session reads causally ([`causal_reads`]): `migrate status` through any node
/// sees every migration the cluster committed.
pub async fn connect(dsn: &str) -> Result<MySqlConnection, MigrateError> {
    let mut failures = Vec::new();
    for options in parse_dsn_list(dsn)? {
        let connected = match MySqlConnection::connect_with(&options).await {
            Ok(mut conn) => causal_reads(&mut conn).await.map(|()| conn),
            Err(e) => Err(e),
        };
        match connected {
            Ok(conn) => return Ok(conn),
            Err(e) => failures.push((target(&options), describe(&e))),
        }
    }
    Err(connect_error(failures))
}

fn connect_error(failures: Vec<(String, String)>) -> MigrateError {
    MigrateError::Connect {
        target: failures
            .iter()
            .map(|(t, _)| t.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        reason: failures
            .iter()
            .map(|(_, r)| r.as_str())
            .collect::<Vec<_>>()
            .join("; "),
    }
}

/// How long a pool of [`failover_pools`] waits for a connection before the call fails with 503.
/// A stopped server refuses connections at once, but the pool keeps trying until this deadline;
/// it is also the longest a request waits for a connection under overload.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// How long [`probe`] waits for a server.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Pool settings shared by every pool Orbit opens. Each new connection asks whether the server
/// is a Galera node (`wsrep_on`); if so it sets `wsrep_sync_wait = 1`, so each statement that
/// reads (a `CALL` counts once, at its start) first waits until this node has applied every
/// transaction the cluster committed before it: after a failover, the first calls on the new
/// node see everything the old node acknowledged (causal reads). On a single server, MySQL, or
/// a MariaDB without Galera, nothing is set.
///
/// A connection is pinged before use only after [`PING_AFTER_IDLE`] idle (sqlx's default pings
/// before every acquire: one more round trip to the server in front of every call, on the
/// critical path of each hand-off). A connection that breaks while in use fails its call
/// (a 503, which the caller retries) however recently it was checked.
fn pool_options(max_connections: u32) -> MySqlPoolOptions {
    MySqlPoolOptions::new()
        .max_connections(max_connections)
        .after_connect(|conn, _meta| {
            crate::db::CONNECTIONS_OPENED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Box::pin(causal_reads(conn))
        })
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for >= PING_AFTER_IDLE {
                    // Bounded: a stalled server must not hold the caller past its own timeout
                    // (an error here closes the connection instead of returning it).
                    tokio::time::timeout(crate::db::PING_TIMEOUT, conn.ping())
                        .await
                        .map_err(|_| sqlx::Error::PoolTimedOut)??;
                }
                Ok(true)
            })
        })
}

/// How long a pooled connection may sit idle and still be used without a ping first (see
/// [`pool_options`]): a server restart or failover leaves connections broken, and the pool sees
/// them idle for longer than this while nothing can be served.
pub const PING_AFTER_IDLE: Duration = Duration::from_secs(1);

/// On a Galera node, `SET SESSION wsrep_sync_wait = 1` (see [`pool_options`]); elsewhere nothing.
pub async fn causal_reads(conn: &mut MySqlConnection) -> Result<(), sqlx::Error> {
    if is_galera(conn).await? {
        sqlx::query("SET SESSION wsrep_sync_wait = 1")
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Whether the server is a Galera cluster node (`wsrep_on` is ON). MySQL and MariaDB without
/// Galera answer no.
pub async fn is_galera(conn: &mut MySqlConnection) -> Result<bool, sqlx::Error> {
    let row: Option<(String, String)> = sqlx::query_as("SHOW VARIABLES LIKE 'wsrep_on'")
        .fetch_optional(&mut *conn)
        .await?;
    Ok(row.is_some_and(|(_, v)| v.eq_ignore_ascii_case("ON")))
}

/// Whether a server can take writes now: it accepts a connection within [`PROBE_TIMEOUT`] and, if
/// it is a Galera node, is ready (`wsrep_ready = ON`: synced, in the primary component). The
/// error says why not.
pub async fn probe(options: &MySqlConnectOptions) -> Result<(), String> {
    let check = async {
        let mut conn = MySqlConnection::connect_with(options)
            .await
            .map_err(|e| describe(&e))?;
        // wsrep_ready is OFF on every server without Galera: ask only a Galera node.
        if !is_galera(&mut conn).await.map_err(|e| describe(&e))? {
            let _ = conn.close().await;
            return Ok(());
        }
        let ready: Option<(String, String)> =
            sqlx::query_as("SHOW GLOBAL STATUS LIKE 'wsrep_ready'")
                .fetch_optional(&mut conn)
                .await
                .map_err(|e| describe(&e))?;
        let _ = conn.close().await;
        match ready {
            Some((_, v)) if !v.eq_ignore_ascii_case("ON") => {
                Err(format!("the Galera node is not ready (wsrep_ready={v})"))
            }
            _ => Ok(()),
        }
    };
    tokio::time::timeout(PROBE_TIMEOUT, check)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {PROBE_TIMEOUT:?}")))
}

/// Opens a small pool (for tests, benchmarks and admin commands); with a DSN list, on the first
/// server that answers.
pub async fn connect_pool(dsn: &str, max_connections: u32) -> Result<MySqlPool, MigrateError> {
    let mut failures = Vec::new();
    for options in parse_dsn_list(dsn)? {
        match pool_options(max_connections)
            .connect_with(options.clone())
            .await
        {
            Ok(pool) => return Ok(pool),
            Err(e) => failures.push((target(&options), describe(&e))),
        }
    }
    Err(connect_error(failures))
}

/// One pool per server of a DSN list (for `serve`'s failover, see [`crate::db::Db`]), each
/// connecting lazily with the short [`ACQUIRE_TIMEOUT`], and the index of the first server that
/// passes [`probe`]; an error naming every server when none does.
pub async fn failover_pools(
    list: &str,
    max_connections: u32,
) -> Result<(Vec<MySqlPool>, usize), MigrateError> {
    let options = parse_dsn_list(list)?;
    let mut failures = Vec::new();
    let mut first_ready = None;
    for o in &options {
        match probe(o).await {
            Ok(()) => {
                first_ready = Some(failures.len());
                break;
            }
            Err(reason) => failures.push((target(o), reason)),
        }
    }
    let Some(start) = first_ready else {
        return Err(connect_error(failures));
    };
    let pools = options
        .into_iter()
        .map(|o| {
            pool_options(max_connections)
                .acquire_timeout(ACQUIRE_TIMEOUT)
                .connect_lazy_with(o)
        })
        .collect();
    Ok((pools, start))
}

/// One applied migration as the catalog records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    pub name: String,
    pub version: u32,
    pub checksum: String,
}

/// What `migrate status` reports.
#[derive(Clone, Debug)]
pub struct Status {
    /// The installed extension version (0 = not installed).
    pub version: u32,
    pub applied: Vec<Applied>,
    /// Known migrations not yet applied, in order.
    pub pending: Vec<String>,
    /// Applied migrations whose file no longer matches the recorded checksum.
    pub changed: Vec<String>,
}

async fn catalog_exists(conn: &mut MySqlConnection) -> Result<bool, MigrateError> {
    let n: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'orbit_extension'",
    )
    .fetch_one(&mut *conn)
    .await
    .map_err(db_err("reading information_schema"))?;
    Ok(n > 0)
}

async fn read_catalog(conn: &mut MySqlConnection) -> Result<(u32, Vec<Applied>), MigrateError> {
    if !catalog_exists(conn).await? {
        return Ok((0, Vec::new()));
    }
    let rows = sqlx::query("SELECT kind, name, version, checksum FROM orbit_extension WHERE kind IN ('extension', 'migration') ORDER BY version, name")
        .fetch_all(&mut *conn)
        .await
        .map_err(db_err("reading the orbit_extension catalog"))?;
    let mut version = 0;
    let mut applied = Vec::new();
    let decode = db_err("decoding the orbit_extension catalog");
    for row in rows {
        // ascii_bin columns arrive flagged binary, so read bytes and convert.
        let text = |col: &str| {
            row.try_get::<Vec<u8>, _>(col)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
        };
        let kind = text("kind").map_err(&decode)?;
        let v: u32 = row.try_get("version").map_err(&decode)?;
        if kind == "extension" {
            version = v;
        } else {
            let name = text("name").map_err(&decode)?;
            let checksum = text("checksum").map_err(&decode)?;
            applied.push(Applied {
                name,
                version: v,
                checksum,
            });
        }
    }
    Ok((version, applied))
}

/// Compares the catalog with the known migrations.
pub async fn status(
    conn: &mut MySqlConnection,
    migrations: &[Migration],
) -> Result<Status, MigrateError> {
    let (version, applied) = read_catalog(conn).await?;
    let changed = applied
        .iter()
        .filter(|a| {
            migrations
                .iter()
                .any(|m| m.name == a.name && m.checksum() != a.checksum)
        })
        .map(|a| a.name.clone())
        .collect();
    let pending = migrations
        .iter()
        .filter(|m| m.version > version)
        .map(|m| m.name.clone())
        .collect();
    Ok(Status {
        version,
        applied,
        pending,
        changed,
    })
}

/// Whether Orbit runs on the server of this `VERSION()`: MariaDB 10.6 and later (a version naming
/// MariaDB), MySQL 8.0.4 and later (any other; its forks report MySQL's version). Older servers
/// lack what the install needs (`JSON_TABLE`: MariaDB 10.6, MySQL 8.0.4; `SKIP LOCKED`), and would
/// fail partway through it. A version that does not start with a number is let through: its
/// statements then fail on their own, with the server's message.
pub fn server_supported(version: &str) -> bool {
    let mariadb = version.contains("MariaDB");
    // Old MariaDB releases put "5.5.5-" in front of their version for old clients.
    let version = match version.strip_prefix("5.5.5-") {
        Some(rest) if mariadb => rest,
        _ => version,
    };
    let numbers: Vec<u32> = version
        .split(|c: char| !c.is_ascii_digit())
        .take(3)
        .map_while(|n| n.parse().ok())
        .collect();
    let [major, minor, patch] = numbers[..] else {
        return true;
    };
    let least = if mariadb { (10, 6, 0) } else { (8, 0, 4) };
    (major, minor, patch) >= least
}

/// [`up`] with this binary's migrations and full install, as `orbit migrate up` runs it.
pub async fn up_embedded(conn: &mut MySqlConnection) -> Result<Vec<String>, MigrateError> {
    up(conn, &embedded(), Some(&embedded_install()), |_, _, _| {}).await
}

/// Applies every pending migration in order; returns the names applied (empty = already current).
/// On a database with no version yet, `install` (the full install of the last migration's
/// version, [`embedded_install`]) is applied instead of the migrations, and its name returned.
/// `progress` is called before each statement with (migration name, statement index, count).
pub async fn up(
    conn: &mut MySqlConnection,
    migrations: &[Migration],
    install: Option<&Migration>,
    mut progress: impl FnMut(&str, usize, usize),
) -> Result<Vec<String>, MigrateError> {
    let version: String = sqlx::query_scalar("SELECT VERSION()")
        .fetch_one(&mut *conn)
        .await
        .map_err(db_err("reading the server's version"))?;
    if !server_supported(&version) {
        return Err(MigrateError::UnsupportedServer { version });
    }
    let got: Option<i64> =
        sqlx::query_scalar("SELECT GET_LOCK(CONCAT('orbit_migrate:', DATABASE()), 30)")
            .fetch_one(&mut *conn)
            .await
            .map_err(db_err("taking the migration lock"))?;
    if got != Some(1) {
        return Err(MigrateError::Locked);
    }
    let result = up_locked(conn, migrations, install, &mut progress).await;
    let _ = sqlx::query("SELECT RELEASE_LOCK(CONCAT('orbit_migrate:', DATABASE()))")
        .execute(&mut *conn)
        .await;
    result
}

async fn up_locked(
    conn: &mut MySqlConnection,
    migrations: &[Migration],
    install: Option<&Migration>,
    progress: &mut impl FnMut(&str, usize, usize),
) -> Result<Vec<String>, MigrateError> {
    let (version, applied) = read_catalog(conn).await?;
    for a in &applied {
        match migrations.iter().find(|m| m.name == a.name) {
            None => {
                return Err(MigrateError::Unknown {
                    name: a.name.clone(),
                })
            }
            Some(m) if m.checksum() != a.checksum => {
                return Err(MigrateError::Changed {
                    name: a.name.clone(),
                    recorded: a.checksum.clone(),
                    current: m.checksum(),
                })
            }
            Some(_) => {}
        }
    }
    if migrations.iter().any(|m| m.version > version) {
        // This account becomes the definer of the procedures it creates, and
        // orbit_task_submit_many creates a temporary table with its definer's rights: without
        // the privilege every batch submit would fail after a migration that succeeded.
        sqlx::raw_sql(
            "CREATE TEMPORARY TABLE orbit_migrate_probe (id INT NOT NULL) ENGINE=InnoDB; \
             DROP TEMPORARY TABLE orbit_migrate_probe",
        )
        .execute(&mut *conn)
        .await
        .map_err(db_err(
            "checking that this account may create temporary tables, before any change \
             (CREATE TEMPORARY TABLES: it becomes the procedures' definer, and \
             orbit_task_submit_many uses one; see docs/install-by-hand.md)",
        ))?;
    }
    // A database with no version (nothing installed, or an install stopped before its catalog
    // rows) gets the full install, which ends where the last migration does.
    let steps: Vec<&Migration> = match install {
        Some(i) if version == 0 && migrations.last().map(|m| m.version) == Some(i.version) => {
            vec![i]
        }
        _ => migrations.iter().filter(|m| m.version > version).collect(),
    };
    let mut done = Vec::new();
    for m in steps {
        let statements = sqlscript::split(&m.text);
        for (i, s) in statements.iter().enumerate() {
            progress(&m.name, i, statements.len());
            sqlx::raw_sql(&s.sql)
                .execute(&mut *conn)
                .await
                .map_err(|e| MigrateError::Statement {
                    name: m.name.clone(),
                    version: m.version,
                    line: s.line,
                    statement: excerpt(&s.sql),
                    reason: describe(&e),
                })?;
        }
        let (now, _) = read_catalog(conn).await?;
        if now != m.version {
            return Err(MigrateError::NotRecorded {
                name: m.name.clone(),
                version: m.version,
            });
        }
        done.push(m.name.clone());
    }
    Ok(done)
}

/// The first line of a statement, shortened, for error messages.
fn excerpt(sql: &str) -> String {
    let first = sql
        .lines()
        .find(|l| !l.trim().starts_with("--") && !l.trim().is_empty())
        .unwrap_or("");
    let first = first.trim();
    if first.chars().count() > 80 {
        format!("{}…", first.chars().take(80).collect::<String>())
    } else {
        first.to_string()
    }
}

/// The version this binary serves; `serve` refuses any other.
pub const fn expected_version() -> u32 {
    EXTENSION_VERSION
}

#[cfg(test)]
mod tests {
    use super::server_supported;

    #[test]
    fn supported_servers_are_told_from_their_version() {
        for supported in [
            "10.6.0-MariaDB",
            "10.11.19-MariaDB-0+deb12u1",
            "11.4.2-MariaDB-log",
            "8.0.4-rc-log",
            "8.0.46-0ubuntu0.22.04.1",
            "9.7.4",
            "8.0.36-28", // Percona Server
            "5.5.5-10.6.1-MariaDB",
        ] {
            assert!(server_supported(supported), "{supported} refused");
        }
        for refused in [
            "10.5.23-MariaDB",
            "10.3.39-MariaDB-0+deb10u1",
            "5.7.44",
            "8.0.3-rc",
            "8.0.1-dmr",
            "5.5.5-10.1.48-MariaDB", // the prefix old MariaDB releases gave old clients
        ] {
            assert!(!server_supported(refused), "{refused} accepted");
        }
    }

    #[test]
    fn a_version_without_numbers_is_let_through() {
        assert!(server_supported("TiDB"));
        assert!(server_supported(""));
    }
}
