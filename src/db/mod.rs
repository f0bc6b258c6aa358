//! Typed calls into the stored procedures: one async function per procedure, typed parameters and
//! result structs. Business rules live in the procedures; this layer only binds arguments, reads
//! the one result set by position, and maps errors ([`error`]).
//!
//! Result columns are read by position, in the order each procedure's header documents: sqlx
//! prepares `CALL` statements, and a prepared `CALL` carries no column names.

pub mod attempts;
pub mod credentials;
pub mod error;
pub mod keys;
pub mod maintenance;
pub mod metrics;
pub mod plans;
pub mod queues;
pub mod tasks;
pub mod workers;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, NaiveDateTime, Utc};
use sqlx::mysql::{MySqlArguments, MySqlRow};
use sqlx::pool::PoolConnection;
use sqlx::query::Query;
use sqlx::{Connection, MySql, MySqlConnection, MySqlPool, Row};

pub use error::DbError;
use error::{classify, Classified};

/// How many times a call rolled back by a deadlock or lock-wait timeout is tried again. Claims
/// racing for the same ready rows deadlock in bursts under load (the stress test saw 9 in a row on
/// a saturated 2-core machine); with the capped exponential backoff below, 16 tries wait at most
/// about 1.5 s in all before the call answers 503.
const RETRIES: u32 = 16;

/// Deadlocks and lock-wait timeouts retried so far by this process (stress tests report it).
pub static RETRIED: AtomicU64 = AtomicU64::new(0);

/// Times this process moved its calls to the next server of its DSN list.
pub static FAILOVERS: AtomicU64 = AtomicU64::new(0);

/// Connections this process's pools opened (a connection's setup costs the server more than a
/// call: tests check that calls reuse them).
pub static CONNECTIONS_OPENED: AtomicU64 = AtomicU64::new(0);

/// How many connections [`Db`] keeps per server between calls, outside its pool (see
/// [`Db::call`]): a server's connections number at most `--pool-size` plus these.
pub const KEPT_PER_SERVER: usize = 2;

/// The longest one attempt of a call may take: getting a connection (a kept one, pinged after a
/// second idle, or one from the pool), sending the `CALL` and reading its whole answer. Past it
/// the call answers 503 and its connection is closed, so a stalled database costs a request at
/// most this long, and a late answer is never read by anyone.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(3);

/// The longest the ping of a connection idle for [`crate::migrate::PING_AFTER_IDLE`] may take.
pub const PING_TIMEOUT: Duration = Duration::from_secs(1);

/// A handle on the database: a connection pool per server, the server in use, and the typed
/// procedure calls.
///
/// Usually there is one server. With a DSN list (the servers of one Galera cluster, see
/// docs/operations.md) every call goes to the *current* server only, so the cluster has a single
/// writer. When a call finds the current server gone (connection refused or lost, shutdown, a
/// Galera node outside the primary component, or no connection within the pool's acquire timeout
/// and a failed [`crate::migrate::probe`]), that call fails with `Unavailable` (503; clients
/// retry) and the current server becomes the next one of the list, so the following calls go to
/// a survivor. There is no fail-back: a server is left only when it fails.
#[derive(Clone, Debug)]
pub struct Db {
    servers: Arc<Servers>,
}

#[derive(Debug)]
struct Servers {
    pools: Vec<MySqlPool>,
    /// Per server, the connections kept between calls, most recently used last (see
    /// [`Db::call`]). They are detached from the pool, so closing the pool never waits for them.
    kept: Vec<Mutex<Vec<Kept>>>,
    /// Per server, how many detached connections are open: kept, or out for a call. At most
    /// [`KEPT_PER_SERVER`], so a kept connection always has room to come back (see
    /// [`Db::give_back`]).
    detached: Vec<Arc<AtomicUsize>>,
    /// Index into `pools` of the server calls go to.
    current: AtomicUsize,
    /// A probe of the current server is running (one at a time).
    probing: AtomicBool,
    /// Connections closed because their call did not finish cleanly (cancelled, timed out,
    /// lost, or an answer of the wrong shape): none of them was used again.
    discarded: Arc<AtomicU64>,
}

