//! The answer checker: every HTTP answer the run reads must be the answer to its own request.
//! Submits are checked as they are answered (the task that comes back carries the payload and
//! key that were sent), a reader reads accepted tasks back through the run (each answer is for
//! the task asked for, with its payload), and a second tenant reads the first tenant's ids
//! (never anything but 404 or 503). During a `PauseDatabase` fault a burst of clients that give
//! up after 0.2-1 s abandons requests mid-call, the case that once crossed answers between
//! requests and tenants.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use orbit_sdk::client::{SubmitTask, Task};
use orbit_sdk::Client;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

/// What the answers showed.
#[derive(Debug, Default)]
pub struct Answers {
    /// Answers read and checked.
    pub checked: AtomicU64,
    /// A 200 for another request: another task, another payload, or another tenant's task.
    pub crossed: AtomicU64,
    /// 500s: an answer the server could not give (never expected, even under faults).
    pub internal: AtomicU64,
    /// The first crossed or internal answers, described.
    pub details: Mutex<Vec<String>>,
}

impl Answers {
    fn note(&self, counter: &AtomicU64, what: String) {
        counter.fetch_add(1, Ordering::Relaxed);
        let mut details = self.details.lock().expect("details");
        if details.len() < 20 {
            details.push(what);
        }
    }

    /// Checks a submit's answer against what was sent.
    pub fn submitted(&self, sent: &SubmitTask, got: &Task) {
        self.checked.fetch_add(1, Ordering::Relaxed);
        if got.payload != sent.payload || got.concurrency_key != sent.concurrency_key {
            self.note(
                &self.crossed,
                format!(
                    "submit of {} answered with task {} carrying {}",
                    sent.payload, got.id, got.payload
                ),
            );
        }
    }

    /// Checks `GET /v1/tasks/{id}` as the task's owner, expecting `payload`.
    pub async fn read_own(&self, client: &Client, id: u64, payload: &serde_json::Value) {
        match client.task(id).await {
            Ok(t) => {
                self.checked.fetch_add(1, Ordering::Relaxed);
                if t.id != id || &t.payload != payload {
                    self.note(
                        &self.crossed,
                        format!(
                            "read of task {id} answered with task {} carrying {}",
                            t.id, t.payload
                        ),
                    );
                }
            }
            Err(e) if e.status == 500 => self.note(
                &self.internal,
                format!("read of task {id}: 500 {}", e.message),
            ),
            Err(_) => {}
        }
    }

    /// Checks `GET /v1/tasks/{id}` as another tenant: never a 200.
    pub async fn read_foreign(&self, other: &Client, id: u64) {
        match other.task(id).await {
            Ok(t) => self.note(
                &self.crossed,
                format!(
                    "another tenant read task {id} and got task {} carrying {}",
                    t.id, t.payload
                ),
            ),
            Err(e) if e.status == 500 => self.note(
                &self.internal,
                format!("foreign read of task {id}: 500 {}", e.message),
            ),
            Err(_) => {
                self.checked.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Accepted tasks with the payload each was submitted with.
pub type Accepted = Arc<Mutex<Vec<(u64, serde_json::Value)>>>;

fn pick(accepted: &Accepted, rng: &mut StdRng) -> Option<(u64, serde_json::Value)> {
    let list = accepted.lock().expect("accepted");
    (!list.is_empty()).then(|| list[rng.gen_range(0..list.len())].clone())
}

/// Reads accepted tasks back until `end`, one at a time, as their owner and as the other tenant.
pub async fn reader(
    answers: Arc<Answers>,
    owner: Client,
    other: Client,
    accepted: Accepted,
    end: Instant,
    seed: u64,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    while Instant::now() < end {
        if let Some((id, payload)) = pick(&accepted, &mut rng) {
            answers.read_own(&owner, id, &payload).await;
            answers.read_foreign(&other, id).await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A burst of `n` reads by clients that give up after 0.2-1 s (the database is paused meanwhile);
/// the few answered in time are checked like any other.
pub async fn abandoning_burst(
    answers: Arc<Answers>,
    client: Client,
    accepted: Accepted,
    n: usize,
    seed: u64,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut reads = Vec::new();
    for _ in 0..n {
        let Some((id, payload)) = pick(&accepted, &mut rng) else {
            return;
        };
        let give_up = Duration::from_millis(rng.gen_range(200..1000));
        let (answers, client) = (answers.clone(), client.clone());
        reads.push(async move {
            let _ = tokio::time::timeout(give_up, answers.read_own(&client, id, &payload)).await;
        });
    }
    futures_util::future::join_all(reads).await;
}
