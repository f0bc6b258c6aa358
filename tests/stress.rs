//! Stress: 32 concurrent claimers on separate connections over 20 keys and 2,000 tasks with random
//! success, retryable failure, permanent failure, unknown outcome, lease expiry and cancel; then an
//! invariant checker over the attempt history; keyed batches submitted while workers run; and
//! grouped results racing lease recovery and cancels.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use orbit::db::tasks::Resolution;
use orbit::db::workers::Outcome;
use orbit::db::Db;
use orbit::testing::Fixture;
use rand::{Rng, SeedableRng};

const WORKERS: usize = 32;
const KEYS: usize = 20;
const TASKS: usize = 2_000;
const QUOTA: u32 = 40;

async fn open_tasks(db: &Db) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM orbit_task WHERE state NOT IN ('SUCCEEDED','FAILED','CANCELLED','EXPIRED')")
        .fetch_one(db.pool())
        .await
        .unwrap()
}

/// One round of a stress run's operator: promotes due retries, and resolves up to 50
/// NEEDS_REVIEW tasks, each as `resolution` picks.
async fn promote_and_resolve(db: &Db, hash: &[u8; 32], mut resolution: impl FnMut() -> Resolution) {
    db.task_promote_due(1000).await.unwrap();
    let review: Vec<u64> =
        sqlx::query_scalar("SELECT id FROM orbit_task WHERE state = 'NEEDS_REVIEW' LIMIT 50")
            .fetch_all(db.pool())
            .await
            .unwrap();
    for id in review {
        db.task_resolve(hash, id, resolution(), None).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claimers_keep_every_invariant() {
    let f = Fixture::new().await;
    sqlx::query("UPDATE orbit_application_quota SET max_active_attempts = ?")
        .bind(QUOTA)
        .execute(f.db.pool())
        .await
        .unwrap();
    let q2 = f.queue("q2").await;
    let queues = [f.queue_id.clone(), q2.clone()];
    // Separate connections for the claimers (one each) and the operator.
    let db = f.own_pool(WORKERS as u32 + 2).await;
    let seed = orbit::testing::stress_seed();

    // 2,000 tasks: 90% keyed over 20 keys, spread over both queues; fast retries.
    let mut submitters = Vec::new();
    for part in 0..4 {
        let (db, hash, queues) = (db.clone(), f.hash, queues.clone());
        let template = f.task(&f.queue_id, "");
        submitters.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ part);
            for i in 0..TASKS / 4 {
                let mut t = template.clone();
                t.queue_id = queues[rng.gen_range(0..2)].clone();
                t.concurrency_key = Some(if rng.gen_bool(0.9) {
                    format!("key-{}", rng.gen_range(0..KEYS))
                } else {
                    String::new()
                });
                t.retry_base_ms = Some(0);
                t.retry_unknown = Some(rng.gen_bool(0.2));
                t.priority = Some(rng.gen_range(0..10));
                db.task_submit(&hash, &format!("s-{part}-{i}"), &t)
                    .await
                    .unwrap();
            }
        }));
    }
    for s in submitters {
        s.await.unwrap();
    }

    let done = Arc::new(AtomicBool::new(false));
    let violations = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for w in 0..WORKERS {
        let (db, f_hash, done, queues) = (db.clone(), f.hash, done.clone(), queues.clone());
        let session = f
            .session(&format!("worker-{w}"), true, &[&queues[0], &queues[1]])
            .await;
        handles.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed.wrapping_add(w as u64 + 100));
            let mut granted = 0u64;
            while !done.load(Ordering::Relaxed) {
                let grants = db.task_claim(session, 4, 30_000).await.expect("claim");
                if grants.is_empty() {
                    tokio::task::yield_now().await;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    continue;
                }
                granted += grants.len() as u64;
                for g in grants {
                    let roll: f64 = rng.gen();
                    if roll < 0.05 {
                        db.task_cancel(&f_hash, g.task.id).await.expect("cancel");
                        continue;
                    }
                    if roll < 0.15 {
                        // The holder stalls past its lease: recovery takes the permit back.
                        expire(&db, g.attempt_id).await;
                        db.lease_recover(100).await.expect("recover");
                        continue;
                    }
                    let start = db
                        .attempt_start(session, g.attempt_id)
                        .await
                        .expect("start");
                    assert!(start.accepted, "start of a fresh grant: {start:?}");
                    let (outcome, retryable) = match rng.gen_range(0..100) {
                        0..=59 => (Outcome::Succeeded, false),
                        60..=79 => (Outcome::Failed, true),
                        80..=87 => (Outcome::Failed, false),
                        _ => (Outcome::Unknown, false),
                    };
                    db.attempt_finish(session, g.attempt_id, outcome, retryable, None, None)
                        .await
                        .expect("finish");
                }
            }
            granted
        }));
    }

    // The operator: resolves NEEDS_REVIEW tasks, promotes retries, samples the quota counters.
    let started = Instant::now();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0xabcdef);
    loop {
        let (active, permits, attempts): (u32, i64, i64) = sqlx::query_as(
            "SELECT CAST(SUM(active_attempts) AS UNSIGNED), (SELECT COUNT(*) FROM orbit_attempt WHERE released_at IS NULL), \
                    (SELECT COUNT(*) FROM orbit_attempt WHERE state IN ('LEASED','RUNNING')) FROM orbit_application_quota",
        )
        .fetch_one(db.pool())
        .await
        .unwrap();
        if active > QUOTA || i64::from(active) != permits || permits != attempts {
            violations.fetch_add(1, Ordering::Relaxed);
            eprintln!(
                "quota sample violated: active={active} permits={permits} attempts={attempts}"
            );
        }
        promote_and_resolve(&db, &f.hash, || {
            [
                Resolution::Requeue,
                Resolution::Succeeded,
                Resolution::Failed,
            ][rng.gen_range(0..3)]
        })
        .await;
        if open_tasks(&db).await == 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "stress run did not converge; {} tasks open",
            open_tasks(&db).await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    done.store(true, Ordering::Relaxed);
    let mut granted = 0;
    for h in handles {
        granted += h.await.unwrap();
    }
    println!(
        "stress: {TASKS} tasks, {granted} grants in {:?}, {} deadlock/lock-wait retries",
        started.elapsed(),
        orbit::db::RETRIED.load(Ordering::Relaxed)
    );
    assert_eq!(violations.load(Ordering::Relaxed), 0);
    check_history(&db, TASKS, KEYS).await;
}

