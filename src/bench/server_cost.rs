//! What a scenario's measured phase cost the database server, per task: deltas of `SHOW GLOBAL
//! STATUS` (statements, row operations, page reads), of `performance_schema` when it is on, and of
//! the `mariadbd` process's CPU time, divided by the tasks the phase processed.
//!
//! The counters are the server's, not the benchmark database's: every client of the server adds to
//! them, so a figure is exact only on an otherwise idle server. The cost of reading the counters
//! themselves (`SHOW GLOBAL STATUS` writes and reads a temporary table) is measured when a
//! [`Meter`] starts and subtracted.
//!
//! Every scenario that processes tasks reports a [`ServerCost`] (`server_cost` in the JSON report);
//! `claim` adds one per backlog level.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::Serialize;
use sqlx::{ConnectOptions, Connection, MySqlConnection, MySqlPool};

use super::sql_err;
use crate::db::DbError;
use crate::processlist;

/// Linux `/proc` times are in clock ticks of 1/100 s (`USER_HZ` on every Linux architecture Orbit
/// builds for).
const TICKS_PER_SECOND: f64 = 100.0;

/// The database server as the benchmark sees it: its process on this machine when it runs here,
/// and whether `performance_schema` counts stored-program statements.
#[derive(Clone, Debug)]
pub struct Server {
    /// The server's process id, when the server runs on this machine.
    pid: Option<u32>,
    /// Why the server's CPU is not reported, when it is not.
    cpu_note: Option<String>,
    /// `@@performance_schema` is on and its statement summary answered.
    performance_schema: bool,
}

impl Server {
    /// The server's process id, when it runs on this machine.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Finds the server's process, on a server whose `@@hostname` is this machine's: the
    /// `mariadbd` or `mysqld` that `@@pid_file` names when this machine can read it, else the
    /// one whose age matches the server's `Uptime` (the two clocks can drift apart on a virtual
    /// machine, so the pid file comes first). Reads `@@performance_schema`.
    pub async fn detect(pool: &MySqlPool) -> Result<Server, DbError> {
        let (pid_file, hostname, performance_schema): (Option<String>, Option<String>, i64) =
            sqlx::query_as("SELECT @@pid_file, @@hostname, @@performance_schema + 0")
                .fetch_one(pool)
                .await
                .map_err(sql_err("reading the server's pid file and host name"))?;
        let performance_schema =
            performance_schema != 0 && sp_statements(pool).await.ok().flatten().is_some();
        let uptime = status(pool)
            .await?
            .get("Uptime")
            .copied()
            .unwrap_or_default() as f64;
        let hostname = hostname.unwrap_or_default();
        let local = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        if local.trim() != hostname.trim() {
            return Ok(Server {
                pid: None,
                cpu_note: Some(format!(
                    "server CPU not measured: the server runs on host {hostname:?}, not on this machine"
                )),
                performance_schema,
            });
        }
        let preferred = pid_file
            .and_then(|f| std::fs::read_to_string(f).ok())
            .and_then(|s| s.trim().parse::<u32>().ok());
        let processes = server_processes();
        let matching: Vec<u32> = processes
            .iter()
            .copied()
            .filter(|&pid| process_age_seconds(pid).is_some_and(|age| (age - uptime).abs() <= 5.0))
            .collect();
        let pid = match (
            preferred.filter(|p| processes.contains(p)),
            matching.as_slice(),
        ) {
            (Some(named), _) => Some(named),
            (None, [one]) => Some(*one),
            (None, _) => None,
        };
        let cpu_note = pid.is_none().then(|| {
            format!(
                "server CPU not measured: {} local mariadbd/mysqld processes started when the server did (Uptime {uptime:.0} s)",
                matching.len()
            )
        });
        Ok(Server {
            pid,
            cpu_note,
            performance_schema,
        })
    }
}

/// Process ids of this machine's `mariadbd` and `mysqld` processes.
fn server_processes() -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            matches!(comm.trim(), "mariadbd" | "mysqld")
        })
        .collect()
}

