//! Test harness: a fresh, uniquely named database per test, with the extension installed through
//! the real migrate code, dropped again when the test ends (also when it panics). Tests therefore
//! run in parallel and never see each other's rows.
//!
//! The server comes from `ORBIT_TEST_MYSQL_DSN` (default `mysql://root@127.0.0.1:3306`).

use sqlx::mysql::MySqlPoolOptions;
use sqlx::{Connection, MySqlConnection, MySqlPool};

use crate::migrate;

/// The server tests create their databases on.
pub fn server_dsn() -> String {
    std::env::var("ORBIT_TEST_MYSQL_DSN")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".to_string())
}

/// Runs the `orbit` binary (tests pass `env!("CARGO_BIN_EXE_orbit")`) with `args`, in `cwd` when
/// given, and returns its exit code, stdout and stderr. The test's own `ORBIT_MYSQL_DSN` and
/// `ORBIT_HTTP_ADDR` never leak into it; `env` sets what the command should see (applied last,
/// after `RUST_LOG=warn`).
pub fn run_cli(
    binary: &str,
    args: &[&str],
    env: &[(&str, &str)],
    cwd: Option<&std::path::Path>,
) -> (i32, String, String) {
    let mut cmd = std::process::Command::new(binary);
    cmd.args(args)
        .env_remove("ORBIT_MYSQL_DSN")
        .env_remove("ORBIT_HTTP_ADDR")
        .env("RUST_LOG", "warn")
        .envs(env.iter().copied());
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("run {binary}: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// [`run_cli`] against `dsn`, which must succeed; returns its stdout.
pub fn run_cli_ok(binary: &str, args: &[&str], dsn: &str) -> String {
    let (code, out, err) = run_cli(binary, args, &[("ORBIT_MYSQL_DSN", dsn)], None);
    assert_eq!(code, 0, "orbit {args:?} exited {code}:\n{out}{err}");
    out
}

/// A database that exists for one test.
pub struct TestDb {
    pub name: String,
    /// DSN of this database (server DSN + `/name`).
    pub dsn: String,
    pub pool: MySqlPool,
}

impl TestDb {
    /// Creates an empty database (no extension installed).
    pub async fn empty() -> TestDb {
        let server = server_dsn();
        let name = format!("orbit_t_{}", hex::encode(rand::random::<[u8; 6]>()));
        let mut admin = MySqlConnection::connect(&server)
            .await
            .unwrap_or_else(|e| panic!("test MariaDB at {server} is not reachable ({e}); start it or set ORBIT_TEST_MYSQL_DSN"));
        sqlx::raw_sql(&format!(
            "CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci"
        ))
        .execute(&mut admin)
        .await
        .expect("create test database");
        let _ = admin.close().await;
        let dsn = format!("{}/{name}", server.trim_end_matches('/'));
        let pool = MySqlPoolOptions::new()
            .max_connections(4)
            .connect(&dsn)
            .await
            .expect("connect to test database");
        TestDb { name, dsn, pool }
    }

    /// Creates a database and installs the extension with `migrate up`.
    pub async fn installed() -> TestDb {
        let db = TestDb::empty().await;
        let mut conn = db.conn().await;
        migrate::up_embedded(&mut conn).await.expect("migrate up");
        let _ = conn.close().await;
        db
    }

    /// True (after saying so) when the test server is not MariaDB: for a test of what only
    /// MariaDB runs, the frozen 0.1.0 migration above all.
    pub async fn skip_unless_mariadb(&self, why: &str) -> bool {
        let server: String = sqlx::query_scalar("SELECT VERSION()")
            .fetch_one(&self.pool)
            .await
            .expect("read the server version");
        let skip = !server.contains("MariaDB");
        if skip {
            eprintln!("skipped on {server}: {why}");
        }
        skip
    }

    /// A dedicated connection to this database (outside the pool).
    pub async fn conn(&self) -> MySqlConnection {
        MySqlConnection::connect(&self.dsn)
            .await
            .expect("connect to test database")
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // Drop runs outside async context; use a short-lived runtime on its own thread so it works
        // whether or not the test's runtime is still alive.
        let server = server_dsn();
        let name = self.name.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(async move {
                let mut admin = MySqlConnection::connect(&server).await.ok()?;
                sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS `{name}`"))
                    .execute(&mut admin)
                    .await
                    .ok()?;
                admin.close().await.ok()
            })
        })
        .join();
    }
}

