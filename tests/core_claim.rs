//! orbit_task_claim: permits, tokens, lanes, and what a claim skips.

use orbit::db::tasks::TaskState;
use orbit::db::workers::{AttemptResult, ClaimAfter, FinishAck, Grant, Outcome};
use orbit::db::DbError;
use orbit::testing::Fixture;
use sqlx::Row;
use std::time::Duration;

async fn resource(f: &Fixture, key: &str) -> (u64, u64) {
    let row =
        sqlx::query("SELECT highest_token, version FROM orbit_resource WHERE concurrency_key = ?")
            .bind(key.as_bytes())
            .fetch_one(f.db.pool())
            .await
            .unwrap();
    (row.get(0), row.get(1))
}

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
    // Two permit records for one keyed attempt; the application counts it once.
    let permits: (i64, i64, u32) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM orbit_queue_permit), (SELECT COUNT(*) FROM orbit_key_permit), \
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
    let keys: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orbit_key_permit")
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
    sqlx::query(
        "UPDATE orbit_task SET deadline_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE id = ?",
    )
    .bind(late.id)
    .execute(f.db.pool())
    .await
    .unwrap();
    let s = f.session("w", true, &[&f.queue_id]).await;
    assert!(f.db.task_claim(s, 10, 30_000).await.unwrap().is_empty());
    assert_eq!(
        f.db.task_get(&f.hash, late.id).await.unwrap().state,
        TaskState::Expired
    );
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
    sqlx::query(
        "UPDATE orbit_task SET deadline_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE id IN (?, ?)",
    )
    .bind(ids[0])
    .bind(ids[1])
    .execute(f.db.pool())
    .await
    .unwrap();
    let s = f.session("w", true, &[&f.queue_id]).await;
    let granted: Vec<u64> =
        f.db.task_claim(s, 3, 30_000)
            .await
            .unwrap()
            .iter()
            .map(|g| g.task.id)
            .collect();
    assert_eq!(granted, ids[2..].to_vec());
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
async fn a_release_makes_exactly_one_next_task_per_queue_claimable() {
    let f = Fixture::new().await;
    let q2 = f.queue("q2").await;
    f.submit(&f.queue_id, "k").await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let holder = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    let mut waiting = Vec::new();
    for _ in 0..3 {
        waiting.push(f.submit(&f.queue_id, "k").await.id);
        waiting.push(f.submit(&q2, "k").await.id);
    }
    for id in &waiting {
        assert_eq!(f.lane(*id).await, "blocked");
    }
    f.db.attempt_finish(s, holder.attempt_id, Outcome::Succeeded, false, None, None)
        .await
        .unwrap();
    let ready: Vec<(String, i64)> =
        sqlx::query_as("SELECT CAST(queue_id AS CHAR), COUNT(*) FROM orbit_task WHERE lane = 'ready' GROUP BY queue_id ORDER BY queue_id")
            .fetch_all(f.db.pool())
            .await
            .unwrap();
    assert_eq!(ready.len(), 2, "one per queue: {ready:?}");
    assert!(ready.iter().all(|(_, n)| *n == 1), "{ready:?}");
}

/// The ready tasks of key `key`, by task id.
async fn ready_of_key(f: &Fixture, key: &str) -> Vec<u64> {
    sqlx::query_scalar(
        "SELECT t.id FROM orbit_task t JOIN orbit_resource r ON r.id = t.resource_id \
          WHERE r.concurrency_key = ? AND t.lane = 'ready' ORDER BY t.id",
    )
    .bind(key.as_bytes())
    .fetch_all(f.db.pool())
    .await
    .unwrap()
}

#[tokio::test]
async fn a_hand_off_passes_over_a_next_task_another_transaction_holds_without_waiting() {
    let f = Fixture::new().await;
    f.submit(&f.queue_id, "k").await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let holder = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    let held = f.submit(&f.queue_id, "k").await;
    let next = f.submit(&f.queue_id, "k").await;
    // Another transaction (a cancel or an expiry, say) holds the key's next task.
    let mut other = f.db.pool().begin().await.unwrap();
    sqlx::query("SELECT id FROM orbit_task WHERE id = ? FOR UPDATE")
        .bind(held.id)
        .execute(&mut *other)
        .await
        .unwrap();
    let claim = ClaimAfter {
        max: 1,
        lease_ms: 30_000,
    };
    // Waiting for that row would take the 50 s lock wait timeout: 10 s is a failure.
    let (_, grants) = tokio::time::timeout(
        Duration::from_secs(10),
        succeed(&f, s, holder.attempt_id, claim),
    )
    .await
    .expect("the hand-off waited for a row another transaction holds")
    .unwrap();
    assert_eq!(
        grants.iter().map(|g| g.task.id).collect::<Vec<_>>(),
        vec![next.id],
        "the key goes to the task after the held one"
    );
    other.rollback().await.unwrap();
    assert_eq!(
        f.lane(held.id).await,
        "blocked",
        "the held task waits for the key again"
    );
}

