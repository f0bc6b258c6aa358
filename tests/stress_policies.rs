//! Stress: submitters send tasks to keys under `cancel_running` and `replace_waiting` key
//! policies while claimers on separate connections hold the keys and write to a fenced register
//! with their tokens, ignoring every cancellation (the worst worker). Then the checker `orbit
//! chaos` uses (one holder per key at a time, tokens increasing, no accepted task lost), plus:
//! every cancelled task was replaced by a later task of its key or was a holder a submit
//! cancelled, and every write a holder started after a newer holder's write was accepted is
//! refused by the fence.

use orbit::db::keys::KeyPolicySpec;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use orbit::db::workers::Outcome;
use orbit::db::Db;
use orbit::testing::Fixture;
use rand::{Rng, SeedableRng};

const SUBMITTERS: u64 = 4;
const WORKERS: usize = 6;
const SUBMIT_FOR: Duration = Duration::from_secs(6);
/// Keys 0 and 1 cancel their running holder; keys 2 and 3 replace their waiting tasks.
const KEYS: [(&str, &str); 4] = [
    ("acct/0", "cancel_running"),
    ("acct/1", "cancel_running"),
    ("doc/2", "replace_waiting"),
    ("doc/3", "replace_waiting"),
];

/// One write a holder attempted: its key, attempt, token, the fence's decision, and when the
/// call started and ended (this process's clock).
#[derive(Clone, Debug)]
struct Write {
    key: &'static str,
    attempt_id: u64,
    token: u64,
    accepted: bool,
    started: Instant,
    ended: Instant,
}

async fn fence_write(db: &Db, key: &str, token: u64, op: &str) -> bool {
    let row = sqlx::query("CALL orbit_fence_write('default', ?, ?, ?, 'stress', ?)")
        .bind(key)
        .bind(token)
        .bind(op)
        .bind(op)
        .fetch_one(db.pool())
        .await
        .expect("fence write");
    let decision: Vec<u8> = sqlx::Row::get(&row, 0);
    match decision.as_slice() {
        b"accepted" => true,
        b"stale" => false,
        other => panic!("unexpected decision {:?}", String::from_utf8_lossy(other)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn policies_never_let_two_holders_act_and_fence_every_cancelled_holder() {
    let f = Fixture::new().await;
    f.test_db.install_fence().await;
    for (key, on_busy) in KEYS {
        f.db.key_policy_set(
            &f.hash,
            f.namespace_id,
            &KeyPolicySpec::new("exact", key, on_busy),
        )
        .await
        .unwrap();
    }
    let q2 = f.queue("q2").await;
    let queues = [f.queue_id.clone(), q2];
    let db = f.own_pool(WORKERS as u32 + SUBMITTERS as u32 + 2).await;
    let seed = orbit::testing::stress_seed();

    let done = Arc::new(AtomicBool::new(false));
    let writes: Arc<Mutex<Vec<Write>>> = Arc::default();
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let (db, done, writes) = (db.clone(), done.clone(), writes.clone());
        let session = f
            .session(&format!("worker-{w}"), true, &[&queues[0], &queues[1]])
            .await;
        workers.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed.wrapping_add(w as u64 + 100));
            while !done.load(Ordering::Relaxed) {
                let grants = db.task_claim(session, 1, 30_000).await.expect("claim");
                let Some(g) = grants.into_iter().next() else {
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    continue;
                };
                let key: &'static str = KEYS
                    .iter()
                    .find(|(k, _)| Some(*k) == g.task.concurrency_key.as_deref())
                    .expect("a policy key")
                    .0;
                // A start refused means a submit already cancelled it: it still writes (the
                // worst worker), and the fence must refuse it once a newer holder wrote.
                let _ = db
                    .attempt_start(session, g.attempt_id)
                    .await
                    .expect("start");
                for step in 0..2 {
                    let started = Instant::now();
                    let accepted = fence_write(
                        &db,
                        key,
                        g.concurrency_token,
                        &format!("a{}-{step}", g.attempt_id),
                    )
                    .await;
                    writes.lock().unwrap().push(Write {
                        key,
                        attempt_id: g.attempt_id,
                        token: g.concurrency_token,
                        accepted,
                        started,
                        ended: Instant::now(),
                    });
                    tokio::time::sleep(Duration::from_millis(rng.gen_range(1..25))).await;
                }
                // A cancelled attempt's result is acknowledged and changes nothing.
                db.attempt_finish(session, g.attempt_id, Outcome::Succeeded, false, None, None)
                    .await
                    .expect("finish");
            }
        }));
    }

    let template = f.task(&f.queue_id, "");
    let accepted =
        orbit::testing::submit_for(&db, f.hash, SUBMITTERS, seed, SUBMIT_FOR, 40, move |rng| {
            orbit::db::tasks::NewTask {
                queue_id: queues[rng.gen_range(0..2)].clone(),
                concurrency_key: Some(KEYS[rng.gen_range(0..KEYS.len())].0.to_string()),
                ..template.clone()
            }
        })
        .await;
    orbit::testing::until_every_task_ended(db.pool(), Duration::from_secs(120)).await;
    done.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    let writes = writes.lock().unwrap().clone();
    check(&db, &accepted, &writes).await;
}

