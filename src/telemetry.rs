//! The Prometheus metrics `GET /metrics` exports, through `metrics-exporter-prometheus`: every
//! family is declared once in [`FAMILIES`] (name, type, labels, help), described to the exporter
//! (so each has `# HELP` and `# TYPE`), and listed in docs/operations.md (a test checks both ways).
//!
//! Latencies are histograms with fixed buckets ([`LATENCY_BUCKETS`], [`TASK_BUCKETS`]), which
//! Prometheus can aggregate across servers (`histogram_quantile(0.99, sum by (le)
//! (rate(…_bucket[5m])))`); counters count what this process did, so sum them over servers.
//! Every label has a bounded set of values: `queue` is a queue id (as many as there are queues),
//! `state`, `outcome`, `kind`, `method` come from fixed sets, `route` is a route template.
//! Gauges are read from the database at scrape time by `orbit_metrics_snapshot`, whose cost
//! grows with queues, sessions and unfinished tasks, never with finished ones; one read at a time
//! per process, shared by the scrapes that arrive while it runs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::db::workers::{AttemptResult, FinishAck, Grant};
use crate::db::Db;

/// A metric family's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    Counter,
    Gauge,
    Histogram,
}

impl Type {
    pub fn as_str(self) -> &'static str {
        match self {
            Type::Counter => "counter",
            Type::Gauge => "gauge",
            Type::Histogram => "histogram",
        }
    }
}

/// One metric family.
#[derive(Clone, Copy, Debug)]
pub struct Family {
    pub name: &'static str,
    pub kind: Type,
    pub labels: &'static [&'static str],
    pub help: &'static str,
}

const fn family(
    name: &'static str,
    kind: Type,
    labels: &'static [&'static str],
    help: &'static str,
) -> Family {
    Family {
        name,
        kind,
        labels,
        help,
    }
}

