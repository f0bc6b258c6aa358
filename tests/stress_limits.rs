//! Stress: submitters send tasks to keys with holder limits and rates while claimers on separate
//! connections hold them for a moment and end them (most succeed, some fail and retry, some are
//! abandoned to lease expiry), and a promoter stands in for the scheduler's
//! `orbit_task_promote_due`. Then the checker `orbit chaos` uses: never more holders than a
//! key's limit, never two live holders in one slot, tokens increasing, no rate window with more
//! grants than the rate, no accepted task lost. The limits must also have been reached: every
//! slot of each limited key was granted, so the run proves concurrency, not just exclusion.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use orbit::db::keys::KeyPolicySpec;
use orbit::db::workers::Outcome;
use orbit::testing::Fixture;
use rand::{Rng, SeedableRng};

const SUBMITTERS: u64 = 3;
const WORKERS: usize = 8;
const SUBMIT_FOR: Duration = Duration::from_secs(6);
/// (key, limit, rate as (grants, per seconds)).
const KEYS: [(&str, u32, Option<(u32, u32)>); 5] = [
    ("pair/0", 2, None),
    ("trio/1", 3, None),
    ("api/2", 1, Some((5, 1))),
    ("api/3", 2, Some((4, 1))),
    ("one/4", 1, None),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn limits_and_rates_hold_under_many_claimers() {
    let f = Fixture::new().await;
    for (key, limit, rate) in KEYS {
        let mut spec = KeyPolicySpec::new("exact", key, "queue").limit(limit);
        if let Some((grants, seconds)) = rate {
            spec = spec.rate(grants, seconds);
        }
        f.db.key_policy_set(&f.hash, f.namespace_id, &spec)
            .await
            .unwrap();
    }
    let q2 = f.queue("q2").await;
    let queues = [f.queue_id.clone(), q2];
    let db = f.own_pool(WORKERS as u32 + SUBMITTERS as u32 + 3).await;
    let seed = orbit::testing::stress_seed();

    let done = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let (db, done) = (db.clone(), done.clone());
        let session = f
            .session(&format!("worker-{w}"), true, &[&queues[0], &queues[1]])
            .await;
        workers.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed.wrapping_add(w as u64 + 100));
            while !done.load(Ordering::Relaxed) {
                // Short leases: an abandoned attempt is recovered within a second.
                let grants = db.task_claim(session, 2, 1_000).await.expect("claim");
                if grants.is_empty() {
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    continue;
                }
                for g in grants {
                    tokio::time::sleep(Duration::from_millis(rng.gen_range(1..30))).await;
                    match rng.gen_range(0..20) {
                        // Abandoned: the lease runs out and recovery ends it.
                        0 => continue,
                        1 | 2 => db
                            .attempt_finish(
                                session,
                                g.attempt_id,
                                Outcome::Failed,
                                true,
                                None,
                                None,
                            )
                            .await
                            .expect("fail"),
                        _ => db
                            .attempt_finish(
                                session,
                                g.attempt_id,
                                Outcome::Succeeded,
                                false,
                                None,
                                None,
                            )
                            .await
                            .expect("finish"),
                    };
                }
            }
        }));
    }
    // The scheduler's part: due retries, lease recovery and rate wake-ups.
    let promoter = {
        let (db, done) = (db.clone(), done.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                db.task_promote_due(500).await.expect("promote");
                db.lease_recover(500).await.expect("recover");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };

    let template = orbit::db::tasks::NewTask {
        retry_base_ms: Some(1),
        retry_max_ms: Some(50),
        max_attempts: Some(5),
        ..f.task(&f.queue_id, "")
    };
    let accepted =
        orbit::testing::submit_for(&db, f.hash, SUBMITTERS, seed, SUBMIT_FOR, 15, move |rng| {
            orbit::db::tasks::NewTask {
                queue_id: queues[rng.gen_range(0..2)].clone(),
                concurrency_key: Some(KEYS[rng.gen_range(0..KEYS.len())].0.to_string()),
                ..template.clone()
            }
        })
        .await;
    orbit::testing::until_every_task_ended(db.pool(), Duration::from_secs(180)).await;
    done.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    promoter.await.unwrap();

    let report = orbit::chaos::checker::check(db.pool(), None, &accepted)
        .await
        .unwrap();
    println!(
        "stress_limits: {} ({} grants, {} tasks by state {:?})",
        report.summary(0),
        report.grants,
        accepted.len(),
        report.states
    );
    assert!(report.ok(), "violations: {:#?}", report.details);
    // Every slot of every limited key was used: the keys really had that many holders.
    for (key, limit, _) in KEYS {
        let slots: Vec<u32> = sqlx::query_scalar(
            "SELECT DISTINCT CAST(a.key_slot AS UNSIGNED) FROM orbit_attempt a \
               JOIN orbit_resource r ON r.id = a.resource_id WHERE r.concurrency_key = ? ORDER BY 1",
        )
        .bind(key.as_bytes())
        .fetch_all(db.pool())
        .await
        .unwrap();
        assert_eq!(slots, (0..limit).collect::<Vec<_>>(), "{key}");
    }
    // The rates bound: each rate key was held back at least once (it had more tasks than its
    // rate lets through in the run), visible as grants spaced by the rate's window.
    for (key, _, rate) in KEYS {
        let Some((grants, seconds)) = rate else {
            continue;
        };
        let times: Vec<i64> = sqlx::query_scalar(
            "SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', a.granted_at) AS SIGNED) \
               FROM orbit_attempt a JOIN orbit_resource r ON r.id = a.resource_id \
              WHERE r.concurrency_key = ? ORDER BY a.grant_version",
        )
        .bind(key.as_bytes())
        .fetch_all(db.pool())
        .await
        .unwrap();
        let g = grants as usize;
        assert!(times.len() > 2 * g, "{key}: only {} grants", times.len());
        let tight = times
            .windows(g + 1)
            .filter(|w| w[g] - w[0] < i64::from(seconds) * 1_100_000)
            .count();
        assert!(tight > 0, "{key}: the rate never bound");
    }
}
