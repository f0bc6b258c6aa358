//! A `serve` child process for end-to-end scenarios (its resident memory is measurable alone).

use std::time::Duration;

use tokio::io::AsyncBufReadExt;

use crate::db::DbError;

pub struct ServeProcess {
    child: tokio::process::Child,
    pub url: String,
}

impl ServeProcess {
    /// Starts `orbit serve` (this binary) against `dsn` on a free loopback port.
    pub async fn start(dsn: &str) -> Result<ServeProcess, DbError> {
        let exe = std::env::current_exe().map_err(|e| DbError::Internal(e.to_string()))?;
        let mut child = tokio::process::Command::new(exe)
            .args(["serve", "--addr", "127.0.0.1:0", "--pool-size", "16"])
            .env("ORBIT_MYSQL_DSN", dsn)
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| DbError::Internal(format!("cannot start serve: {e}")))?;
        let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("piped")).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .map_err(|_| DbError::Internal("serve did not start within 30 s".into()))?
            .map_err(|e| DbError::Internal(e.to_string()))?;
        let url = first
            .as_deref()
            .and_then(|l| l.strip_prefix("listening on "))
            .ok_or_else(|| DbError::Internal(format!("serve did not start: {first:?}")))?
            .to_string();
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(ServeProcess { child, url })
    }

    /// The serve process's id (gone once it exits).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Resident memory of the serve process, in bytes (Linux `/proc`).
    pub fn rss_bytes(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()?)).ok()?;
        let kb: u64 = status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        Some(kb * 1024)
    }
}
