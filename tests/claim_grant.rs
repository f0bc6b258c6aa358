//! orbit_task_claim (through orbit_task_grant): permits, tokens, lanes, quotas, filters, what a
//! claim skips, and what one grant writes.

mod claim;

use claim::{claim_seq, resource, session_starting_on_assign};
use orbit::db::tasks::TaskState;
use orbit::db::workers::Outcome;
use orbit::testing::Fixture;

#[tokio::test]
async fn a_grant_takes_the_next_token_and_advances_the_version() {
    let f = Fixture::new().await;
    f.submit(&f.queue_id, "k").await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap();
    assert_eq!(g.len(), 1);
    assert_eq!(g[0].concurrency_token, 1);
    assert_eq!(g[0].attempt_no, 1);
    assert_eq!(g[0].task.state, TaskState::Leased);
    assert_eq!(resource(&f, "k").await, (1, 1));
    // Two permits for one keyed attempt (its queue permit, the key's holder); the application
    // counts it once.
    let permits: (i64, i64, u32) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM orbit_attempt WHERE released_at IS NULL), \
                (SELECT COUNT(*) FROM orbit_resource WHERE holder_attempt_id <> 0), \
                (SELECT CAST(SUM(active_attempts) AS UNSIGNED) FROM orbit_application_quota)",
    )
    .fetch_one(f.db.pool())
    .await
    .unwrap();
    assert_eq!(permits, (1, 1, 1));
    // Release advances the version again; the next grant gets a larger token.
    f.db.attempt_finish(
        s,
        g[0].attempt_id,
        Outcome::Succeeded,
        false,
        Some("{}"),
        None,
    )
    .await
    .unwrap();
    assert_eq!(resource(&f, "k").await, (1, 2));
    f.submit(&f.queue_id, "k").await;
    let g2 = f.db.task_claim(s, 1, 30_000).await.unwrap();
    assert_eq!(g2[0].concurrency_token, 2);
}

#[tokio::test]
async fn one_task_per_key_per_batch_and_across_queues() {
    let f = Fixture::new().await;
    let q2 = f.queue("q2").await;
    for _ in 0..3 {
        f.submit(&f.queue_id, "k").await;
        f.submit(&q2, "k").await;
    }
    f.submit(&f.queue_id, "other").await;
    let s = f.session("w", true, &[&f.queue_id, &q2]).await;
    let grants = f.db.task_claim(s, 100, 30_000).await.unwrap();
    let keys: Vec<_> = grants
        .iter()
        .map(|g| g.task.concurrency_key.clone().unwrap())
        .collect();
    assert_eq!(
        grants.len(),
        2,
        "one grant for k (either queue) and one for other: {keys:?}"
    );
    assert!(keys.contains(&"k".to_string()) && keys.contains(&"other".to_string()));
    // Nothing more until k is released, whichever queue asks.
    assert!(f.db.task_claim(s, 100, 30_000).await.unwrap().is_empty());
}

#[tokio::test]
async fn sessions_without_concurrency_keys_never_get_keyed_tasks() {
    let f = Fixture::new().await;
    let keyed = f.submit(&f.queue_id, "k").await;
    let plain = f.submit(&f.queue_id, "").await;
    let old = f.session("old-worker", false, &[&f.queue_id]).await;
    let g = f.db.task_claim(old, 10, 30_000).await.unwrap();
    assert_eq!(
        g.iter().map(|g| g.task.id).collect::<Vec<_>>(),
        vec![plain.id]
    );
    assert_eq!(
        g[0].concurrency_token, 0,
        "an unkeyed grant carries no token"
    );
    assert!(
        f.db.task_claim(old, 10, 30_000).await.unwrap().is_empty(),
        "the keyed task waits for a capable worker"
    );
    let new = f.session("new-worker", true, &[&f.queue_id]).await;
    assert_eq!(
        f.db.task_claim(new, 10, 30_000).await.unwrap()[0].task.id,
        keyed.id
    );
}

