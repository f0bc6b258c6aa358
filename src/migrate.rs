//! `orbit migrate up|status`: installs and upgrades the extension from the numbered migrations.
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
    [(
        "000001_install.sql",
        include_str!("../migrations/000001_install.sql"),
    )]
    .into_iter()
    .map(|(file, text)| {
        Migration::parse(file, text.to_string()).expect("embedded migration names are valid")
    })
    .collect()
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
        "the DSN names no database; add one after the host, e.g. mysql://root@127.0.0.1:3306/orbit"
    )]
    NoDatabase,
    #[error("cannot connect to the database at {target}: {reason}")]
    Connect { target: String, reason: String },
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
    #[error("database error while {doing}: {reason}")]
    Database { doing: &'static str, reason: String },
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

/// Parses a DSN and insists that it names a database.
pub fn parse_dsn(dsn: &str) -> Result<MySqlConnectOptions, MigrateError> {
    let options = MySqlConnectOptions::from_str(dsn).map_err(|e| MigrateError::BadDsn {
        dsn: redact(dsn),
        reason: e.to_string(),
    })?;
    if options.get_database().is_none_or(str::is_empty) {
        return Err(MigrateError::NoDatabase);
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

fn target(options: &MySqlConnectOptions) -> String {
    format!(
        "{}:{}/{}",
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or("")
    )
}

/// Opens one connection for migrating.
pub async fn connect(dsn: &str) -> Result<MySqlConnection, MigrateError> {
    let options = parse_dsn(dsn)?;
    MySqlConnection::connect_with(&options)
        .await
        .map_err(|e| MigrateError::Connect {
            target: target(&options),
            reason: describe(&e),
        })
}

/// Opens a small pool (for `serve`, tests and benchmarks).
pub async fn connect_pool(dsn: &str, max_connections: u32) -> Result<MySqlPool, MigrateError> {
    let options = parse_dsn(dsn)?;
    MySqlPoolOptions::new()
        .max_connections(max_connections)
        .connect_with(options.clone())
        .await
        .map_err(|e| MigrateError::Connect {
            target: target(&options),
            reason: describe(&e),
        })
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

/// Applies every pending migration in order; returns the names applied (empty = already current).
/// `progress` is called before each statement with (migration name, statement index, count).
pub async fn up(
    conn: &mut MySqlConnection,
    migrations: &[Migration],
    mut progress: impl FnMut(&str, usize, usize),
) -> Result<Vec<String>, MigrateError> {
    let got: Option<i64> =
        sqlx::query_scalar("SELECT GET_LOCK(CONCAT('orbit_migrate:', DATABASE()), 30)")
            .fetch_one(&mut *conn)
            .await
            .map_err(db_err("taking the migration lock"))?;
    if got != Some(1) {
        return Err(MigrateError::Locked);
    }
    let result = up_locked(conn, migrations, &mut progress).await;
    let _ = sqlx::query("SELECT RELEASE_LOCK(CONCAT('orbit_migrate:', DATABASE()))")
        .execute(&mut *conn)
        .await;
    result
}

async fn up_locked(
    conn: &mut MySqlConnection,
    migrations: &[Migration],
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
    let mut done = Vec::new();
    for m in migrations.iter().filter(|m| m.version > version) {
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