#[tokio::test]
async fn a_result_that_grants_readies_only_the_key_s_best_next_task_and_the_rest_if_not_taken() {
    let f = Fixture::new().await;
    let q2 = f.queue("q2").await;
    let urgent = |queue: &str| orbit::db::tasks::NewTask {
        priority: Some(0),
        ..f.task(queue, "k")
    };
    f.submit(&f.queue_id, "k").await;
    let s = f.session("w", true, &[&f.queue_id, &q2]).await;
    let holder = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    let older = f.submit(&f.queue_id, "k").await;
    let best = f.submit_task(&urgent(&q2)).await;
    let later = f.submit(&q2, "k").await;
    let claim = ClaimAfter {
        max: 5,
        lease_ms: 30_000,
    };
    // The best head over both queues (priority first) is granted with the result, and no other
    // head was made ready on the way (a promotion the grant would have undone).
    let (_, grants) = succeed(&f, s, holder.attempt_id, claim).await.unwrap();
    assert_eq!(
        grants.iter().map(|g| g.task.id).collect::<Vec<_>>(),
        vec![best.id]
    );
    assert_eq!(ready_of_key(&f, "k").await, Vec::<u64>::new());
    for id in [older.id, later.id] {
        assert_eq!(f.lane(id).await, "blocked");
    }
    // Released without a grant: the key's head in every queue, as before.
    succeed(&f, s, grants[0].attempt_id, ClaimAfter::NONE)
        .await
        .unwrap();
    assert_eq!(ready_of_key(&f, "k").await, vec![older.id, later.id]);
}

#[tokio::test]
async fn a_key_whose_best_next_task_is_in_another_queue_is_left_ready_in_every_queue() {
    // A session that does not serve the best head's queue: that head is readied for the sessions
    // that do (the grant takes nothing of the key, even the head of its own queue, which waits
    // behind it), and then the key, still free, gets its head in every queue as before.
    let f = Fixture::new().await;
    let q2 = f.queue("q2").await;
    let claim = ClaimAfter {
        max: 5,
        lease_ms: 30_000,
    };
    let narrow = f.session("narrow", true, &[&f.queue_id]).await;
    f.submit(&f.queue_id, "j").await;
    let mine = f.db.task_claim(narrow, 1, 30_000).await.unwrap().remove(0);
    let elsewhere = f
        .submit_task(&orbit::db::tasks::NewTask {
            priority: Some(0),
            ..f.task(&q2, "j")
        })
        .await;
    let own = f.submit(&f.queue_id, "j").await;
    let (ack, grants) = succeed(&f, narrow, mine.attempt_id, claim).await.unwrap();
    assert!(grants.is_empty(), "{grants:?}");
    assert!(ack.wake, "the sessions that serve it must hear of it");
    assert_eq!(ready_of_key(&f, "j").await, vec![elsewhere.id, own.id]);
}

/// Fsyncs are not observable per call, but a claim that writes nothing leaves no trace: the
/// session's claim_seq does not move.
async fn claim_seq(f: &Fixture, session: u64) -> u64 {
    sqlx::query_scalar("SELECT claim_seq FROM orbit_session WHERE id = ?")
        .bind(session)
        .fetch_one(f.db.pool())
        .await
        .unwrap()
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

#[tokio::test]
async fn a_result_hands_the_released_key_to_its_next_task_in_the_same_transaction() {
    let f = Fixture::new().await;
    let q2 = f.queue("q2").await;
    let first = f.submit(&f.queue_id, "k").await;
    let s = f.session("w", true, &[&f.queue_id, &q2]).await;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap();
    assert_eq!(g[0].task.id, first.id);
    // Submitted while the key is held: blocked until the release.
    let second = f.submit(&q2, "k").await;
    let unkeyed = f.submit(&f.queue_id, "").await;
    let (ack, grants) = succeed(
        &f,
        s,
        g[0].attempt_id,
        ClaimAfter {
            max: 5,
            lease_ms: 30_000,
        },
    )
    .await
    .unwrap();
    assert_eq!(ack.attempt_id, g[0].attempt_id);
    assert_eq!(ack.task_id, first.id);
    assert_eq!(ack.task_state, "SUCCEEDED");
    assert!(!ack.duplicate);
    let mut granted: Vec<u64> = grants.iter().map(|g| g.task.id).collect();
    granted.sort_unstable();
    assert_eq!(
        granted,
        vec![second.id, unkeyed.id],
        "the key's next task and the free task"
    );
    let keyed = grants.iter().find(|g| g.task.id == second.id).unwrap();
    assert_eq!(
        keyed.concurrency_token, 2,
        "the next holder gets a larger token"
    );
    assert_eq!(keyed.task.state, TaskState::Leased);
    // The permit changed hands inside one commit: the released attempt's release_version is
    // followed directly by the new grant_version on the resource row.
    let (release, grant): (u64, u64) = sqlx::query_as(
        "SELECT (SELECT release_version FROM orbit_attempt WHERE id = ?), \
                (SELECT grant_version FROM orbit_attempt WHERE id = ?)",
    )
    .bind(g[0].attempt_id)
    .bind(keyed.attempt_id)
    .fetch_one(f.db.pool())
    .await
    .unwrap();
    assert_eq!((release, grant), (2, 3));
    assert_eq!(resource(&f, "k").await, (2, 3));
}

#[tokio::test]
async fn a_repeated_result_with_a_claim_grants_only_what_is_free() {
    let f = Fixture::new().await;
    f.submit(&f.queue_id, "").await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap();
    let claim = ClaimAfter {
        max: 1,
        lease_ms: 30_000,
    };
    let finish = || succeed(&f, s, g[0].attempt_id, claim);
    let (ack, grants) = finish().await.unwrap();
    assert!(!ack.duplicate);
    assert!(grants.is_empty(), "nothing else is ready");
    f.submit(&f.queue_id, "").await;
    let (ack, grants) = finish().await.unwrap();
    assert!(ack.duplicate, "the same result again");
    assert_eq!(
        grants.len(),
        1,
        "a duplicate still grants the capacity it names"
    );
    let err = succeed(
        &f,
        s,
        g[0].attempt_id,
        ClaimAfter {
            max: 1,
            lease_ms: 10,
        },
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), "INVALID_ARGUMENT");
}

