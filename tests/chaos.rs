//! The chaos harness and its checker: the checker counts each kind of violation in a tampered
//! history (so a clean report means something), and a short `orbit chaos` run under every fault
//! kind ends with a clean summary line.

use orbit::chaos::checker::{self, append_operation_id, element};
use orbit::db::keys::KeyPolicySpec;
use orbit::db::workers::Outcome;
use orbit::testing::{Fixture, TestDb};
use orbit_sdk::fence::mysql::MySqlFence;
use orbit_sdk::{Fence, FenceWrite};

/// Two holders of one key, one after the other, each finished: a clean history.
async fn two_holders(f: &Fixture) -> (u64, u64, Vec<u64>) {
    let a = f.submit(&f.queue_id, "k").await;
    let b = f.submit(&f.queue_id, "k").await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let mut attempts = Vec::new();
    for _ in 0..2 {
        let g = f.db.task_claim(s, 10, 30_000).await.unwrap();
        assert_eq!(g.len(), 1, "one holder of the key at a time");
        let id = g[0].attempt_id;
        f.db.attempt_start(s, id).await.unwrap();
        f.db.attempt_finish(s, id, Outcome::Succeeded, false, Some("{}"), None)
            .await
            .unwrap();
        attempts.push(id);
    }
    (attempts[0], attempts[1], vec![a.id, b.id])
}

#[tokio::test]
async fn the_checker_passes_a_clean_history_and_counts_each_violation() {
    let f = Fixture::new().await;
    let (first, second, tasks) = two_holders(&f).await;
    let clean = checker::check(f.db.pool(), None, &tasks).await.unwrap();
    assert!(clean.ok(), "{:?}", clean.details);
    assert_eq!((clean.grants, clean.tasks), (2, 2));
    assert_eq!(
        clean.summary(3).to_string(),
        "tasks=2 faults=3 overlaps=0 token_regressions=0 lost_updates=0 lost_tasks=0 crossed_answers=0 internal_errors=0 rate_violations=0"
    );

    // The first holder "released" after the second was granted, with a token as large.
    sqlx::query(
        "UPDATE orbit_attempt a JOIN orbit_attempt b ON b.id = ? \
            SET a.release_version = b.grant_version + 1, a.concurrency_token = b.concurrency_token \
          WHERE a.id = ?",
    )
    .bind(second)
    .bind(first)
    .execute(f.db.pool())
    .await
    .unwrap();
    // A task the producer saw accepted that does not exist, and one that never ended.
    let waiting = f.submit(&f.queue_id, "").await;
    let mut accepted = tasks.clone();
    accepted.extend([u64::MAX - 1, waiting.id]);
    let report = checker::check(f.db.pool(), None, &accepted).await.unwrap();
    assert_eq!(
        report.summary(0).to_string(),
        "tasks=4 faults=0 overlaps=1 token_regressions=1 lost_updates=0 lost_tasks=2 crossed_answers=0 internal_errors=0 rate_violations=0"
    );
    assert!(!report.ok());
    assert_eq!(report.details.len(), 4, "{:?}", report.details);
}

#[tokio::test]
async fn the_checker_holds_a_key_to_its_limit_its_slots_and_its_rate() {
    let f = Fixture::new().await;
    let spec = KeyPolicySpec::new("exact", "k2", "queue")
        .limit(2)
        .rate(2, 60);
    f.db.key_policy_set(&f.hash, f.namespace_id, &spec)
        .await
        .unwrap();
    let s = f.session("w", true, &[&f.queue_id]).await;
    let a = f.submit(&f.queue_id, "k2").await;
    let b = f.submit(&f.queue_id, "k2").await;
    let mut held = f.db.task_claim(s, 10, 30_000).await.unwrap();
    held.extend(f.db.task_claim(s, 10, 30_000).await.unwrap());
    assert_eq!(held.len(), 2, "{held:?}");
    for g in &held {
        f.db.attempt_finish(s, g.attempt_id, Outcome::Succeeded, false, None, None)
            .await
            .unwrap();
    }
    // Two holders at once in slots 0 and 1, two grants in the window: all within the policy.
    let tasks = vec![a.id, b.id];
    let clean = checker::check(f.db.pool(), None, &tasks).await.unwrap();
    assert!(clean.ok(), "{:?}", clean.details);
    assert_eq!(clean.grants, 2);
    // The second holder "in" the first's slot: an overlap. A rate of 1 a minute: a violation.
    sqlx::query("UPDATE orbit_attempt SET key_slot = 0")
        .execute(f.db.pool())
        .await
        .unwrap();
    f.db.key_policy_set(&f.hash, f.namespace_id, &spec.rate(1, 60))
        .await
        .unwrap();
    let report = checker::check(f.db.pool(), None, &tasks).await.unwrap();
    assert_eq!(
        (report.overlaps, report.rate_violations),
        (1, 1),
        "{:?}",
        report.details
    );
    // At a limit of 1 the two holders overlap whatever their slots.
    sqlx::query("UPDATE orbit_attempt SET key_slot = id - (SELECT MIN(id) FROM (SELECT id FROM orbit_attempt) x)")
        .execute(f.db.pool())
        .await
        .unwrap();
    f.db.key_policy_set(
        &f.hash,
        f.namespace_id,
        &KeyPolicySpec::new("exact", "k2", "queue"),
    )
    .await
    .unwrap();
    let report = checker::check(f.db.pool(), None, &tasks).await.unwrap();
    assert_eq!(
        (report.overlaps, report.rate_violations),
        (1, 0),
        "{:?}",
        report.details
    );
    assert!(!report.ok());
}