#[tokio::test]
async fn paused_queues_are_skipped_and_pausing_releases_nothing() {
    let f = Fixture::new().await;
    f.submit(&f.queue_id, "k").await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let held = f.db.task_claim(s, 1, 30_000).await.unwrap();
    f.submit(&f.queue_id, "").await;
    f.db.queue_set_paused(&f.hash, &f.queue_id, true)
        .await
        .unwrap();
    assert!(f.db.task_claim(s, 10, 30_000).await.unwrap().is_empty());
    let keys: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM orbit_resource WHERE holder_attempt_id <> 0")
            .fetch_one(f.db.pool())
            .await
            .unwrap();
    assert_eq!(keys, 1, "pausing released nothing");
    assert!(
        f.db.attempt_start(s, held[0].attempt_id)
            .await
            .unwrap()
            .accepted,
        "in-flight work continues"
    );
    f.db.queue_set_paused(&f.hash, &f.queue_id, false)
        .await
        .unwrap();
    assert_eq!(f.db.task_claim(s, 10, 30_000).await.unwrap().len(), 1);
}

#[tokio::test]
async fn priority_orders_candidates() {
    let f = Fixture::new().await;
    let mut low = f.task(&f.queue_id, "");
    low.priority = Some(9);
    let mut high = f.task(&f.queue_id, "");
    high.priority = Some(0);
    let l = f.submit_task(&low).await;
    let h = f.submit_task(&high).await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let g = f.db.task_claim(s, 2, 30_000).await.unwrap();
    assert_eq!(
        g.iter().map(|g| g.task.id).collect::<Vec<_>>(),
        vec![h.id, l.id]
    );
}