#[tokio::test]
async fn a_draining_session_is_granted_nothing_with_its_result() {
    let f = Fixture::new().await;
    f.submit(&f.queue_id, "").await;
    f.submit(&f.queue_id, "").await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap();
    f.db.session_close(s, true).await.unwrap();
    let (_, grants) = succeed(
        &f,
        s,
        g[0].attempt_id,
        ClaimAfter {
            max: 4,
            lease_ms: 30_000,
        },
    )
    .await
    .unwrap();
    assert!(grants.is_empty());
}

/// A `succeeded` result for an attempt of session `s`, granting what `claim` allows.
async fn succeed(
    f: &Fixture,
    s: u64,
    attempt_id: u64,
    claim: ClaimAfter,
) -> Result<(FinishAck, Vec<Grant>), DbError> {
    f.db.attempt_finish_and_claim(s, attempt_id, Outcome::Succeeded, false, None, None, claim)
        .await
}

async fn session_starting_on_assign(f: &Fixture, worker_id: &str, queues: &[&str]) -> u64 {
    f.db.session_open(
        &f.hash,
        &orbit::db::workers::SessionOpen {
            worker_id: worker_id.into(),
            node: "test".into(),
            capacity: 10,
            concurrency_keys: true,
            start_on_assign: true,
            queue_ids: queues.iter().map(|q| q.to_string()).collect(),
            ..Default::default()
        },
    )
    .await
    .unwrap()
    .session_id
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
        "SELECT COUNT(*) FROM orbit_queue_permit p JOIN orbit_attempt a ON a.id = p.attempt_id \
          WHERE p.attempt_id = ? AND p.queue_id = a.queue_id AND p.expires_at = a.lease_expires_at",
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
                                (SELECT COUNT(*) FROM orbit_key_permit k
                                  WHERE k.attempt_id = a.id AND k.resource_id = a.resource_id
                                    AND k.concurrency_token = a.concurrency_token
                                    AND k.expires_at = a.lease_expires_at) = (a.resource_id <> 0),
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
        let detail = format!("session {s}");
        let mut expected = vec![(
            "granted".to_string(),
            "WAITING".to_string(),
            "LEASED".to_string(),
            detail,
        )];
        if start {
            expected.push((
                "started".into(),
                "LEASED".into(),
                "RUNNING".into(),
                "start_on_assign".into(),
            ));
        }
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
    assert_eq!(events, vec!["submitted", "granted", "started"]);
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

#[tokio::test]
async fn a_result_wakes_other_sessions_only_for_what_it_left_claimable() {
    let f = Fixture::new().await;
    let other = f.queue("other").await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let claim = ClaimAfter {
        max: 1,
        lease_ms: 30_000,
    };
    let finish = |attempt_id| succeed(&f, s, attempt_id, claim);
    // An unkeyed task on a queue without a permit limit frees nothing anyone waits for.
    f.submit(&f.queue_id, "").await;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    let (ack, _) = finish(g.attempt_id).await.unwrap();
    assert!(!ack.wake, "nothing left claimable");
    // Nor does a released key with no task waiting for it.
    f.submit(&f.queue_id, "lone").await;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    let (ack, grants) = finish(g.attempt_id).await.unwrap();
    assert!(grants.is_empty());
    assert!(!ack.wake, "the released key has no next task");
    // The key's next task sits in a queue this session does not serve: others must hear of it.
    f.submit(&f.queue_id, "k").await;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    let next = f.submit(&other, "k").await;
    let (ack, grants) = finish(g.attempt_id).await.unwrap();
    assert!(grants.is_empty());
    assert!(ack.wake, "a ready task of the released key was left");
    assert_eq!(
        f.lane(next.id).await,
        "ready",
        "readied by the hand-off itself"
    );
    // A retry without backoff is ready at once; when the grant takes better work instead, the
    // retried task is left for others.
    let retried = f
        .submit_task(&orbit::db::tasks::NewTask {
            priority: Some(9),
            retry_base_ms: Some(0),
            ..f.task(&f.queue_id, "")
        })
        .await;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    assert_eq!(g.task.id, retried.id);
    let better = f
        .submit_task(&orbit::db::tasks::NewTask {
            priority: Some(0),
            ..f.task(&f.queue_id, "")
        })
        .await;
    let (ack, grants) =
        f.db.attempt_finish_and_claim(s, g.attempt_id, Outcome::Failed, true, None, None, claim)
            .await
            .unwrap();
    assert_eq!(
        ack.task_state, "WAITING",
        "no backoff: waiting again at once"
    );
    assert_eq!(grants[0].task.id, better.id, "priority first");
    assert!(
        ack.wake,
        "the retried task waits, ready, for another session"
    );
    succeed(&f, s, grants[0].attempt_id, ClaimAfter::NONE)
        .await
        .unwrap();
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    assert_eq!(g.task.id, retried.id);
    succeed(&f, s, g.attempt_id, ClaimAfter::NONE)
        .await
        .unwrap();
    // The key's next task taken by this very result: nothing left for others.
    f.submit(&f.queue_id, "j").await;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    f.submit(&f.queue_id, "j").await;
    let (ack, grants) = finish(g.attempt_id).await.unwrap();
    assert_eq!(grants.len(), 1);
    assert!(
        !ack.wake,
        "the next holder was granted in the same transaction"
    );
    // A queue with a permit limit: a release makes room someone may be waiting for.
    sqlx::query("UPDATE orbit_queue SET max_active_attempts = 5 WHERE id = ?")
        .bind(&f.queue_id)
        .execute(f.db.pool())
        .await
        .unwrap();
    // (Two ready tasks: the grant takes one, the other waits for another session.)
    f.submit(&f.queue_id, "").await;
    f.submit(&f.queue_id, "").await;
    let finished =
        f.db.attempt_finish_many(
            s,
            &[result(grants[0].attempt_id, Outcome::Succeeded)],
            claim,
        )
        .await
        .unwrap();
    assert!(finished.acks[0].wake, "a permit limit was relieved");
    assert_eq!(
        finished.wake_queues,
        vec![f.queue_id.clone()],
        "only that queue's sessions"
    );
    // Without a claim nothing was taken in its place: wake whenever work is ready (here the
    // task left above); a duplicate never does.
    sqlx::query("UPDATE orbit_queue SET max_active_attempts = 0")
        .execute(f.db.pool())
        .await
        .unwrap();
    f.submit(&f.queue_id, "").await;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    for duplicate in [false, true] {
        let (ack, _) = succeed(&f, s, g.attempt_id, ClaimAfter::NONE)
            .await
            .unwrap();
        assert_eq!((ack.duplicate, ack.wake), (duplicate, !duplicate));
    }
}

fn result(attempt_id: u64, outcome: Outcome) -> AttemptResult {
    AttemptResult {
        attempt_id,
        outcome,
        retryable: outcome == Outcome::Failed,
        output: Some(serde_json::json!({"n": attempt_id})),
        error: None,
    }
}

#[tokio::test]
async fn results_sent_together_are_confirmed_in_one_call_each_on_its_own() {
    let f = Fixture::new().await;
    for key in ["", "", "k", "k"] {
        f.submit(&f.queue_id, key).await;
    }
    let s = f.session("w", true, &[&f.queue_id]).await;
    let other = f.session("other", true, &[&f.queue_id]).await;
    let held = f.db.task_claim(s, 3, 30_000).await.unwrap();
    assert_eq!(held.len(), 3, "two unkeyed tasks and the key's first task");
    let theirs = f.db.task_claim(other, 1, 30_000).await.unwrap();
    assert!(theirs.is_empty(), "the key's second task waits for the key");
    let (keyed, unkeyed): (Vec<&Grant>, Vec<&Grant>) =
        held.iter().partition(|g| g.concurrency_token > 0);
    let (keyed, u1, u2) = (
        keyed[0].attempt_id,
        unkeyed[0].attempt_id,
        unkeyed[1].attempt_id,
    );
    let results = vec![
        result(u1, Outcome::Succeeded),
        result(999_999, Outcome::Succeeded),
        result(keyed, Outcome::Succeeded),
        result(u1, Outcome::Succeeded),
        result(u2, Outcome::Failed),
    ];
    let finished =
        f.db.attempt_finish_many(
            s,
            &results,
            ClaimAfter {
                max: 3,
                lease_ms: 30_000,
            },
        )
        .await
        .unwrap();
    let acks: Vec<(u64, bool, &str)> = finished
        .acks
        .iter()
        .map(|a| (a.attempt_id, a.duplicate, a.code.as_str()))
        .collect();
    assert_eq!(
        acks,
        vec![
            (u1, false, ""),
            (999_999, false, "NOT_FOUND"),
            (keyed, false, ""),
            (u1, true, ""),
            (u2, false, ""),
        ],
        "one acknowledgement per result, in the order sent; the unknown one does not stop the rest"
    );
    assert_eq!(finished.acks[0].task_state, "SUCCEEDED");
    assert_eq!(
        finished.acks[3].task_state, "SUCCEEDED",
        "a repeat gets the same answer"
    );
    // The released key went to its next task in the same transaction, granted with the results.
    assert_eq!(finished.grants.len(), 1);
    assert_eq!(finished.grants[0].concurrency_token, 2);
    let stored: Option<String> =
        sqlx::query_scalar("SELECT CAST(output AS CHAR) FROM orbit_attempt WHERE id = ?")
            .bind(u1)
            .fetch_one(f.db.pool())
            .await
            .unwrap();
    let stored: serde_json::Value = serde_json::from_str(&stored.unwrap()).unwrap();
    assert_eq!(stored, serde_json::json!({"n": u1}));
    // A result for another session's attempt is refused on its own.
    let finished =
        f.db.attempt_finish_many(other, &[result(u2, Outcome::Succeeded)], ClaimAfter::NONE)
            .await
            .unwrap();
    assert_eq!(finished.acks[0].code, "NOT_FOUND");
}

#[tokio::test]
async fn grouped_results_are_checked_before_anything_is_written() {
    let f = Fixture::new().await;
    f.submit(&f.queue_id, "").await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap();
    for bad in [
        "[]".to_string(),
        "{}".to_string(),
        format!(
            r#"[{{"attempt_id": {}, "outcome": "succeeded"}}, {{"attempt_id": 1, "outcome": "maybe"}}]"#,
            g[0].attempt_id
        ),
        format!(
            r#"[{{"attempt_id": {}, "outcome": "succeeded"}}, {{"outcome": "failed"}}]"#,
            g[0].attempt_id
        ),
        format!(
            r#"[{{"attempt_id": {}, "outcome": "failed", "retryable": "yes"}}]"#,
            g[0].attempt_id
        ),
        format!(
            "[{}]",
            vec![r#"{"attempt_id": 1, "outcome": "succeeded"}"#; 1001].join(",")
        ),
    ] {
        let e = sqlx::query("CALL orbit_attempt_finish(?, ?, 0, 0)")
            .bind(s)
            .bind(&bad)
            .execute(f.db.pool())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("INVALID_ARGUMENT"), "{bad}: {e}");
    }
    let state: String =
        sqlx::query_scalar("SELECT CAST(state AS CHAR) FROM orbit_attempt WHERE id = ?")
            .bind(g[0].attempt_id)
            .fetch_one(f.db.pool())
            .await
            .unwrap();
    assert_eq!(state, "LEASED", "a refused call ends no attempt");
}

/// (slot, active_attempts) of every slot row with a charge.
async fn active_slots(f: &Fixture) -> Vec<(u8, u32)> {
    sqlx::query_as(
        "SELECT slot, active_attempts FROM orbit_application_quota WHERE active_attempts > 0 ORDER BY slot",
    )
    .fetch_all(f.db.pool())
    .await
    .unwrap()
}

#[tokio::test]
async fn a_sessions_attempts_are_charged_to_its_own_slot_and_given_back_there() {
    let f = Fixture::new().await;
    for _ in 0..6 {
        f.submit(&f.queue_id, "").await;
    }
    let a = f.session("a", false, &[&f.queue_id]).await;
    let b = f.session("b", false, &[&f.queue_id]).await;
    let ga = f.db.task_claim(a, 3, 30_000).await.unwrap();
    let gb = f.db.task_claim(b, 3, 30_000).await.unwrap();
    assert_eq!((ga.len(), gb.len()), (3, 3));
    let (sa, sb) = ((a % 16) as u8, (b % 16) as u8);
    let mut expected = vec![(sa, 3), (sb, 3)];
    expected.sort();
    if sa == sb {
        expected = vec![(sa, 6)];
    }
    assert_eq!(active_slots(&f).await, expected, "session ids {a} and {b}");
    // Whichever pooled connection runs them, a's results give back a's slot.
    let results: Vec<AttemptResult> = ga
        .iter()
        .map(|g| AttemptResult {
            attempt_id: g.attempt_id,
            outcome: Outcome::Succeeded,
            retryable: false,
            output: None,
            error: None,
        })
        .collect();
    let incomplete_before = incomplete_slots(&f).await;
    f.db.attempt_finish_many(a, &results, ClaimAfter::NONE)
        .await
        .unwrap();
    assert_eq!(active_slots(&f).await, vec![(sb, 3)], "b's three are left");
    // The three tasks' incomplete charges go back to a's slot too, wherever they were charged:
    // the result locks no slot row but its session's.
    let incomplete_after = incomplete_slots(&f).await;
    for slot in 0..16u8 {
        let (before, after) = (
            incomplete_before[slot as usize],
            incomplete_after[slot as usize],
        );
        if slot == sa {
            assert_eq!(after, before - 3, "slot {slot}");
        } else {
            assert_eq!(after, before, "slot {slot}");
        }
    }
    assert_eq!(
        incomplete_after.iter().sum::<i64>(),
        3,
        "b's three tasks are still incomplete"
    );
}

/// The incomplete-task counter of each slot, by slot.
async fn incomplete_slots(f: &Fixture) -> Vec<i64> {
    sqlx::query_scalar("SELECT incomplete_tasks FROM orbit_application_quota ORDER BY slot")
        .fetch_all(f.db.pool())
        .await
        .unwrap()
}

/// 20,000 ready copies of task `model` (bulk SQL: setup, not the behaviour under test).
async fn ready_copies(f: &Fixture, model: u64) {
    let columns: String = sqlx::query_scalar(
        "SELECT GROUP_CONCAT(column_name ORDER BY ordinal_position) FROM information_schema.columns \
          WHERE table_schema = DATABASE() AND table_name = 'orbit_task' \
            AND column_name NOT IN ('id', 'idempotency_key')",
    )
    .fetch_one(f.db.pool())
    .await
    .unwrap();
    let digit =
        "(SELECT 0 AS x UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL \
                 SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL \
                 SELECT 8 UNION ALL SELECT 9)";
    sqlx::raw_sql(&format!(
        "INSERT INTO orbit_task ({columns}, idempotency_key) \
         SELECT {columns}, CONCAT('copy-', n.i) \
           FROM orbit_task t \
           JOIN (SELECT 1 + a.x + 10 * b.x + 100 * c.x + 1000 * d.x + 10000 * e.x AS i \
                   FROM {digit} a, {digit} b, {digit} c, {digit} d, {digit} e) n \
          WHERE t.id = {model} AND n.i <= 20000"
    ))
    .execute(f.db.pool())
    .await
    .unwrap();
}

#[tokio::test]
async fn a_result_and_its_grant_read_a_few_entries_and_need_no_disk_table() {
    let f = Fixture::new().await;
    let first = f.submit(&f.queue_id, "").await;
    ready_copies(&f, first.id).await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap();
    assert_eq!(g[0].task.id, first.id);
    // The result, its wake check and the grant of the next task, on one connection: the index
    // entries it reads (Handler_read_next; about 50, mostly quota slot rows) do not grow with the
    // ready lane.
    let mut conn = f.db.pool().acquire().await.unwrap();
    sqlx::raw_sql("FLUSH STATUS")
        .execute(&mut *conn)
        .await
        .unwrap();
    sqlx::query("CALL orbit_attempt_finish(?, ?, 1, 30000)")
        .bind(s)
        .bind(format!(
            r#"[{{"attempt_id": {}, "outcome": "succeeded"}}]"#,
            g[0].attempt_id
        ))
        .execute(&mut *conn)
        .await
        .unwrap();
    let (_, reads): (String, String) =
        sqlx::query_as("SHOW SESSION STATUS LIKE 'Handler_read_next'")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
    let reads: u64 = reads.parse().unwrap();
    assert!(reads < 100, "{reads} index entries read for one result");
    // Nor does it build a temporary table on disk to order its answer (the task columns are
    // TEXT, which an in-memory temporary table cannot hold): that was one per result.
    let (_, disk): (String, String) =
        sqlx::query_as("SHOW SESSION STATUS LIKE 'Created_tmp_disk_tables'")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
    assert_eq!(disk, "0", "temporary tables on disk for one result");
    // It did end the first attempt and grant the next task.
    let attempts: Vec<(u64, String)> = sqlx::query_as(
        "SELECT task_id, CAST(state AS CHAR) FROM orbit_attempt WHERE session_id = ? ORDER BY id",
    )
    .bind(s)
    .fetch_all(f.db.pool())
    .await
    .unwrap();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0], (first.id, "SUCCEEDED".to_string()));
    assert!(attempts[1].0 > first.id);
    // A result that grants nothing answers with one row of NULL grant columns, read by probes,
    // not by scanning the task and attempt tables.
    let second: u64 = sqlx::query_scalar("SELECT MAX(id) FROM orbit_attempt")
        .fetch_one(f.db.pool())
        .await
        .unwrap();
    sqlx::raw_sql("FLUSH STATUS")
        .execute(&mut *conn)
        .await
        .unwrap();
    sqlx::query("CALL orbit_attempt_finish(?, ?, 0, 0)")
        .bind(s)
        .bind(format!(
            r#"[{{"attempt_id": {second}, "outcome": "succeeded"}}]"#
        ))
        .execute(&mut *conn)
        .await
        .unwrap();
    let (_, scanned): (String, String) =
        sqlx::query_as("SHOW SESSION STATUS LIKE 'Handler_read_rnd_next'")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
    let scanned: u64 = scanned.parse().unwrap();
    assert!(
        scanned < 100,
        "{scanned} rows scanned for a result without a grant"
    );
}