/// Keyed batches submitted while workers run: 4 submitters send batches of 25 tasks over 10
/// shared keys and new ones they create together, into keys that workers hold and release
/// meanwhile. Every task must run (none is left blocked behind
/// a free key, none ready twice for one key), each key's holders never overlap and its tokens only
/// grow (the history checker).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keyed_batches_submitted_while_workers_run_keep_every_invariant() {
    const BATCHES: usize = 40;
    const PER_BATCH: usize = 25;
    let f = Fixture::new().await;
    let db = f.own_pool(16).await;
    let seed = orbit::testing::stress_seed();
    let done = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for w in 0..8 {
        let (db, done) = (db.clone(), done.clone());
        let session = f
            .session(&format!("worker-{w}"), true, &[&f.queue_id])
            .await;
        workers.push(tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                let grants = db.task_claim(session, 4, 30_000).await.expect("claim");
                if grants.is_empty() {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    continue;
                }
                for g in grants {
                    db.attempt_start(session, g.attempt_id)
                        .await
                        .expect("start");
                    db.attempt_finish(session, g.attempt_id, Outcome::Succeeded, false, None, None)
                        .await
                        .expect("finish");
                }
            }
        }));
    }
    let mut submitters = Vec::new();
    for part in 0..4 {
        let (db, hash) = (db.clone(), f.hash);
        let template = f.task(&f.queue_id, "");
        submitters.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ (part + 7));
            for b in 0..BATCHES / 4 {
                // 10 shared keys, and 3 new keys each batch index, which the 4 submitters'
                // batches of that index create at about the same time.
                let items: Vec<_> = (0..PER_BATCH)
                    .map(|i| {
                        let mut t = template.clone();
                        t.concurrency_key = Some(if i < 3 {
                            format!("wave-{b}-{i}")
                        } else {
                            format!("key-{}", rng.gen_range(0..10))
                        });
                        (format!("kb-{part}-{b}-{i}"), t)
                    })
                    .collect();
                let out = db.task_submit_many(&hash, &items).await.expect("submit");
                assert!(out.iter().all(|s| !s.replayed));
            }
        }));
    }
    for s in submitters {
        s.await.unwrap();
    }
    orbit::testing::until_every_task_ended(db.pool(), Duration::from_secs(120)).await;
    done.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    let succeeded: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM orbit_task WHERE state = 'SUCCEEDED'")
            .fetch_one(db.pool())
            .await
            .unwrap();
    assert_eq!(succeeded, (BATCHES * PER_BATCH) as i64);
    check_history(&db, BATCHES * PER_BATCH, 10 + BATCHES / 4 * 3).await;
}

