//! The life cycle after a grant (SPEC §4 table, one test per row, and the rules around it).

use orbit::db::tasks::{Resolution, TaskState};
use orbit::db::workers::{Outcome, SessionOpen};
use orbit::db::DbError;
use orbit::testing::{Counters, Fixture};

async fn key_permit_holder(f: &Fixture, key: &str) -> Option<u64> {
    sqlx::query_scalar(
        "SELECT a.id FROM orbit_resource r JOIN orbit_attempt a ON a.id = r.holder_attempt_id WHERE r.concurrency_key = ?",
    )
    .bind(key.as_bytes())
    .fetch_optional(f.db.pool())
    .await
    .unwrap()
}

async fn counters(f: &Fixture) -> (u32, u64) {
    sqlx::query_as(
        "SELECT CAST(SUM(active_attempts) AS UNSIGNED), CAST(SUM(incomplete_tasks) AS UNSIGNED) \
           FROM orbit_application_quota",
    )
    .fetch_one(f.db.pool())
    .await
    .unwrap()
}

#[tokio::test]
async fn reconnect_and_resume_keep_the_attempt_and_token_and_renew_extends_the_permit() {
    let f = Fixture::new().await;
    f.submit(&f.queue_id, "k").await;
    let s1 = f.session("worker-a", true, &[&f.queue_id]).await;
    let g = f.db.task_claim(s1, 1, 30_000).await.unwrap().remove(0);
    assert!(f.db.attempt_start(s1, g.attempt_id).await.unwrap().accepted);
    // The socket drops; the same worker identity says hello again with resume.
    f.db.session_close(s1, false).await.unwrap();
    let s2 =
        f.db.session_open(
            &f.hash,
            &SessionOpen {
                worker_id: "worker-a".into(),
                capacity: 4,
                concurrency_keys: true,
                queue_ids: vec![f.queue_id.clone()],
                resume: vec![g.attempt_id, 999_999],
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        s2.resumed,
        vec![g.attempt_id],
        "only its own live attempt is resumed"
    );
    assert_eq!(
        key_permit_holder(&f, "k").await,
        Some(g.attempt_id),
        "disconnecting released nothing"
    );
    let renewed =
        f.db.attempt_renew(s2.session_id, g.attempt_id, 60_000)
            .await
            .unwrap();
    assert!(renewed.accepted);
    assert!(renewed.lease_expires_at.unwrap() > g.lease_expires_at);
    // The key permit names the attempt, whose lease is the permit's: renewed with it.
    let (holder, token): (u64, u64) = sqlx::query_as(
        "SELECT a.id, a.concurrency_token FROM orbit_resource r JOIN orbit_attempt a ON a.id = r.holder_attempt_id",
    )
    .fetch_one(f.db.pool())
    .await
    .unwrap();
    assert_eq!(holder, g.attempt_id, "renew keeps the key permit");
    assert_eq!(token, g.concurrency_token, "same attempt, same token");
    // The old session can no longer act on it (it is closed: every frame is refused); the new
    // one finishes it.
    assert!(matches!(
        f.db.attempt_renew(s1, g.attempt_id, 60_000)
            .await
            .unwrap_err(),
        DbError::Unauthenticated(_)
    ));
    let ack =
        f.db.attempt_finish(
            s2.session_id,
            g.attempt_id,
            Outcome::Succeeded,
            false,
            Some("{}"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(ack.task_state, "SUCCEEDED");
}

#[tokio::test]
async fn a_resumed_attempt_is_never_taken_for_one_of_the_new_sessions_grants() {
    // Found by `orbit chaos`: a resumed attempt kept the old session's claim_seq, and the new
    // session's grant with that number took it for one of its own (an answer naming it, a second
    // queue permit that outlived it and stalled lease recovery behind it).
    let f = Fixture::new().await;
    for _ in 0..3 {
        f.submit(&f.queue_id, "").await;
    }
    let s1 = f.session("worker-a", true, &[&f.queue_id]).await;
    let g = f.db.task_claim(s1, 1, 30_000).await.unwrap().remove(0);
    f.db.session_close(s1, false).await.unwrap();
    let s2 =
        f.db.session_open(
            &f.hash,
            &SessionOpen {
                worker_id: "worker-a".into(),
                capacity: 4,
                concurrency_keys: true,
                queue_ids: vec![f.queue_id.clone()],
                resume: vec![g.attempt_id],
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(s2.resumed, vec![g.attempt_id]);
    // The new session's first grant has the number the resumed attempt's grant had.
    let mine = f.db.task_claim(s2.session_id, 1, 30_000).await.unwrap();
    assert_eq!(mine.len(), 1);
    assert_ne!(
        mine[0].attempt_id, g.attempt_id,
        "a new task, not the resumed one"
    );
    // The resumed attempt ends; the next grants leave no permit behind it.
    f.db.attempt_finish(
        s2.session_id,
        g.attempt_id,
        Outcome::Succeeded,
        false,
        Some("{}"),
        None,
    )
    .await
    .unwrap();
    let more = f.db.task_claim(s2.session_id, 2, 30_000).await.unwrap();
    assert_eq!(more.len(), 1);
    let permits: Vec<u64> =
        sqlx::query_scalar("SELECT id FROM orbit_attempt WHERE released_at IS NULL ORDER BY id")
            .fetch_all(f.db.pool())
            .await
            .unwrap();
    assert_eq!(permits, [mine[0].attempt_id, more[0].attempt_id]);
    let attempts: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orbit_attempt WHERE task_id = ?")
        .bind(g.task.id)
        .fetch_one(f.db.pool())
        .await
        .unwrap();
    assert_eq!(attempts, 1, "the resumed task was granted once");
}

/// Every attempt id a worker may send (any u64) gets its own answer: one above 2^63 - 1 is not
/// found, as any id no one holds, on every server (MySQL assigned such a JSON integer through a
/// signed integer and failed the whole call with error 1264).
#[tokio::test]
async fn an_attempt_id_beyond_the_signed_range_is_not_found() {
    let f = Fixture::new().await;
    f.submit(&f.queue_id, "k").await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let held = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    for id in [i64::MAX as u64 + 1, u64::MAX - 1, u64::MAX] {
        let started =
            f.db.attempt_start_many(s, &[held.attempt_id, id])
                .await
                .unwrap();
        assert!(started[0].accepted, "{id}: the held attempt starts");
        assert_eq!(
            (started[1].attempt_id, started[1].code.as_str()),
            (id, "NOT_FOUND")
        );
        let renewed =
            f.db.attempt_renew_many(s, &[id, held.attempt_id], 30_000)
                .await
                .unwrap();
        assert_eq!(
            (renewed[0].attempt_id, renewed[0].code.as_str()),
            (id, "NOT_FOUND")
        );
        assert!(renewed[1].accepted, "{id}: the held attempt renews");
        let finished =
            f.db.attempt_finish(s, id, Outcome::Succeeded, false, None, None);
        assert!(
            matches!(finished.await.unwrap_err(), DbError::NotFound(_)),
            "{id}: a result for it"
        );
    }
}

#[tokio::test]
async fn a_duplicate_result_releases_nothing_twice() {
    let f = Fixture::new().await;
    f.submit(&f.queue_id, "k").await;
    f.submit(&f.queue_id, "k").await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let a = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    let first =
        f.db.attempt_finish(s, a.attempt_id, Outcome::Succeeded, false, Some("{}"), None)
            .await
            .unwrap();
    assert!(!first.duplicate);
    let b = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    assert!(b.concurrency_token > a.concurrency_token);
    // The old receipt is replayed (duplicate frame, reconnect replay): same answer, b untouched.
    let replay =
        f.db.attempt_finish(s, a.attempt_id, Outcome::Succeeded, false, Some("{}"), None)
            .await
            .unwrap();
    assert!(replay.duplicate);
    assert_eq!(
        (replay.task_state.as_str(), replay.attempt_state.as_str()),
        ("SUCCEEDED", "SUCCEEDED")
    );
    assert_eq!(key_permit_holder(&f, "k").await, Some(b.attempt_id));
    assert_eq!(counters(&f).await, (1, 1));
}

#[tokio::test]
async fn cancel_before_start_releases_and_the_next_grant_gets_a_larger_token() {
    let f = Fixture::new().await;
    let t1 = f.submit(&f.queue_id, "k").await;
    f.submit(&f.queue_id, "k").await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let a = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    let cancelled = f.db.task_cancel(&f.hash, t1.id).await.unwrap();
    assert_eq!(cancelled.state, TaskState::Cancelled);
    assert_eq!(
        key_permit_holder(&f, "k").await,
        None,
        "released in the cancel transaction"
    );
    let b = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    assert!(b.concurrency_token > a.concurrency_token);
    // The cancelled attempt can no longer start.
    assert_eq!(
        f.db.attempt_start(s, a.attempt_id).await.unwrap().code,
        "STATE_CONFLICT"
    );
    // A RUNNING task cannot be cancelled; a finished one neither; cancelling twice is idempotent.
    assert!(f.db.attempt_start(s, b.attempt_id).await.unwrap().accepted);
    assert!(matches!(
        f.db.task_cancel(&f.hash, b.task.id).await.unwrap_err(),
        DbError::StateConflict(_)
    ));
    assert_eq!(
        f.db.task_cancel(&f.hash, t1.id).await.unwrap().state,
        TaskState::Cancelled
    );
    f.db.attempt_finish(s, b.attempt_id, Outcome::Succeeded, false, None, None)
        .await
        .unwrap();
    assert!(matches!(
        f.db.task_cancel(&f.hash, b.task.id).await.unwrap_err(),
        DbError::StateConflict(_)
    ));
    assert_eq!(counters(&f).await, (0, 0));
}

#[tokio::test]
async fn cancelling_a_waiting_head_hands_the_slot_to_the_next_task() {
    let f = Fixture::new().await;
    let head = f.submit(&f.queue_id, "k").await;
    let next = f.submit(&f.queue_id, "k").await;
    assert_eq!(
        (
            f.lane(head.id).await.as_str(),
            f.lane(next.id).await.as_str()
        ),
        ("ready", "blocked")
    );
    f.db.task_cancel(&f.hash, head.id).await.unwrap();
    assert_eq!(f.lane(next.id).await, "ready");
}

#[tokio::test]
async fn lease_expiry_before_start_ends_expired_and_the_task_waits_again() {
    let f = Fixture::new().await;
    let t = f.submit(&f.queue_id, "k").await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let a = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    f.expire_lease(a.attempt_id).await;
    // A late Start is rejected inside its transaction, before recovery runs.
    assert_eq!(
        f.db.attempt_start(s, a.attempt_id).await.unwrap().code,
        "LEASE_EXPIRED"
    );
    assert_eq!(
        f.db.attempt_renew(s, a.attempt_id, 30_000)
            .await
            .unwrap()
            .code,
        "LEASE_EXPIRED"
    );
    let swept = f.db.lease_recover(100).await.unwrap();
    assert_eq!(swept.count, 1);
    assert_eq!(
        f.db.task_get(&f.hash, t.id).await.unwrap().state,
        TaskState::Waiting
    );
    let b = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    assert_eq!(b.task.id, t.id);
    assert_eq!(b.attempt_no, 2);
    assert!(b.concurrency_token > a.concurrency_token);
    assert_eq!(
        f.db.attempt_start(s, a.attempt_id).await.unwrap().code,
        "STATE_CONFLICT"
    );
    let state: String =
        sqlx::query_scalar("SELECT CAST(state AS CHAR) FROM orbit_attempt WHERE id = ?")
            .bind(a.attempt_id)
            .fetch_one(f.db.pool())
            .await
            .unwrap();
    assert_eq!(state, "EXPIRED");
}

#[tokio::test]
async fn lease_expiry_while_running_is_unknown_and_goes_to_review() {
    let f = Fixture::new().await;
    let t = f.submit(&f.queue_id, "k").await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let a = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    f.db.attempt_start(s, a.attempt_id).await.unwrap();
    f.expire_lease(a.attempt_id).await;
    assert_eq!(f.db.lease_recover(100).await.unwrap().count, 1);
    let shown = f.db.task_get(&f.hash, t.id).await.unwrap();
    assert_eq!(shown.state, TaskState::NeedsReview);
    assert_eq!(
        key_permit_holder(&f, "k").await,
        None,
        "the permit is released"
    );
    assert_eq!(
        counters(&f).await,
        (0, 1),
        "the task still counts against the backlog quota"
    );
    // The late result of the paused holder is recorded and acts on nothing.
    let late =
        f.db.attempt_finish(s, a.attempt_id, Outcome::Succeeded, false, Some("{}"), None)
            .await
            .unwrap();
    assert!(late.duplicate);
    assert_eq!(late.task_state, "NEEDS_REVIEW");
    let recorded: String =
        sqlx::query_scalar("SELECT CAST(late_result AS CHAR) FROM orbit_attempt WHERE id = ?")
            .bind(a.attempt_id)
            .fetch_one(f.db.pool())
            .await
            .unwrap();
    assert_eq!(recorded, "succeeded");
}

#[tokio::test]
async fn a_task_safe_to_retry_after_unknown_goes_to_retry_wait() {
    let f = Fixture::new().await;
    let mut t = f.task(&f.queue_id, "k");
    t.retry_unknown = Some(true);
    t.retry_base_ms = Some(0);
    let t = f.submit_task(&t).await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let a = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    f.db.attempt_start(s, a.attempt_id).await.unwrap();
    f.expire_lease(a.attempt_id).await;
    f.db.lease_recover(10).await.unwrap();
    let b = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    assert_eq!(b.task.id, t.id);
    assert!(b.concurrency_token > a.concurrency_token);
}

#[tokio::test]
async fn unknown_outcome_releases_keeps_history_and_resolve_requeues_with_a_larger_token() {
    let f = Fixture::new().await;
    let t = f.submit(&f.queue_id, "k").await;
    let other = f.submit(&f.queue_id, "k").await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let a = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    f.db.attempt_start(s, a.attempt_id).await.unwrap();
    let ack =
        f.db.attempt_finish(
            s,
            a.attempt_id,
            Outcome::Unknown,
            false,
            None,
            Some(r#"{"why":"timeout"}"#),
        )
        .await
        .unwrap();
    assert_eq!(
        (ack.task_state.as_str(), ack.attempt_state.as_str()),
        ("NEEDS_REVIEW", "UNKNOWN")
    );
    // The key is not locked until review: the other task runs now.
    let b = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    assert_eq!(b.task.id, other.id);
    f.db.attempt_finish(s, b.attempt_id, Outcome::Succeeded, false, None, None)
        .await
        .unwrap();
    // Resolve rejects tasks not in review, then requeues this one.
    assert!(matches!(
        f.db.task_resolve(&f.hash, other.id, Resolution::Requeue, None)
            .await
            .unwrap_err(),
        DbError::StateConflict(_)
    ));
    let requeued =
        f.db.task_resolve(&f.hash, t.id, Resolution::Requeue, None)
            .await
            .unwrap();
    assert_eq!(requeued.state, TaskState::Waiting);
    let c = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    assert_eq!(c.task.id, t.id);
    assert!(c.concurrency_token > b.concurrency_token);
    let events: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(event AS CHAR) FROM orbit_task_event WHERE task_id = ? ORDER BY id",
    )
    .bind(t.id)
    .fetch_all(f.db.pool())
    .await
    .unwrap();
    assert_eq!(events, ["attempt_unknown", "resolved"], "history kept");
    // A second unknown, resolved as succeeded, is terminal.
    f.db.attempt_finish(s, c.attempt_id, Outcome::Unknown, false, None, None)
        .await
        .unwrap();
    let done =
        f.db.task_resolve(
            &f.hash,
            t.id,
            Resolution::Succeeded,
            Some(r#"{"checked":true}"#),
        )
        .await
        .unwrap();
    assert_eq!(done.state, TaskState::Succeeded);
    assert_eq!(counters(&f).await, (0, 0));
}

#[tokio::test]
async fn a_retryable_failure_releases_now_and_competes_again_when_due() {
    let f = Fixture::new().await;
    let mut t = f.task(&f.queue_id, "k");
    t.retry_base_ms = Some(60_000);
    let t = f.submit_task(&t).await;
    let other = f.submit(&f.queue_id, "k").await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let a = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    assert_eq!(a.task.id, t.id);
    let ack =
        f.db.attempt_finish(
            s,
            a.attempt_id,
            Outcome::Failed,
            true,
            None,
            Some(r#"{"e":1}"#),
        )
        .await
        .unwrap();
    assert_eq!(ack.task_state, "RETRY_WAIT");
    assert_eq!(f.lane(t.id).await, "scheduled");
    // The key is free during the backoff: the other task is granted at once.
    let b = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    assert_eq!(b.task.id, other.id);
    assert_eq!(
        f.db.task_promote_due(10).await.unwrap().count,
        0,
        "not due yet"
    );
    f.db.attempt_finish(s, b.attempt_id, Outcome::Succeeded, false, None, None)
        .await
        .unwrap();
    f.make_due(t.id).await;
    assert_eq!(f.db.task_promote_due(10).await.unwrap().count, 1);
    let c = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    assert_eq!((c.task.id, c.attempt_no), (t.id, 2));
    assert!(c.concurrency_token > b.concurrency_token);
    // Out of attempts: a retryable failure is final.
    let mut last = f.task(&f.queue_id, "");
    last.max_attempts = Some(1);
    let last = f.submit_task(&last).await;
    let d =
        f.db.task_claim(s, 1, 30_000)
            .await
            .unwrap()
            .into_iter()
            .find(|g| g.task.id == last.id)
            .unwrap();
    let ack =
        f.db.attempt_finish(s, d.attempt_id, Outcome::Failed, true, None, None)
            .await
            .unwrap();
    assert_eq!(ack.task_state, "FAILED");
}

#[tokio::test]
async fn draining_or_closing_a_session_releases_nothing() {
    let f = Fixture::new().await;
    f.submit(&f.queue_id, "k").await;
    f.submit(&f.queue_id, "").await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let a = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    assert_eq!(
        f.db.session_close(s, true).await.unwrap(),
        1,
        "one attempt in flight"
    );
    assert!(
        f.db.task_claim(s, 10, 30_000).await.unwrap().is_empty(),
        "a draining session gets nothing new"
    );
    f.db.session_close(s, false).await.unwrap();
    assert_eq!(key_permit_holder(&f, "k").await, Some(a.attempt_id));
    assert_eq!(counters(&f).await.0, 1);
}

#[tokio::test]
async fn start_and_finish_check_ownership_and_start_is_repeatable() {
    let f = Fixture::new().await;
    f.submit(&f.queue_id, "").await;
    let s = f.session("w1", true, &[&f.queue_id]).await;
    let intruder = f.session("w2", true, &[&f.queue_id]).await;
    let a = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    assert_eq!(
        f.db.attempt_start(intruder, a.attempt_id)
            .await
            .unwrap()
            .code,
        "NOT_FOUND"
    );
    assert!(matches!(
        f.db.attempt_finish(
            intruder,
            a.attempt_id,
            Outcome::Succeeded,
            false,
            None,
            None
        )
        .await
        .unwrap_err(),
        DbError::NotFound(_)
    ));
    assert!(f.db.attempt_start(s, a.attempt_id).await.unwrap().accepted);
    assert!(
        f.db.attempt_start(s, a.attempt_id).await.unwrap().accepted,
        "a repeated start is accepted"
    );
    assert_eq!(
        f.db.attempt_start(s, 424_242).await.unwrap().code,
        "NOT_FOUND"
    );
    assert!(matches!(
        f.db.attempt_finish(s, 424_242, Outcome::Succeeded, false, None, None)
            .await
            .unwrap_err(),
        DbError::NotFound(_)
    ));
    assert!(matches!(
        f.db.attempt_finish(
            s,
            a.attempt_id,
            Outcome::Succeeded,
            false,
            Some("{bad"),
            None
        )
        .await
        .unwrap_err(),
        DbError::InvalidArgument(_)
    ));
}

#[tokio::test]
async fn the_concurrency_keys_registration_is_fixed_per_worker_id() {
    let f = Fixture::new().await;
    f.session("w", true, &[&f.queue_id]).await;
    let err =
        f.db.session_open(
            &f.hash,
            &SessionOpen {
                worker_id: "w".into(),
                capacity: 1,
                concurrency_keys: false,
                queue_ids: vec![f.queue_id.clone()],
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, DbError::StateConflict(_)), "{err:?}");
}

#[tokio::test]
async fn deadlines_expire_waiting_and_blocked_tasks() {
    let f = Fixture::new().await;
    f.submit(&f.queue_id, "k").await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    f.db.task_claim(s, 1, 30_000).await.unwrap();
    let mut t = f.task(&f.queue_id, "k");
    t.deadline_seconds = Some(3600);
    let blocked = f.submit_task(&t).await;
    assert_eq!(f.lane(blocked.id).await, "blocked");
    let swept = f.db.task_expire_due(100).await.unwrap();
    assert_eq!(swept.count, 0);
    assert!(swept.next_due_at.is_some());
    f.pass_deadline(blocked.id).await;
    assert_eq!(f.db.task_expire_due(100).await.unwrap().count, 1);
    assert_eq!(
        f.db.task_get(&f.hash, blocked.id).await.unwrap().state,
        TaskState::Expired
    );
    assert_eq!(counters(&f).await, (1, 1));
}

#[tokio::test]
async fn resource_rows_are_never_deleted() {
    let f = Fixture::new().await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    for _ in 0..3 {
        f.submit(&f.queue_id, "k").await;
        let g = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
        f.db.attempt_finish(s, g.attempt_id, Outcome::Succeeded, false, None, None)
            .await
            .unwrap();
    }
    let (rows, highest, version): (i64, u64, u64) =
        sqlx::query_as("SELECT COUNT(*), MAX(highest_token), MAX(version) FROM orbit_resource")
            .fetch_one(f.db.pool())
            .await
            .unwrap();
    assert_eq!(
        (rows, highest, version),
        (1, 3, 6),
        "one row, kept; each grant and release advanced it"
    );
}

#[tokio::test]
async fn starts_and_renewals_of_many_attempts_are_answered_each_in_order() {
    let f = Fixture::new().await;
    for key in ["", "k"] {
        f.submit(&f.queue_id, key).await;
    }
    let s = f.session("w", true, &[&f.queue_id]).await;
    let other = f.session("other", true, &[&f.queue_id]).await;
    let held = f.db.task_claim(s, 2, 30_000).await.unwrap();
    let (a, b) = (held[0].attempt_id, held[1].attempt_id);
    f.submit(&f.queue_id, "").await;
    let theirs = f.db.task_claim(other, 1, 30_000).await.unwrap()[0].attempt_id;
    let started =
        f.db.attempt_start_many(s, &[b, 424_242, a, theirs, a])
            .await
            .unwrap();
    let seen: Vec<(u64, bool, &str)> = started
        .iter()
        .map(|x| (x.attempt_id, x.accepted, x.code.as_str()))
        .collect();
    assert_eq!(
        seen,
        vec![
            (b, true, ""),
            (424_242, false, "NOT_FOUND"),
            (a, true, ""),
            (theirs, false, "NOT_FOUND"),
            (a, true, ""),
        ]
    );
    assert!(started[0].lease_expires_at.is_some() && started[1].lease_expires_at.is_none());
    let states: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(state AS CHAR) FROM orbit_attempt WHERE id IN (?, ?, ?) ORDER BY id",
    )
    .bind(a)
    .bind(b)
    .bind(theirs)
    .fetch_all(f.db.pool())
    .await
    .unwrap();
    assert_eq!(states, ["RUNNING", "RUNNING", "LEASED"]);
    let renewed =
        f.db.attempt_renew_many(s, &[a, theirs, b], 120_000)
            .await
            .unwrap();
    assert_eq!(
        renewed
            .iter()
            .map(|x| (x.attempt_id, x.accepted, x.code.as_str()))
            .collect::<Vec<_>>(),
        vec![(a, true, ""), (theirs, false, "NOT_FOUND"), (b, true, "")]
    );
    assert!(renewed[0].lease_expires_at.unwrap() > held[0].lease_expires_at);
    for bad in ["[]", "[0]", "[1, \"2\"]", "{}", "nope"] {
        for call in [
            "CALL orbit_attempt_start(?, ?)",
            "CALL orbit_attempt_renew(?, ?, 30000)",
        ] {
            let e = sqlx::query(call)
                .bind(s)
                .bind(bad)
                .execute(f.db.pool())
                .await
                .unwrap_err();
            assert!(
                e.to_string().contains("INVALID_ARGUMENT"),
                "{call} {bad}: {e}"
            );
        }
    }
}

/// Index entries read (`Handler_read_next`) by one `CALL orbit_task_expire_due(100)` on a
/// connection of its own, and the sweep's count.
async fn sweep_reads(f: &Fixture) -> u64 {
    let mut conn = f.db.pool().acquire().await.unwrap();
    let counters = Counters::start(&mut conn, &["Handler_read_next"]).await;
    sqlx::raw_sql("CALL orbit_task_expire_due(100)")
        .execute(&mut *conn)
        .await
        .unwrap();
    counters.since(&mut conn).await["Handler_read_next"]
}

#[tokio::test]
async fn the_deadline_sweep_reads_a_few_entries_however_many_tasks_wait() {
    let f = Fixture::new().await;
    let first = f.submit(&f.queue_id, "").await;
    // 20,000 waiting copies of it, blocked, 1,000 of them with a deadline in a day (bulk SQL:
    // setup, not the behaviour under test).
    f.copies(
        first.id,
        &[
            ("lane", "'blocked'"),
            (
                "deadline_at",
                "IF(n.i % 20 = 0, UTC_TIMESTAMP(6) + INTERVAL 1 DAY, NULL)",
            ),
        ],
    )
    .await;
    let reads = sweep_reads(&f).await;
    assert!(reads < 50, "{reads} index entries read for one sweep");
    let swept = f.db.task_expire_due(100).await.unwrap();
    assert_eq!(swept.count, 0);
    assert!(
        swept.next_due_at.is_some(),
        "the day-ahead deadlines are found"
    );
    // One of them falls due: it is found and expired the same way.
    sqlx::query(
        "UPDATE orbit_task SET deadline_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND \
          WHERE idempotency_key = 'copy-20'",
    )
    .execute(f.db.pool())
    .await
    .unwrap();
    assert!(sweep_reads(&f).await < 50);
    let id: u64 = sqlx::query_scalar("SELECT id FROM orbit_task WHERE idempotency_key = 'copy-20'")
        .fetch_one(f.db.pool())
        .await
        .unwrap();
    assert_eq!(
        f.db.task_get(&f.hash, id).await.unwrap().state,
        TaskState::Expired
    );
}