/// Every family `/metrics` exports.
pub const FAMILIES: &[Family] = &[
    family(
        "orbit_http_requests_total",
        Type::Counter,
        &["route", "method", "status"],
        "HTTP requests answered, by route template, method and status code.",
    ),
    family(
        "orbit_http_request_duration_seconds",
        Type::Histogram,
        &["route", "method"],
        "Time from a request's headers to its response (a WebSocket upgrade ends at its 101).",
    ),
    family(
        "orbit_tasks_submitted_total",
        Type::Counter,
        &["queue"],
        "Tasks accepted by a submit (single or batch); an idempotent replay is not counted again.",
    ),
    family(
        "orbit_grants_total",
        Type::Counter,
        &["queue"],
        "Attempts granted to worker sessions: by a claim or with a result's acknowledgement (hand-off).",
    ),
    family(
        "orbit_claim_duration_seconds",
        Type::Histogram,
        &[],
        "Duration of one orbit_task_claim call, whatever it granted.",
    ),
    family(
        "orbit_handoff_duration_seconds",
        Type::Histogram,
        &[],
        "Duration of one orbit_attempt_finish call that granted work with its acknowledgement.",
    ),
    family(
        "orbit_task_results_total",
        Type::Counter,
        &["outcome", "state"],
        "Worker results taken, by the reported outcome (succeeded, failed, unknown) and the task state it led to.",
    ),
    family(
        "orbit_task_end_to_end_seconds",
        Type::Histogram,
        &["state"],
        "From a task's acceptance to the result that finished it (SUCCEEDED, FAILED or NEEDS_REVIEW), measured by the server that granted its last attempt.",
    ),
    family(
        "orbit_retries_total",
        Type::Counter,
        &[],
        "Results that scheduled a retry (the task went to RETRY_WAIT).",
    ),
    family(
        "orbit_lease_expiries_total",
        Type::Counter,
        &[],
        "Attempts whose lease expired, recovered by this server's scheduler.",
    ),
    family(
        "orbit_deadline_expiries_total",
        Type::Counter,
        &[],
        "Tasks expired at their deadline by this server's scheduler.",
    ),
    family(
        "orbit_tasks_purged_total",
        Type::Counter,
        &[],
        "Finished tasks deleted by this server's scheduler once their queue's retention passed (with their attempts, history and idempotency receipts).",
    ),
    family(
        "orbit_database_errors_total",
        Type::Counter,
        &["kind"],
        "Database calls that failed for want of the database: unavailable (connection refused or lost), saturated (no connection within the acquire timeout), conflict (a deadlock or lock-wait timeout, retried), conflict_exhausted (still conflicting after every retry), internal (an unexpected error).",
    ),
    family(
        "orbit_db_failovers_total",
        Type::Counter,
        &[],
        "Moves of this server's calls to the next database server of its DSN list.",
    ),
    family(
        "orbit_worker_claims_total",
        Type::Counter,
        &[],
        "orbit_task_claim calls made by worker sessions (on hello, and when woken with free capacity).",
    ),
    family(
        "orbit_tasks",
        Type::Gauge,
        &["queue", "state"],
        "Unfinished tasks by queue and state (WAITING, LEASED, RUNNING, RETRY_WAIT, NEEDS_REVIEW); finished tasks are counted by orbit_task_results_total.",
    ),
    family(
        "orbit_queue_info",
        Type::Gauge,
        &["queue", "name"],
        "1 for every queue, with its name: join on `queue` to show names.",
    ),
    family(
        "orbit_queue_paused",
        Type::Gauge,
        &["queue"],
        "1 while the queue is paused.",
    ),
    family(
        "orbit_queue_permits",
        Type::Gauge,
        &["queue"],
        "Queue permits held: the queue's LEASED and RUNNING attempts.",
    ),
    family(
        "orbit_key_permits",
        Type::Gauge,
        &[],
        "Concurrency keys held by an attempt.",
    ),
    family(
        "orbit_key_held",
        Type::Gauge,
        &["namespace", "queue"],
        "Keys whose permit is held, by namespace id and the holder's queue id.",
    ),
    family(
        "orbit_key_blocked_tasks",
        Type::Gauge,
        &["namespace", "queue"],
        "Tasks waiting in the blocked lane on a held key, by namespace id and queue id.",
    ),
    family(
        "orbit_key_oldest_wait_seconds",
        Type::Gauge,
        &["namespace", "queue"],
        "Seconds since the oldest task blocked on a held key became due (0 when none).",
    ),
    family(
        "orbit_key_handoff_wait_seconds",
        Type::Histogram,
        &["namespace", "queue"],
        "Per grant of a key granted before (a hand-off): seconds from its task becoming due to the grant.",
    ),
    family(
        "orbit_sessions",
        Type::Gauge,
        &["state"],
        "Worker sessions by state (active, draining).",
    ),
    family(
        "orbit_application_active_attempts",
        Type::Gauge,
        &["application"],
        "LEASED and RUNNING attempts charged to each application's quota.",
    ),
    family(
        "orbit_application_incomplete_tasks",
        Type::Gauge,
        &["application"],
        "Accepted, unfinished tasks charged to each application's quota.",
    ),
    family(
        "orbit_database_up",
        Type::Gauge,
        &[],
        "1 when the last scrape read the gauges from the database, 0 when it could not.",
    ),
    family(
        "orbit_metrics_database_reads_total",
        Type::Counter,
        &[],
        "Gauge reads from the database by /metrics scrapes (orbit_metrics_snapshot, orbit_key_metrics): one at a time, and scrapes that arrive while one runs share it.",
    ),
];

/// Buckets of the request, claim and hand-off histograms, in seconds.
pub const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Buckets of the end-to-end histogram, in seconds (tasks run for minutes or wait for retries).
pub const TASK_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// The process's recorder: installed once, with every family described and every histogram
/// given buckets (the exporter renders a histogram without buckets as a summary).
pub fn handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets(&LATENCY_BUCKETS)
                .expect("latency buckets are not empty")
                .set_buckets_for_metric(
                    Matcher::Full("orbit_task_end_to_end_seconds".to_string()),
                    &TASK_BUCKETS,
                )
                .expect("task buckets are not empty")
                .set_buckets_for_metric(
                    Matcher::Full("orbit_key_handoff_wait_seconds".to_string()),
                    crate::http::keys::HANDOFF_BUCKETS,
                )
                .expect("hand-off buckets are not empty")
                .build_recorder();
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_ok() {
                describe();
            }
            handle
        })
        .clone()
}

fn describe() {
    for f in FAMILIES {
        match f.kind {
            Type::Counter => metrics::describe_counter!(f.name, f.help),
            Type::Gauge => metrics::describe_gauge!(f.name, f.help),
            Type::Histogram => metrics::describe_histogram!(f.name, f.help),
        }
    }
    // Families without a sample yet still show from the first scrape.
    for name in [
        "orbit_retries_total",
        "orbit_lease_expiries_total",
        "orbit_deadline_expiries_total",
        "orbit_tasks_purged_total",
        "orbit_db_failovers_total",
        "orbit_worker_claims_total",
    ] {
        metrics::counter!(name).absolute(0);
    }
    for kind in DATABASE_ERROR_KINDS {
        metrics::counter!("orbit_database_errors_total", "kind" => kind).absolute(0);
    }
    // Registered histograms are rendered (with empty buckets) before their first sample.
    let _ = metrics::histogram!("orbit_claim_duration_seconds");
    let _ = metrics::histogram!("orbit_handoff_duration_seconds");
    for state in ["SUCCEEDED", "FAILED", "NEEDS_REVIEW"] {
        let _ = metrics::histogram!("orbit_task_end_to_end_seconds", "state" => state);
    }
}

