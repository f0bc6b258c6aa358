//! The keyed-concurrency scenario of SPEC §7 / the design note §5.
//!
//! Two fresh queues get one task each with the same fresh `concurrency_key`; two SDK workers
//! (capacity 4) run them. The handler writes through a fenced in-memory resource model with its
//! `concurrency_token`; the attempts API shows the tokens increasing; a replay of the older write is
//! rejected by the fence; both workers drain. Prints exactly two lines, within 20 s or exits
//! non-zero after a bounded cleanup.
//!
//! ```sh
//! ORBIT_URL=http://127.0.0.1:8080 ORBIT_CREDENTIALS_FILE=/tmp/orbit-keyed.credentials.json \
//!   cargo run --example keyed-concurrency
//! ```
//! The credentials need queues:manage, tasks:submit, tasks:read, workers:connect and
//! workers:consume on every queue of the namespace (`orbit admin bootstrap --worker-access`).
//! The in-memory model only shows where the atomic check belongs; it is not a production store.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use orbit_sdk::client::SubmitTask;
use orbit_sdk::credentials::Credentials;
use orbit_sdk::{Client, Fence, FenceDecision, FenceWrite, HandlerError, InMemoryFence, Worker};
use serde_json::json;

const NAMESPACE: &str = "keyed-example";

#[tokio::main]
async fn main() -> ExitCode {
    let (url, creds) = match config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("keyed-concurrency: {e}");
            return ExitCode::from(2);
        }
    };
    let fence = Arc::new(InMemoryFence::new());
    let mut workers = Vec::new();
    let outcome = tokio::time::timeout(
        Duration::from_secs(20),
        run(&url, &creds, fence, &mut workers),
    )
    .await;
    match outcome {
        Ok(Ok(lines)) => {
            println!("{lines}");
            ExitCode::SUCCESS
        }
        Ok(Err(e)) => {
            eprintln!("keyed-concurrency: {e}");
            cleanup(workers).await;
            ExitCode::from(1)
        }
        Err(_) => {
            eprintln!("keyed-concurrency: did not finish within 20 s");
            cleanup(workers).await;
            ExitCode::from(1)
        }
    }
}

fn config() -> Result<(String, Credentials), String> {
    let url = std::env::var("ORBIT_URL")
        .map_err(|_| "set ORBIT_URL (e.g. http://127.0.0.1:8080)".to_string())?;
    let file = std::env::var("ORBIT_CREDENTIALS_FILE")
        .map_err(|_| "set ORBIT_CREDENTIALS_FILE".to_string())?;
    let creds = Credentials::load(&file).map_err(|e| format!("cannot read {file}: {e}"))?;
    Ok((url, creds))
}

/// Bounded cleanup: stop the workers without waiting for a drain.
async fn cleanup(workers: Vec<orbit_sdk::WorkerHandle>) {
    for w in &workers {
        w.abort();
    }
}

async fn run(
    url: &str,
    creds: &Credentials,
    fence: Arc<InMemoryFence>,
    workers: &mut Vec<orbit_sdk::WorkerHandle>,
) -> Result<String, String> {
    let client = Client::new(url, &creds.token);
    let run_id = format!("{:016x}", rand::random::<u64>());
    let key = format!("example/{run_id}");
    let mut queues = Vec::new();
    for i in 0..2 {
        queues.push(
            client
                .create_queue(&format!("keyed-{run_id}-{i}"))
                .await
                .map_err(|e| format!("create queue: {e}"))?
                .id,
        );
    }
    let mut task_ids = Vec::new();
    for (i, q) in queues.iter().enumerate() {
        let t = SubmitTask {
            queue_id: q.clone(),
            handler: "object.update".into(),
            handler_version: "v1".into(),
            payload_version: "v1".into(),
            payload: json!({"operation_ref": format!("update-{i}"), "object_ref": key}),
            concurrency_key: Some(key.clone()),
            ..Default::default()
        };
        let submitted = client
            .submit(&format!("{run_id}-op-{i}"), &t)
            .await
            .map_err(|e| format!("submit: {e}"))?;
        task_ids.push(submitted.task.id);
    }
    for w in 0..2 {
        let fence = fence.clone();
        let mut worker =
            Worker::new(url, &creds.token, &format!("keyed-example-{run_id}-{w}")).capacity(4);
        for q in &queues {
            worker = worker.queue(q);
        }
        let worker = worker.handler("object.update", "v1", move |ctx| {
            let fence = fence.clone();
            async move {
                let token = ctx.concurrency_token.ok_or_else(|| {
                    HandlerError::Permanent(json!("a keyed task without a token"))
                })?;
                let write = FenceWrite {
                    namespace: NAMESPACE.into(),
                    key: ctx.concurrency_key.clone().unwrap_or_default(),
                    token,
                    operation_id: ctx.task.payload["operation_ref"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    value: Some(format!("written by attempt {}", ctx.attempt_id)),
                    slot: None,
                };
                match fence.write(&write).await {
                    Ok(FenceDecision::Accepted | FenceDecision::Duplicate) => {
                        Ok(json!({"token": token.to_string()}))
                    }
                    Ok(FenceDecision::Stale { highest }) => Err(HandlerError::Permanent(
                        json!({"stale": highest.to_string()}),
                    )),
                    Err(e) => Err(HandlerError::Retryable(json!(e.to_string()))),
                }
            }
        });
        workers.push(worker.start());
    }

    // Wait (bounded by the caller's 20 s) until both tasks have finished.
    let mut completed = 0;
    while completed < 2 {
        completed = 0;
        for id in &task_ids {
            let t = client
                .task(*id)
                .await
                .map_err(|e| format!("read task: {e}"))?;
            match t.state.as_str() {
                "SUCCEEDED" => completed += 1,
                "FAILED" | "CANCELLED" | "EXPIRED" | "NEEDS_REVIEW" => {
                    return Err(format!("task {id} ended {}", t.state))
                }
                _ => {}
            }
        }
        if completed < 2 {
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    // Tokens from the attempts API (history only), in grant order.
    let mut grants = Vec::new();
    for id in &task_ids {
        for a in client
            .attempts(*id)
            .await
            .map_err(|e| format!("attempts: {e}"))?
        {
            let granted_at = a
                .rest
                .get("granted_at")
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_string();
            grants.push((
                granted_at,
                a.token()
                    .ok_or("an attempt of a keyed task without a token")?,
            ));
        }
    }
    grants.sort();
    let tokens: Vec<u64> = grants.iter().map(|g| g.1).collect();
    let tokens_increasing = tokens.len() >= 2 && tokens.windows(2).all(|p| p[0] < p[1]);

    // Replay the older holder's write: the resource has seen a larger token and refuses it.
    let stale = FenceWrite {
        namespace: NAMESPACE.into(),
        key: key.clone(),
        token: tokens[0],
        operation_id: format!("{run_id}-replayed-stale-write"),
        value: Some("stale".into()),
        slot: None,
    };
    let stale_write_rejected = matches!(fence.write(&stale).await, Ok(FenceDecision::Stale { .. }));
    let resource_writes = fence.accepted().len();

    let mut worker_drained = true;
    for w in workers.drain(..) {
        worker_drained &= w.drain().await.map(|r| r.drained).unwrap_or(false);
    }
    Ok(format!(
        "queues={} completed={completed} tokens_increasing={tokens_increasing}\nresource_writes={resource_writes} stale_write_rejected={stale_write_rejected} worker_drained={worker_drained}",
        queues.len()
    ))
}