/// Some of one connection's session status counters (e.g. `Handler_read_next`: index entries
/// read; `Com_call_procedure`: procedures called, nested calls included), counted from a start:
/// [`Counters::start`] before what is measured, [`Counters::since`] after, on the same connection.
/// Not `FLUSH STATUS`: on MySQL (its Performance Schema on) that resets every session's counters,
/// a concurrent test's among them.
pub struct Counters {
    start: std::collections::HashMap<String, u64>,
}

impl Counters {
    /// Reads `names` on `conn`: what they count from here on is what [`Counters::since`] answers.
    pub async fn start(conn: &mut MySqlConnection, names: &[&str]) -> Counters {
        Counters {
            start: read_counters(conn, names.iter().map(|n| n.to_string()).collect()).await,
        }
    }

    /// What each counter counted on `conn` since [`Counters::start`], by name.
    pub async fn since(
        &self,
        conn: &mut MySqlConnection,
    ) -> std::collections::HashMap<String, u64> {
        let now = read_counters(conn, self.start.keys().cloned().collect()).await;
        now.into_iter()
            .map(|(name, value)| {
                let since = value
                    .checked_sub(self.start[&name])
                    .unwrap_or_else(|| panic!("{name} went down: something reset the counters"));
                (name, since)
            })
            .collect()
    }
}

/// The session status counters `names` of `conn`, read by one statement.
async fn read_counters(
    conn: &mut MySqlConnection,
    names: Vec<String>,
) -> std::collections::HashMap<String, u64> {
    for name in &names {
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "a status variable name: {name}"
        );
    }
    let list = names
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let rows: Vec<(String, String)> = sqlx::query_as(&format!(
        "SHOW SESSION STATUS WHERE Variable_name IN ({list})"
    ))
    .fetch_all(conn)
    .await
    .expect("SHOW SESSION STATUS");
    let values: std::collections::HashMap<String, u64> = rows
        .into_iter()
        .map(|(name, value)| (name, value.parse().expect("a counter")))
        .collect();
    // The server answers its own spelling of each name; every name asked must be there.
    names
        .into_iter()
        .map(|name| {
            let value = values
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(&name))
                .map(|(_, v)| *v)
                .unwrap_or_else(|| panic!("no session status counter {name}"));
            (name, value)
        })
        .collect()
}

/// A test database with the extension installed and one tenant bootstrapped: an application,
/// environment, namespace, queue and a credential holding every scope.
pub struct Fixture {
    pub test_db: TestDb,
    pub db: crate::db::Db,
    pub token: String,
    pub hash: [u8; 32],
    pub queue_id: String,
    pub namespace_id: u64,
    pub application_id: u64,
}

/// Every credential scope.
pub const ALL_SCOPES: [&str; 6] = [
    "queues:manage",
    "tasks:submit",
    "tasks:read",
    "workers:connect",
    "workers:consume",
    "metrics:read",
];

impl Fixture {
    /// A `Db` over a pool of its own with up to `connections` connections: a stress run's
    /// concurrent clients, each on a connection of its own.
    pub async fn own_pool(&self, connections: u32) -> crate::db::Db {
        let pool = sqlx::mysql::MySqlPoolOptions::new()
            .max_connections(connections)
            .connect(&self.test_db.dsn)
            .await
            .expect("a stress pool");
        crate::db::Db::new(pool)
    }

    pub async fn new() -> Fixture {
        Fixture::with_queue_id(&crate::auth::new_queue_id()).await
    }

    /// Another queue in the same namespace.
    pub async fn queue(&self, name: &str) -> String {
        self.db
            .queue_create(&self.hash, None, name, None, None)
            .await
            .expect("queue create")
            .id
    }

    /// A minimal task for `queue_id` with `key` ("" = none).
    pub fn task(&self, queue_id: &str, key: &str) -> crate::db::tasks::NewTask {
        crate::db::tasks::NewTask {
            queue_id: queue_id.to_string(),
            handler: "test.handler".into(),
            handler_version: "v1".into(),
            payload_version: "v1".into(),
            payload: "{}".into(),
            concurrency_key: Some(key.to_string()),
            ..Default::default()
        }
    }

    /// Submits a fresh task (random Idempotency-Key).
    pub async fn submit(&self, queue_id: &str, key: &str) -> crate::db::tasks::Task {
        self.submit_task(&self.task(queue_id, key)).await
    }

    pub async fn submit_task(&self, t: &crate::db::tasks::NewTask) -> crate::db::tasks::Task {
        let idem = format!("idem-{}", hex::encode(rand::random::<[u8; 8]>()));
        self.db
            .task_submit(&self.hash, &idem, t)
            .await
            .expect("submit")
            .task
    }