/// The `kind` values of `orbit_database_errors_total`.
pub const DATABASE_ERROR_KINDS: [&str; 5] = [
    "unavailable",
    "saturated",
    "conflict",
    "conflict_exhausted",
    "internal",
];

/// When each attempt this process granted was accepted as a task, for the end-to-end histogram;
/// an entry leaves when its result is taken. Bounded: cleared when full (an attempt whose result
/// goes to another server would otherwise stay).
static GRANTED: OnceLock<Mutex<HashMap<u64, DateTime<Utc>>>> = OnceLock::new();
const GRANTED_CAPACITY: usize = 100_000;

fn granted() -> &'static Mutex<HashMap<u64, DateTime<Utc>>> {
    GRANTED.get_or_init(Default::default)
}

/// Grants made (by a claim or a hand-off).
pub fn grants(grants: &[Grant]) {
    if grants.is_empty() {
        return;
    }
    let mut queues: HashMap<&str, u64> = HashMap::new();
    for g in grants {
        *queues.entry(g.task.queue_id.as_str()).or_default() += 1;
    }
    for (queue, n) in queues {
        metrics::counter!("orbit_grants_total", "queue" => queue.to_string()).increment(n);
    }
    if let Ok(mut map) = granted().lock() {
        if map.len() + grants.len() > GRANTED_CAPACITY {
            map.clear();
        }
        for g in grants {
            map.insert(g.attempt_id, g.task.created_at);
        }
    }
}

/// One `orbit_task_claim` call.
pub fn claimed(took: Duration, made: &[Grant]) {
    metrics::histogram!("orbit_claim_duration_seconds").record(took.as_secs_f64());
    grants(made);
}

/// One `orbit_attempt_finish` call: its results with their acknowledgements (in order), and the
/// grants made with them.
pub fn finished(took: Duration, results: &[AttemptResult], acks: &[FinishAck], made: &[Grant]) {
    if !made.is_empty() {
        metrics::histogram!("orbit_handoff_duration_seconds").record(took.as_secs_f64());
    }
    let now = Utc::now();
    for (result, ack) in results.iter().zip(acks) {
        if !ack.code.is_empty() || ack.duplicate {
            continue;
        }
        let state = state_label(&ack.task_state);
        metrics::counter!(
            "orbit_task_results_total",
            "outcome" => result.outcome.as_str(),
            "state" => state
        )
        .increment(1);
        if state == "RETRY_WAIT" {
            metrics::counter!("orbit_retries_total").increment(1);
        }
        let created = granted()
            .lock()
            .ok()
            .and_then(|mut m| m.remove(&ack.attempt_id));
        if let (Some(created), true) = (
            created,
            matches!(state, "SUCCEEDED" | "FAILED" | "NEEDS_REVIEW"),
        ) {
            let seconds = (now - created).num_microseconds().unwrap_or(0).max(0) as f64 / 1e6;
            metrics::histogram!("orbit_task_end_to_end_seconds", "state" => state).record(seconds);
        }
    }
    grants(made);
}

/// A task state as a label: one of the nine states, or `other` (never a value from outside).
fn state_label(state: &str) -> &'static str {
    match state {
        "WAITING" => "WAITING",
        "LEASED" => "LEASED",
        "RUNNING" => "RUNNING",
        "RETRY_WAIT" => "RETRY_WAIT",
        "SUCCEEDED" => "SUCCEEDED",
        "FAILED" => "FAILED",
        "CANCELLED" => "CANCELLED",
        "NEEDS_REVIEW" => "NEEDS_REVIEW",
        "EXPIRED" => "EXPIRED",
        _ => "other",
    }
}

/// Tasks accepted by a submit to `queue` (not replays).
pub fn submitted(queue: &str, n: u64) {
    if n > 0 {
        metrics::counter!("orbit_tasks_submitted_total", "queue" => queue.to_string()).increment(n);
    }
}

/// What one scheduler round did.
pub fn swept(lease_expiries: u64, deadline_expiries: u64) {
    metrics::counter!("orbit_lease_expiries_total").increment(lease_expiries);
    metrics::counter!("orbit_deadline_expiries_total").increment(deadline_expiries);
}

