//! `orbit dev`: the whole product on one machine with no setup. Without `ORBIT_MYSQL_DSN` it starts
//! a private MariaDB (or MySQL) from the server binary on this machine, with its data under
//! `.orbit/dev/` and a free loopback port; installs the extension; writes a credentials file;
//! serves; and on Ctrl-C stops the server and the database. A second run reuses the data.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::{Connection, MySqlConnection};

/// Why `dev` could not start.
#[derive(Debug, thiserror::Error)]
pub enum DevError {
    #[error(
        "no MySQL/MariaDB server binary found (looked for mariadbd and mysqld on PATH and in /usr/sbin). \
         Install one (Debian/Ubuntu: apt-get install mariadb-server) or point ORBIT_MYSQL_DSN at a server"
    )]
    NoServerBinary,
    #[error("{0}")]
    Setup(String),
    /// Another `orbit dev` holds the directory's lock.
    #[error(
        "another `orbit dev` is running with its private database in {dir}; stop it first, \
         or pass --dir to use another directory"
    )]
    DirInUse { dir: String },
    /// The data directory is locked by a database server this process did not start.
    #[error(
        "the data directory {data} is in use by another database server (an `orbit dev` that was \
         killed may have left its mariadbd/mysqld running: stop that process). The server said: {line} \
         (log: {log})"
    )]
    DataDirLocked {
        data: String,
        line: String,
        log: String,
    },
    /// The server process ended before it answered.
    #[error("the private database exited at once ({status}); the end of {log}:\n{tail}")]
    Exited {
        status: String,
        log: String,
        tail: String,
    },
    #[error("the private database did not answer within {seconds} s; the end of {log}:\n{tail}")]
    NoAnswer {
        seconds: u64,
        log: String,
        tail: String,
    },
    #[error("cannot create the orbit database: {0}")]
    Database(String),
    #[error(transparent)]
    Migrate(#[from] crate::migrate::MigrateError),
}

impl DevError {
    /// The CLI's exit code: 2 for what the operator can fix on this machine (a missing binary, a
    /// directory in use, files), 3 when the database itself failed.
    pub fn exit_code(&self) -> u8 {
        match self {
            DevError::NoServerBinary
            | DevError::Setup(_)
            | DevError::DirInUse { .. }
            | DevError::DataDirLocked { .. } => 2,
            DevError::Exited { .. } | DevError::NoAnswer { .. } | DevError::Database(_) => 3,
            DevError::Migrate(e) => {
                if e.is_usage() {
                    2
                } else {
                    3
                }
            }
        }
    }
}

/// Takes the exclusive lock of `dir` (the file `dir/dev.lock`), held as long as the returned file
/// is open: a second `orbit dev` on the same directory is refused at once instead of starting a
/// second server on the same data.
pub fn lock_dir(dir: &Path) -> Result<std::fs::File, DevError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| DevError::Setup(format!("cannot create {}: {e}", dir.display())))?;
    let path = dir.join("dev.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| DevError::Setup(format!("cannot open {}: {e}", path.display())))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(DevError::DirInUse {
            dir: dir.display().to_string(),
        }),
        Err(std::fs::TryLockError::Error(e)) => Err(DevError::Setup(format!(
            "cannot lock {}: {e}",
            path.display()
        ))),
    }
}

/// What the server logged from byte `from` of `log` on.
fn log_since(log: &Path, from: u64) -> String {
    use std::io::{Read, Seek};
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(log) {
        if f.seek(std::io::SeekFrom::Start(from)).is_ok() {
            let mut bytes = Vec::new();
            let _ = f.read_to_end(&mut bytes);
            text = String::from_utf8_lossy(&bytes).into_owned();
        }
    }
    text
}

/// The last `n` lines of `text`, indented, for an error message.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(n);
    if lines.is_empty() {
        return "  (the log is empty)".into();
    }
    lines[start..]
        .iter()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The line of a server log saying that another server holds the data directory's locks