#[tokio::test]
async fn a_thousand_blocked_tasks_do_not_hide_a_free_key() {
    let f = Fixture::new().await;
    f.submit(&f.queue_id, "hot").await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    f.db.task_claim(s, 1, 30_000).await.unwrap();
    // 1,000 tasks waiting on the occupied key, bulk-loaded through the real procedure.
    let mut handles = Vec::new();
    for chunk in 0..4 {
        let (db, hash, t) = (f.db.clone(), f.hash, f.task(&f.queue_id, "hot"));
        handles.push(tokio::spawn(async move {
            for i in 0..250 {
                db.task_submit(&hash, &format!("hot-{chunk}-{i}"), &t)
                    .await
                    .unwrap();
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let free = f.submit(&f.queue_id, "free").await;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap();
    assert_eq!(g.len(), 1);
    assert_eq!(g[0].task.id, free.id);
    let ready: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orbit_task WHERE lane = 'ready'")
        .fetch_one(f.db.pool())
        .await
        .unwrap();
    assert_eq!(
        ready, 0,
        "none of the 1,000 blocked tasks is in the claim's range"
    );
}

#[tokio::test]
async fn token_space_is_refused_at_its_end_never_wrapped() {
    let f = Fixture::new().await;
    let first = f.submit(&f.queue_id, "k").await;
    sqlx::query("UPDATE orbit_resource SET highest_token = 18446744073709551614")
        .execute(f.db.pool())
        .await
        .unwrap();
    let s = f.session("w", true, &[&f.queue_id]).await;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap();
    assert_eq!(g[0].task.id, first.id);
    assert_eq!(
        g[0].concurrency_token,
        u64::MAX,
        "one more grant works: 2^64-1"
    );
    f.db.attempt_finish(s, g[0].attempt_id, Outcome::Succeeded, false, None, None)
        .await
        .unwrap();
    let next = f.submit(&f.queue_id, "k").await;
    assert!(
        f.db.task_claim(s, 1, 30_000).await.unwrap().is_empty(),
        "the next grant is refused"
    );
    let shown = f.db.task_get(&f.hash, next.id).await.unwrap();
    assert_eq!(shown.state, TaskState::Waiting);
    assert!(
        shown.blocked_reason.starts_with("TOKEN_EXHAUSTED"),
        "{}",
        shown.blocked_reason
    );
    let (highest, _) = resource(&f, "k").await;
    assert_eq!(highest, u64::MAX, "no wrap-around");
}

#[tokio::test]
async fn application_active_attempt_quota_bounds_a_claim() {
    let f = Fixture::new().await;
    sqlx::query("UPDATE orbit_application_quota SET max_active_attempts = 2")
        .execute(f.db.pool())
        .await
        .unwrap();
    for _ in 0..5 {
        f.submit(&f.queue_id, "").await;
    }
    let s = f.session("w", true, &[&f.queue_id]).await;
    assert_eq!(f.db.task_claim(s, 10, 30_000).await.unwrap().len(), 2);
    assert!(f.db.task_claim(s, 10, 30_000).await.unwrap().is_empty());
}

#[tokio::test]
async fn queue_permit_limit_bounds_a_queue() {
    let f = Fixture::new().await;
    let limited =
        f.db.queue_create(&f.hash, None, "limited", Some(1), None)
            .await
            .unwrap()
            .id;
    for _ in 0..3 {
        f.submit(&limited, "").await;
    }
    let s = f.session("w", true, &[&limited]).await;
    let g = f.db.task_claim(s, 10, 30_000).await.unwrap();
    assert_eq!(g.len(), 1);
    f.db.attempt_finish(s, g[0].attempt_id, Outcome::Succeeded, false, None, None)
        .await
        .unwrap();
    assert_eq!(f.db.task_claim(s, 10, 30_000).await.unwrap().len(), 1);
}

#[tokio::test]
async fn handlers_filter_what_a_session_receives() {
    let f = Fixture::new().await;
    let mut other = f.task(&f.queue_id, "");
    other.handler = "other.handler".into();
    let theirs = f.submit_task(&other).await;
    let mine = f.submit(&f.queue_id, "").await;
    let s =
        f.db.session_open(
            &f.hash,
            &orbit::db::workers::SessionOpen {
                worker_id: "picky".into(),
                capacity: 10,
                concurrency_keys: true,
                handlers: vec!["test.handler".into()],
                queue_ids: vec![f.queue_id.clone()],
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .session_id;
    let g = f.db.task_claim(s, 10, 30_000).await.unwrap();
    assert_eq!(
        g.iter().map(|g| g.task.id).collect::<Vec<_>>(),
        vec![mine.id]
    );
    assert_ne!(theirs.id, mine.id);
}

#[tokio::test]
async fn a_ready_task_past_its_deadline_is_expired_not_granted() {
    let f = Fixture::new().await;
    let mut t = f.task(&f.queue_id, "k");
    t.deadline_seconds = Some(60);
    let late = f.submit_task(&t).await;
    f.pass_deadline(late.id).await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    assert_eq!(f.incomplete_tasks().await, 1);
    assert!(f.db.task_claim(s, 10, 30_000).await.unwrap().is_empty());
    assert_eq!(
        f.db.task_get(&f.hash, late.id).await.unwrap().state,
        TaskState::Expired
    );
    // Its incomplete-task charge went back (to the granting session's slot: only the sum counts).
    assert_eq!(f.incomplete_tasks().await, 0);
}

#[tokio::test]
async fn a_keyed_task_expired_at_its_grant_readies_its_keys_next_task() {
    // The key's ready head expires when a claim finds it; the key's next task, blocked behind it
    // (one ready task per key and queue), takes its place in the ready lane, and the key's token
    // is untouched until that task is granted.
    let f = Fixture::new().await;
    let mut t = f.task(&f.queue_id, "k");
    t.deadline_seconds = Some(60);
    let late = f.submit_task(&t).await;
    let next = f.submit(&f.queue_id, "k").await;
    assert_eq!(f.lane(next.id).await, "blocked");
    f.pass_deadline(late.id).await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    // The same claim goes on past the expired head and takes the task readied in its place.
    let granted = f.db.task_claim(s, 1, 30_000).await.unwrap();
    assert_eq!(
        f.db.task_get(&f.hash, late.id).await.unwrap().state,
        TaskState::Expired
    );
    assert_eq!(granted.len(), 1);
    assert_eq!(granted[0].task.id, next.id);
    assert_eq!(granted[0].concurrency_token, 1);
}

#[tokio::test]
async fn candidates_that_expire_do_not_use_up_a_claim() {
    // The claim locks its candidates a batch at a time: the first batch of three holds the two
    // past their deadline, and the next batch finds the rest.
    let f = Fixture::new().await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        let mut t = f.task(&f.queue_id, "");
        t.deadline_seconds = Some(60);
        ids.push(f.submit_task(&t).await.id);
    }
    f.pass_deadline(ids[0]).await;
    f.pass_deadline(ids[1]).await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let granted: Vec<u64> =
        f.db.task_claim(s, 3, 30_000)
            .await
            .unwrap()
            .iter()
            .map(|g| g.task.id)
            .collect();
    assert_eq!(granted, ids[2..].to_vec());
    // The two expired tasks' charges went back; the three granted still count.
    assert_eq!(f.incomplete_tasks().await, 3);
    for id in &ids[..2] {
        assert_eq!(
            f.db.task_get(&f.hash, *id).await.unwrap().state,
            TaskState::Expired
        );
    }
}

#[tokio::test]
async fn claim_validates_its_arguments() {
    let f = Fixture::new().await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    assert!(matches!(
        f.db.task_claim(s, 0, 30_000).await.unwrap_err(),
        orbit::db::DbError::InvalidArgument(_)
    ));
    assert!(matches!(
        f.db.task_claim(s, 1, 10).await.unwrap_err(),
        orbit::db::DbError::InvalidArgument(_)
    ));
    assert!(matches!(
        f.db.task_claim(999_999, 1, 30_000).await.unwrap_err(),
        orbit::db::DbError::NotFound(_)
    ));
}

#[tokio::test]
async fn equal_priority_work_is_spread_across_queues() {
    let f = Fixture::new().await;
    let q2 = f.queue("q2").await;
    for _ in 0..4 {
        f.submit(&f.queue_id, "").await;
        f.submit(&q2, "").await;
    }
    let s = f.session("w", true, &[&f.queue_id, &q2]).await;
    let mut from_first = 0;
    for _ in 0..4 {
        let g = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
        from_first += usize::from(g.task.queue_id == f.queue_id);
    }
    assert_eq!(from_first, 2, "the claim's starting queue rotates");
}

#[tokio::test]
async fn a_queue_named_twice_in_hello_takes_one_position_and_the_rotation_holds() {
    let f = Fixture::new().await;
    let q2 = f.queue("q2").await;
    for _ in 0..4 {
        f.submit(&f.queue_id, "").await;
        f.submit(&q2, "").await;
    }
    let s = f.session("w", true, &[&f.queue_id, &f.queue_id, &q2]).await;
    let positions: Vec<(String, u32)> =
        sqlx::query_as("SELECT CAST(queue_id AS CHAR), position FROM orbit_session_queue WHERE session_id = ? ORDER BY position")
            .bind(s)
            .fetch_all(f.db.pool())
            .await
            .unwrap();
    assert_eq!(
        positions,
        vec![(f.queue_id.clone(), 0), (q2.clone(), 1)],
        "positions run 0 to n-1"
    );
    let mut from_first = 0;
    for _ in 0..4 {
        let g = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
        from_first += usize::from(g.task.queue_id == f.queue_id);
    }
    assert_eq!(
        from_first, 2,
        "the claim's starting queue rotates over both queues"
    );
}

#[tokio::test]
async fn an_empty_claim_writes_nothing() {
    let f = Fixture::new().await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let before = claim_seq(&f, s).await;
    assert!(f.db.task_claim(s, 10, 30_000).await.unwrap().is_empty());
    assert_eq!(
        claim_seq(&f, s).await,
        before,
        "nothing granted, nothing written"
    );
    f.submit(&f.queue_id, "").await;
    assert_eq!(f.db.task_claim(s, 10, 30_000).await.unwrap().len(), 1);
    assert_eq!(claim_seq(&f, s).await, before + 1);
}

/// What a grant wrote for one attempt: its history rows (the token checked against the
/// attempt's), its queue permit, and the attempt, task and key permit checked against each other
/// (a JSON array of truths, with the attempt's state).
async fn grant_rows(
    f: &Fixture,
    attempt_id: u64,
) -> (Vec<(String, String, String, String)>, i64, String) {
    let events: Vec<(String, String, String, String)> = sqlx::query_as(
        "SELECT CAST(e.event AS CHAR), CAST(e.from_state AS CHAR), CAST(e.to_state AS CHAR), CAST(e.detail AS CHAR) \
           FROM orbit_task_event e JOIN orbit_attempt a ON a.id = e.attempt_id AND a.task_id = e.task_id \
          WHERE e.attempt_id = ? AND e.concurrency_token = a.concurrency_token ORDER BY e.id",
    )
    .bind(attempt_id)
    .fetch_all(f.db.pool())
    .await
    .unwrap();
    let permits: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM orbit_attempt a WHERE a.id = ? AND a.released_at IS NULL",
    )
    .bind(attempt_id)
    .fetch_one(f.db.pool())
    .await
    .unwrap();
    let shape: String = sqlx::query_scalar(
        "SELECT CAST(JSON_ARRAY(a.state, t.state = a.state, t.lane = 'none', t.blocked_reason = '',
                                t.current_attempt_id = a.id, t.attempt_count = a.attempt_no,
                                a.namespace_id = t.namespace_id, a.queue_id = t.queue_id,
                                a.resource_id = t.resource_id,
                                a.concurrency_token = IF(a.resource_id = 0, 0, r.highest_token),
                                a.grant_version = IF(a.resource_id = 0, 0, r.version),
                                COALESCE(r.holder_attempt_id = a.id, a.resource_id = 0) = 1,
                                (a.started_at IS NOT NULL) = (a.state = 'RUNNING'),
                                a.lease_expires_at > a.granted_at) AS CHAR)
           FROM orbit_attempt a JOIN orbit_task t ON t.id = a.task_id
           LEFT JOIN orbit_resource r ON r.id = a.resource_id
          WHERE a.id = ?",
    )
    .bind(attempt_id)
    .fetch_one(f.db.pool())
    .await
    .unwrap();
    (events, permits, shape)
}

#[tokio::test]
async fn a_grant_of_one_writes_what_a_grant_of_several_writes() {
    for start in [true, false] {
        let f = Fixture::new().await;
        for key in ["a", "b", ""] {
            f.submit(&f.queue_id, key).await;
        }
        let s = if start {
            session_starting_on_assign(&f, "starts", &[&f.queue_id]).await
        } else {
            f.session("plain", true, &[&f.queue_id]).await
        };
        let one = f.db.task_claim(s, 1, 30_000).await.unwrap();
        let several = f.db.task_claim(s, 2, 30_000).await.unwrap();
        assert_eq!(
            (one.len(), several.len()),
            (1, 2),
            "start_on_assign {start}"
        );
        // No history row: the attempt row records the grant and the start.
        let expected: Vec<(String, String, String, String)> = Vec::new();
        let state = if start { "RUNNING" } else { "LEASED" };
        let shape = format!("[\"{state}\", {}]", ["true"; 13].join(", "));
        for g in one.iter().chain(&several) {
            assert_eq!(
                grant_rows(&f, g.attempt_id).await,
                (expected.clone(), 1, shape.clone()),
                "attempt {}",
                g.attempt_id
            );
        }
        // The batch's grants are in candidate order: keys a, b, then the unkeyed task.
        let order: Vec<u64> = one.iter().chain(&several).map(|g| g.task.id).collect();
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(order, sorted);
    }
}

#[tokio::test]
async fn a_start_on_assign_session_is_granted_running_attempts() {
    let f = Fixture::new().await;
    let t = f.submit(&f.queue_id, "k").await;
    let s = session_starting_on_assign(&f, "w", &[&f.queue_id]).await;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    assert_eq!(g.task.state, TaskState::Running, "started with the grant");
    let (state, started): (String, Option<chrono::NaiveDateTime>) =
        sqlx::query_as("SELECT CAST(state AS CHAR), started_at FROM orbit_attempt WHERE id = ?")
            .bind(g.attempt_id)
            .fetch_one(f.db.pool())
            .await
            .unwrap();
    assert_eq!(state, "RUNNING");
    assert!(started.is_some());
    let events: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(event AS CHAR) FROM orbit_task_event WHERE task_id = ? ORDER BY id",
    )
    .bind(t.id)
    .fetch_all(f.db.pool())
    .await
    .unwrap();
    assert!(
        events.is_empty(),
        "the task and attempt rows record the submit, grant and start: {events:?}"
    );
    // A task.start anyway is a repeated start: accepted, nothing changes.
    assert!(f.db.attempt_start(s, g.attempt_id).await.unwrap().accepted);
    // It counts as started: a lease that runs out is an unknown outcome, not a free retry.
    f.expire_lease(g.attempt_id).await;
    assert_eq!(f.db.lease_recover(100).await.unwrap().count, 1);
    assert_eq!(
        f.db.task_get(&f.hash, t.id).await.unwrap().state,
        TaskState::NeedsReview
    );
}