/// What ending attempt `attempt_id` wrote: its row, its task's row and the task's events, each
/// as JSON text (times as relations, since two endings differ in time).
async fn ending(f: &Fixture, attempt_id: u64) -> (String, String, String) {
    sqlx::query_as(
        "SELECT CAST(JSON_ARRAY(a.state, a.outcome, a.retryable, a.output, a.error, a.late_result,
                                a.released_at IS NOT NULL) AS CHAR),
                CAST(JSON_ARRAY(t.state, t.lane, t.output, t.error, t.finished_at = t.updated_at,
                                t.finished_at = a.released_at, t.run_at <= t.finished_at,
                                t.current_attempt_id = a.id, t.attempt_count) AS CHAR),
                CAST((SELECT JSON_ARRAYAGG(JSON_ARRAY(e.event, e.from_state, e.to_state, e.concurrency_token,
                                                      e.detail, e.attempt_id = a.id))
                        FROM orbit_task_event e WHERE e.task_id = t.id) AS CHAR)
           FROM orbit_attempt a JOIN orbit_task t ON t.id = a.task_id
          WHERE a.id = ?",
    )
    .bind(attempt_id)
    .fetch_one(f.db.pool())
    .await
    .unwrap()
}

#[tokio::test]
async fn a_group_of_successes_ends_without_a_call_per_result_writing_what_each_call_writes() {
    let f = Fixture::new().await;
    for _ in 0..4 {
        f.submit(&f.queue_id, "").await;
    }
    let s = session_starting_on_assign(&f, "w", &[&f.queue_id]).await;
    let other = f.session("other", true, &[&f.queue_id]).await;
    let held = f.db.task_claim(s, 4, 30_000).await.unwrap();
    assert_eq!(held.len(), 4);
    let ids: Vec<u64> = held.iter().map(|g| g.attempt_id).collect();
    let output = r#"{"a":1,  "b" : [1, 2.50, "\u00e9"]}"#;
    let mut conn = f.db.pool().acquire().await.unwrap();
    // Finishes `results` on one connection; returns its acks and the procedure calls it made.
    async fn finish(
        conn: &mut sqlx::MySqlConnection,
        session: u64,
        results: String,
    ) -> (serde_json::Value, u64) {
        sqlx::raw_sql("FLUSH STATUS")
            .execute(&mut *conn)
            .await
            .unwrap();
        let rows = sqlx::query("CALL orbit_attempt_finish(?, ?, 0, 0)")
            .bind(session)
            .bind(results)
            .fetch_all(&mut *conn)
            .await
            .unwrap();
        let acks: Vec<u8> = rows[0].try_get(0).unwrap();
        let (_, calls): (String, String) =
            sqlx::query_as("SHOW SESSION STATUS LIKE 'Com_call_procedure'")
                .fetch_one(&mut *conn)
                .await
                .unwrap();
        (
            serde_json::from_slice(&acks).unwrap(),
            calls.parse().unwrap(),
        )
    }
    let ok =
        |id: u64| format!(r#"{{"attempt_id": {id}, "outcome": "succeeded", "output": {output}}}"#);
    // Successes of the session's own attempts: the group path, no orbit_attempt_end call.
    let (acks, calls) = finish(&mut conn, s, format!("[{}, {}]", ok(ids[0]), ok(ids[1]))).await;
    assert_eq!(calls, 1, "only the CALL itself");
    assert_eq!(
        acks,
        serde_json::json!([
            {"attempt_id": ids[0], "task_id": held[0].task.id, "task_state": "SUCCEEDED",
             "attempt_state": "SUCCEEDED", "duplicate": 0, "code": ""},
            {"attempt_id": ids[1], "task_id": held[1].task.id, "task_state": "SUCCEEDED",
             "attempt_state": "SUCCEEDED", "duplicate": 0, "code": ""}
        ])
    );
    // A group with an attempt that is not the session's: rolled back to its savepoint, then each
    // result on its own (orbit_attempt_end for the success; the other is refused).
    let theirs = f.submit(&f.queue_id, "").await;
    let g = f.db.task_claim(other, 1, 30_000).await.unwrap();
    assert_eq!(g[0].task.id, theirs.id);
    let (acks, calls) = finish(
        &mut conn,
        s,
        format!("[{}, {}, {}]", ok(ids[2]), ok(g[0].attempt_id), ok(999_999)),
    )
    .await;
    assert!(calls >= 2, "the per-result path: {calls} calls");
    let codes: Vec<&str> = acks
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["", "NOT_FOUND", "NOT_FOUND"]);
    assert_eq!(
        f.db.task_get(&f.hash, theirs.id).await.unwrap().state,
        TaskState::Leased,
        "the other session's task is untouched"
    );
    // A single result takes the per-result path (no group check for one).
    let (_, calls) = finish(&mut conn, s, format!("[{}]", ok(ids[3]))).await;
    assert_eq!(calls, 2, "the CALL and its orbit_attempt_end");
    // The same rows either way: attempt, task and history.
    assert_eq!(ending(&f, ids[0]).await, ending(&f, ids[2]).await);
    assert_eq!(ending(&f, ids[1]).await, ending(&f, ids[2]).await);
    assert_eq!(ending(&f, ids[3]).await, ending(&f, ids[2]).await);
    // Each attempt's queue permit and quota charges were given back once: one attempt of the
    // other session is still active; five tasks, four done.
    let permits: Vec<u64> =
        sqlx::query_scalar("SELECT attempt_id FROM orbit_queue_permit ORDER BY attempt_id")
            .fetch_all(f.db.pool())
            .await
            .unwrap();
    assert_eq!(permits, [g[0].attempt_id]);
    let active: Vec<(u8, u32)> = active_slots(&f).await;
    assert_eq!(active.iter().map(|s| s.1).sum::<u32>(), 1, "{active:?}");
    assert_eq!(incomplete_slots(&f).await.iter().sum::<i64>(), 1);
}

