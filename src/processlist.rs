//! The database server's process list, read the one way that works on every supported server:
//! `SHOW FULL PROCESSLIST`, its columns read as bytes.
//!
//! Not `information_schema.PROCESSLIST`: MySQL 9 fails every read of that table (error 3854,
//! "Cannot convert string … from utf8mb4 to utf8mb3") while any connection runs a statement whose
//! text holds bytes that are not UTF-8, and Orbit's own calls are such statements (a credential's
//! SHA-256 hash is a binary parameter, which MySQL shows inlined). The bench's idle check, chaos's
//! connection kills and the tests that watch other connections all read it here.

use sqlx::mysql::MySqlRow;
use sqlx::{Executor, MySqlConnection, Row};

/// One connection of the server's process list.
#[derive(Debug, Clone)]
pub struct Process {
    pub id: u64,
    pub db: Option<String>,
    /// What the connection does (`Query`, `Execute`, `Sleep`, `Daemon`, …).
    pub command: String,
    pub state: String,
    /// The statement it runs, bytes that are not UTF-8 replaced; empty when none.
    pub info: String,
}

impl Process {
    /// Whether the connection is running a statement now.
    pub fn is_running(&self) -> bool {
        matches!(self.command.as_str(), "Query" | "Execute")
    }
}

/// Every connection of the server, the reader's own included (see [`own_id`]).
pub async fn read(conn: &mut MySqlConnection) -> Result<Vec<Process>, sqlx::Error> {
    // Through the connection's `Executor`: with `RawSql::fetch_all`'s bounds, a spawned caller's
    // future fails the compiler's `Send` proof.
    let rows = conn
        .fetch_all(sqlx::raw_sql("SHOW FULL PROCESSLIST"))
        .await?;
    // The text protocol answers every column as text; read them as bytes.
    let text = |r: &MySqlRow, column: &str| -> Result<Option<String>, sqlx::Error> {
        Ok(r.try_get_unchecked::<Option<Vec<u8>>, _>(column)?
            .map(|b| String::from_utf8_lossy(&b).into_owned()))
    };
    rows.iter()
        .map(|r| {
            let id = text(r, "Id")?
                .and_then(|id| id.parse().ok())
                .ok_or_else(|| {
                    sqlx::Error::Decode("SHOW FULL PROCESSLIST: an Id that is not a number".into())
                })?;
            Ok(Process {
                id,
                db: text(r, "db")?,
                command: text(r, "Command")?.unwrap_or_default(),
                state: text(r, "State")?.unwrap_or_default(),
                info: text(r, "Info")?.unwrap_or_default(),
            })
        })
        .collect()
}

/// The reading connection's own id and database, to tell it and its peers from other clients.
pub async fn own_id(conn: &mut MySqlConnection) -> Result<(u64, Option<String>), sqlx::Error> {
    sqlx::query_as("SELECT CONNECTION_ID(), DATABASE()")
        .fetch_one(conn)
        .await
}