/// The fields of `/proc/<pid>/stat` after "pid (comm)": index 0 is field 3 (state).
fn stat_fields(pid: u32) -> Option<Vec<u64>> {
    stat_file_fields(&format!("/proc/{pid}/stat"))
}

/// The fields of a `stat` file of `/proc` after "pid (comm)".
fn stat_file_fields(path: &str) -> Option<Vec<u64>> {
    let stat = std::fs::read_to_string(path).ok()?;
    Some(
        stat.get(stat.rfind(')')? + 1..)?
            .split_whitespace()
            .map(|f| f.parse().unwrap_or(0))
            .collect(),
    )
}

/// CPU seconds process `pid` has used, user + system (fields 14 and 15 of `/proc/<pid>/stat`).
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    let f = stat_fields(pid)?;
    Some((f.get(11)? + f.get(12)?) as f64 / TICKS_PER_SECOND)
}

/// CPU seconds thread `tid` of process `pid` has used, user + system.
pub fn thread_cpu_seconds(pid: u32, tid: u64) -> Option<f64> {
    let f = stat_file_fields(&format!("/proc/{pid}/task/{tid}/stat"))?;
    Some((f.get(11)? + f.get(12)?) as f64 / TICKS_PER_SECOND)
}

/// Seconds since process `pid` started (field 22 of `/proc/<pid>/stat` against `/proc/uptime`).
fn process_age_seconds(pid: u32) -> Option<f64> {
    let started = *stat_fields(pid)?.get(19)? as f64 / TICKS_PER_SECOND;
    let up: f64 = std::fs::read_to_string("/proc/uptime")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(up - started)
}

/// `SHOW GLOBAL STATUS`, its numeric values.
async fn status(pool: &MySqlPool) -> Result<BTreeMap<String, u64>, DbError> {
    let rows: Vec<(String, String)> = sqlx::query_as("SHOW GLOBAL STATUS")
        .fetch_all(pool)
        .await
        .map_err(sql_err("reading SHOW GLOBAL STATUS"))?;
    Ok(rows
        .into_iter()
        .filter_map(|(name, value)| Some((name, value.parse().ok()?)))
        .collect())
}

/// Stored-program statements executed since the server started, from `performance_schema`.
async fn sp_statements(pool: &MySqlPool) -> Result<Option<u64>, sqlx::Error> {
    let (n,): (Option<u64>,) = sqlx::query_as(
        "SELECT CAST(SUM(COUNT_STAR) AS UNSIGNED) FROM performance_schema.events_statements_summary_global_by_event_name
          WHERE EVENT_NAME LIKE 'statement/sp/%'",
    )
    .fetch_one(pool)
    .await?;
    Ok(n)
}

/// The key under which a snapshot keeps `performance_schema`'s stored-program statement count.
const PS_SP_STATEMENTS: &str = "performance_schema: statement/sp/%";

/// Counter values and CPU times at one moment.
#[derive(Clone, Debug, Default)]
struct Snapshot {
    counters: BTreeMap<String, u64>,
    server_cpu: Option<f64>,
    serve_cpu: Option<f64>,
}

/// What a phase used: counter deltas and CPU seconds. Usages of several phases add up.
#[derive(Clone, Debug, Default)]
pub struct Usage {
    counters: BTreeMap<String, u64>,
    server_cpu: Option<f64>,
    serve_cpu: Option<f64>,
    /// Looks at the server's process list during the phase.
    watch_samples: u64,
    /// Looks that saw another client's statement running.
    watch_busy: u64,
}

impl Usage {
    fn between(before: &Snapshot, after: &Snapshot) -> Usage {
        Usage {
            counters: after
                .counters
                .iter()
                .map(|(k, v)| {
                    let was = before.counters.get(k).copied().unwrap_or(*v);
                    (k.clone(), v.saturating_sub(was))
                })
                .collect(),
            server_cpu: after.server_cpu.zip(before.server_cpu).map(|(a, b)| a - b),
            serve_cpu: after.serve_cpu.zip(before.serve_cpu).map(|(a, b)| a - b),
            watch_samples: 0,
            watch_busy: 0,
        }
    }