/// A connection kept between calls, and when its last call ended.
#[derive(Debug)]
struct Kept {
    conn: MySqlConnection,
    since: Instant,
}

/// A connection out for one call: from the pool or from the kept ones.
enum Conn {
    Pooled(PoolConnection<MySql>),
    Kept(MySqlConnection),
}

/// A connection checked out for one call. Only [`Db::give_back`] returns it for reuse; dropped
/// any other way (the call's future was cancelled because its client gave up or its time ran
/// out, or the call failed in a way that leaves the connection's state unknown) it is closed.
/// sqlx does not track every answer a connection still owes (a ping's, a prepare's): a
/// connection reused after an interrupted call can hand that call's late answer to the next
/// caller, which is how one tenant was once shown another's task (sqlx issue 563).
struct Checkout {
    conn: Option<Conn>,
    discarded: Arc<AtomicU64>,
    /// The server's count of detached connections ([`Servers::detached`]).
    detached: Arc<AtomicUsize>,
}

impl Checkout {
    fn conn(&mut self) -> &mut MySqlConnection {
        match self
            .conn
            .as_mut()
            .expect("a checkout holds its connection until given back")
        {
            Conn::Pooled(c) => c,
            Conn::Kept(c) => c,
        }
    }
}

impl Drop for Checkout {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.discarded.fetch_add(1, Ordering::Relaxed);
            match conn {
                // Detached, the pool may open a replacement; dropped, the socket closes at once
                // (no QUIT, nothing more read or written on it).
                Conn::Pooled(c) => drop(c.detach()),
                Conn::Kept(c) => {
                    drop(c);
                    self.detached.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
    }
}

/// One argument of a procedure call.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Arg<'a> {
    Null,
    U64(u64),
    I64(i64),
    Text(&'a str),
    Bytes(&'a [u8]),
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(v: &'a str) -> Self {
        Arg::Text(v)
    }
}
impl<'a> From<Option<&'a str>> for Arg<'a> {
    fn from(v: Option<&'a str>) -> Self {
        v.map_or(Arg::Null, Arg::Text)
    }
}
impl From<u64> for Arg<'_> {
    fn from(v: u64) -> Self {
        Arg::U64(v)
    }
}
impl From<Option<i64>> for Arg<'_> {
    fn from(v: Option<i64>) -> Self {
        v.map_or(Arg::Null, Arg::I64)
    }
}
impl From<bool> for Arg<'_> {
    fn from(v: bool) -> Self {
        Arg::I64(i64::from(v))
    }
}

fn bind<'q>(q: Query<'q, MySql, MySqlArguments>, arg: Arg<'q>) -> Query<'q, MySql, MySqlArguments> {
    match arg {
        Arg::Null => q.bind(Option::<String>::None),
        Arg::U64(v) => q.bind(v),
        Arg::I64(v) => q.bind(v),
        Arg::Text(v) => q.bind(v),
        Arg::Bytes(v) => q.bind(v),
    }
}

impl Db {
    /// A handle on one server.
    pub fn new(pool: MySqlPool) -> Db {
        Db::with_failover(vec![pool], 0)
    }

    /// A handle on the servers of one cluster, in failover order, starting at `current`.
    pub fn with_failover(pools: Vec<MySqlPool>, current: usize) -> Db {
        assert!(!pools.is_empty(), "a Db needs at least one pool");
        Db {
            servers: Arc::new(Servers {
                current: AtomicUsize::new(current % pools.len()),
                kept: pools.iter().map(|_| Mutex::default()).collect(),
                detached: pools.iter().map(|_| Arc::default()).collect(),
                pools,
                probing: AtomicBool::new(false),
                discarded: Arc::default(),
            }),
        }
    }

    /// Connects to a DSN or a comma-separated DSN list (see [`crate::migrate::split_dsn_list`]):
    /// one lazily connecting pool of `pool_size` per server, starting on the first server that
    /// answers.
    pub async fn connect(
        dsn_list: &str,
        pool_size: u32,
    ) -> Result<Db, crate::migrate::MigrateError> {
        let (pools, current) = crate::migrate::failover_pools(dsn_list, pool_size).await?;
        Ok(Db::with_failover(pools, current))
    }

