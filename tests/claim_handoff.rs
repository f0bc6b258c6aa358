//! Releases and hand-offs: a result that releases a key readies or grants its next task in the
//! same transaction (orbit_attempt_finish with orbit_task_grant), and wakes only what it left
//! claimable.

mod claim;

use claim::{ready_of_key, resource, result, succeed};
use orbit::db::tasks::TaskState;
use orbit::db::workers::{ClaimAfter, Outcome};
use orbit::testing::Fixture;
use std::time::Duration;

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
async fn a_hand_off_goes_before_older_ready_tasks_of_its_priority_and_after_better_ones() {
    // The key's next task is granted straight from the blocked lane, ahead of an older ready task
    // of its priority (readied first, it would have queued behind that one); a ready task of a
    // better priority still goes first, and the key's next task is then readied for others.
    let f = Fixture::new().await;
    let one = ClaimAfter {
        max: 1,
        lease_ms: 30_000,
    };
    f.submit(&f.queue_id, "k").await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let holder = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    let older = f.submit(&f.queue_id, "").await;
    let next = f.submit(&f.queue_id, "k").await;
    assert!(older.id < next.id);
    let (_, grants) = succeed(&f, s, holder.attempt_id, one).await.unwrap();
    assert_eq!(
        grants.iter().map(|g| g.task.id).collect::<Vec<_>>(),
        vec![next.id],
        "the hand-off goes first within its priority"
    );
    assert_eq!(f.lane(older.id).await, "ready");

    let urgent = f
        .submit_task(&orbit::db::tasks::NewTask {
            priority: Some(0),
            ..f.task(&f.queue_id, "")
        })
        .await;
    let after = f.submit(&f.queue_id, "k").await;
    let (ack, grants) = succeed(&f, s, grants[0].attempt_id, one).await.unwrap();
    assert_eq!(
        grants.iter().map(|g| g.task.id).collect::<Vec<_>>(),
        vec![urgent.id],
        "a better priority goes before the hand-off"
    );
    assert_eq!(ready_of_key(&f, "k").await, vec![after.id]);
    assert!(ack.wake, "the key's next task was left to other sessions");
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

/// Each slot's share of 32 is 2 (16 slots), and every slot is within it (checked).
async fn limit_active_attempts_to_32(f: &Fixture) {
    sqlx::query(
        "UPDATE orbit_application_quota SET max_active_attempts = 32, checked_max_active_attempts = 32",
    )
        .execute(f.db.pool())
        .await
        .unwrap();
}

async fn active_attempts(f: &Fixture) -> u64 {
    sqlx::query_scalar("SELECT CAST(SUM(active_attempts) AS UNSIGNED) FROM orbit_application_quota")
        .fetch_one(f.db.pool())
        .await
        .unwrap()
}

/// A result's grant that the session's quota slot cannot take whole, even with the charges the
/// results give back, is charged under a lock on every slot, in the same transaction: the give-back
/// comes after it (quota rows last), and counts as room.
#[tokio::test]
async fn a_grant_the_sessions_quota_slot_cannot_take_locks_every_slot() {
    let f = Fixture::new().await;
    limit_active_attempts_to_32(&f).await;
    for _ in 0..5 {
        f.submit(&f.queue_id, "").await;
    }
    let s = f.session("w", true, &[&f.queue_id]).await;
    let held = f.db.task_claim(s, 2, 30_000).await.unwrap();
    assert_eq!(held.len(), 2, "the session's slot takes its share");
    let finished =
        f.db.attempt_finish_many(
            s,
            &[result(held[0].attempt_id, Outcome::Succeeded)],
            ClaimAfter {
                max: 3,
                lease_ms: 30_000,
            },
        )
        .await
        .unwrap();
    assert_eq!(finished.acks[0].task_state, "SUCCEEDED");
    assert_eq!(finished.grants.len(), 3, "1 + 3 of 32");
    assert!(!finished.claim_again);
    assert_eq!(active_attempts(&f).await, 4);
}

/// When the session's slot was charged by another transaction between the grant's read of its
/// room and its charge, the update that waited for the row keeps it locked, so the grant is left
/// to a claim of the session's own (`claim_again`); that claim takes every slot's row at once.
#[tokio::test]
async fn a_grant_whose_slot_filled_meanwhile_is_left_to_a_claim() {
    let f = Fixture::new().await;
    limit_active_attempts_to_32(&f).await;
    for _ in 0..4 {
        f.submit(&f.queue_id, "").await;
    }
    let s = f.session("w", true, &[&f.queue_id]).await;
    let held = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    // Another transaction charges the session's slot to its share and commits only once the
    // result's charge waits for the row.
    let slot: u8 = sqlx::query_scalar("SELECT quota_slot FROM orbit_attempt WHERE id = ?")
        .bind(held.attempt_id)
        .fetch_one(f.db.pool())
        .await
        .unwrap();
    let mut other = f.db.pool().begin().await.unwrap();
    let other_id: u64 = sqlx::query_scalar("SELECT CONNECTION_ID()")
        .fetch_one(&mut *other)
        .await
        .unwrap();
    sqlx::query(
        "UPDATE orbit_application_quota SET active_attempts = 2 WHERE application_id = ? AND slot = ?",
    )
    .bind(f.application_id)
    .bind(slot)
        .execute(&mut *other)
        .await
        .unwrap();
    let db = f.db.clone();
    let finish = tokio::spawn(async move {
        db.attempt_finish_many(
            s,
            &[result(held.attempt_id, Outcome::Succeeded)],
            ClaimAfter {
                max: 2,
                lease_ms: 30_000,
            },
        )
        .await
    });
    // The grant's charge of the slot has started (in this test's database: the other tests share
    // the server). MariaDB's INNODB_TRX does not show the lock wait; the process list shows the
    // statement.
    quota_update_started(&f, other_id).await;
    other.commit().await.unwrap();
    let finished = tokio::time::timeout(Duration::from_secs(20), finish)
        .await
        .expect("the result does not wait for a lock timeout")
        .unwrap()
        .unwrap();
    assert_eq!(finished.acks[0].task_state, "SUCCEEDED");
    assert!(finished.grants.is_empty(), "{:?}", finished.grants);
    assert!(finished.claim_again, "the grant is left to a claim");
    // The other transaction's charge (2) less the result's give-back (1); nothing charged.
    assert_eq!(active_attempts(&f).await, 1);
    // The claim: its slot is at its share, so it locks every slot (1 + 2 of 32).
    assert_eq!(f.db.task_claim(s, 2, 30_000).await.unwrap().len(), 2);
    assert_eq!(active_attempts(&f).await, 3);
}

/// A claim whose one-slot charge waited for the slot's row and then found it full is still
/// granted, under every slot's lock and on other slots (it starts again in a transaction of its
/// own, so it never locks every slot while holding that row; alone, this test cannot tell that
/// from locking them in the same transaction: tests/stress.rs counts the deadlocks).
#[tokio::test]
async fn a_claim_whose_slot_filled_meanwhile_is_granted_on_other_slots() {
    let f = Fixture::new().await;
    limit_active_attempts_to_32(&f).await;
    for _ in 0..3 {
        f.submit(&f.queue_id, "").await;
    }
    let s = f.session("w", true, &[&f.queue_id]).await;
    let slot: u8 = sqlx::query_scalar("SELECT ? % 16")
        .bind(s)
        .fetch_one(f.db.pool())
        .await
        .unwrap();
    // Another transaction fills the session's slot to its share and commits only once the
    // claim's charge has started.
    let mut other = f.db.pool().begin().await.unwrap();
    let other_id: u64 = sqlx::query_scalar("SELECT CONNECTION_ID()")
        .fetch_one(&mut *other)
        .await
        .unwrap();
    sqlx::query(
        "UPDATE orbit_application_quota SET active_attempts = 2 WHERE application_id = ? AND slot = ?",
    )
    .bind(f.application_id)
    .bind(slot)
    .execute(&mut *other)
    .await
    .unwrap();
    let db = f.db.clone();
    let claim = tokio::spawn(async move { db.task_claim(s, 2, 30_000).await });
    quota_update_started(&f, other_id).await;
    other.commit().await.unwrap();
    let grants = tokio::time::timeout(Duration::from_secs(20), claim)
        .await
        .expect("the claim does not wait for a lock timeout")
        .unwrap()
        .unwrap();
    assert_eq!(grants.len(), 2, "granted under every slot's lock");
    // The other transaction's 2 and the claim's 2, the claim's on another slot.
    assert_eq!(active_attempts(&f).await, 4);
    let on_other_slots: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM orbit_attempt WHERE session_id = ? AND quota_slot <> ?",
    )
    .bind(s)
    .bind(slot)
    .fetch_one(f.db.pool())
    .await
    .unwrap();
    assert_eq!(on_other_slots, 2, "the full slot took none of them");
}

/// Waits until a connection other than `other_id` runs an update of the quota rows. The other
/// transaction's own update is excluded: the server sends its OK before it clears the
/// connection's `INFO`, so for a moment after it returns the process list still shows it.
async fn quota_update_started(f: &Fixture, other_id: u64) {
    let mut conn = f.test_db.conn().await;
    let db = f.test_db.name.clone();
    loop {
        let running = orbit::processlist::read(&mut conn)
            .await
            .expect("SHOW FULL PROCESSLIST")
            .into_iter()
            .any(|p| {
                p.db.as_deref() == Some(db.as_str())
                    && p.id != other_id
                    && p.info.starts_with("UPDATE orbit_application_quota")
            });
        if running {
            return;
        }
        tokio::task::yield_now().await;
    }
}