    /// `self` less `other`'s counters (CPU is left as is: reading the counters costs the server
    /// less CPU than `/proc` can resolve).
    fn less(mut self, other: &Usage) -> Usage {
        for (k, v) in &other.counters {
            if let Some(mine) = self.counters.get_mut(k) {
                *mine = mine.saturating_sub(*v);
            }
        }
        self
    }

    /// Each counter's lesser value of `self` and `other` (CPU is `self`'s).
    fn least(mut self, other: &Usage) -> Usage {
        for (k, v) in self.counters.iter_mut() {
            *v = (*v).min(other.counters.get(k).copied().unwrap_or(*v));
        }
        self
    }

    /// Adds another phase's usage.
    pub fn add(&mut self, other: &Usage) {
        for (k, v) in &other.counters {
            *self.counters.entry(k.clone()).or_default() += v;
        }
        let sum = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        self.server_cpu = sum(self.server_cpu, other.server_cpu);
        self.serve_cpu = sum(self.serve_cpu, other.serve_cpu);
        self.watch_samples += other.watch_samples;
        self.watch_busy += other.watch_busy;
    }

    fn get(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }

    fn sum(&self, names: &[&str]) -> u64 {
        names.iter().map(|n| self.get(n)).sum()
    }

    /// The usage divided by `tasks`.
    pub fn per_task(&self, server: &Server, tasks: u64) -> ServerCost {
        let n = tasks.max(1) as f64;
        let per = |v: u64| v as f64 / n;
        let has = |name: &str| self.counters.contains_key(name);
        let (stored_program_statements, stored_program_statements_from) = if has(PS_SP_STATEMENTS) {
            (
                    per(self.get(PS_SP_STATEMENTS)),
                    "performance_schema: events_statements_summary_global_by_event_name, statement/sp/%",
                )
        } else {
            (
                    per(self.get("Queries").saturating_sub(self.sum(&[
                        "Questions",
                        "Com_stmt_prepare",
                        "Com_stmt_close",
                        "Com_stmt_reset",
                    ]))),
                    "Queries - Questions - Com_stmt_prepare/close/reset (performance_schema is off): every stored-program instruction, control flow and SET included",
                )
        };
        let innodb_rows = |name: &str| has(name).then(|| per(self.get(name)));
        let row_reads = self
            .counters
            .iter()
            .filter(|(k, _)| k.starts_with("Handler_read_"))
            .map(|(_, v)| v)
            .sum();
        let mut notes =
            vec!["global server counters: exact only on an otherwise idle server".to_string()];
        if !has("Innodb_rows_inserted") {
            notes.push(
                "this server has no Innodb_rows_* counters (MariaDB 10.11 has none): InnoDB row figures are null; Handler_write/update/delete count the same row operations (explicit temporary tables included, internal ones are tmp_row_writes)".into(),
            );
        }
        notes.extend(server.cpu_note.clone());
        if self.watch_busy > 0 {
            notes.push(format!(
                "NOT IDLE: another client's statement was running in {} of {} looks at the server's process list; these figures include its work",
                self.watch_busy, self.watch_samples
            ));
        }
        ServerCost {
            tasks,
            statements: per(self.get("Questions")),
            sql_statements: per(self.sum(&[
                "Com_select",
                "Com_insert",
                "Com_insert_select",
                "Com_update",
                "Com_update_multi",
                "Com_delete",
                "Com_delete_multi",
                "Com_replace",
                "Com_replace_select",
            ])),
            stored_program_statements,
            stored_program_statements_from,
            commits: per(self.get("Com_commit")),
            fsyncs: per(self.get("Innodb_data_fsyncs")),
            row_writes: per(self.sum(&["Handler_write", "Handler_update", "Handler_delete"])),
            handler_write: per(self.get("Handler_write")),
            handler_update: per(self.get("Handler_update")),
            handler_delete: per(self.get("Handler_delete")),
            row_reads: per(row_reads),
            tmp_row_writes: (has("Handler_tmp_write") || has("Handler_tmp_update"))
                .then(|| per(self.sum(&["Handler_tmp_write", "Handler_tmp_update"]))),
            innodb_rows_inserted: innodb_rows("Innodb_rows_inserted"),
            innodb_rows_updated: innodb_rows("Innodb_rows_updated"),
            innodb_rows_deleted: innodb_rows("Innodb_rows_deleted"),
            page_reads: per(self.get("Innodb_buffer_pool_read_requests")),
            server_cpu_ms: self.server_cpu.map(|s| s * 1000.0 / n),
            serve_cpu_ms: self.serve_cpu.map(|s| s * 1000.0 / n),
            other_clients_seen: self.watch_busy,
            process_list_looks: self.watch_samples,
            notes,
        }
    }
}

