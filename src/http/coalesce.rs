//! Single submits (`POST /v1/tasks`) that arrive while earlier ones are being called share one
//! `orbit_task_submit_many` call.
//!
//! Why: a single submit costs the database a call, a transaction and a durable commit of its own,
//! a task of a batch a fraction of that (BENCHMARKS.md, "submit" against "submit, single"). So at
//! most [`CALLS`] rounds of single submits are called at once, and what arrives meanwhile waits
//! for the next round, which takes all of it: one call per credential. An idle server calls a
//! submit at once, as before, and a round of one task is an `orbit_task_submit` call.
//!
//! Each request gets what a call of its own would give it. `orbit_task_submit_many` gives each
//! task exactly what `orbit_task_submit` gives it (the same receipt, replay or conflict, and a key
//! used twice replays its first use, as two racing submits do). The batch is all or nothing, so
//! when the shared call fails (one task's bad field, an Idempotency-Key reused with another body,
//! a full quota, a busy key's policy) each of its tasks is then called on its own, and each
//! request gets its own answer. A 503 (the database cannot be reached or is saturated) is every
//! task's answer, as it would have been; a client sends the request again with its
//! Idempotency-Key.
//!
//! Bounds: at most [`WAITING`] submits wait for a round (more wait to enter, as a request waits
//! for a connection), a round takes at most [`ROUND_TASKS`] tasks and about [`ROUND_BYTES`] of
//! task text (what one `POST /v1/tasks/batch` may carry; a larger task goes alone), and at most
//! [`CALLS`] rounds run at once. A request whose client gives up leaves its task in the round:
//! it is accepted or refused all the same, and a retry with its key replays it.

use std::sync::Arc;

use futures_util::future::join_all;
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::db::tasks::{NewTask, Submitted};
use crate::db::{Db, DbError};

/// Rounds called at once. Small on purpose: while they run, later submits gather for the next.
pub const CALLS: usize = 2;
/// Submits that may wait for a round.
pub const WAITING: usize = 1024;
/// Tasks a round takes at most.
pub const ROUND_TASKS: usize = 100;
/// Task text a round takes at most (estimated as each task's strings plus 1 KiB).
pub const ROUND_BYTES: usize = crate::http::envelope::BODY_LIMIT;

/// One single submit waiting for its round.
struct Pending {
    token_hash: [u8; 32],
    idempotency_key: String,
    task: NewTask,
    bytes: usize,
    answer: oneshot::Sender<Result<Submitted, DbError>>,
}

/// The way in to the rounds; cheap to clone.
#[derive(Clone)]
pub struct Submits {
    waiting: mpsc::Sender<Pending>,
}

impl Submits {
    /// Starts the rounds over `db` (a task of the current runtime, which ends with the last
    /// clone of the returned handle).
    pub fn start(db: Db) -> Submits {
        let (waiting, rx) = mpsc::channel(WAITING);
        tokio::spawn(rounds(db, rx));
        Submits { waiting }
    }

    /// Submits one task in the next round and waits for its answer.
    pub async fn submit(
        &self,
        token_hash: &[u8; 32],
        idempotency_key: &str,
        task: NewTask,
    ) -> Result<Submitted, DbError> {
        let (answer, answered) = oneshot::channel();
        let bytes = 1024
            + task.payload.len()
            + task.handler.len()
            + task.business_key.as_ref().map_or(0, String::len)
            + task.concurrency_key.as_ref().map_or(0, String::len);
        let pending = Pending {
            token_hash: *token_hash,
            idempotency_key: idempotency_key.to_string(),
            task,
            bytes,
            answer,
        };
        metrics::gauge!("orbit_submits_waiting").increment(1.0);
        if self.waiting.send(pending).await.is_err() {
            metrics::gauge!("orbit_submits_waiting").decrement(1.0);
            return Err(DbError::Unavailable("the server is shutting down".into()));
        }
        answered
            .await
            .map_err(|_| DbError::Internal("a submit round ended without an answer".into()))?
    }
}

/// Takes rounds off the queue: waits for a free call, then takes everything waiting (within the
/// round's bounds) and calls it.
async fn rounds(db: Db, mut waiting: mpsc::Receiver<Pending>) {
    let calls = Arc::new(Semaphore::new(CALLS));
    // A submit taken off the queue that did not fit the round before: the next round's first.
    let mut carried: Option<Pending> = None;
    loop {
        let Ok(permit) = calls.clone().acquire_owned().await else {
            return;
        };
        let first = match carried.take() {
            Some(p) => p,
            None => match waiting.recv().await {
                Some(p) => p,
                None => return,
            },
        };
        let mut bytes = first.bytes;
        let mut round = vec![first];
        while round.len() < ROUND_TASKS {
            match waiting.try_recv() {
                Ok(p) if bytes + p.bytes > ROUND_BYTES => {
                    carried = Some(p);
                    break;
                }
                Ok(p) => {
                    bytes += p.bytes;
                    round.push(p);
                }
                Err(_) => break,
            }
        }
        // A carried submit still waits.
        metrics::gauge!("orbit_submits_waiting").decrement(round.len() as f64);
        let db = db.clone();
        tokio::spawn(async move {
            call_round(&db, round).await;
            drop(permit);
        });
    }
}

/// Calls one round: one call per credential, all at once.
async fn call_round(db: &Db, round: Vec<Pending>) {
    let mut groups: Vec<Vec<Pending>> = Vec::new();
    for p in round {
        match groups.iter_mut().find(|g| g[0].token_hash == p.token_hash) {
            Some(g) => g.push(p),
            None => groups.push(vec![p]),
        }
    }
    join_all(groups.into_iter().map(|g| call_group(db, g))).await;
}

/// Calls one credential's tasks of a round: together when there are several, and each on its own
/// when that fails (or when it is alone).
async fn call_group(db: &Db, group: Vec<Pending>) {
    let token_hash = group[0].token_hash;
    let (items, answers): (Vec<(String, NewTask)>, Vec<_>) = group
        .into_iter()
        .map(|p| ((p.idempotency_key, p.task), p.answer))
        .unzip();
    if items.len() > 1 {
        match db.task_submit_many(&token_hash, &items).await {
            Ok(submitted) => {
                metrics::counter!("orbit_submits_shared_total").increment(items.len() as u64);
                for (answer, s) in answers.into_iter().zip(submitted) {
                    let _ = answer.send(Ok(s));
                }
                return;
            }
            Err(e @ DbError::Unavailable(_)) => {
                for answer in answers {
                    let _ = answer.send(Err(e.clone()));
                }
                return;
            }
            // All or nothing: one task's refusal refused the others; each is asked on its own.
            Err(_) => {}
        }
    }
    join_all(
        items
            .iter()
            .zip(answers)
            .map(|((key, task), answer)| async move {
                let _ = answer.send(db.task_submit(&token_hash, key, task).await);
            }),
    )
    .await;
}