/// Where session `s`'s last scan stopped: (position, priority, task id).
async fn scan_stop(f: &Fixture, s: u64) -> (u32, u8, u64) {
    sqlx::query_as(
        "SELECT scan_position, scan_priority, scan_task_id FROM orbit_session WHERE id = ?",
    )
    .bind(s)
    .fetch_one(f.db.pool())
    .await
    .unwrap()
}

/// A keyed task readied behind session `s`'s scan stop: `other` holds key `k` with a task
/// submitted first, a second task of the key waits blocked; `s` claims two of the unkeyed
/// tasks submitted after both; then `other`'s result releases the key, which readies the
/// second task, older than where `s`'s scan stopped. Returns (the readied task, `s`'s grants).
async fn readied_behind_the_stop(f: &Fixture, s: u64, unkeyed: usize) -> (u64, Vec<Grant>) {
    let other = f.session("other", true, &[&f.queue_id]).await;
    f.submit(&f.queue_id, "k").await;
    let held = f.db.task_claim(other, 1, 30_000).await.unwrap();
    let behind = f.submit(&f.queue_id, "k").await;
    for _ in 0..unkeyed {
        f.submit(&f.queue_id, "").await;
    }
    let g = f.db.task_claim(s, 2, 30_000).await.unwrap();
    assert_eq!(g.len(), 2);
    assert_eq!(scan_stop(f, s).await, (0, 5, g[1].task.id));
    f.db.attempt_finish(
        other,
        held[0].attempt_id,
        Outcome::Succeeded,
        false,
        None,
        None,
    )
    .await
    .unwrap();
    assert_eq!(ready_of_key(f, "k").await, [behind.id]);
    (behind.id, g)
}

