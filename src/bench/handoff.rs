//! `handoff-sql`: the hot key's hand-off in SQL alone, without the façade.
//!
//! One key across two queues and one `start_on_assign` session of capacity 4 (as `hotkey`'s
//! workers), then a loop of `orbit_attempt_finish` calls from one connection: each ends the
//! attempt that holds the key and grants the key's next task in the same transaction, the call
//! `serve` makes for each result. Each call asks for one task, as the results of a session with
//! nothing else ready do (`serve`'s idle sessions: they ask only for the hand-off). Latency is per
//! call, as the client sees it; tasks/s is calls/s. What the procedures cost, without the
//! WebSocket hops and the worker: the figure to compare when a procedure changes.
//!
//! With `--ready-backlog N`, N unkeyed tasks of the key's priority wait ready in the key's first
//! queue beside it, which the calls never take: the hand-off's cost must not grow with them.

use std::time::Instant;

use serde_json::json;

use super::{progress, tenant, BenchDb, Report, HOTKEY_CAPACITY};
use crate::db::tasks::NewTask;
use crate::db::workers::{AttemptResult, ClaimAfter, Outcome, SessionOpen};
use crate::db::DbError;

const LEASE_MS: u32 = 60_000;

/// A `bench.noop` task for `queue_id`, under `key` ("" = none).
fn noop_task(queue_id: &str, key: &str) -> NewTask {
    NewTask {
        queue_id: queue_id.into(),
        handler: "bench.noop".into(),
        handler_version: "v1".into(),
        payload_version: "v1".into(),
        payload: "{}".into(),
        concurrency_key: Some(key.into()),
        ..Default::default()
    }
}

/// Runs `calls` hand-offs beside `ready_backlog` ready unkeyed tasks; `baseline` is the same
/// run's durable commits/s.
pub async fn run(
    bench: &BenchDb,
    calls: u32,
    ready_backlog: u64,
    baseline: f64,
) -> Result<Report, DbError> {
    let db = &bench.db;
    let t = tenant(db).await?;
    let second = db
        .queue_create(
            &t.hash,
            Some(t.namespace_id),
            &format!("hot-{}", crate::auth::new_queue_id()),
            None,
            None,
        )
        .await?
        .id;
    let queues = [t.queue_id.clone(), second];
    // One task more than calls: the first is claimed, and each call ends one and grants the next.
    let tasks: Vec<(String, NewTask)> = (0..=calls as usize)
        .map(|n| (format!("handoff-{n}"), noop_task(&queues[n % 2], "hot")))
        .collect();
    for chunk in tasks.chunks(1000) {
        db.task_submit_many(&t.hash, chunk).await?;
    }
    // The backlog after the key's tasks: the first claim below takes the key's first task.
    let backlog_bar = progress(ready_backlog, "ready backlog");
    let mut submitted = 0;
    while submitted < ready_backlog {
        let chunk: Vec<(String, NewTask)> = (submitted..ready_backlog.min(submitted + 1000))
            .map(|n| (format!("ready-{n}"), noop_task(&queues[0], "")))
            .collect();
        db.task_submit_many(&t.hash, &chunk).await?;
        submitted += chunk.len() as u64;
        backlog_bar.set_position(submitted);
    }
    backlog_bar.finish_and_clear();
    let session = db
        .session_open(
            &t.hash,
            &SessionOpen {
                worker_id: "bench-handoff".into(),
                node: "bench".into(),
                capacity: HOTKEY_CAPACITY,
                concurrency_keys: true,
                start_on_assign: true,
                queue_ids: queues.to_vec(),
                ..Default::default()
            },
        )
        .await?
        .session_id;
    let not_handed_on =
        || DbError::Internal("a result did not hand the key to its next task".into());
    let mut attempt = db
        .task_claim(session, 1, LEASE_MS)
        .await?
        .first()
        .ok_or_else(not_handed_on)?
        .attempt_id;

    let meter = bench.meter(None).await?;
    let bar = progress(u64::from(calls), "hand-offs");
    let mut latencies = Vec::with_capacity(calls as usize);
    let started = Instant::now();
    for _ in 0..calls {
        let result = AttemptResult {
            attempt_id: attempt,
            outcome: Outcome::Succeeded,
            retryable: false,
            output: None,
            error: None,
        };
        let claim = ClaimAfter {
            max: 1,
            lease_ms: LEASE_MS,
        };
        let call = Instant::now();
        let finished = db.attempt_finish_many(session, &[result], claim).await?;
        latencies.push(call.elapsed());
        attempt = finished
            .grants
            .first()
            .ok_or_else(not_handed_on)?
            .attempt_id;
        bar.inc(1);
    }
    bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    let cost = meter.per_task(u64::from(calls)).await?;
    Ok(Report::throughput(
        "handoff-sql",
        calls,
        seconds,
        &mut latencies,
        baseline,
        json!({ "latency": "one orbit_attempt_finish call (a result and the next grant)",
                "capacity": HOTKEY_CAPACITY, "claim_max": 1, "queues": 2,
                "ready_backlog": ready_backlog }),
    )
    .costing(cost))
}
