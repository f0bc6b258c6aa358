//! Stress: submitters send bursts of debounced keyed tasks, delayed keyed and unkeyed tasks and
//! plain ones while claimers on separate connections run them and a scheduler promotes the due
//! ones; then a checker over the history: no accepted task lost, no task claimed before its
//! run_at, every replaced task names a later task of its key and queue, and the debounced tasks
//! that ran never had overlapping windows (at most one per key and queue per window).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, Utc};
use orbit::db::tasks::{NewTask, Timing};
use orbit::db::workers::Outcome;
use orbit::db::Db;
use orbit::testing::Fixture;
use rand::{Rng, SeedableRng};

const SUBMITTERS: u64 = 4;
const WORKERS: usize = 8;
const KEYS: usize = 6;
/// How long the submitters run.
const SUBMIT_FOR: Duration = Duration::from_secs(8);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delayed_and_debounced_tasks_are_never_lost_and_debounce_runs_one_per_window() {
    let f = Fixture::new().await;
    let q2 = f.queue("q2").await;
    let queues = [f.queue_id.clone(), q2.clone()];
    let db = f.own_pool(WORKERS as u32 + SUBMITTERS as u32 + 2).await;
    let seed = orbit::testing::stress_seed();

    let done = Arc::new(AtomicBool::new(false));
    // When each task's first grant reached its worker, by this host's clock (the database's
    // granted_at is the claim's start, which may precede a lock wait).
    let received: Arc<Mutex<HashMap<u64, DateTime<Utc>>>> = Arc::default();
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let (db, done, received) = (db.clone(), done.clone(), received.clone());
        let session = f
            .session(&format!("worker-{w}"), true, &[&queues[0], &queues[1]])
            .await;
        workers.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed.wrapping_add(w as u64 + 100));
            while !done.load(Ordering::Relaxed) {
                let grants = db.task_claim(session, 2, 30_000).await.expect("claim");
                if grants.is_empty() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                let now = Utc::now();
                for g in &grants {
                    received.lock().unwrap().entry(g.task.id).or_insert(now);
                }
                for g in grants {
                    let start = db
                        .attempt_start(session, g.attempt_id)
                        .await
                        .expect("start");
                    assert!(start.accepted, "{start:?}");
                    tokio::time::sleep(Duration::from_millis(rng.gen_range(0..15))).await;
                    // Some retries: a retried debounced task runs again, in its own window.
                    let (outcome, retryable) = if rng.gen_bool(0.1) {
                        (Outcome::Failed, true)
                    } else {
                        (Outcome::Succeeded, false)
                    };
                    db.attempt_finish(session, g.attempt_id, outcome, retryable, None, None)
                        .await
                        .expect("finish");
                }
            }
        }));
    }
    // The scheduler's promotion, as `orbit serve` runs it.
    let scheduler = {
        let (db, done) = (db.clone(), done.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                db.task_promote_due(1000).await.expect("promote");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };

    let template = f.task(&f.queue_id, "");
    let submit_queues = queues.clone();
    let accepted =
        orbit::testing::submit_for(&db, f.hash, SUBMITTERS, seed, SUBMIT_FOR, 120, move |rng| {
            let key = format!("key-{}", rng.gen_range(0..KEYS));
            let timing = match rng.gen_range(0..10) {
                0..=5 => Timing {
                    debounce_seconds: Some(1),
                    debounce_max_seconds: rng.gen_bool(0.5).then_some(2),
                    ..Default::default()
                },
                6..=7 => Timing {
                    delay_seconds: Some(rng.gen_range(0..3)),
                    ..Default::default()
                },
                _ => Timing::default(),
            };
            let unkeyed = timing.debounce_seconds.is_none() && rng.gen_bool(0.3);
            NewTask {
                queue_id: submit_queues[rng.gen_range(0..2)].clone(),
                concurrency_key: Some(if unkeyed { String::new() } else { key }),
                retry_base_ms: Some(0),
                max_attempts: Some(10),
                timing,
                ..template.clone()
            }
        })
        .await;
    // Every task ends: the last debounced ones run a second or two after the last submit.
    orbit::testing::until_every_task_ended(db.pool(), Duration::from_secs(120)).await;
    done.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    scheduler.await.unwrap();
    let received = received.lock().unwrap().clone();
    check(&db, &accepted, &received).await;
}