/// A result's grant of up to `max` more tasks.
fn up_to(max: u32) -> ClaimAfter {
    ClaimAfter {
        max,
        lease_ms: 30_000,
    }
}

#[tokio::test]
async fn a_result_s_grant_scans_on_from_where_the_last_scan_stopped_and_from_the_front_every_16th()
{
    let f = Fixture::new().await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let (behind, g) = readied_behind_the_stop(&f, s, 40).await;
    // Each result grants one more: the scans go on from where the last one stopped, past the
    // task readied behind it, until the session's 16th grant starts at the front of the lane.
    let mut running = g[1].attempt_id;
    let mut finish = g[0].attempt_id;
    let mut passed_over = 0;
    loop {
        let (_, grants) = succeed(&f, s, finish, up_to(1)).await.unwrap();
        assert_eq!(grants.len(), 1);
        let seq = claim_seq(&f, s).await;
        if grants[0].task.id == behind {
            assert_eq!(seq % 16, 0, "the restart comes with the 16th grant");
            break;
        }
        assert!(grants[0].task.id > behind);
        assert_ne!(
            seq % 16,
            0,
            "a grant from the front takes the oldest ready task"
        );
        passed_over += 1;
        (finish, running) = (running, grants[0].attempt_id);
    }
    assert_eq!(passed_over, 14, "grants 2 to 15 went on from the stop");
}