    /// Opens a worker session on `queues`.
    pub async fn session(&self, worker_id: &str, concurrency_keys: bool, queues: &[&str]) -> u64 {
        self.db
            .session_open(
                &self.hash,
                &crate::db::workers::SessionOpen {
                    worker_id: worker_id.into(),
                    node: "test".into(),
                    capacity: 100,
                    concurrency_keys,
                    queue_ids: queues.iter().map(|q| q.to_string()).collect(),
                    ..Default::default()
                },
            )
            .await
            .expect("session open")
            .session_id
    }

    /// Makes an attempt's lease (and so its permits) already expired: a deterministic clock jump.
    pub async fn expire_lease(&self, attempt_id: u64) {
        sqlx::query(
            "UPDATE orbit_attempt SET lease_expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE id = ?",
        )
        .bind(attempt_id)
        .execute(&self.test_db.pool)
        .await
        .expect("expire lease");
    }

    /// Makes a scheduled task due now (a deterministic clock jump past its backoff).
    pub async fn make_due(&self, task_id: u64) {
        sqlx::query(
            "UPDATE orbit_task SET run_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE id = ?",
        )
        .bind(task_id)
        .execute(&self.test_db.pool)
        .await
        .expect("make due");
    }

    /// Puts a task's total deadline a second behind it (a deterministic clock jump).
    pub async fn pass_deadline(&self, task_id: u64) {
        sqlx::query(
            "UPDATE orbit_task SET deadline_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE id = ?",
        )
        .bind(task_id)
        .execute(&self.test_db.pool)
        .await
        .expect("pass deadline");
    }

    /// The dispatch lane of a task (white-box: proves where blocked tasks sit).
    pub async fn lane(&self, task_id: u64) -> String {
        let lane: Vec<u8> =
            sqlx::query_scalar("SELECT CAST(lane AS BINARY) FROM orbit_task WHERE id = ?")
                .bind(task_id)
                .fetch_one(&self.test_db.pool)
                .await
                .expect("lane");
        String::from_utf8(lane).expect("utf8")
    }

    /// 20,000 copies of task `model`, each with an Idempotency-Key of its own (bulk SQL: test
    /// setup, not the behaviour under test). `set` replaces columns by SQL expressions, which may
    /// use the copy's number `n.i` (1 to 20,000), e.g. `("lane", "'blocked'")`.
    pub async fn copies(&self, model: u64, set: &[(&str, &str)]) {
        let kept: String = sqlx::query_scalar(
            "SELECT GROUP_CONCAT(column_name ORDER BY ordinal_position) FROM information_schema.columns
              WHERE table_schema = DATABASE() AND table_name = 'orbit_task'
                AND column_name NOT IN ('id', 'idempotency_key')",
        )
        .fetch_one(&self.test_db.pool)
        .await
        .expect("orbit_task's columns");
        let kept: Vec<&str> = kept
            .split(',')
            .filter(|c| set.iter().all(|(name, _)| name != c))
            .collect();
        let columns = kept
            .iter()
            .copied()
            .chain(set.iter().map(|(name, _)| *name))
            .collect::<Vec<_>>()
            .join(", ");
        let values = kept
            .iter()
            .map(|c| format!("t.{c}"))
            .chain(set.iter().map(|(_, value)| value.to_string()))
            .collect::<Vec<_>>()
            .join(", ");
        let digit =
            "(SELECT 0 AS x UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL \
                      SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL \
                      SELECT 8 UNION ALL SELECT 9)";
        let copied = sqlx::raw_sql(&format!(
            "INSERT INTO orbit_task ({columns}, idempotency_key) \
             SELECT {values}, CONCAT('copy-', n.i) \
               FROM orbit_task t \
               JOIN (SELECT 1 + a.x + 10 * b.x + 100 * c.x + 1000 * d.x + 10000 * e.x AS i \
                       FROM {digit} a, {digit} b, {digit} c, {digit} d, {digit} e) n \
              WHERE t.id = {model} AND n.i <= 20000"
        ))
        .execute(&self.test_db.pool)
        .await
        .expect("copies of a task");
        assert_eq!(copied.rows_affected(), 20_000, "copies of task {model}");
    }

    /// The incomplete tasks the application is charged for: the sum over its quota slots (a
    /// slot's own counter may go below zero; only the sum has a meaning).
    pub async fn incomplete_tasks(&self) -> i64 {
        sqlx::query_scalar(
            "SELECT CAST(SUM(incomplete_tasks) AS SIGNED) FROM orbit_application_quota",
        )
        .fetch_one(&self.test_db.pool)
        .await
        .expect("incomplete tasks")
    }
}