/// Finished tasks the scheduler's purge deleted.
pub fn purged(tasks: u64) {
    metrics::counter!("orbit_tasks_purged_total").increment(tasks);
}

/// A database call that failed for want of the database (see [`FAMILIES`] for the kinds).
pub fn database_error(kind: &'static str) {
    metrics::counter!("orbit_database_errors_total", "kind" => kind).increment(1);
}

/// Reads the gauges from the database (`orbit_metrics_snapshot`) and renders every family.
pub async fn scrape(db: &Db) -> String {
    read_gauges(db).await;
    handle().render()
}

/// Gauge reads finished by this process: a scrape that sees this change while it waits for its
/// turn was served by the read that ran meanwhile.
static GAUGE_READS_DONE: AtomicU64 = AtomicU64::new(0);
/// Held while the gauges are read from the database.
static GAUGE_READ: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Sets the gauges from the database, one read at a time: the reads cost what the unfinished
/// tasks make them cost (see the module's doc), so scrapes that arrive while a read runs wait for
/// it and share it, however many clients scrape at once. A scrape dropped mid-read (its client
/// gave up) frees the turn, and the next scrape reads.
async fn read_gauges(db: &Db) {
    let seen = GAUGE_READS_DONE.load(Ordering::Acquire);
    let _turn = GAUGE_READ.lock().await;
    if GAUGE_READS_DONE.load(Ordering::Acquire) != seen {
        return;
    }
    metrics::counter!("orbit_metrics_database_reads_total").increment(1);
    match db.metrics_snapshot().await {
        Ok(rows) => {
            for row in rows {
                let queue = row.queue_id;
                let v = row.value as f64;
                match row.metric.as_str() {
                    "tasks" => {
                        let state = state_label(&row.label);
                        metrics::gauge!("orbit_tasks", "queue" => queue, "state" => state).set(v)
                    }
                    "queue_paused" => {
                        metrics::gauge!("orbit_queue_info", "queue" => queue.clone(), "name" => row.label)
                            .set(1.0);
                        metrics::gauge!("orbit_queue_paused", "queue" => queue).set(v)
                    }
                    "queue_permits" => {
                        metrics::gauge!("orbit_queue_permits", "queue" => queue).set(v)
                    }
                    "key_permits" => metrics::gauge!("orbit_key_permits").set(v),
                    "sessions" => {
                        let state = match row.label.as_str() {
                            "active" => "active",
                            "draining" => "draining",
                            _ => "other",
                        };
                        metrics::gauge!("orbit_sessions", "state" => state).set(v)
                    }
                    "application_active_attempts" => metrics::gauge!(
                        "orbit_application_active_attempts",
                        "application" => row.label
                    )
                    .set(v),
                    "application_incomplete_tasks" => metrics::gauge!(
                        "orbit_application_incomplete_tasks",
                        "application" => row.label
                    )
                    .set(v),
                    other => {
                        tracing::warn!(metric = other, "unknown gauge from orbit_metrics_snapshot")
                    }
                }
            }
            key_gauges(db).await;
            metrics::gauge!("orbit_database_up").set(1.0);
        }
        Err(e) => {
            tracing::warn!(error = %e, "metrics scrape could not read the database");
            metrics::gauge!("orbit_database_up").set(0.0);
        }
    }
    GAUGE_READS_DONE.fetch_add(1, Ordering::Release);
}

/// Sets the key gauges from `orbit_key_metrics`, which answers every queue, zeros included (so
/// no series keeps a stale value).
async fn key_gauges(db: &Db) {
    let Ok(rows) = db.key_metrics().await else {
        return;
    };
    for g in rows {
        let (namespace, queue) = (g.namespace_id.to_string(), g.queue_id);
        metrics::gauge!(format!("orbit_{}", g.metric), "namespace" => namespace, "queue" => queue)
            .set(g.value);
    }
}

/// The metrics reference of docs/operations.md (between its `metrics reference` markers),
/// rendered from [`FAMILIES`]; a test keeps the document equal to it.
pub fn reference_markdown() -> String {
    let mut md = String::from("| metric | type | labels | meaning |\n| --- | --- | --- | --- |\n");
    for f in FAMILIES {
        let labels = if f.labels.is_empty() {
            "—".to_string()
        } else {
            f.labels
                .iter()
                .map(|l| format!("`{l}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        md.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            f.name,
            f.kind.as_str(),
            labels,
            f.help.replace('|', "\\|")
        ));
    }
    md
}