#[tokio::test]
async fn a_scan_that_comes_up_short_goes_on_from_the_front_and_a_claim_always_starts_there() {
    let f = Fixture::new().await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let (behind, g) = readied_behind_the_stop(&f, s, 3).await;
    // The stop is past the second unkeyed task: one more is left after it.
    let (_, grants) = succeed(&f, s, g[0].attempt_id, up_to(2)).await.unwrap();
    let mut granted: Vec<u64> = grants.iter().map(|g| g.task.id).collect();
    assert!(granted[0] > behind, "the scan went on from the stop first");
    granted.sort_unstable();
    assert_eq!(
        granted[0], behind,
        "then from the front for the rest: {granted:?}"
    );
    // A claim on its own starts at the front, whatever the stop.
    let f = Fixture::new().await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let (behind, _) = readied_behind_the_stop(&f, s, 3).await;
    assert_eq!(
        f.db.task_claim(s, 1, 30_000).await.unwrap()[0].task.id,
        behind
    );
}

#[tokio::test]
async fn a_scan_from_the_last_stop_still_takes_better_priorities_first_and_worse_ones_whole() {
    let f = Fixture::new().await;
    let mut worse = f.task(&f.queue_id, "");
    worse.priority = Some(9);
    let worse = f.submit_task(&worse).await;
    let usual: Vec<u64> = {
        let mut ids = Vec::new();
        for _ in 0..3 {
            ids.push(f.submit(&f.queue_id, "").await.id);
        }
        ids
    };
    let s = f.session("w", true, &[&f.queue_id]).await;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap();
    assert_eq!(g[0].task.id, usual[0]);
    assert_eq!(scan_stop(&f, s).await, (0, 5, usual[0]));
    let mut better = f.task(&f.queue_id, "");
    better.priority = Some(0);
    let better = f.submit_task(&better).await;
    let (_, grants) = succeed(&f, s, g[0].attempt_id, up_to(4)).await.unwrap();
    assert_eq!(
        grants.iter().map(|g| g.task.id).collect::<Vec<_>>(),
        [better.id, usual[1], usual[2], worse.id]
    );
}
