//! Retention of finished tasks (`orbit_task_purge`, `orbit_queue_set_retention`): a purge deletes
//! exactly the finished tasks past their queue's retention with their attempts, history and
//! receipts, keeps NEEDS_REVIEW and unfinished ones, leaves a key's tokens monotonic, splits the
//! work between two purgers; the API shows and sets the retention; a server purges and counts it.
//!
//! The purge takes the time it purges as of (`p_now`), so a test asks for "8 days from now"
//! instead of waiting; the server test moves `finished_at` back instead.

mod support;

use chrono::{Duration, Utc};
use orbit::db::tasks::{NewTask, TaskState};
use orbit::db::workers::Outcome;
use orbit::db::DbError;
use orbit::testing::Fixture;
use serde_json::json;
use support::Api;

const DAY: i64 = 86_400;

async fn count(f: &Fixture, sql: &str, task_id: u64) -> i64 {
    sqlx::query_scalar(sql)
        .bind(task_id)
        .fetch_one(f.db.pool())
        .await
        .unwrap()
}

/// (attempts, events, receipts) stored for a task.
async fn rows_of(f: &Fixture, task_id: u64) -> (i64, i64, i64) {
    (
        count(
            f,
            "SELECT COUNT(*) FROM orbit_attempt WHERE task_id = ?",
            task_id,
        )
        .await,
        count(
            f,
            "SELECT COUNT(*) FROM orbit_task_event WHERE task_id = ?",
            task_id,
        )
        .await,
        count(
            f,
            "SELECT COUNT(*) FROM orbit_idempotency WHERE task_id = ?",
            task_id,
        )
        .await,
    )
}