/// A phase's server cost per task (every figure but `tasks` is per task).
#[derive(Clone, Debug, Serialize)]
pub struct ServerCost {
    /// Tasks the phase processed: the divisor.
    pub tasks: u64,
    /// Statements clients sent (`Questions`: `CALL`s and plain SQL, not what procedures run).
    pub statements: f64,
    /// SELECT, INSERT, UPDATE, DELETE and REPLACE statements, sent or run inside stored programs
    /// (`Com_select` + `Com_insert` + … ).
    pub sql_statements: f64,
    /// Statements stored programs executed.
    pub stored_program_statements: f64,
    /// Where `stored_program_statements` comes from.
    pub stored_program_statements_from: &'static str,
    /// `COMMIT` statements (`Com_commit`).
    pub commits: f64,
    /// InnoDB fsyncs of the log and data files (`Innodb_data_fsyncs`).
    pub fsyncs: f64,
    /// `handler_write` + `handler_update` + `handler_delete`.
    pub row_writes: f64,
    /// Rows inserted (`Handler_write`, temporary tables included).
    pub handler_write: f64,
    /// Rows updated (`Handler_update`).
    pub handler_update: f64,
    /// Rows deleted (`Handler_delete`).
    pub handler_delete: f64,
    /// Row reads: every `Handler_read_*` summed.
    pub row_reads: f64,
    /// Rows written to internal temporary tables (`Handler_tmp_write` + `Handler_tmp_update`,
    /// MariaDB's; null where the server has no such counters), not part of `row_writes`.
    pub tmp_row_writes: Option<f64>,
    /// `Innodb_rows_inserted` (null where the server has no such counter).
    pub innodb_rows_inserted: Option<f64>,
    /// `Innodb_rows_updated` (null where the server has no such counter).
    pub innodb_rows_updated: Option<f64>,
    /// `Innodb_rows_deleted` (null where the server has no such counter).
    pub innodb_rows_deleted: Option<f64>,
    /// Buffer-pool page reads (`Innodb_buffer_pool_read_requests`, cached or not).
    pub page_reads: f64,
    /// CPU milliseconds of the server process (`mariadbd`/`mysqld`, user + system; null when the
    /// server does not run on this machine).
    pub server_cpu_ms: Option<f64>,
    /// CPU milliseconds of the scenario's `serve` process (null without one).
    pub serve_cpu_ms: Option<f64>,
    /// Looks at the server's process list (every 250 ms) that saw another client's statement
    /// running: above 0, the server was not idle and the figures include other work.
    pub other_clients_seen: u64,
    /// Looks at the server's process list during the phase.
    pub process_list_looks: u64,
    /// How to read the figures: what is global, what is missing and why.
    pub notes: Vec<String>,
}

