//! Typed calls into the stored procedures: one async function per procedure, typed parameters and
//! result structs. Business rules live in the procedures; this layer only binds arguments, reads
//! the one result set by position, and maps errors ([`error`]).
//!
//! Result columns are read by position, in the order each procedure's header documents: sqlx
//! prepares `CALL` statements, and a prepared `CALL` carries no column names.

pub mod attempts;
pub mod credentials;
pub mod error;
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
use sqlx::{Connection, MySql, MySqlPool, Row};

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
    /// [`Db::call`]).
    warm: Vec<Mutex<Vec<Warm>>>,
    /// Index into `pools` of the server calls go to.
    current: AtomicUsize,
    /// A probe of the current server is running (one at a time).
    probing: AtomicBool,
}

/// A connection kept checked out of its pool between calls, and when its last call ended.
#[derive(Debug)]
struct Warm {
    conn: PoolConnection<MySql>,
    since: Instant,
}

impl Drop for Servers {
    fn drop(&mut self) {
        // A pooled connection goes back to its pool from a task; without a runtime to run it (a
        // Db dropped after its runtime) a kept connection is closed here instead.
        if tokio::runtime::Handle::try_current().is_err() {
            for warm in &mut self.warm {
                let warm = warm.get_mut().unwrap_or_else(|e| e.into_inner());
                for w in warm.drain(..) {
                    drop(w.conn.leak());
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
                warm: pools.iter().map(|_| Mutex::default()).collect(),
                pools,
                probing: AtomicBool::new(false),
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

    /// Closes every pool (a pool's close waits for its checked-out connections: the kept ones
    /// go back first).
    pub async fn close(&self) {
        for (i, pool) in self.servers.pools.iter().enumerate() {
            let closing = pool.close();
            self.cool(i);
            closing.await;
        }
    }

    /// A connection to server `used` for one call: the one its last call used most recently, or
    /// one from the pool. sqlx's pool hands out its idle connections in turn (first in, first
    /// out) and pings each as it comes back: on a sequence of calls, as one hot key's hand-offs
    /// are, every call went to another server thread whose caches had gone cold, and a ping
    /// followed each. The same connection again ran a hand-off's call in 1.85 ms against
    /// 2.10 ms (p50) and 2.8-3.2 ms against 4.8-4.9 ms (p99), `orbit bench handoff-sql`.
    async fn connection(&self, used: usize) -> Result<PoolConnection<MySql>, sqlx::Error> {
        loop {
            let warm = self.servers.warm[used]
                .lock()
                .expect("warm connections")
                .pop();
            let Some(Warm { mut conn, since }) = warm else {
                break;
            };
            // As the pool's own check (crate::migrate::pool_options): a ping after a second idle.
            if since.elapsed() < crate::migrate::PING_AFTER_IDLE || conn.ping().await.is_ok() {
                return Ok(conn);
            }
            conn.close_on_drop();
        }
        self.servers.pools[used].acquire().await
    }

    /// Takes back a call's connection: kept for the next call unless the call lost it.
    fn release(&self, used: usize, mut conn: PoolConnection<MySql>, lost: bool) {
        let pool = &self.servers.pools[used];
        if lost {
            // The server may be gone: the kept ones go back to the pool, which tests each.
            conn.close_on_drop();
            self.cool(used);
            return;
        }
        // A kept connection holds its pool permit: keep it only while another permit is free,
        // so a call waiting on the pool never waits behind it.
        let checked_out = (pool.size() as usize).saturating_sub(pool.num_idle());
        if pool.is_closed() || checked_out >= pool.options().get_max_connections() as usize {
            return;
        }
        self.servers.warm[used]
            .lock()
            .expect("warm connections")
            .push(Warm {
                conn,
                since: Instant::now(),
            });
        if pool.is_closed() {
            // Closed meanwhile (Db::close): its close waits for this one.
            self.cool(used);
        }
    }

    /// Returns server `used`'s kept connections to its pool.
    fn cool(&self, used: usize) {
        let kept = std::mem::take(&mut *self.servers.warm[used].lock().expect("warm connections"));
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

    /// `CALL procedure(args…)` and return its one result set. A call rolled back by a deadlock or
    /// lock-wait timeout is repeated (each procedure is one transaction, or a series of
    /// independent ones, so repeating is safe), up to [`RETRIES`] times with a short backoff.
    pub(crate) async fn call(
        &self,
        procedure: &str,
        args: &[Arg<'_>],
    ) -> Result<Vec<MySqlRow>, DbError> {
        let placeholders = vec!["?"; args.len()].join(", ");
        let sql = format!("CALL {procedure}({placeholders})");
        let mut attempt = 0;
        loop {
            let mut q = sqlx::query(&sql);
            for a in args {
                q = bind(q, *a);
            }
            let used = self.current();
            let result = match self.connection(used).await {
                Ok(mut conn) => {
                    let result = q.fetch_all(&mut *conn).await.map_err(classify);
                    let lost =
                        matches!(result, Err(Classified::Down(_) | Classified::Saturated(_)));
                    self.release(used, conn, lost);
                    result
                }
                Err(e) => Err(classify(e)),
            };
            match result {
                Ok(rows) => return Ok(rows),
                Err(Classified::Fail(e)) => return Err(e),
                Err(failure @ (Classified::Down(_) | Classified::Saturated(_))) => {
                    return Err(self.unavailable(used, failure).await)
                }
                Err(Classified::Retry(message)) => {
                    attempt += 1;
                    RETRIED.fetch_add(1, Ordering::Relaxed);
                    if attempt > RETRIES {
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

    /// Like [`Db::call`] for procedures documented to return exactly one row.
    pub(crate) async fn call_one(
        &self,
        procedure: &str,
        args: &[Arg<'_>],
    ) -> Result<MySqlRow, DbError> {
        let mut rows = self.call(procedure, args).await?;
        match rows.len() {
            1 => Ok(rows.remove(0)),
            n => Err(DbError::Internal(format!(
                "{procedure} returned {n} rows where its header promises one"
            ))),
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

    /// A text column, read as bytes: binary-collated columns arrive flagged binary.
    pub fn opt_text(&mut self) -> Result<Option<String>, DbError> {
        let i = self.index();
        let bytes = match self.row.try_get::<Option<Vec<u8>>, _>(i) {
            Ok(b) => b,
            Err(_) => self
                .row
                .try_get::<Option<String>, _>(i)
                .map_err(|e| decode_err(i, e))?
                .map(String::into_bytes),
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
        let used = self.current();
        let missing: Result<i64, _> = sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.routines WHERE routine_schema = DATABASE() AND routine_name = 'orbit_extension_version'",
        )
        .fetch_one(&self.servers.pools[used])
        .await;
        let missing = match missing {
            Ok(n) => n,
            Err(e) => return Err(self.unavailable(used, classify(e)).await),
        };
        if missing == 0 {
            return Ok(0);
        }
        let row = self.call_one("orbit_extension_version", &[]).await?;
        Cols::new(&row).u32()
    }
}