/// Every ending takes one path (`orbit_attempt_end`): workers send the results of a claim or a
/// hand-off in one call (keyed and unkeyed, every outcome, now and then a result twice, half the
/// calls granting the freed capacity in the same transaction), while a recoverer ends expired
/// attempts and the workers cancel some of their own. Each attempt is ended once and by one
/// ending: a result that finds its attempt ended another way is kept as its late result and
/// changes nothing, a result's acknowledgement says whether it ended its attempt, and the history
/// checker finds no overlapping holders, no token regression and no permit or quota charge left.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grouped_results_racing_recovery_and_cancels_keep_every_invariant() {
    const GROUP_TASKS: usize = 1_000;
    const GROUP_WORKERS: usize = 12;
    let f = Fixture::new().await;
    let q2 = f.queue("q2").await;
    let queues = [f.queue_id.clone(), q2.clone()];
    let db = f.own_pool(GROUP_WORKERS as u32 + 3).await;
    let seed = orbit::testing::stress_seed();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x6e0d);
    for i in 0..GROUP_TASKS {
        let mut t = f.task(&queues[rng.gen_range(0..2)], "");
        t.concurrency_key = Some(if rng.gen_bool(0.7) {
            format!("key-{}", rng.gen_range(0..KEYS))
        } else {
            String::new()
        });
        t.retry_base_ms = Some(0);
        t.retry_unknown = Some(rng.gen_bool(0.3));
        db.task_submit(&f.hash, &format!("g-{i}"), &t)
            .await
            .unwrap();
    }

    // What the results ended, by the acknowledgements: attempt -> the outcome sent.
    let ended_by_result = Arc::new(std::sync::Mutex::new(std::collections::HashMap::new()));
    let done = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for w in 0..GROUP_WORKERS {
        let (db, hash, done, ended) = (db.clone(), f.hash, done.clone(), ended_by_result.clone());
        let session = f
            .session(&format!("grouped-{w}"), true, &[&queues[0], &queues[1]])
            .await;
        handles.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed.wrapping_add(w as u64 + 500));
            while !done.load(Ordering::Relaxed) {
                let mut grants = db.task_claim(session, 4, 30_000).await.expect("claim");
                if grants.is_empty() {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    continue;
                }
                // The grants of a claim, then those each call hands back, a group at a time.
                while !grants.is_empty() {
                    let mut results = Vec::new();
                    for g in &grants {
                        let roll: f64 = rng.gen();
                        if roll < 0.05 {
                            // Cancelled before it starts; a recovery may have moved it first.
                            match db.task_cancel(&hash, g.task.id).await {
                                Ok(_) | Err(orbit::db::DbError::StateConflict(_)) => {}
                                Err(e) => panic!("cancel: {e}"),
                            }
                        } else if roll < 0.15 {
                            // The lease runs out: recovered now (the result below comes late) or
                            // by the recoverer, racing the result.
                            expire(&db, g.attempt_id).await;
                            if rng.gen_bool(0.5) {
                                db.lease_recover(100).await.expect("recover");
                            }
                        } else if rng.gen_bool(0.7) {
                            db.attempt_start(session, g.attempt_id)
                                .await
                                .expect("start");
                        }
                        let (outcome, retryable) = match rng.gen_range(0..100) {
                            0..=59 => (Outcome::Succeeded, false),
                            60..=79 => (Outcome::Failed, true),
                            80..=87 => (Outcome::Failed, false),
                            _ => (Outcome::Unknown, false),
                        };
                        let result = orbit::db::workers::AttemptResult {
                            attempt_id: g.attempt_id,
                            outcome,
                            retryable,
                            output: None,
                            error: None,
                        };
                        if rng.gen_bool(0.05) {
                            results.push(result.clone());
                        }
                        results.push(result);
                    }
                    let claim = if rng.gen_bool(0.5) {
                        orbit::db::workers::ClaimAfter {
                            max: grants.len() as u32,
                            lease_ms: 30_000,
                        }
                    } else {
                        orbit::db::workers::ClaimAfter::NONE
                    };
                    let finished = db
                        .attempt_finish_many(session, &results, claim)
                        .await
                        .expect("finish");
                    assert_eq!(finished.acks.len(), results.len());
                    let mut ended = ended.lock().unwrap();
                    for (ack, result) in finished.acks.iter().zip(&results) {
                        assert_eq!(ack.attempt_id, result.attempt_id);
                        assert_eq!(ack.code, "", "{ack:?}");
                        if !ack.duplicate {
                            let sent = serde_json::to_value(result.outcome).unwrap();
                            assert!(
                                ended.insert(result.attempt_id, sent).is_none(),
                                "attempt {} ended twice by results",
                                result.attempt_id
                            );
                        }
                    }
                    grants = finished.grants;
                }
            }
        }));
    }
    let recoverer = {
        let (db, done) = (db.clone(), done.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                db.lease_recover(100).await.expect("recover");
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
        })
    };

    // The operator: resolves NEEDS_REVIEW tasks and promotes retries until every task is done.
    let started = Instant::now();
    while open_tasks(&db).await > 0 {
        promote_and_resolve(&db, &f.hash, || Resolution::Requeue).await;
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "grouped stress run did not converge; {} tasks open",
            open_tasks(&db).await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    done.store(true, Ordering::Relaxed);
    for h in handles {
        h.await.unwrap();
    }
    recoverer.await.unwrap();

    // Each attempt a result ended carries that result's outcome; every other ended attempt was
    // ended by recovery or a cancel, and a result sent for it after that is its late result.
    let rows: Vec<(u64, String, String)> = sqlx::query_as(
        "SELECT id, CAST(outcome AS CHAR), CAST(late_result AS CHAR) FROM orbit_attempt",
    )
    .fetch_all(db.pool())
    .await
    .unwrap();
    let ended = ended_by_result.lock().unwrap();
    let mut late = 0;
    for (id, outcome, late_result) in &rows {
        match ended.get(id) {
            Some(sent) => {
                assert_eq!(sent.as_str(), Some(outcome.as_str()), "attempt {id}");
                assert_eq!(late_result, "", "attempt {id} ended by its result");
            }
            None => {
                assert!(
                    ["expired", "unknown", "cancelled"].contains(&outcome.as_str()),
                    "attempt {id} ended by no result: {outcome}"
                );
                late += usize::from(!late_result.is_empty());
            }
        }
    }
    assert!(late > 0, "no result came after its attempt's recovery");
    println!(
        "grouped stress: {} attempts, {} ended by results, {late} late results, {} retries",
        rows.len(),
        ended.len(),
        orbit::db::RETRIED.load(Ordering::Relaxed)
    );
    check_history(&db, GROUP_TASKS, KEYS).await;
}