#[tokio::test]
async fn the_checker_finds_a_lost_update_and_a_fence_token_regression() {
    let orbit = TestDb::installed().await;
    let resource = TestDb::fenced().await;
    let fence = MySqlFence::new(resource.pool.clone(), "test");
    let append = |token: u64, task: u64, attempt: u64, value: &str| {
        FenceWrite::write(
            "chaos",
            "key-0",
            token,
            &append_operation_id(task, attempt),
            value.to_string(),
        )
    };
    // Two appends, the second reading the first: nothing lost.
    let one = element(1, 1);
    let two = format!("{one} {}", element(2, 2));
    fence.write(&append(5, 1, 1, &one)).await.unwrap();
    fence.write(&append(6, 2, 2, &two)).await.unwrap();
    let clean = checker::check(&orbit.pool, Some(&resource.pool), &[])
        .await
        .unwrap();
    assert!(clean.ok(), "{:?}", clean.details);
    assert_eq!(clean.fenced_writes, 2);

    // A third holder that did not touch first and overwrote with a stale read: element 2.2 lost.
    fence.write(&append(7, 3, 3, &one)).await.unwrap();
    // And an accepted write that went back in token order (inserted behind the fence's back).
    sqlx::query(
        "INSERT INTO orbit_fence_operation (fence_namespace, resource_key, operation_id, token, accepted_at) \
         VALUES ('chaos', 'key-0', 'touch/9', 4, UTC_TIMESTAMP(6))",
    )
    .execute(&resource.pool)
    .await
    .unwrap();
    let report = checker::check(&orbit.pool, Some(&resource.pool), &[])
        .await
        .unwrap();
    assert_eq!(
        (report.lost_updates, report.token_regressions),
        (2, 1),
        "{:?}",
        report.details
    );
}

/// A short run with every fault kind (CI's version; the README documents a long one).
#[test]
fn a_short_chaos_run_keeps_every_guarantee() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_orbit"))
        .args([
            "chaos",
            "--duration",
            "40",
            "--fault-every",
            "3",
            "--seed",
            "20261202",
            // Half the workers start attempts with the grant: both kinds of holder share keys.
            "--start-on-assign",
        ])
        .output()
        .expect("run orbit chaos");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "orbit chaos failed: {stdout}\n{stderr}"
    );
    let last = stdout.lines().last().unwrap_or_default();
    let fields: Vec<(&str, u64)> = last
        .split(' ')
        .map(|kv| {
            let (k, v) = kv.split_once('=').expect("key=value");
            (k, v.parse().expect("a count"))
        })
        .collect();
    let names: Vec<&str> = fields.iter().map(|f| f.0).collect();
    assert_eq!(
        names,
        [
            "tasks",
            "faults",
            "overlaps",
            "token_regressions",
            "lost_updates",
            "lost_tasks",
            "crossed_answers",
            "internal_errors",
            "rate_violations"
        ]
    );
    let get = |name: &str| fields.iter().find(|f| f.0 == name).unwrap().1;
    assert!(get("tasks") >= 200, "{last}");
    assert!(get("faults") >= 5, "{last}");
    for violation in [
        "overlaps",
        "token_regressions",
        "lost_updates",
        "lost_tasks",
        "crossed_answers",
        "internal_errors",
    ] {
        assert_eq!(get(violation), 0, "{last}");
    }
    for kind in [
        "SIGKILL worker",
        "SIGSTOP worker",
        "KILL CONNECTION",
        "SIGKILL façade",
        "SIGKILL database",
        "SIGSTOP database",
    ] {
        assert!(stdout.contains(kind), "no '{kind}' fault in the schedule");
    }
}

/// `orbit chaos --policies`: key-0 under cancel_running (every submit cancels its running
/// holder, whose late writes the fence must refuse), key-1 under replace_waiting, under the
/// same faults. Every guarantee holds, and the policies did cancel tasks.
#[test]
fn a_short_chaos_run_with_key_policies_keeps_every_guarantee() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_orbit"))
        .args([
            "chaos",
            "--duration",
            "30",
            "--fault-every",
            "3",
            "--seed",
            "20261205",
            "--policies",
        ])
        .output()
        .expect("run orbit chaos");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "orbit chaos --policies failed: {stdout}\n{stderr}"
    );
    let last = stdout.lines().last().unwrap_or_default();
    for violation in [
        "overlaps=0",
        "token_regressions=0",
        "lost_updates=0",
        "lost_tasks=0",
        "crossed_answers=0",
        "internal_errors=0",
    ] {
        assert!(last.contains(violation), "{last}");
    }
    assert!(
        stdout.contains("key-0 cancel_running"),
        "the run set its key policies"
    );
    assert!(
        stdout.contains("\"CANCELLED\""),
        "the policies cancelled or replaced tasks: {stdout}"
    );
}