    /// The pool of the server in use.
    pub fn pool(&self) -> &MySqlPool {
        &self.servers.pools[self.current()]
    }

    /// Index (in the DSN list) of the server in use.
    pub fn current(&self) -> usize {
        self.servers.current.load(Ordering::Acquire)
    }

    /// Number of servers in the DSN list.
    pub fn servers(&self) -> usize {
        self.servers.pools.len()
    }

    /// Closes the kept connections and every pool. Closing a pool directly does not wait for the
    /// kept connections either: they are not the pool's.
    pub async fn close(&self) {
        for (i, pool) in self.servers.pools.iter().enumerate() {
            self.cool(i);
            pool.close().await;
        }
    }

    /// A connection to server `used` for one call: the one its last call used most recently, or
    /// one from the pool. sqlx's pool hands out its idle connections in turn (first in, first
    /// out) and pings each as it comes back: on a sequence of calls, as one hot key's hand-offs
    /// are, every call went to another server thread whose caches had gone cold, and a ping
    /// followed each (BENCHMARKS.md, `orbit bench handoff-sql`).
    async fn checkout(&self, used: usize) -> Result<Checkout, sqlx::Error> {
        loop {
            let kept = self.servers.kept[used]
                .lock()
                .expect("kept connections")
                .pop();
            let Some(Kept { conn, since }) = kept else {
                break;
            };
            let mut out = self.checked_out(used, Conn::Kept(conn));
            // As the pool's own check (crate::migrate::pool_options): a ping after a second idle.
            if since.elapsed() < crate::migrate::PING_AFTER_IDLE {
                return Ok(out);
            }
            if let Ok(Ok(())) = tokio::time::timeout(PING_TIMEOUT, out.conn().ping()).await {
                return Ok(out);
            }
            // Dropped: closed (a ping without its answer must never be followed by a call).
        }
        let conn = self.servers.pools[used].acquire().await?;
        Ok(self.checked_out(used, Conn::Pooled(conn)))
    }

    fn checked_out(&self, used: usize, conn: Conn) -> Checkout {
        Checkout {
            conn: Some(conn),
            discarded: self.servers.discarded.clone(),
            detached: self.servers.detached[used].clone(),
        }
    }

    /// Connections this handle closed because their call did not finish cleanly (cancelled,
    /// timed out, lost, or answered with a result of the wrong shape).
    pub fn discarded(&self) -> u64 {
        self.servers.discarded.load(Ordering::Relaxed)
    }

    /// Takes back a connection whose call finished cleanly: a kept one is kept again; one of the
    /// pool is kept instead of going back while fewer than [`KEPT_PER_SERVER`] detached
    /// connections are open, otherwise it goes back to its pool. A kept connection is never
    /// closed for want of room: under concurrent calls that closed one and made the pool open
    /// another (a connection's setup, on the server and in `after_connect`) every few calls,
    /// which halved single submits (BENCHMARKS.md, submit).
    fn give_back(&self, used: usize, mut out: Checkout) {
        let conn = out.conn.take().expect("a checkout holds its connection");
        let pool = &self.servers.pools[used];
        let detached = &self.servers.detached[used];
        let mut kept = self.servers.kept[used].lock().expect("kept connections");
        let conn = match conn {
            Conn::Kept(c) if pool.is_closed() => {
                drop(c);
                detached.fetch_sub(1, Ordering::Relaxed);
                return;
            }
            Conn::Kept(c) => c,
            Conn::Pooled(c)
                if pool.is_closed() || detached.load(Ordering::Relaxed) >= KEPT_PER_SERVER =>
            {
                drop(c);
                return;
            }
            Conn::Pooled(c) => {
                detached.fetch_add(1, Ordering::Relaxed);
                c.detach()
            }
        };
        kept.push(Kept {
            conn,
            since: Instant::now(),
        });
    }