/// A spawned `orbit serve` process on a free port, killed when dropped.
pub struct Server {
    child: tokio::process::Child,
    /// `http://127.0.0.1:PORT`
    pub url: String,
    /// What the server wrote to stderr so far is kept in this file (for failing tests).
    pub log: std::path::PathBuf,
}

impl Server {
    /// Starts `binary serve` against `dsn` and waits until it listens.
    pub async fn start(binary: &str, dsn: &str) -> Server {
        Self::try_start(binary, dsn)
            .await
            .unwrap_or_else(|e| panic!("orbit serve did not start: {e}"))
    }

    /// Like [`Server::start`], returning the server's error output when it exits instead.
    pub async fn try_start(binary: &str, dsn: &str) -> Result<Server, String> {
        Self::try_start_at(binary, dsn, "127.0.0.1:0").await
    }

    /// Starts on a chosen address (to restart a server where its clients expect it).
    pub async fn start_at(binary: &str, dsn: &str, addr: &str) -> Server {
        Self::try_start_at(binary, dsn, addr)
            .await
            .unwrap_or_else(|e| panic!("orbit serve did not start: {e}"))
    }

    /// Starts `binary serve` with extra `serve` arguments (e.g. `--max-connections 8`).
    pub async fn start_with_args(binary: &str, dsn: &str, args: &[&str]) -> Server {
        Self::try_start_with(binary, dsn, "127.0.0.1:0", args)
            .await
            .unwrap_or_else(|e| panic!("orbit serve did not start: {e}"))
    }

    /// Starts `binary serve` with extra arguments and `RUST_LOG` (e.g. `info` for the access log,
    /// which goes to [`Server::log`]).
    pub async fn start_logging(binary: &str, dsn: &str, args: &[&str], rust_log: &str) -> Server {
        Self::spawn(binary, dsn, "127.0.0.1:0", args, rust_log)
            .await
            .unwrap_or_else(|e| panic!("orbit serve did not start: {e}"))
    }

    /// The server's process id (to look at its open file descriptors).
    pub fn pid(&self) -> u32 {
        self.child.id().expect("the server is running")
    }

    async fn try_start_at(binary: &str, dsn: &str, addr: &str) -> Result<Server, String> {
        Self::try_start_with(binary, dsn, addr, &[]).await
    }

    async fn try_start_with(
        binary: &str,
        dsn: &str,
        addr: &str,
        extra: &[&str],
    ) -> Result<Server, String> {
        Self::spawn(binary, dsn, addr, extra, "warn").await
    }

    async fn spawn(
        binary: &str,
        dsn: &str,
        addr: &str,
        extra: &[&str],
        rust_log: &str,
    ) -> Result<Server, String> {
        use tokio::io::AsyncBufReadExt;
        let log = std::env::temp_dir().join(format!(
            "orbit-serve-{}.log",
            hex::encode(rand::random::<[u8; 6]>())
        ));
        let mut child = tokio::process::Command::new(binary)
            .args(["serve", "--addr", addr, "--pool-size", "8"])
            .args(extra)
            .env("ORBIT_MYSQL_DSN", dsn)
            .env("RUST_LOG", rust_log)
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(&log).map_err(|e| e.to_string())?)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| e.to_string())?;
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let first = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
            .await
            .map_err(|_| "timed out waiting for `listening on`".to_string())?
            .map_err(|e| e.to_string())?;
        match first
            .as_deref()
            .and_then(|l| l.strip_prefix("listening on "))
        {
            Some(url) => {
                // Keep draining stdout so the child never blocks on a full pipe.
                tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
                Ok(Server {
                    child,
                    url: url.to_string(),
                    log,
                })
            }
            None => {
                let _ = child.wait().await;
                Err(std::fs::read_to_string(&log).unwrap_or_default())
            }
        }
    }

    /// Kills the process at once (SIGKILL), like a crash.
    pub async fn kill(mut self) {
        let _ = self.child.kill().await;
    }

    /// Sends SIGTERM and waits for a graceful exit.
    pub async fn stop(mut self) -> std::process::ExitStatus {
        #[cfg(unix)]
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        self.child.wait().await.expect("wait for orbit serve")
    }
}