#[derive(sqlx::FromRow)]
struct Row {
    id: u64,
    queue_id: String,
    resource_id: u64,
    state: String,
    debounce_seconds: u32,
    run_at: NaiveDateTime,
    /// A debounced task's window end: its run_at as accepted (acceptance + debounce, at most its
    /// burst's bound), which a retry moves on; run_at for other tasks.
    window_end: NaiveDateTime,
    created_at: NaiveDateTime,
    replaced_by: Option<u64>,
    attempts: i64,
}

async fn check(db: &Db, accepted: &[u64], received: &HashMap<u64, DateTime<Utc>>) {
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT t.id, CAST(t.queue_id AS CHAR) AS queue_id, t.resource_id, CAST(t.state AS CHAR) AS state,
                t.debounce_seconds, t.run_at, t.created_at,
                IF(t.debounce_seconds > 0,
                   LEAST(DATE_ADD(t.created_at, INTERVAL t.debounce_seconds SECOND),
                         COALESCE(t.debounce_until, DATE_ADD(t.created_at, INTERVAL t.debounce_seconds SECOND))),
                   t.run_at) AS window_end,
                CAST(JSON_VALUE(t.error, '$.replaced_by') AS UNSIGNED) AS replaced_by,
                (SELECT COUNT(*) FROM orbit_attempt a WHERE a.task_id = t.id) AS attempts
           FROM orbit_task t ORDER BY t.id",
    )
    .fetch_all(db.pool())
    .await
    .unwrap();
    let by_id: HashMap<u64, &Row> = rows.iter().map(|r| (r.id, r)).collect();
    // No accepted task lost, none invented.
    let mut ids: Vec<u64> = accepted.to_vec();
    ids.sort_unstable();
    assert_eq!(ids, rows.iter().map(|r| r.id).collect::<Vec<_>>());
    let (mut replaced, mut ran_debounced) = (0, 0);
    for r in &rows {
        match r.state.as_str() {
            "SUCCEEDED" | "FAILED" => {
                assert!(r.attempts > 0, "task {} ended without running", r.id);
                // A retry moves run_at; the first grant is checked against the first run_at.
                if r.attempts == 1 {
                    assert_eq!(r.run_at, r.window_end, "task {}'s run_at as accepted", r.id);
                    let got = received[&r.id];
                    assert!(
                        got >= r.run_at.and_utc(),
                        "task {} reached a worker at {got}, before its run_at {} (debounce {})",
                        r.id,
                        r.run_at,
                        r.debounce_seconds
                    );
                }
            }
            "CANCELLED" => {
                // Only debounce cancels here: a replaced task never ran, and names a later task of
                // its key and queue.
                let by = r
                    .replaced_by
                    .unwrap_or_else(|| panic!("task {} cancelled without a successor", r.id));
                let s = by_id[&by];
                assert!(s.id > r.id && s.resource_id == r.resource_id && s.queue_id == r.queue_id);
                assert!(s.debounce_seconds > 0 && r.debounce_seconds > 0);
                assert!(s.created_at >= r.created_at);
                assert!(
                    s.created_at < r.run_at,
                    "task {} replaced after its window",
                    r.id
                );
                assert_eq!(r.attempts, 0, "a replaced task never ran");
                replaced += 1;
            }
            other => panic!("task {} ended {other}", r.id),
        }
    }
    // At most one debounced task per key and queue per window: of two that ran, the later was
    // accepted once the earlier's window had closed (its run_at as accepted: a retry of the
    // earlier one moves its run_at past a later task's acceptance, rightly).
    let mut ran: HashMap<(u64, &str), Vec<&Row>> = HashMap::new();
    for r in rows
        .iter()
        .filter(|r| r.debounce_seconds > 0 && r.attempts > 0)
    {
        ran.entry((r.resource_id, r.queue_id.as_str()))
            .or_default()
            .push(r);
        ran_debounced += 1;
    }
    for runs in ran.values() {
        for w in runs.windows(2) {
            assert!(
                w[1].created_at >= w[0].window_end,
                "debounced tasks {} and {} both ran within one window",
                w[0].id,
                w[1].id
            );
        }
    }
    println!(
        "stress_timing: {} tasks, {replaced} replaced, {ran_debounced} debounced ran",
        rows.len()
    );
    assert!(
        replaced > 0 && ran_debounced > 0,
        "the run exercised debounce"
    );
}