/// One purge call as of `now`, with a budget no test reaches: how many tasks it deleted.
async fn purge(db: &orbit::db::Db, now: Option<chrono::DateTime<Utc>>, limit: u32) -> u64 {
    let p = db
        .task_purge(now, limit, std::time::Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(p.more, p.count >= u64::from(limit), "{p:?}");
    p.count
}

async fn exists(f: &Fixture, task_id: u64) -> bool {
    count(f, "SELECT COUNT(*) FROM orbit_task WHERE id = ?", task_id).await == 1
}

/// Submits under `idem`, claims and starts it in `session`, and reports `outcome`.
async fn run_to(f: &Fixture, session: u64, t: &NewTask, idem: &str, outcome: Outcome) -> u64 {
    let task = f.db.task_submit(&f.hash, idem, t).await.unwrap().task;
    let g = f.db.task_claim(session, 1, 30_000).await.unwrap().remove(0);
    assert_eq!(g.task.id, task.id);
    assert!(
        f.db.attempt_start(session, g.attempt_id)
            .await
            .unwrap()
            .accepted
    );
    f.db.attempt_finish(
        session,
        g.attempt_id,
        outcome,
        false,
        Some("{}"),
        Some("{}"),
    )
    .await
    .unwrap();
    task.id
}

#[tokio::test]
async fn a_purge_deletes_exactly_the_expired_finished_tasks_with_their_attempts_events_and_receipts(
) {
    let f = Fixture::new().await;
    let q = f.queue_id.clone();
    let s = f.session("w", true, &[&q]).await;
    let mut once = f.task(&q, "");
    once.max_attempts = Some(1);
    let succeeded = run_to(&f, s, &once, "i-succeeded", Outcome::Succeeded).await;
    let failed = run_to(&f, s, &once, "i-failed", Outcome::Failed).await;
    let review = run_to(&f, s, &once, "i-review", Outcome::Unknown).await;
    let cancelled =
        f.db.task_submit(&f.hash, "i-cancelled", &once)
            .await
            .unwrap()
            .task
            .id;
    f.db.task_cancel(&f.hash, cancelled).await.unwrap();
    let mut deadline = once.clone();
    deadline.deadline_seconds = Some(3600);
    let expired =
        f.db.task_submit(&f.hash, "i-expired", &deadline)
            .await
            .unwrap()
            .task
            .id;
    f.pass_deadline(expired).await;
    assert_eq!(f.db.task_expire_due(10).await.unwrap().count, 1);
    let running =
        f.db.task_submit(&f.hash, "i-running", &once)
            .await
            .unwrap()
            .task
            .id;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    assert!(f.db.attempt_start(s, g.attempt_id).await.unwrap().accepted);
    let waiting =
        f.db.task_submit(&f.hash, "i-waiting", &once)
            .await
            .unwrap()
            .task
            .id;
    for (id, state) in [
        (succeeded, TaskState::Succeeded),
        (failed, TaskState::Failed),
        (review, TaskState::NeedsReview),
        (cancelled, TaskState::Cancelled),
        (expired, TaskState::Expired),
        (running, TaskState::Running),
        (waiting, TaskState::Waiting),
    ] {
        assert_eq!(
            f.db.task_get(&f.hash, id).await.unwrap().state,
            state,
            "task {id}"
        );
    }
    let finished = [succeeded, failed, cancelled, expired];
    let kept = [review, running, waiting];
    let mut kept_rows = Vec::new();
    for id in kept {
        kept_rows.push(rows_of(&f, id).await);
    }
    for id in finished {
        let (_, events, receipts) = rows_of(&f, id).await;
        assert!(
            events >= 1 && receipts == 1,
            "task {id} has history and a receipt"
        );
    }

    // Within the default retention (7 days), nothing goes.
    assert_eq!(purge(&f.db, None, 100).await, 0);
    let now = Utc::now();
    assert_eq!(
        purge(&f.db, Some(now + Duration::seconds(7 * DAY - 60)), 100).await,
        0
    );
    // Past it: the four finished tasks and every row that names them; nothing else.
    let later = now + Duration::seconds(8 * DAY);
    assert_eq!(purge(&f.db, Some(later), 100).await, 4);
    for id in finished {
        assert!(!exists(&f, id).await, "task {id} purged");
        assert_eq!(rows_of(&f, id).await, (0, 0, 0), "task {id}'s rows purged");
        assert!(matches!(
            f.db.task_get(&f.hash, id).await,
            Err(DbError::NotFound(_))
        ));
    }
    for (id, rows) in kept.iter().zip(&kept_rows) {
        assert!(exists(&f, *id).await, "task {id} kept");
        assert_eq!(&rows_of(&f, *id).await, rows, "task {id}'s rows kept");
    }
    // Nothing is counted twice.
    assert_eq!(purge(&f.db, Some(later), 100).await, 0);
    // A purged task's Idempotency-Key is free again: the same submit is a new task, where a kept
    // task's key still replays.
    let again =
        f.db.task_submit(&f.hash, "i-succeeded", &once)
            .await
            .unwrap();
    assert!(!again.replayed);
    assert_ne!(again.task.id, succeeded);
    let replay = f.db.task_submit(&f.hash, "i-review", &once).await.unwrap();
    assert!(replay.replayed);
    assert_eq!(replay.task.id, review);
}

#[tokio::test]
async fn retention_is_per_queue_and_a_change_applies_to_tasks_already_finished() {
    let f = Fixture::new().await;
    let short =
        f.db.queue_create_with(&f.hash, None, "short", None, Some(60), None)
            .await
            .unwrap();
    assert_eq!(short.retention_seconds, 60);
    let long = f.db.queue_get(&f.hash, &f.queue_id).await.unwrap();
    assert_eq!(long.retention_seconds, 604_800, "the default: 7 days");
    let a = f.submit(&short.id, "").await.id;
    let b = f.submit(&long.id, "").await.id;
    f.db.task_cancel(&f.hash, a).await.unwrap();
    f.db.task_cancel(&f.hash, b).await.unwrap();
    let soon = Utc::now() + Duration::seconds(120);
    assert_eq!(purge(&f.db, Some(soon), 100).await, 1);
    assert!(!exists(&f, a).await);
    assert!(exists(&f, b).await);

    let q =
        f.db.queue_set_retention(&f.hash, &long.id, 60)
            .await
            .unwrap();
    assert_eq!(q.retention_seconds, 60);
    assert_eq!(
        f.db.queue_get(&f.hash, &long.id)
            .await
            .unwrap()
            .retention_seconds,
        60
    );
    assert_eq!(purge(&f.db, Some(soon), 100).await, 1);
    assert!(!exists(&f, b).await);

    for bad in [0, 59, 315_360_001, -1] {
        assert!(
            matches!(
                f.db.queue_set_retention(&f.hash, &long.id, bad).await,
                Err(DbError::InvalidArgument(_))
            ),
            "{bad}"
        );
        assert!(matches!(
            f.db.queue_create_with(&f.hash, None, "bad", None, Some(bad), None)
                .await,
            Err(DbError::InvalidArgument(_))
        ));
    }
    for (limit, budget_ms) in [(0, 1000), (10_001, 1000), (100, 0), (100, 60_001)] {
        assert!(matches!(
            f.db.task_purge(None, limit, std::time::Duration::from_millis(budget_ms))
                .await,
            Err(DbError::InvalidArgument(_))
        ));
    }
}

#[tokio::test]
async fn a_purge_keeps_the_key_and_its_tokens_stay_monotonic() {
    let f = Fixture::new().await;
    let q = f.queue_id.clone();
    let s = f.session("w", true, &[&q]).await;
    let mut highest = 0;
    for i in 0..3 {
        let task = f.submit(&q, "k").await;
        let g = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
        assert_eq!(g.task.id, task.id);
        assert!(g.concurrency_token > highest);
        highest = g.concurrency_token;
        assert!(f.db.attempt_start(s, g.attempt_id).await.unwrap().accepted);
        let outcome = if i == 1 {
            Outcome::Failed
        } else {
            Outcome::Succeeded
        };
        f.db.attempt_finish(s, g.attempt_id, outcome, false, None, Some("{}"))
            .await
            .unwrap();
    }
    let resource: (u64, u64) =
        sqlx::query_as("SELECT id, highest_token FROM orbit_resource WHERE concurrency_key = 'k'")
            .fetch_one(f.db.pool())
            .await
            .unwrap();
    assert_eq!(resource.1, highest);
    let later = Utc::now() + Duration::seconds(8 * DAY);
    assert_eq!(purge(&f.db, Some(later), 100).await, 3);
    assert_eq!(
        count(
            &f,
            "SELECT COUNT(*) FROM orbit_task WHERE resource_id = ?",
            resource.0
        )
        .await,
        0,
        "every task of the key is purged"
    );
    let kept: (u64, u64) =
        sqlx::query_as("SELECT id, highest_token FROM orbit_resource WHERE concurrency_key = 'k'")
            .fetch_one(f.db.pool())
            .await
            .unwrap();
    assert_eq!(kept, resource, "the resource row is never deleted");
    let task = f.submit(&q, "k").await;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    assert_eq!(g.task.id, task.id);
    assert!(
        g.concurrency_token > highest,
        "{} after {highest}",
        g.concurrency_token
    );
}

#[tokio::test]
async fn two_purges_at_once_split_the_work_without_deadlock_or_double_count() {
    let f = Fixture::new().await;
    let other = f.queue("other").await;
    // 600 cancelled tasks over two queues (cancel is the quickest way to a terminal state).
    let mut ids = Vec::new();
    for i in 0..600 {
        let q = if i % 2 == 0 { &f.queue_id } else { &other };
        ids.push(f.submit(q, "").await.id);
    }
    for id in &ids {
        f.db.task_cancel(&f.hash, *id).await.unwrap();
    }
    let later = Some(Utc::now() + Duration::seconds(8 * DAY));
    let db2 = orbit::db::Db::connect(&f.test_db.dsn, 4).await.unwrap();
    let (a, b) = tokio::join!(purge(&f.db, later, 10_000), purge(&db2, later, 10_000));
    assert_eq!(a + b, 600, "{a} + {b}");
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orbit_task")
        .fetch_one(f.db.pool())
        .await
        .unwrap();
    assert_eq!(left, 0);
    // A time budget bounds one call: no batch starts after it, and the call says there is more.
    for _ in 0..300 {
        let id = f.submit(&f.queue_id, "").await.id;
        f.db.task_cancel(&f.hash, id).await.unwrap();
    }
    let p =
        f.db.task_purge(later, 10_000, std::time::Duration::from_millis(1))
            .await
            .unwrap();
    assert!(p.more && p.count < 300, "{p:?}");
    assert_eq!(p.count + purge(&f.db, later, 10_000).await, 300);
    // A limit bounds one call.
    for _ in 0..5 {
        let id = f.submit(&f.queue_id, "").await.id;
        f.db.task_cancel(&f.hash, id).await.unwrap();
    }
    assert_eq!(purge(&f.db, later, 3).await, 3);
    assert_eq!(purge(&f.db, later, 3).await, 2);
}

#[tokio::test]
async fn the_api_shows_and_sets_a_queues_retention() {
    let api = Api::start().await;
    let q = api.fixture.queue_id.clone();
    let r = api.get("/v1/queues/{id}", &format!("/v1/queues/{q}")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["data"]["retention_seconds"], 604_800);

    let path = format!("/v1/queues/{q}/retention");
    let r = api
        .post(
            "/v1/queues/{id}/retention",
            &path,
            &json!({"retention_seconds": 3600}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["data"]["retention_seconds"], 3600);
    let r = api.get("/v1/queues/{id}", &format!("/v1/queues/{q}")).await;
    assert_eq!(r.body["data"]["retention_seconds"], 3600);
    let r = api.get("/v1/queues", "/v1/queues").await;
    assert_eq!(r.body["data"][0]["retention_seconds"], 3600);

    for bad in [
        json!({"retention_seconds": 59}),
        json!({"retention_seconds": 315_360_001u64}),
        json!({"retention_seconds": -5}),
        json!({"retention_seconds": "3600"}),
        json!({"retention_seconds": null}),
        json!({}),
        json!({"retention_seconds": 3600, "other": 1}),
    ] {
        let r = api.post("/v1/queues/{id}/retention", &path, &bad).await;
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
        assert_eq!(r.body["error"]["code"], "INVALID_ARGUMENT");
    }
    // The scope pause and resume need: queues:manage.
    let reader = api.fixture.credential(&["tasks:read"]).await;
    let r = api
        .call(
            reqwest::Method::POST,
            "/v1/queues/{id}/retention",
            &path,
            Some(&reader),
            &[],
            Some(&json!({"retention_seconds": 3600})),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.body);
    let r = api
        .post(
            "/v1/queues/{id}/retention",
            "/v1/queues/0123456789abcdef0123456789abcdef/retention",
            &json!({"retention_seconds": 3600}),
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.body);

    // Create takes it as an optional field, within the same bounds.
    let r = api
        .post(
            "/v1/queues",
            "/v1/queues",
            &json!({"name": "kept", "retention_seconds": 120}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["data"]["retention_seconds"], 120);
    let r = api
        .post(
            "/v1/queues",
            "/v1/queues",
            &json!({"name": "bad", "retention_seconds": 10}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
}

#[tokio::test]
async fn a_server_purges_finished_tasks_past_retention_and_counts_them() {
    let f = Fixture::new().await;
    let old = f.submit(&f.queue_id, "").await.id;
    let recent = f.submit(&f.queue_id, "").await.id;
    let review = f.submit(&f.queue_id, "").await.id;
    f.db.task_cancel(&f.hash, old).await.unwrap();
    f.db.task_cancel(&f.hash, recent).await.unwrap();
    // `old` finished 8 days ago (the clock moved back, not waited for); a NEEDS_REVIEW task
    // claims to be as old and is kept all the same.
    sqlx::query(
        "UPDATE orbit_task SET finished_at = UTC_TIMESTAMP(6) - INTERVAL 8 DAY WHERE id IN (?, ?)",
    )
    .bind(old)
    .bind(review)
    .execute(f.db.pool())
    .await
    .unwrap();
    sqlx::query("UPDATE orbit_task SET state = 'NEEDS_REVIEW', lane = 'none' WHERE id = ?")
        .bind(review)
        .execute(f.db.pool())
        .await
        .unwrap();
    let metrics_token = f.credential(&["metrics:read"]).await;
    let api = Api::over(f).await;
    // The scheduler purges on its first round; the counter is the signal it did.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let text = api
            .http
            .get(format!("{}/metrics", api.server.url))
            .bearer_auth(&metrics_token)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let purged = text
            .lines()
            .find(|l| l.starts_with("orbit_tasks_purged_total "))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
        if purged >= 1.0 {
            assert_eq!(purged, 1.0);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no purge within 30 s:\n{text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let f = &api.fixture;
    assert!(!exists(f, old).await);
    assert!(exists(f, recent).await);
    assert!(exists(f, review).await, "NEEDS_REVIEW is never purged");
    let r = api.get("/v1/tasks/{id}", &format!("/v1/tasks/{old}")).await;
    assert_eq!(r.status, 404);
}
