//! The keyed workload of the chaos run (and of the Galera test): each task reads its key slot's
//! fenced register, appends its own element, and writes it back with its `concurrency_token`. A
//! holder that lost its permit while paused must find its write fenced off; an element the fence
//! accepted must survive in the register (the [`checker`](super::checker) proves both). The
//! register is the slot's (`FenceWrite::in_slot`): a key of limit N has N live holders, each the
//! only one in its slot; a key of limit 1 has slot 0 alone, one register as before.

use std::time::Duration;

use orbit_sdk::client::SubmitTask;
use orbit_sdk::{Client, Fence, FenceDecision, FenceWrite, HandlerError, TaskContext};
use serde_json::{json, Value};

use super::checker::{append_operation_id, element};

/// The handler name (version `v1`) the workload's tasks carry.
pub const HANDLER: &str = "chaos.append";
/// The fence namespace the registers live in.
pub const FENCE_NAMESPACE: &str = "chaos";

/// Why a fenced append did not happen.
#[derive(Debug)]
pub enum AppendError {
    /// The register has seen a newer token: this holder lost its permit.
    FencedOff { token: u64, highest: u64 },
    /// The resource could not be reached; the attempt may try again.
    Storage(String),
    /// The task has no key or token (not a workload task).
    NotKeyed,
}

impl AppendError {
    /// The handler's answer: fenced off and storage failures are retryable (a newer attempt, if
    /// any, does the work); a task without a key is a permanent failure.
    pub fn into_handler_error(self) -> HandlerError {
        match self {
            AppendError::FencedOff { token, highest } => HandlerError::Retryable(
                json!({"fenced_off": {"token": token.to_string(), "highest": highest.to_string()}}),
            ),
            AppendError::Storage(e) => HandlerError::Retryable(json!({"storage": e})),
            AppendError::NotKeyed => HandlerError::Permanent(json!("a workload task needs a key")),
        }
    }
}

/// Touch, read, append, write: the successor's protocol against a paused predecessor. The touch
/// raises the register's token first, so a predecessor's late write is refused rather than
/// silently overwritten by this holder's read-modify-write.
pub async fn fenced_append<F: Fence>(fence: &F, ctx: &TaskContext) -> Result<Value, AppendError> {
    let (Some(key), Some(token)) = (ctx.concurrency_key.as_deref(), ctx.concurrency_token) else {
        return Err(AppendError::NotKeyed);
    };
    let slot = ctx.key_slot.unwrap_or(0);
    let storage = |e: orbit_sdk::FenceError| AppendError::Storage(e.to_string());
    let touch = FenceWrite::touch(
        FENCE_NAMESPACE,
        key,
        token,
        &format!("touch/{}", ctx.attempt_id),
    )
    .in_slot(slot);
    if let FenceDecision::Stale { highest } = fence.write(&touch).await.map_err(storage)? {
        return Err(AppendError::FencedOff { token, highest });
    }
    let (highest, value) = fence
        .read_slot(FENCE_NAMESPACE, key, slot)
        .await
        .map_err(storage)?
        .unwrap_or_default();
    if highest > token {
        return Err(AppendError::FencedOff { token, highest });
    }
    // Widen the read-modify-write window so pauses and kills land inside it.
    tokio::time::sleep(Duration::from_millis(rand::random::<u64>() % 150)).await;
    let mine = element(ctx.task.id, ctx.attempt_id);
    let appended = if value.is_empty() {
        mine
    } else {
        format!("{value} {mine}")
    };
    let write = FenceWrite::write(
        FENCE_NAMESPACE,
        key,
        token,
        &append_operation_id(ctx.task.id, ctx.attempt_id),
        appended,
    )
    .in_slot(slot);
    match fence.write(&write).await.map_err(storage)? {
        FenceDecision::Accepted | FenceDecision::Duplicate => {
            Ok(json!({"token": token.to_string()}))
        }
        FenceDecision::Stale { highest } => Err(AppendError::FencedOff { token, highest }),
    }
}

/// A workload task on `key`: retried on unknown outcomes too (the fence makes a repeat safe),
/// with enough attempts that faults rarely exhaust them.
pub fn task(queue_id: &str, key: &str, n: u64) -> SubmitTask {
    SubmitTask {
        queue_id: queue_id.to_string(),
        handler: HANDLER.into(),
        handler_version: "v1".into(),
        payload_version: "v1".into(),
        payload: json!({"n": n}),
        concurrency_key: Some(key.to_string()),
        max_attempts: Some(25),
        retry_base_ms: Some(100),
        retry_max_ms: Some(1000),
        retry_unknown: Some(true),
        ..Default::default()
    }
}

/// Submits with one Idempotency-Key until the server answers with the task (201, or 200 for a
/// repeat of an earlier accepted attempt), retrying unavailability and lost connections; gives up
/// with the last error at `deadline`. Only an answered submit counts as accepted.
pub async fn submit_until_accepted(
    client: &Client,
    idempotency_key: &str,
    task: &SubmitTask,
    deadline: tokio::time::Instant,
) -> Result<orbit_sdk::client::Task, String> {
    let mut backoff = Duration::from_millis(50);
    loop {
        match client.submit(idempotency_key, task).await {
            Ok(s) => return Ok(s.task),
            Err(e) if e.status == 0 || e.status >= 500 || e.status == 429 => {
                if tokio::time::Instant::now() + backoff > deadline {
                    return Err(e.to_string());
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Used by [`fenced_append`]'s callers to print one line per fenced-off write.
pub fn describe(e: &AppendError, ctx: &TaskContext) -> String {
    match e {
        AppendError::FencedOff { token, highest } => format!(
            "fenced-off task={} attempt={} token={token} highest={highest}",
            ctx.task.id, ctx.attempt_id
        ),
        AppendError::Storage(s) => format!(
            "storage-error task={} attempt={}: {s}",
            ctx.task.id, ctx.attempt_id
        ),
        AppendError::NotKeyed => format!("not-keyed task={}", ctx.task.id),
    }
}