impl ServerCost {
    /// The human summary: the figures, then the notes, one a line.
    pub fn summary(&self) -> String {
        let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
        let mut lines = vec![format!(
            "server cost per task ({} tasks): {:.1} statements sent, {:.1} SQL statements, {:.1} stored-program statements, \
             {:.1} row writes ({:.1} inserts, {:.1} updates, {:.1} deletes), {} temporary-table row writes, \
             {:.0} row reads, {:.0} page reads, {:.2} commits, {:.2} fsyncs; CPU ms: server {}, serve {}",
            self.tasks,
            self.statements,
            self.sql_statements,
            self.stored_program_statements,
            self.row_writes,
            self.handler_write,
            self.handler_update,
            self.handler_delete,
            self.tmp_row_writes.map_or("-".to_string(), |v| format!("{v:.1}")),
            self.row_reads,
            self.page_reads,
            self.commits,
            self.fsyncs,
            ms(self.server_cpu_ms),
            ms(self.serve_cpu_ms),
        )];
        lines.extend(self.notes.iter().map(|n| format!("  note: {n}")));
        lines.join("\n")
    }
}

/// How many statements of other clients are running now: another database's, or no database's
/// (the benchmark's own connections, `serve`'s included, use the benchmark database). `me` and
/// `db` are the watching connection's own id and database ([`processlist::own_id`]).
async fn others_running(
    conn: &mut MySqlConnection,
    me: u64,
    db: &Option<String>,
) -> Result<usize, sqlx::Error> {
    Ok(processlist::read(conn)
        .await?
        .iter()
        .filter(|p| p.id != me && p.is_running() && (p.db.is_none() || p.db != *db))
        .count())
}

/// How often [`Meter`] looks at the server's process list.
const WATCH_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// Measures one phase: [`Meter::start`] before it, [`Meter::stop`] after. Meanwhile it looks at
/// the server's process list every [`WATCH_EVERY`] for other clients' statements, which the
/// global counters would count too.
pub struct Meter {
    pool: MySqlPool,
    server: Server,
    serve_pid: Option<u32>,
    before: Snapshot,
    /// What reading the counters costs by itself (subtracted from the phase's usage).
    reading: Usage,
    watching: Arc<AtomicBool>,
    /// The watch's (samples, samples that saw another client's statement).
    watch: tokio::task::JoinHandle<(u64, u64)>,
}

impl Meter {
    /// Starts measuring; `serve_pid` is the scenario's `serve` process, if any.
    pub async fn start(
        pool: &MySqlPool,
        server: &Server,
        serve_pid: Option<u32>,
    ) -> Result<Meter, DbError> {
        let snapshot = |pool| Meter::snapshot(pool, server, serve_pid);
        // What one reading costs is the least of three back-to-back readings' costs: other
        // clients' work between two readings only ever adds to a difference, and subtracting
        // it would hide the phase's own rows.
        let mut previous = snapshot(pool).await?;
        let mut reading: Option<Usage> = None;
        for _ in 0..3 {
            let next = snapshot(pool).await?;
            let cost = Usage::between(&previous, &next);
            reading = Some(match reading {
                None => cost,
                Some(least) => least.least(&cost),
            });
            previous = next;
        }
        let (before, reading) = (previous, reading.unwrap_or_default());
        let watching = Arc::new(AtomicBool::new(true));
        let watch = tokio::spawn({
            let (pool, watching) = (pool.clone(), watching.clone());
            async move {
                let (mut samples, mut busy) = (0, 0);
                // A connection of the watch's own for the phase: its id and database are read
                // once, and each look is one statement. Without it the watch counts no look.
                let Ok(mut conn) = pool.connect_options().connect().await else {
                    return (samples, busy);
                };
                let Ok((me, db)) = processlist::own_id(&mut conn).await else {
                    return (samples, busy);
                };
                while watching.load(Ordering::Relaxed) {
                    if let Ok(running) = others_running(&mut conn, me, &db).await {
                        samples += 1;
                        busy += u64::from(running > 0);
                    }
                    tokio::time::sleep(WATCH_EVERY).await;
                }
                let _ = conn.close().await;
                (samples, busy)
            }
        });
        Ok(Meter {
            pool: pool.clone(),
            server: server.clone(),
            serve_pid,
            before,
            reading,
            watching,
            watch,
        })
    }