/// (MariaDB's Aria control file, InnoDB's ibdata1): such a server retries for 30 s before it
/// gives up, so the caller stops it at once instead.
fn lock_refusal(log: &str) -> Option<String> {
    log.lines()
        .find(|l| {
            l.contains("Can't lock aria control file")
                || l.contains("Unable to lock ./ibdata1")
                || (l.contains("InnoDB") && l.contains("Unable to lock"))
        })
        .map(|l| l.trim().to_string())
}

/// A private database server owned by this process; stopped when dropped.
pub struct PrivateServer {
    child: Child,
    pub dsn: String,
    /// The loopback port it listens on (a restart on the same port keeps clients' DSNs valid).
    pub port: u16,
    /// The server's error log, and where this start's lines begin in it.
    pub log: PathBuf,
    log_from: u64,
}

impl PrivateServer {
    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resolves when the server process has ended, with a message naming its exit status and the
    /// end of its log (polled every 250 ms): `orbit dev` stops with it instead of answering 503
    /// for ever.
    pub async fn exited(&mut self) -> String {
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return format!(
                    "the private database stopped ({status}); the end of {}:\n{}",
                    self.log.display(),
                    tail(&log_since(&self.log, self.log_from), 10)
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// SIGKILL, as a crash would: no clean InnoDB shutdown (fault injection).
    pub fn crash(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return; // already gone (crashed on purpose, or exited)
        }
        // SIGTERM lets InnoDB shut down cleanly; wait for it.
        #[cfg(unix)]
        {
            let _ = Command::new("kill")
                .args(["-TERM", &self.child.id().to_string()])
                .status();
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The first of `names` on `PATH`, or in `/usr/sbin` and `/usr/local/sbin`.
pub fn find_binary(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in names {
        for dir in std::env::split_paths(&path)
            .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/local/sbin")])
        {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    None
}

/// A free loopback port.
pub fn free_port() -> Result<u16, DevError> {
    let l = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| DevError::Setup(format!("no free loopback port: {e}")))?;
    Ok(l.local_addr()
        .map_err(|e| DevError::Setup(e.to_string()))?
        .port())
}

/// Whether this process runs as root (the servers then need `--user=root`).
pub fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// Creates a fresh data directory `data` with the machine's initialiser (`mariadb-install-db`, or
/// `mysqld --initialize-insecure`): root on loopback with no password. A failed attempt leaves no
/// half-initialised directory behind. The initialiser runs a server too, which at startup deletes
/// every `#sql*` file in its tmpdir: it gets `tmp` beside `data`, never a /tmp another
/// initialiser is using.
pub fn initialise_data_dir(data: &Path) -> Result<(), DevError> {
    let server = find_binary(&["mariadbd", "mysqld"]).ok_or(DevError::NoServerBinary)?;
    let tmp = data
        .parent()
        .map(|p| p.join("tmp"))
        .unwrap_or_else(|| PathBuf::from("tmp"));
    std::fs::create_dir_all(&tmp)
        .map_err(|e| DevError::Setup(format!("cannot create the initialiser's tmpdir: {e}")))?;
    let is_mariadb = server.file_name().is_some_and(|n| n == "mariadbd");
    let root = running_as_root();
    let mut cmd = if is_mariadb {
        let install =
            find_binary(&["mariadb-install-db", "mysql_install_db"]).ok_or_else(|| {
                DevError::Setup("mariadb-install-db not found next to mariadbd".into())
            })?;
        let mut cmd = Command::new(install);
        cmd.args([
            "--no-defaults",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
        ]);
        cmd
    } else {
        let mut cmd = Command::new(&server);
        cmd.args(["--no-defaults", "--initialize-insecure"]);
        cmd
    };
    cmd.arg(format!("--datadir={}", data.display()))
        .arg(format!("--tmpdir={}", tmp.display()));
    if root {
        cmd.arg("--user=root");
    }
    let status = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| DevError::Setup(format!("cannot run the database initialiser: {e}")))?;
    if !status.status.success() {
        let _ = std::fs::remove_dir_all(data);
        return Err(DevError::Setup(format!(
            "initialising the database failed: {}",
            String::from_utf8_lossy(&status.stderr)
        )));
    }
    Ok(())
}

/// Starts (initialising on first use) a private server with its data under `dir`.
pub async fn start_private_server(dir: &Path) -> Result<PrivateServer, DevError> {
    start_private_server_on(dir, None).await
}

/// [`start_private_server`] on a chosen port (`None`: a free one).
pub async fn start_private_server_on(
    dir: &Path,
    port: Option<u16>,
) -> Result<PrivateServer, DevError> {
    let server = find_binary(&["mariadbd", "mysqld"]).ok_or(DevError::NoServerBinary)?;
    let data = dir.join("data");
    let setup = |what: &str, e: std::io::Error| DevError::Setup(format!("{what}: {e}"));
    std::fs::create_dir_all(dir).map_err(|e| setup("cannot create .orbit/dev", e))?;
    let data = std::fs::canonicalize(dir)
        .map_err(|e| setup("cannot resolve .orbit/dev", e))?
        .join(data.file_name().unwrap());
    let dir = data.parent().unwrap().to_path_buf();
    let root = running_as_root();
    if !data.join("mysql").exists() {
        eprintln!("dev: initialising a private database in {}", data.display());
        initialise_data_dir(&data)?;
    }
    let port = match port {
        Some(p) => p,
        None => free_port()?,
    };
    // A temporary directory of its own: a server starting up deletes every `#sql*` file in its
    // tmpdir, and in a shared /tmp those are another server's temporary tables in use.
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).map_err(|e| setup("cannot create the database's tmpdir", e))?;
    let mut cmd = Command::new(&server);
    cmd.arg("--no-defaults")
        .arg(format!("--datadir={}", data.display()))
        .arg(format!("--tmpdir={}", tmp.display()))
        .arg(format!("--port={port}"))
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--socket={}", dir.join("mysqld.sock").display()))
        .arg(format!("--pid-file={}", dir.join("mysqld.pid").display()))
        .arg(format!("--log-error={}", dir.join("mysqld.log").display()))
        .arg("--skip-name-resolve")
        .arg("--character-set-server=utf8mb4");
    if root {
        cmd.arg("--user=root");
    }
    // Where this start's lines begin, read before the server can write any.
    let log = dir.join("mysqld.log");
    let log_from = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| setup("cannot start the database", e))?;
    let mut server = PrivateServer {
        child,
        dsn: format!("mysql://root@127.0.0.1:{port}"),
        port,
        log: log.clone(),
        log_from,
    };
    let wait = Duration::from_secs(60);
    let deadline = Instant::now() + wait;
    loop {
        if let Ok(mut c) = MySqlConnection::connect(&server.dsn).await {
            sqlx::raw_sql("CREATE DATABASE IF NOT EXISTS orbit CHARACTER SET utf8mb4")
                .execute(&mut c)
                .await
                .map_err(|e| DevError::Database(crate::migrate::describe(&e)))?;
            let _ = c.close().await;
            break;
        }
        // Whether it exited, then what it logged: a server that wrote and exited in between is
        // reported with its last lines.
        let exited = server.child.try_wait();
        let logged = log_since(&log, log_from);
        if let Ok(Some(status)) = exited {
            if let Some(line) = lock_refusal(&logged) {
                return Err(DevError::DataDirLocked {
                    data: data.display().to_string(),
                    line,
                    log: log.display().to_string(),
                });
            }
            return Err(DevError::Exited {
                status: status.to_string(),
                log: log.display().to_string(),
                tail: tail(&logged, 10),
            });
        }
        if let Some(line) = lock_refusal(&logged) {
            server.crash(); // it would retry for 30 s, then exit
            return Err(DevError::DataDirLocked {
                data: data.display().to_string(),
                line,
                log: log.display().to_string(),
            });
        }
        if Instant::now() > deadline {
            server.crash();
            return Err(DevError::NoAnswer {
                seconds: wait.as_secs(),
                log: log.display().to_string(),
                tail: tail(&logged, 10),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.dsn.push_str("/orbit");
    Ok(server)
}