/// The log goes with a server that passed; a failing test's stays for reading.
impl Drop for Server {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

impl Fixture {
    /// Like [`Fixture::new`] with a chosen id for the first queue (e.g. the design note's example).
    pub async fn with_queue_id(queue_id: &str) -> Fixture {
        let test_db = TestDb::installed().await;
        let db = crate::db::Db::new(test_db.pool.clone());
        let (mut bootstrap, token) = crate::db::queues::Bootstrap::with_new_token(
            "app",
            "test",
            "default",
            "q1",
            &ALL_SCOPES,
            "fixture",
        );
        bootstrap.new_queue_id = Some(queue_id.to_string());
        let hash = crate::auth::token_hash(&token);
        let b = db.admin_bootstrap(&bootstrap).await.expect("bootstrap");
        Fixture {
            test_db,
            db,
            token,
            hash,
            queue_id: b.queue_id,
            namespace_id: b.namespace_id,
            application_id: b.application_id,
        }
    }

    /// A new credential in this tenant's namespace with only `scopes`; returns its token.
    pub async fn credential(&self, scopes: &[&str]) -> String {
        let token = crate::auth::generate_token();
        self.db
            .admin_bootstrap(&crate::db::queues::Bootstrap {
                application: "app".into(),
                environment: "test".into(),
                namespace: "default".into(),
                queue: "q1".into(),
                token_hash: crate::auth::token_hash(&token).to_vec(),
                token_hint: crate::auth::token_hint(&token),
                scopes: scopes.iter().map(|s| s.to_string()).collect(),
                label: "fixture".into(),
                ..Default::default()
            })
            .await
            .expect("credential");
        token
    }
}

impl TestDb {
    /// An empty database with the resource-side fence installed from `generated-sql/fence/install.sql`.
    pub async fn fenced() -> TestDb {
        let db = TestDb::empty().await;
        db.install_fence().await;
        db
    }

    /// Installs the resource-side fence (`generated-sql/fence/install.sql`) in this database, beside
    /// whatever it holds: tests whose resource and Orbit share a database.
    pub async fn install_fence(&self) {
        let script = crate::codegen::render().expect("render").files
            [std::path::Path::new("generated-sql/fence/install.sql")]
        .clone();
        let mut conn = self.conn().await;
        for s in crate::sqlscript::split(&script) {
            sqlx::raw_sql(&s.sql)
                .execute(&mut conn)
                .await
                .unwrap_or_else(|e| panic!("fence install line {}: {e}", s.line));
        }
        let _ = conn.close().await;
    }
}

/// Waits (polling every 50 ms) until no task of the database is unfinished; panics with the count
/// still open after `within`. A stress run's drain.
pub async fn until_every_task_ended(pool: &sqlx::MySqlPool, within: std::time::Duration) {
    let started = std::time::Instant::now();
    loop {
        let open: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM orbit_task WHERE state NOT IN ('SUCCEEDED','FAILED','CANCELLED','EXPIRED')",
        )
        .fetch_one(pool)
        .await
        .expect("count open tasks");
        if open == 0 {
            return;
        }
        assert!(started.elapsed() < within, "{open} tasks still open");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The seed of a stress run: `ORBIT_STRESS_SEED`, or a random one. Printed, so a failing run can
/// be repeated with it.
pub fn stress_seed() -> u64 {
    let seed = std::env::var("ORBIT_STRESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("stress seed {seed}");
    seed
}

/// A stress run's producers: `submitters` tasks, each submitting, until `duration` has passed, the
/// task `make` draws from its own generator (seeded from `seed`), each with an Idempotency-Key of
/// its own, and pausing up to `max_pause_ms` after each. Returns every accepted task's id, sorted.
pub async fn submit_for<F>(
    db: &crate::db::Db,
    hash: [u8; 32],
    submitters: u64,
    seed: u64,
    duration: std::time::Duration,
    max_pause_ms: u64,
    make: F,
) -> Vec<u64>
where
    F: Fn(&mut rand::rngs::StdRng) -> crate::db::tasks::NewTask + Clone + Send + 'static,
{
    use rand::{Rng, SeedableRng};
    let started = std::time::Instant::now();
    let mut handles = Vec::new();
    for part in 0..submitters {
        let (db, make) = (db.clone(), make.clone());
        handles.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ part);
            let mut accepted = Vec::new();
            let mut i = 0;
            while started.elapsed() < duration {
                i += 1;
                let t = make(&mut rng);
                let s = db
                    .task_submit(&hash, &format!("s-{part}-{i}"), &t)
                    .await
                    .expect("submit");
                accepted.push(s.task.id);
                let pause = rng.gen_range(0..max_pause_ms.max(1));
                tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
            }
            accepted
        }));
    }
    let mut accepted = Vec::new();
    for h in handles {
        accepted.extend(h.await.expect("a submitter"));
    }
    accepted.sort_unstable();
    accepted
}