async fn check(db: &Db, accepted: &[u64], writes: &[Write]) {
    // One holder per key at a time, tokens increasing, nothing accepted lost.
    let report = orbit::chaos::checker::check(db.pool(), None, accepted)
        .await
        .unwrap();
    println!(
        "stress_policies: {} ({} grants)",
        report.summary(0),
        report.grants
    );
    assert!(report.ok(), "violations: {:#?}", report.details);

    // Every cancelled task was replaced by a later task of its key and queue, or was a holder
    // a cancel_running submit ended (its attempt ended CANCELLED).
    let cancelled: Vec<(u64, u64, String, Option<u64>, i64)> = sqlx::query_as(
        "SELECT t.id, t.resource_id, CAST(t.queue_id AS CHAR),
                CAST(JSON_VALUE(t.error, '$.replaced_by') AS UNSIGNED),
                (SELECT COUNT(*) FROM orbit_attempt a WHERE a.task_id = t.id AND a.state = 'CANCELLED')
           FROM orbit_task t WHERE t.state = 'CANCELLED'",
    )
    .fetch_all(db.pool())
    .await
    .unwrap();
    let mut holders_cancelled = 0;
    for (id, resource_id, queue_id, replaced_by, cancelled_attempts) in &cancelled {
        match replaced_by {
            Some(by) => {
                let (r, q): (u64, String) = sqlx::query_as(
                    "SELECT resource_id, CAST(queue_id AS CHAR) FROM orbit_task WHERE id = ?",
                )
                .bind(by)
                .fetch_one(db.pool())
                .await
                .unwrap();
                assert!(
                    *by > *id && r == *resource_id && q == *queue_id,
                    "task {id}"
                );
                assert_eq!(
                    *cancelled_attempts, 0,
                    "task {id}: a replaced task never ran"
                );
            }
            None => {
                assert_eq!(
                    *cancelled_attempts, 1,
                    "task {id} cancelled without a reason"
                );
                holders_cancelled += 1;
            }
        }
    }
    // The fence: a write that started after a larger token's write was accepted on the same key
    // is refused. That is what protects the resource from a cancelled holder that keeps going.
    let mut stale_after_cancel = 0;
    let mut by_key: HashMap<&str, Vec<&Write>> = HashMap::new();
    for w in writes {
        by_key.entry(w.key).or_default().push(w);
    }
    for list in by_key.values() {
        for w in list {
            let superseded = list
                .iter()
                .any(|n| n.accepted && n.token > w.token && n.ended < w.started);
            if superseded {
                assert!(
                    !w.accepted,
                    "attempt {} (token {}) wrote to {} after a newer holder: accepted",
                    w.attempt_id, w.token, w.key
                );
                stale_after_cancel += 1;
            }
        }
    }
    let counts: (i64, i64, u32, u64) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM orbit_attempt WHERE released_at IS NULL), \
                (SELECT COUNT(*) FROM orbit_resource WHERE holder_attempt_id <> 0), \
                CAST(SUM(active_attempts) AS UNSIGNED), CAST(SUM(incomplete_tasks) AS UNSIGNED) \
           FROM orbit_application_quota",
    )
    .fetch_one(db.pool())
    .await
    .unwrap();
    assert_eq!(counts, (0, 0, 0, 0), "permits and counters return to zero");
    println!(
        "stress_policies: {} tasks, {} cancelled ({holders_cancelled} running holders), {} writes, {stale_after_cancel} refused after a newer holder",
        accepted.len(),
        cancelled.len(),
        writes.len()
    );
    assert!(
        holders_cancelled > 0 && stale_after_cancel > 0,
        "the run exercised cancel_running and the fence"
    );
}