    async fn snapshot(
        pool: &MySqlPool,
        server: &Server,
        serve_pid: Option<u32>,
    ) -> Result<Snapshot, DbError> {
        let mut counters = status(pool).await?;
        if server.performance_schema {
            if let Ok(Some(n)) = sp_statements(pool).await {
                counters.insert(PS_SP_STATEMENTS.into(), n);
            }
        }
        Ok(Snapshot {
            counters,
            server_cpu: server.pid.and_then(process_cpu_seconds),
            serve_cpu: serve_pid.and_then(process_cpu_seconds),
        })
    }

    /// What the phase used since [`Meter::start`].
    pub async fn stop(self) -> Result<Usage, DbError> {
        self.watching.store(false, Ordering::Relaxed);
        let (samples, busy) = self.watch.await.unwrap_or((0, 0));
        let after = Meter::snapshot(&self.pool, &self.server, self.serve_pid).await?;
        let mut usage = Usage::between(&self.before, &after).less(&self.reading);
        // Each look at the process list is one statement sent, and one SELECT.
        for name in ["Questions", "Queries", "Com_select"] {
            if let Some(v) = usage.counters.get_mut(name) {
                *v = v.saturating_sub(samples);
            }
        }
        usage.watch_samples = samples;
        usage.watch_busy = busy;
        Ok(usage)
    }

    /// The phase's cost per task, `tasks` being what it processed.
    pub async fn per_task(self, tasks: u64) -> Result<ServerCost, DbError> {
        let server = self.server.clone();
        Ok(self.stop().await?.per_task(&server, tasks))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(counters: &[(&str, u64)], server_cpu: f64) -> Snapshot {
        Snapshot {
            counters: counters.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            server_cpu: Some(server_cpu),
            serve_cpu: None,
        }
    }

    fn local_server() -> Server {
        Server {
            pid: Some(1),
            cpu_note: None,
            performance_schema: false,
        }
    }

    /// Deltas less the counters' own reading, divided by the tasks; stored-program statements are
    /// Queries less what clients sent when performance_schema is off.
    #[test]
    fn per_task_divides_the_deltas_less_the_reading() {
        let before = snapshot(
            &[
                ("Questions", 100),
                ("Queries", 100),
                ("Com_stmt_prepare", 0),
                ("Handler_write", 1000),
                ("Handler_update", 0),
                ("Handler_read_key", 0),
                ("Handler_read_next", 0),
                ("Innodb_buffer_pool_read_requests", 0),
            ],
            1.0,
        );
        let after = snapshot(
            &[
                ("Questions", 121),
                ("Queries", 521),
                ("Com_stmt_prepare", 1),
                ("Handler_write", 1600),
                ("Handler_update", 40),
                ("Handler_read_key", 300),
                ("Handler_read_next", 100),
                ("Innodb_buffer_pool_read_requests", 4000),
            ],
            1.5,
        );
        let reading = Usage::between(
            &snapshot(&[("Questions", 0), ("Handler_write", 0)], 0.0),
            &snapshot(&[("Questions", 1), ("Handler_write", 400)], 0.0),
        );
        let cost = Usage::between(&before, &after)
            .less(&reading)
            .per_task(&local_server(), 10);
        assert_eq!(cost.statements, 2.0);
        // 421 - 20 statements sent - 1 prepare.
        assert_eq!(cost.stored_program_statements, 40.0);
        assert_eq!(cost.handler_write, 20.0);
        assert_eq!(cost.row_writes, 24.0);
        assert_eq!(cost.row_reads, 40.0);
        assert_eq!(cost.page_reads, 400.0);
        assert_eq!(cost.server_cpu_ms, Some(50.0));
        assert_eq!(cost.serve_cpu_ms, None);
        assert_eq!(cost.innodb_rows_inserted, None);
    }

    /// Phases add up: claim's levels make its total.
    #[test]
    fn usages_add_up() {
        let one = Usage::between(
            &snapshot(&[("Handler_write", 0)], 0.0),
            &snapshot(&[("Handler_write", 30)], 0.25),
        );
        let mut total = Usage::default();
        total.add(&one);
        total.add(&one);
        let cost = total.per_task(&local_server(), 20);
        assert_eq!(cost.handler_write, 3.0);
        assert_eq!(cost.server_cpu_ms, Some(25.0));
    }
}