async fn expire(db: &Db, attempt_id: u64) {
    for sql in [
        "UPDATE orbit_attempt SET lease_expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE id = ? AND state IN ('LEASED','RUNNING')",
    ] {
        sqlx::query(sql).bind(attempt_id).execute(db.pool()).await.unwrap();
    }
}

/// The invariant checker (the one `orbit chaos` uses) over the whole attempt history of `tasks`
/// tasks over `key_count` keys, plus the bookkeeping this run must leave at zero.
async fn check_history(db: &Db, tasks: usize, key_count: usize) {
    let ids: Vec<u64> = sqlx::query_scalar("SELECT id FROM orbit_task ORDER BY id")
        .fetch_all(db.pool())
        .await
        .unwrap();
    assert_eq!(ids.len(), tasks);
    let report = orbit::chaos::checker::check(db.pool(), None, &ids)
        .await
        .unwrap();
    println!("stress: {} ({} grants)", report.summary(0), report.grants);
    assert!(report.ok(), "violations: {:#?}", report.details);
    let keys: i64 = sqlx::query_scalar(
        "SELECT COUNT(DISTINCT resource_id) FROM orbit_attempt WHERE resource_id <> 0",
    )
    .fetch_one(db.pool())
    .await
    .unwrap();
    assert_eq!(keys as usize, key_count, "every key was granted");
    let states = &report.states;
    assert!(
        states
            .keys()
            .all(|s| ["SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED"].contains(&s.as_str())),
        "{states:?}"
    );
    let gaps: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM (SELECT task_id, MAX(attempt_no) m, COUNT(*) c FROM orbit_attempt GROUP BY task_id) x WHERE m <> c",
    )
    .fetch_one(db.pool())
    .await
    .unwrap();
    assert_eq!(gaps, 0);
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
    println!("stress: states {states:?}");
}