    /// Closes server `used`'s kept connections (it may be gone, or stalled).
    fn cool(&self, used: usize) {
        let kept = std::mem::take(&mut *self.servers.kept[used].lock().expect("kept connections"));
        self.servers.detached[used].fetch_sub(kept.len(), Ordering::Relaxed);
        drop(kept);
    }

    /// What a failed call returns, after moving to the next server when the current one (index
    /// `used`, the one the call went to) is gone.
    async fn unavailable(&self, used: usize, failure: Classified) -> DbError {
        let down = match &failure {
            Classified::Down(_) | Classified::Saturated(_) if self.servers() > 1 => {
                // One lost connection (e.g. killed by an operator) does not make a server gone:
                // ask the server itself, one probe at a time.
                if self.current() != used || self.servers.probing.swap(true, Ordering::AcqRel) {
                    None
                } else {
                    let options = self.servers.pools[used].connect_options();
                    let probed = crate::migrate::probe(&options).await;
                    self.servers.probing.store(false, Ordering::Release);
                    probed.err()
                }
            }
            _ => None,
        };
        if let Some(reason) = down {
            self.fail_over(used, &reason);
        }
        failure.into_error()
    }

    /// Moves calls from server `from` to the next one (unless another call already moved them).
    fn fail_over(&self, from: usize, reason: &str) {
        let n = self.servers();
        let to = (from + 1) % n;
        if self
            .servers
            .current
            .compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            FAILOVERS.fetch_add(1, Ordering::Relaxed);
            ::metrics::counter!("orbit_db_failovers_total").increment(1);
            let target =
                |i: usize| crate::migrate::target(&self.servers.pools[i].connect_options());
            tracing::warn!(
                from = %target(from),
                to = %target(to),
                %reason,
                "database server unavailable; moving calls to the next server of the DSN list"
            );
        }
    }

    /// One attempt of a call on server `used`, within [`CALL_TIMEOUT`], its answer read by
    /// `read` while the connection is still out. The connection goes back for reuse only when the
    /// whole answer was read and `read` found it of the promised shape, or the server refused the
    /// call cleanly (a SIGNAL); in every other case it is closed. A call rolled back by a
    /// deadlock or lock-wait timeout closes its connection too: on MariaDB 10.6 one such
    /// connection was seen still inside a transaction (the next call's `SET TRANSACTION` failed
    /// with error 1568), and closing it rolls back whatever it still held.
    async fn attempt<T>(
        &self,
        used: usize,
        sql: &str,
        args: &[Arg<'_>],
        read: &impl Fn(&[MySqlRow]) -> Result<T, DbError>,
    ) -> Result<T, Classified> {
        let run = async {
            let mut out = self.checkout(used).await.map_err(classify)?;
            let mut q = sqlx::query(sql);
            for a in args {
                q = bind(q, *a);
            }
            let result = match q.fetch_all(out.conn()).await {
                Ok(rows) => read(&rows).map_err(Classified::Fail),
                Err(e) => Err(classify(e)),
            };
            let clean = match &result {
                Ok(_) => true,
                Err(Classified::Retry(_)) => false,
                Err(Classified::Fail(e)) => !matches!(e, DbError::Internal(_)),
                Err(Classified::Down(_) | Classified::Saturated(_)) => false,
            };
            if clean {
                self.give_back(used, out);
            } else if let Err(Classified::Down(_)) = &result {
                // The server may be gone: its kept connections go too.
                drop(out);
                self.cool(used);
            }
            result
        };
        match tokio::time::timeout(CALL_TIMEOUT, run).await {
            Ok(result) => result,
            Err(_) => {
                self.cool(used);
                Err(Classified::Down(format!(
                    "database unavailable: no answer within {} s",
                    CALL_TIMEOUT.as_secs()
                )))
            }
        }
    }

    /// `CALL procedure(args…)`, each row of its one result set read by `read` (columns in the
    /// order the procedure's header documents). A call rolled back by a deadlock or lock-wait
    /// timeout is repeated (each procedure is one transaction, or a series of independent ones,
    /// so repeating is safe), up to [`RETRIES`] times with a short backoff. A row `read` cannot
    /// read (an internal error) closes the connection: an answer of the wrong shape may be
    /// another call's.
    pub(crate) async fn call<T>(
        &self,
        procedure: &str,
        args: &[Arg<'_>],
        read: impl Fn(&mut Cols<'_>) -> Result<T, DbError>,
    ) -> Result<Vec<T>, DbError> {
        self.call_with(procedure, args, |rows| {
            rows.iter().map(|row| read(&mut Cols::new(row))).collect()
        })
        .await
    }

    /// Like [`Db::call`] for procedures documented to return exactly one row; another count
    /// closes the connection and is an internal error.
    pub(crate) async fn call_one<T>(
        &self,
        procedure: &str,
        args: &[Arg<'_>],
        read: impl Fn(&mut Cols<'_>) -> Result<T, DbError>,
    ) -> Result<T, DbError> {
        self.call_with(procedure, args, |rows| match rows {
            [row] => read(&mut Cols::new(row)),
            _ => Err(DbError::Internal(format!(
                "{procedure} returned {} rows where its header promises one",
                rows.len()
            ))),
        })
        .await
    }

    /// Like [`Db::call`], the whole result set read at once (by procedures whose rows read
    /// together: a first row carrying more, a row per input item).
    pub(crate) async fn call_with<T>(
        &self,
        procedure: &str,
        args: &[Arg<'_>],
        read: impl Fn(&[MySqlRow]) -> Result<T, DbError>,
    ) -> Result<T, DbError> {
        let placeholders = vec!["?"; args.len()].join(", ");
        let sql = format!("CALL {procedure}({placeholders})");
        let mut attempt = 0;
        loop {
            let used = self.current();
            match self.attempt(used, &sql, args, &read).await {
                Ok(answer) => return Ok(answer),
                Err(Classified::Fail(e)) => {
                    if matches!(e, DbError::Internal(_)) {
                        crate::telemetry::database_error("internal");
                    }
                    return Err(e);
                }
                Err(failure @ (Classified::Down(_) | Classified::Saturated(_))) => {
                    crate::telemetry::database_error(match failure {
                        Classified::Down(_) => "unavailable",
                        _ => "saturated",
                    });
                    return Err(self.unavailable(used, failure).await);
                }
                Err(Classified::Retry(message)) => {
                    attempt += 1;
                    RETRIED.fetch_add(1, Ordering::Relaxed);
                    crate::telemetry::database_error("conflict");
                    if attempt > RETRIES {
                        crate::telemetry::database_error("conflict_exhausted");
                        return Err(DbError::Unavailable(format!(
                            "{procedure} kept conflicting: {message}"
                        )));
                    }
                    // Exponential, capped, with full jitter: colliding callers spread apart.
                    let cap = 1u64 << attempt.min(6);
                    let wait = cap + rand::random::<u64>() % (cap + 1);
                    tokio::time::sleep(Duration::from_millis(wait)).await;
                }
            }
        }
    }

    /// `SELECT SLEEP(seconds)` through the path every call takes (connection, time limit,
    /// retries): the tests of cancellation and [`CALL_TIMEOUT`] use it.
    #[doc(hidden)]
    pub async fn sleep_for_tests(&self, seconds: f64) -> Result<(), DbError> {
        let used = self.current();
        let seconds = seconds.to_string();
        match self
            .attempt(used, "SELECT SLEEP(?)", &[Arg::Text(&seconds)], &|_| Ok(()))
            .await
        {
            Ok(_) => Ok(()),
            Err(failure) => Err(self.unavailable(used, failure).await),
        }
    }
}

/// Reads a result row's columns in order.
pub(crate) struct Cols<'r> {
    row: &'r MySqlRow,
    next: usize,
}

fn decode_err(i: usize, e: sqlx::Error) -> DbError {
    DbError::Internal(format!("result column {i}: {e}"))
}

impl<'r> Cols<'r> {
    pub fn new(row: &'r MySqlRow) -> Self {
        Cols { row, next: 0 }
    }

    /// Starts reading at column `start` (after a procedure-specific prefix).
    pub fn at(row: &'r MySqlRow, start: usize) -> Self {
        Cols { row, next: start }
    }

    fn index(&mut self) -> usize {
        self.next += 1;
        self.next - 1
    }

    /// Any integer column, as u64 (procedures return both signed and unsigned integer types).
    pub fn u64(&mut self) -> Result<u64, DbError> {
        let i = self.index();
        let row = self.row;
        if let Ok(v) = row.try_get::<Option<u64>, _>(i) {
            return Ok(v.unwrap_or(0));
        }
        match row.try_get::<Option<i64>, _>(i) {
            Ok(v) => u64::try_from(v.unwrap_or(0))
                .map_err(|_| DbError::Internal(format!("result column {i}: negative"))),
            Err(e) => Err(decode_err(i, e)),
        }
    }

    /// Any integer column that may be NULL.
    pub fn opt_u64(&mut self) -> Result<Option<u64>, DbError> {
        use sqlx::ValueRef;
        let i = self.next;
        let null = matches!(self.row.try_get_raw(i).map(|v| v.is_null()), Ok(true));
        let v = self.u64()?;
        Ok((!null).then_some(v))
    }

    /// A floating-point column (DOUBLE).
    pub fn f64(&mut self) -> Result<f64, DbError> {
        let i = self.index();
        self.row
            .try_get::<Option<f64>, _>(i)
            .map(|v| v.unwrap_or(0.0))
            .map_err(|e| decode_err(i, e))
    }

    pub fn u32(&mut self) -> Result<u32, DbError> {
        let v = self.u64()?;
        u32::try_from(v).map_err(|_| {
            DbError::Internal(format!(
                "result column {}: {v} overflows u32",
                self.next - 1
            ))
        })
    }

    pub fn bool(&mut self) -> Result<bool, DbError> {
        Ok(self.u64()? != 0)
    }

    /// A text column, read as bytes: binary-collated columns arrive flagged binary, and MySQL
    /// sends what its JSON functions return as type JSON (MariaDB: text), which sqlx's text and
    /// byte types do not accept (its value is the document's text either way).
    pub fn opt_text(&mut self) -> Result<Option<String>, DbError> {
        use sqlx::{Column, TypeInfo};
        let i = self.index();
        let json = self
            .row
            .columns()
            .get(i)
            .is_some_and(|c| c.type_info().name() == "JSON");
        let bytes = if json {
            self.row
                .try_get_unchecked::<Option<Vec<u8>>, _>(i)
                .map_err(|e| decode_err(i, e))?
        } else {
            match self.row.try_get::<Option<Vec<u8>>, _>(i) {
                Ok(b) => b,
                Err(_) => self
                    .row
                    .try_get::<Option<String>, _>(i)
                    .map_err(|e| decode_err(i, e))?
                    .map(String::into_bytes),
            }
        };
        bytes
            .map(|b| {
                String::from_utf8(b)
                    .map_err(|_| DbError::Internal(format!("result column {i}: not UTF-8")))
            })
            .transpose()
    }

    pub fn text(&mut self) -> Result<String, DbError> {
        Ok(self.opt_text()?.unwrap_or_default())
    }

    pub fn opt_time(&mut self) -> Result<Option<DateTime<Utc>>, DbError> {
        let i = self.index();
        self.row
            .try_get::<Option<NaiveDateTime>, _>(i)
            .map(|t| t.map(|t| t.and_utc()))
            .map_err(|e| decode_err(i, e))
    }

    pub fn time(&mut self) -> Result<DateTime<Utc>, DbError> {
        let i = self.next;
        self.opt_time()?
            .ok_or_else(|| DbError::Internal(format!("result column {i}: unexpected NULL time")))
    }
}

impl Db {
    /// `orbit_extension_version`: the installed version (0 = not installed).
    pub async fn extension_version(&self) -> Result<u32, DbError> {
        match self
            .call_one("orbit_extension_version", &[], |c| c.u32())
            .await
        {
            Ok(version) => Ok(version),
            Err(e) if error::is_missing_procedure(&e) => Ok(0),
            Err(e) => Err(e),
        }
    }
}
