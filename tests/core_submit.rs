//! orbit_task_submit: idempotency, key validation in SQL, busy keys, quota, and auth codes.

use orbit::db::DbError;
use orbit::testing::{Counters, Fixture};
use sqlx::Row;

#[tokio::test]
async fn same_key_same_request_replays_the_original() {
    let f = Fixture::new().await;
    let t = f.task(&f.queue_id, "object/42");
    let first = f.db.task_submit(&f.hash, "op-1", &t).await.unwrap();
    let again = f.db.task_submit(&f.hash, "op-1", &t).await.unwrap();
    assert!(!first.replayed);
    assert!(again.replayed);
    assert_eq!(first.task.id, again.task.id);
    assert_eq!(again.task.concurrency_key.as_deref(), Some("object/42"));
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orbit_task")
        .fetch_one(f.db.pool())
        .await
        .unwrap();
    assert_eq!(n, 1);
}

#[tokio::test]
async fn a_keyed_replay_reads_its_receipt_and_creates_nothing_to_undo() {
    let f = Fixture::new().await;
    // One connection, so its counters are the calls'; the fixture's task, its other fields
    // defaulted (NULL).
    let mut conn = f.db.pool().acquire().await.unwrap();
    // Keyed: no key row taken, no policy run. (An unkeyed replay creates its task and undoes it:
    // one insert, cheaper than a read on every submit.)
    for (key, calls, undone) in [("object/7", 3, 0), ("", 4, 1)] {
        let submit = || {
            sqlx::query(
                "CALL orbit_task_submit(?, ?, ?, 'test.handler', 'v1', 'v1', '{}', NULL, ?,
                                        NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
            )
            .bind(&f.hash[..])
            .bind(format!("op-{key}"))
            .bind(&f.queue_id)
            .bind(key)
        };
        let created = submit().fetch_one(&mut *conn).await.unwrap();
        let counters = Counters::start(&mut conn, &[CALLS, UNDONE]).await;
        let again = submit().fetch_one(&mut *conn).await.unwrap();
        let counted = counters.since(&mut conn).await;
        assert_eq!(created.get::<i64, _>(0), 0, "{key:?}");
        assert_eq!(again.get::<i64, _>(0), 1, "{key:?}: replayed");
        assert_eq!(again.get::<u64, _>(1), created.get::<u64, _>(1), "{key:?}");
        // The call, its token and queue check and its field checks (orbit_auth_queue_check,
        // orbit_task_validate), and for the unkeyed task orbit_task_create.
        assert_eq!(counted[CALLS], calls, "{key:?}");
        assert_eq!(counted[UNDONE], undone, "{key:?}");
    }
}

#[tokio::test]
async fn same_key_with_any_other_field_is_an_idempotency_conflict() {
    let f = Fixture::new().await;
    let t = f.task(&f.queue_id, "object/42");
    f.db.task_submit(&f.hash, "op-1", &t).await.unwrap();
    let mut other_key = t.clone();
    other_key.concurrency_key = Some("object/43".into());
    let mut other_payload = t.clone();
    other_payload.payload = r#"{"x":1}"#.into();
    let mut no_key = t.clone();
    no_key.concurrency_key = Some(String::new());
    let mut other_priority = t.clone();
    other_priority.priority = Some(1);
    for variant in [other_key, other_payload, no_key, other_priority] {
        let err =
            f.db.task_submit(&f.hash, "op-1", &variant)
                .await
                .unwrap_err();
        assert!(matches!(err, DbError::IdempotencyConflict(_)), "{err:?}");
    }
}

#[tokio::test]
async fn fifty_concurrent_identical_submits_create_one_task() {
    // Keyed (the key's row, the task, then its receipt) and unkeyed (the task, then its receipt).
    for key in ["object/1", ""] {
        fifty_identical_submits(key).await;
    }
}

async fn fifty_identical_submits(key: &str) {
    let f = Fixture::new().await;
    let t = f.task(&f.queue_id, key);
    let mut handles = Vec::new();
    for _ in 0..50 {
        let (db, hash, t) = (f.db.clone(), f.hash, t.clone());
        handles.push(tokio::spawn(async move {
            db.task_submit(&hash, "same-op", &t).await
        }));
    }
    let mut created = 0;
    let mut ids = std::collections::HashSet::new();
    for h in handles {
        let s = h.await.unwrap().unwrap();
        created += usize::from(!s.replayed);
        ids.insert(s.task.id);
    }
    assert_eq!(created, 1, "{key:?}");
    assert_eq!(ids.len(), 1, "{key:?}");
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orbit_task")
        .fetch_one(f.db.pool())
        .await
        .unwrap();
    assert_eq!(n, 1, "{key:?}");
    assert_eq!(f.incomplete_tasks().await, 1, "{key:?}: one charge");
}

#[tokio::test]
async fn concurrency_key_rules_are_enforced_in_sql() {
    let f = Fixture::new().await;
    let bad: Vec<(Option<String>, &str)> = vec![
        (None, "not null"),
        (Some("x".repeat(192)), "at most 191"),
        (Some("a\u{0}b".into()), "control"),
        (Some("a\u{7}b".into()), "control"),
        (Some("a\u{85}b".into()), "control"),
        (Some("\u{3000}key".into()), "whitespace"),
        (Some("key\u{a0}".into()), "whitespace"),
        (Some(" key".into()), "whitespace"),
        (Some("key ".into()), "whitespace"),
        (Some("key\u{2009}".into()), "whitespace"),
    ];
    for (key, needle) in bad {
        let mut t = f.task(&f.queue_id, "");
        t.concurrency_key = key.clone();
        let err =
            f.db.task_submit(&f.hash, &format!("k-{key:?}"), &t)
                .await
                .unwrap_err();
        match err {
            DbError::InvalidArgument(m) => {
                assert!(
                    m.contains("concurrency_key") && m.contains(needle),
                    "{key:?}: {m}"
                )
            }
            other => panic!("{key:?}: expected INVALID_ARGUMENT, got {other:?}"),
        }
    }
    // 191 four-byte characters are fine; inner spaces are fine; "" means no key.
    let long = "\u{1F600}".repeat(191);
    assert_eq!(
        f.submit(&f.queue_id, &long)
            .await
            .concurrency_key
            .as_deref(),
        Some(long.as_str())
    );
    assert_eq!(
        f.submit(&f.queue_id, "a b")
            .await
            .concurrency_key
            .as_deref(),
        Some("a b")
    );
    assert_eq!(f.submit(&f.queue_id, "").await.concurrency_key, None);
}

#[tokio::test]
async fn invalid_utf8_key_bytes_are_rejected() {
    let f = Fixture::new().await;
    let err = sqlx::query("CALL orbit_task_submit(?, 'k1', ?, 'h', 'v1', 'v1', '{}', NULL, ?, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)")
        .bind(&f.hash[..])
        .bind(&f.queue_id)
        .bind(&b"ab\xff"[..])
        .execute(f.db.pool())
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("INVALID_ARGUMENT: concurrency_key must be valid UTF-8"),
        "{err}"
    );
}

#[tokio::test]
async fn keys_match_by_exact_bytes() {
    let f = Fixture::new().await;
    let keys = ["object/A", "object/a", "\u{e9}", "e\u{301}"];
    for k in keys {
        f.submit(&f.queue_id, k).await;
    }
    let resources: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orbit_resource")
        .fetch_one(f.db.pool())
        .await
        .unwrap();
    assert_eq!(resources, 4, "four different keys, four resource rows");
    // All four are free, so each one's task is claimable in the same batch.
    let s = f.session("w", true, &[&f.queue_id]).await;
    assert_eq!(f.db.task_claim(s, 10, 30_000).await.unwrap().len(), 4);
}

#[tokio::test]
async fn a_busy_key_still_accepts_the_task_without_consuming_an_attempt() {
    let f = Fixture::new().await;
    let first = f.submit(&f.queue_id, "k").await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let grant = f.db.task_claim(s, 1, 30_000).await.unwrap();
    assert_eq!(grant[0].task.id, first.id);
    let second = f.submit(&f.queue_id, "k").await;
    assert_eq!(second.state, orbit::db::tasks::TaskState::Waiting);
    assert_eq!(second.attempt_count, 0);
    assert_eq!(
        f.lane(second.id).await,
        "blocked",
        "blocked tasks stay out of the claim's range"
    );
    let incomplete = f.incomplete_tasks().await;
    assert_eq!(
        incomplete, 2,
        "the waiting task occupies the incomplete-task quota"
    );
}

#[tokio::test]
async fn incomplete_task_quota_is_enforced() {
    let f = Fixture::new().await;
    sqlx::query("UPDATE orbit_application_quota SET max_incomplete_tasks = 2")
        .execute(f.db.pool())
        .await
        .unwrap();
    f.submit(&f.queue_id, "").await;
    f.submit(&f.queue_id, "").await;
    let err =
        f.db.task_submit(&f.hash, "third", &f.task(&f.queue_id, ""))
            .await
            .unwrap_err();
    assert!(matches!(err, DbError::QuotaExceeded(_)), "{err:?}");
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orbit_task")
        .fetch_one(f.db.pool())
        .await
        .unwrap();
    assert_eq!(n, 2, "the refused submit left nothing behind");
    let idem: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orbit_idempotency")
        .fetch_one(f.db.pool())
        .await
        .unwrap();
    assert_eq!(idem, 2);
}

#[tokio::test]
async fn incomplete_task_quota_is_exact_across_quota_slots() {
    // The counter is split over quota slots (orbit_application_quota.slot); concurrent submits on
    // different connections charge different slots, and the application total stays exact.
    let f = Fixture::new().await;
    sqlx::query("UPDATE orbit_application_quota SET max_incomplete_tasks = 37")
        .execute(f.db.pool())
        .await
        .unwrap();
    let mut handles = Vec::new();
    for i in 0..120 {
        let (db, hash, t) = (f.db.clone(), f.hash, f.task(&f.queue_id, ""));
        handles.push(tokio::spawn(async move {
            db.task_submit(&hash, &format!("op-{i}"), &t).await
        }));
    }
    let (mut accepted, mut refused) = (0, 0);
    for h in handles {
        match h.await.unwrap() {
            Ok(_) => accepted += 1,
            Err(DbError::QuotaExceeded(_)) => refused += 1,
            Err(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(
        (accepted, refused),
        (37, 83),
        "exactly the limit is accepted"
    );
    // Every slot is within its share of 37 (37 DIV 16 + (slot < 37 % 16)), and they add up.
    let slots: Vec<(u8, i64)> =
        sqlx::query_as("SELECT slot, incomplete_tasks FROM orbit_application_quota ORDER BY slot")
            .fetch_all(f.db.pool())
            .await
            .unwrap();
    assert_eq!(slots.len(), 16);
    for (slot, charged) in &slots {
        assert!(
            *charged <= 2 + i64::from(*slot < 5),
            "slot {slot} above its share"
        );
    }
    assert_eq!(slots.iter().map(|s| s.1).sum::<i64>(), 37);
    // A lowered limit holds at once, although some slots now sit above their new share.
    sqlx::query("UPDATE orbit_application_quota SET max_incomplete_tasks = 36")
        .execute(f.db.pool())
        .await
        .unwrap();
    let err =
        f.db.task_submit(&f.hash, "after-lowering", &f.task(&f.queue_id, ""))
            .await
            .unwrap_err();
    assert!(matches!(err, DbError::QuotaExceeded(_)), "{err:?}");
}

#[tokio::test]
async fn field_validation_names_the_field() {
    let f = Fixture::new().await;
    let cases: Vec<(Box<dyn Fn(&mut orbit::db::tasks::NewTask)>, &str)> = vec![
        (Box::new(|t| t.handler = String::new()), "handler"),
        (
            Box::new(|t| t.handler_version = "x".repeat(65)),
            "handler_version",
        ),
        (Box::new(|t| t.payload = "{not json".into()), "payload"),
        (Box::new(|t| t.priority = Some(10)), "priority"),
        (Box::new(|t| t.max_attempts = Some(0)), "max_attempts"),
        (
            Box::new(|t| t.deadline_seconds = Some(-1)),
            "deadline_seconds",
        ),
        (
            Box::new(|t| t.business_key = Some("b".repeat(192))),
            "business_key",
        ),
    ];
    for (i, (mutate, field)) in cases.into_iter().enumerate() {
        let mut t = f.task(&f.queue_id, "");
        mutate(&mut t);
        match f
            .db
            .task_submit(&f.hash, &format!("v{i}"), &t)
            .await
            .unwrap_err()
        {
            DbError::InvalidArgument(m) => assert!(m.starts_with(field), "{field}: {m}"),
            other => panic!("{field}: {other:?}"),
        }
    }
    let err =
        f.db.task_submit(&f.hash, "", &f.task(&f.queue_id, ""))
            .await
            .unwrap_err();
    assert!(
        matches!(&err, DbError::InvalidArgument(m) if m.contains("Idempotency-Key")),
        "{err:?}"
    );
}

/// The rules are checked in parameter order and the first broken one is reported, the key's among
/// them (m::task_definition_error evaluates the key's rules after business_key and before
/// priority), by a single submit and by a batch alike.
#[tokio::test]
async fn a_definition_that_breaks_several_rules_reports_the_first_in_parameter_order() {
    let f = Fixture::new().await;
    let cases: Vec<(Box<dyn Fn(&mut orbit::db::tasks::NewTask)>, &str)> = vec![
        (
            Box::new(|t| {
                t.handler = String::new();
                t.concurrency_key = Some(" k".into());
            }),
            "handler must be 1-191",
        ),
        (
            Box::new(|t| {
                t.business_key = Some("b".repeat(192));
                t.concurrency_key = Some(" k".into());
                t.priority = Some(10);
            }),
            "business_key must be at most",
        ),
        (
            Box::new(|t| {
                t.concurrency_key = Some(" k".into());
                t.priority = Some(10);
            }),
            "concurrency_key must not start",
        ),
        (
            Box::new(|t| {
                t.concurrency_key = Some("k".repeat(192));
                t.max_attempts = Some(0);
            }),
            "concurrency_key must be at most",
        ),
        (
            Box::new(|t| {
                t.concurrency_key = Some("k".into());
                t.priority = Some(10);
                t.max_attempts = Some(0);
            }),
            "priority must be between",
        ),
    ];
    for (i, (mutate, rule)) in cases.into_iter().enumerate() {
        let mut t = f.task(&f.queue_id, "");
        mutate(&mut t);
        match f.db.task_submit(&f.hash, &format!("o{i}"), &t).await {
            Err(DbError::InvalidArgument(m)) => assert!(m.starts_with(rule), "{rule}: {m}"),
            other => panic!("{rule}: {other:?}"),
        }
        let mut items = batch(&f, &f.queue_id, &format!("ob{i}"), 2);
        items[1].1 = t;
        match f.db.task_submit_many(&f.hash, &items).await {
            Err(DbError::InvalidArgument(m)) => {
                assert!(m.starts_with(&format!("tasks[1]: {rule}")), "{rule}: {m}")
            }
            other => panic!("{rule}: {other:?}"),
        }
    }
    assert_eq!(count(&f, "orbit_task").await, 0);
}

#[tokio::test]
async fn auth_codes_unauthenticated_permission_denied_not_found() {
    let f = Fixture::new().await;
    let t = f.task(&f.queue_id, "");
    let wrong = orbit::auth::token_hash("orbit_not_a_real_token");
    assert!(matches!(
        f.db.task_submit(&wrong, "a", &t).await.unwrap_err(),
        DbError::Unauthenticated(_)
    ));

    // A read-only credential in the same namespace.
    let reader = orbit::auth::generate_token();
    f.db.admin_bootstrap(&orbit::db::queues::Bootstrap {
        application: "app".into(),
        environment: "test".into(),
        namespace: "default".into(),
        queue: "q1".into(),
        token_hash: orbit::auth::token_hash(&reader).to_vec(),
        token_hint: orbit::auth::token_hint(&reader),
        scopes: vec!["tasks:read".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    let reader = orbit::auth::token_hash(&reader);
    assert!(matches!(
        f.db.task_submit(&reader, "b", &t).await.unwrap_err(),
        DbError::PermissionDenied(_)
    ));

    // Another tenant's queue does not exist for this credential.
    let other = orbit::auth::generate_token();
    let b =
        f.db.admin_bootstrap(&orbit::db::queues::Bootstrap {
            application: "other-app".into(),
            environment: "test".into(),
            namespace: "default".into(),
            queue: "theirs".into(),
            token_hash: orbit::auth::token_hash(&other).to_vec(),
            token_hint: orbit::auth::token_hint(&other),
            scopes: orbit::testing::ALL_SCOPES
                .iter()
                .map(|s| s.to_string())
                .collect(),
            ..Default::default()
        })
        .await
        .unwrap();
    let theirs = f.task(&b.queue_id, "");
    assert!(matches!(
        f.db.task_submit(&f.hash, "c", &theirs).await.unwrap_err(),
        DbError::NotFound(_)
    ));
    let mine = f.submit(&f.queue_id, "").await;
    let other_hash = orbit::auth::token_hash(&other);
    assert!(matches!(
        f.db.task_get(&other_hash, mine.id).await.unwrap_err(),
        DbError::NotFound(_)
    ));
    assert!(matches!(
        f.db.task_get(&f.hash, 999_999).await.unwrap_err(),
        DbError::NotFound(_)
    ));
    assert_eq!(f.db.task_get(&reader, mine.id).await.unwrap().id, mine.id);
}

// ---------------------------------------------------------------------------------------------
// orbit_task_submit_many: the batch submit
// ---------------------------------------------------------------------------------------------

/// `n` tasks on `queue`, keyed `{prefix}-0` .., payloads {"i": i}.
fn batch(
    f: &Fixture,
    queue: &str,
    prefix: &str,
    n: usize,
) -> Vec<(String, orbit::db::tasks::NewTask)> {
    (0..n)
        .map(|i| {
            let mut t = f.task(queue, "");
            t.payload = format!(r#"{{"i":{i}}}"#);
            (format!("{prefix}-{i}"), t)
        })
        .collect()
}

/// A queue of another application, which the fixture's credential must not see.
async fn other_tenant_queue(f: &Fixture) -> String {
    let other = orbit::auth::generate_token();
    f.db.admin_bootstrap(&orbit::db::queues::Bootstrap {
        application: "other-app".into(),
        environment: "test".into(),
        namespace: "default".into(),
        queue: "theirs".into(),
        token_hash: orbit::auth::token_hash(&other).to_vec(),
        token_hint: orbit::auth::token_hint(&other),
        scopes: orbit::testing::ALL_SCOPES
            .iter()
            .map(|s| s.to_string())
            .collect(),
        ..Default::default()
    })
    .await
    .unwrap()
    .queue_id
}

/// The session counters of the procedures called ([`Counters`]; nested calls included) and of the
/// savepoints rolled back to.
const CALLS: &str = "Com_call_procedure";
const UNDONE: &str = "Com_rollback_to_savepoint";

/// `items` in one CALL of orbit_task_submit_many on a connection of its own: the rows, and what
/// the call counted in [`CALLS`] and [`UNDONE`].
async fn submit_many_counted(
    f: &Fixture,
    items: &[(String, orbit::db::tasks::NewTask)],
) -> (
    Vec<sqlx::mysql::MySqlRow>,
    std::collections::HashMap<String, u64>,
) {
    let tasks = serde_json::Value::Array(items.iter().map(|(k, t)| t.batch_item(k)).collect());
    let mut conn = f.db.pool().acquire().await.unwrap();
    let counters = Counters::start(&mut conn, &[CALLS, UNDONE]).await;
    let rows = sqlx::query("CALL orbit_task_submit_many(?, ?)")
        .bind(&f.hash[..])
        .bind(tasks.to_string())
        .fetch_all(&mut *conn)
        .await
        .unwrap();
    let counted = counters.since(&mut conn).await;
    (rows, counted)
}

async fn count(f: &Fixture, table: &str) -> i64 {
    sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
        .fetch_one(f.db.pool())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_batch_creates_its_tasks_in_order_each_with_its_own_key() {
    let f = Fixture::new().await;
    let mut items = batch(&f, &f.queue_id, "b", 5);
    items[2].1.priority = Some(1);
    items[3].1.business_key = Some("order-7".into());
    items[4].1.retry_unknown = Some(true);
    items[4].1.deadline_seconds = Some(60);
    let out = f.db.task_submit_many(&f.hash, &items).await.unwrap();
    assert_eq!(out.len(), 5);
    for (i, s) in out.iter().enumerate() {
        assert!(!s.replayed, "{i}");
        assert_eq!(s.task.payload, format!(r#"{{"i":{i}}}"#), "stored as sent");
        assert_eq!(s.task.state, orbit::db::tasks::TaskState::Waiting);
    }
    let ids: Vec<u64> = out.iter().map(|s| s.task.id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "input order: {ids:?}");
    assert_eq!(
        (out[0].task.priority, out[2].task.priority),
        (5, 1),
        "defaults and given values"
    );
    assert_eq!(out[3].task.business_key, "order-7");
    assert!(out[4].task.retry_unknown && out[4].task.deadline_at.is_some());
    assert!(!out[0].task.retry_unknown && out[0].task.deadline_at.is_none());
    // Each task is recorded under its own key, like a single submit.
    let keys: Vec<(Vec<u8>, u64)> =
        sqlx::query_as("SELECT idempotency_key, task_id FROM orbit_idempotency ORDER BY task_id")
            .fetch_all(f.db.pool())
            .await
            .unwrap();
    let want: Vec<(Vec<u8>, u64)> = (0..5)
        .map(|i| (format!("b-{i}").into_bytes(), ids[i]))
        .collect();
    assert_eq!(keys, want);
    let incomplete = f.incomplete_tasks().await;
    assert_eq!(incomplete, 5, "each task is charged to the quota");
    // A worker can claim them.
    let s = f.session("w", true, &[&f.queue_id]).await;
    assert_eq!(f.db.task_claim(s, 10, 30_000).await.unwrap().len(), 5);
}

#[tokio::test]
async fn replaying_a_batch_returns_the_same_tasks_and_creates_nothing() {
    let f = Fixture::new().await;
    let items = batch(&f, &f.queue_id, "r", 4);
    let first = f.db.task_submit_many(&f.hash, &items).await.unwrap();
    let again = f.db.task_submit_many(&f.hash, &items).await.unwrap();
    assert!(again.iter().all(|s| s.replayed));
    assert_eq!(
        first.iter().map(|s| s.task.id).collect::<Vec<_>>(),
        again.iter().map(|s| s.task.id).collect::<Vec<_>>()
    );
    assert_eq!(count(&f, "orbit_task").await, 4);
    assert_eq!(count(&f, "orbit_idempotency").await, 4);
    // A key twice in one batch: the second replays the first.
    let mut twice = batch(&f, &f.queue_id, "t", 2);
    twice.push(twice[0].clone());
    let out = f.db.task_submit_many(&f.hash, &twice).await.unwrap();
    assert_eq!(
        out.iter().map(|s| s.replayed).collect::<Vec<_>>(),
        [false, false, true]
    );
    assert_eq!(out[2].task.id, out[0].task.id);
    assert_eq!(count(&f, "orbit_task").await, 6);
}

#[tokio::test]
async fn a_batch_sent_again_replays_each_task_without_creating_it() {
    let f = Fixture::new().await;
    let unkeyed = batch(&f, &f.queue_id, "u", 4);
    let mut keyed = batch(&f, &f.queue_id, "k", 4);
    for (i, (_, t)) in keyed.iter_mut().enumerate() {
        t.concurrency_key = Some(format!("key-{}", i % 2));
    }
    for items in [&unkeyed, &keyed] {
        let first = f.db.task_submit_many(&f.hash, items).await.unwrap();
        let (rows, counted) = submit_many_counted(&f, items).await;
        let replayed: Vec<(i64, u64)> = rows.iter().map(|r| (r.get(1), r.get(2))).collect();
        let expected: Vec<(i64, u64)> = first.iter().map(|s| (1, s.task.id)).collect();
        assert_eq!(replayed, expected);
        // The call and its token and queue checks: no task created (orbit_task_create,
        // orbit_task_create_keyed_many) and none undone.
        assert_eq!(counted[CALLS], 3);
        assert_eq!(counted[UNDONE], 0);
    }
    assert_eq!(count(&f, "orbit_task").await, 8);
}

#[tokio::test]
async fn a_batch_and_a_single_submit_with_the_same_key_and_body_replay_each_other() {
    let f = Fixture::new().await;
    // Every field given, so the request hash covers non-default values of each.
    let mut t = f.task(&f.queue_id, "object/42");
    t.payload = r#"{"b": [1, 2.5, "\u00e9\n"], "a": null}"#.into();
    t.business_key = Some("é-order".into());
    t.priority = Some(2);
    t.max_attempts = Some(7);
    t.retry_base_ms = Some(10);
    t.retry_max_ms = Some(20);
    t.retry_unknown = Some(true);
    t.deadline_seconds = Some(3600);
    let single = f.db.task_submit(&f.hash, "op-1", &t).await.unwrap();
    let items = vec![
        ("op-new".to_string(), f.task(&f.queue_id, "")),
        ("op-1".to_string(), t.clone()),
    ];
    let out = f.db.task_submit_many(&f.hash, &items).await.unwrap();
    assert!(!out[0].replayed);
    assert!(out[1].replayed, "the single submit's key replays");
    assert_eq!(out[1].task.id, single.task.id);
    assert_eq!(out[1].task.payload, t.payload, "the payload text as sent");
    // The other way round: a single submit replays a batch task.
    let again =
        f.db.task_submit(&f.hash, "op-new", &f.task(&f.queue_id, ""))
            .await
            .unwrap();
    assert!(again.replayed);
    assert_eq!(again.task.id, out[0].task.id);
    // The same payload in another formatting is another request, as for single submits.
    let mut reformatted = t.clone();
    reformatted.payload = r#"{"b":[1,2.5,"é\n"],"a":null}"#.into();
    let err =
        f.db.task_submit_many(&f.hash, &[("op-1".to_string(), reformatted)])
            .await
            .unwrap_err();
    assert!(matches!(err, DbError::IdempotencyConflict(_)), "{err:?}");
    assert_eq!(count(&f, "orbit_task").await, 2);
}

#[tokio::test]
async fn a_conflict_in_one_task_rolls_back_the_whole_batch() {
    let f = Fixture::new().await;
    f.db.task_submit(&f.hash, "used", &f.task(&f.queue_id, "k"))
        .await
        .unwrap();
    let mut items = batch(&f, &f.queue_id, "c", 5);
    items[3].0 = "used".into(); // same key, another request
    items[1].1.concurrency_key = Some("k2".into());
    let err = f.db.task_submit_many(&f.hash, &items).await.unwrap_err();
    match err {
        DbError::IdempotencyConflict(m) => assert!(m.starts_with("tasks[3]: "), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(count(&f, "orbit_task").await, 1, "none of the batch");
    assert_eq!(count(&f, "orbit_idempotency").await, 1);
    assert_eq!(count(&f, "orbit_resource").await, 1, "k2 was not kept");
    // A key twice in one batch with different requests conflicts with itself.
    let mut twice = batch(&f, &f.queue_id, "d", 3);
    twice[2].0 = twice[0].0.clone();
    let err = f.db.task_submit_many(&f.hash, &twice).await.unwrap_err();
    assert!(
        matches!(&err, DbError::IdempotencyConflict(m) if m.starts_with("tasks[2]: ")),
        "{err:?}"
    );
    assert_eq!(count(&f, "orbit_task").await, 1);
    // Afterwards the same batch without the conflict goes through.
    items[3].0 = "c-3".into();
    assert_eq!(
        f.db.task_submit_many(&f.hash, &items).await.unwrap().len(),
        5
    );
}

#[tokio::test]
async fn an_invalid_task_fails_the_batch_naming_it_and_writes_nothing() {
    let f = Fixture::new().await;
    type Mutate = Box<dyn Fn(&mut (String, orbit::db::tasks::NewTask))>;
    let cases: Vec<(Mutate, &str)> = vec![
        (
            Box::new(|t| t.1.handler = String::new()),
            "handler must be 1-191",
        ),
        (
            Box::new(|t| t.1.handler = "h".repeat(70_000)),
            "handler must be 1-191",
        ),
        (
            Box::new(|t| t.1.payload = "{not json".into()),
            "payload must be valid JSON",
        ),
        (
            Box::new(|t| t.1.priority = Some(10)),
            "priority must be between",
        ),
        (
            Box::new(|t| t.1.retry_base_ms = Some(1 << 40)),
            "retry_base_ms must be",
        ),
        (
            Box::new(|t| t.1.concurrency_key = None),
            "concurrency_key must be a string or omitted",
        ),
        (
            Box::new(|t| t.1.concurrency_key = Some(" k".into())),
            "concurrency_key must not start",
        ),
        (
            Box::new(|t| t.1.business_key = Some("b".repeat(192))),
            "business_key must be at most",
        ),
        (
            Box::new(|t| t.0 = String::new()),
            "idempotency_key must be a string of 1-255 bytes",
        ),
        (
            Box::new(|t| t.0 = "k".repeat(256)),
            "idempotency_key must be a string of 1-255 bytes",
        ),
    ];
    for (mutate, needle) in cases {
        let mut items = batch(&f, &f.queue_id, "v", 4);
        mutate(&mut items[2]);
        match f.db.task_submit_many(&f.hash, &items).await.unwrap_err() {
            DbError::InvalidArgument(m) => {
                assert!(
                    m.starts_with("tasks[2]: ") && m.contains(needle),
                    "{needle}: {m}"
                )
            }
            other => panic!("{needle}: {other:?}"),
        }
    }
    // Of several bad tasks the first is named (items past 9 too), whatever its rule.
    let mut items = batch(&f, &f.queue_id, "v", 12);
    items[11].1.priority = Some(10);
    items[10].1.handler = String::new();
    items[9].1.retry_base_ms = Some(1 << 40);
    match f.db.task_submit_many(&f.hash, &items).await.unwrap_err() {
        DbError::InvalidArgument(m) => assert!(m.starts_with("tasks[9]: retry_base_ms"), "{m}"),
        other => panic!("{other:?}"),
    }
    // The array itself.
    for bad in [0, 1001] {
        let items = batch(&f, &f.queue_id, "n", bad);
        let err = f.db.task_submit_many(&f.hash, &items).await.unwrap_err();
        assert!(
            matches!(&err, DbError::InvalidArgument(m) if m.starts_with("tasks must be a JSON array of 1-1000")),
            "{bad}: {err:?}"
        );
    }
    assert_eq!(count(&f, "orbit_task").await, 0);
    assert_eq!(count(&f, "orbit_idempotency").await, 0);
    assert_eq!(count(&f, "orbit_resource").await, 0);
}

#[tokio::test]
async fn the_procedure_reads_its_json_strictly() {
    // What a DBA calling orbit_task_submit_many by hand can get wrong (the façade cannot).
    let f = Fixture::new().await;
    let q = &f.queue_id;
    let good = format!(
        r#"{{"idempotency_key":"x","queue_id":"{q}","handler":"h","handler_version":"v1","payload_version":"v1","payload":"{{}}"}}"#
    );
    let with = |extra: &str| format!("[{}, {}]", good, good.replacen("\"x\"", extra, 1));
    // A member of `good` given another value (not a second member of the same name: which of
    // two a server keeps is its own choice, the first on MariaDB and the last on MySQL).
    let replaced = |old: &str, new: &str| {
        assert!(good.contains(old), "{old}");
        format!(
            "[{}, {}]",
            good,
            good.replacen("\"x\"", "\"y\"", 1).replacen(old, new, 1)
        )
    };
    let cases = [
        (
            "[]".to_string(),
            "tasks must be a JSON array of 1-1000 tasks",
        ),
        (
            "{}".to_string(),
            "tasks must be a JSON array of 1-1000 tasks",
        ),
        (
            "[1,".to_string(),
            "tasks must be a JSON array of 1-1000 tasks",
        ),
        (
            format!("[{good}, 5]"),
            "tasks[1]: a task must be a JSON object",
        ),
        (
            with(r#""y","colour":"red""#),
            "tasks[1]: the task has a member",
        ),
        (
            replaced(r#""handler":"h""#, r#""handler":5"#),
            "tasks[1]: handler must be a string",
        ),
        (
            replaced(r#""payload":"{}""#, r#""payload":{}"#),
            "tasks[1]: payload must be a string holding the JSON text",
        ),
        (
            with(r#""y","priority":"5""#),
            "tasks[1]: priority must be an integer",
        ),
        (
            with(r#""y","priority":1.0"#),
            "tasks[1]: priority must be an integer",
        ),
        (
            with(r#""y","max_attempts":12345678901"#),
            "tasks[1]: max_attempts must be between",
        ),
        // Past 64 bits: refused as out of range (MariaDB keeps the digits) or as no integer
        // (MySQL reads such a number as a double).
        (
            with(r#""y","max_attempts":123456789012345678901234"#),
            "tasks[1]: max_attempts must be ",
        ),
        (
            with(r#""y","retry_unknown":1"#),
            "tasks[1]: retry_unknown must be true or false",
        ),
        (
            with(r#""y","concurrency_key":null"#),
            "tasks[1]: concurrency_key must be a string or omitted",
        ),
        (with("7"), "tasks[1]: idempotency_key must be a string"),
    ];
    for (tasks, want) in cases {
        let err = sqlx::query("CALL orbit_task_submit_many(?, ?)")
            .bind(&f.hash[..])
            .bind(&tasks)
            .execute(f.db.pool())
            .await
            .unwrap_err();
        assert!(err.to_string().contains(want), "{tasks}: {err}");
    }
    // Null members take the defaults; a missing concurrency_key is none.
    let nulls = with(
        r#""y","business_key":null,"priority":null,"retry_unknown":null,"deadline_seconds":null"#,
    );
    let rows = sqlx::query("CALL orbit_task_submit_many(?, ?)")
        .bind(&f.hash[..])
        .bind(&nulls)
        .fetch_all(f.db.pool())
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(count(&f, "orbit_task").await, 2);
}

#[tokio::test]
async fn a_batch_outside_the_credential_is_refused_like_a_single_submit() {
    let f = Fixture::new().await;
    let q2 = f.queue("q2").await;
    let wrong = orbit::auth::token_hash("orbit_not_a_real_token");
    assert!(matches!(
        f.db.task_submit_many(&wrong, &batch(&f, &f.queue_id, "a", 2))
            .await
            .unwrap_err(),
        DbError::Unauthenticated(_)
    ));
    let reader = orbit::auth::token_hash(&f.credential(&["tasks:read"]).await);
    assert!(matches!(
        f.db.task_submit_many(&reader, &batch(&f, &f.queue_id, "b", 2))
            .await
            .unwrap_err(),
        DbError::PermissionDenied(_)
    ));
    // A credential listing only the first queue: a task on q2 refuses the batch.
    let token = orbit::auth::generate_token();
    f.db.credential_create(&orbit::db::credentials::NewCredential {
        application: "app".into(),
        environment: "test".into(),
        namespace: "default".into(),
        queue_ids: vec![f.queue_id.clone()],
        token_hash: orbit::auth::token_hash(&token).to_vec(),
        token_hint: orbit::auth::token_hint(&token),
        scopes: orbit::testing::ALL_SCOPES
            .iter()
            .map(|s| s.to_string())
            .collect(),
        label: "listed".into(),
    })
    .await
    .unwrap();
    let listed = orbit::auth::token_hash(&token);
    let mut items = batch(&f, &f.queue_id, "c", 3);
    items[1].1.queue_id = q2.clone();
    let err = f.db.task_submit_many(&listed, &items).await.unwrap_err();
    assert!(
        matches!(&err, DbError::PermissionDenied(m) if m.starts_with("tasks[1]: ")),
        "{err:?}"
    );
    // Another tenant's queue, an unknown one and a non-ASCII one do not exist.
    for queue in [other_tenant_queue(&f).await, "0".repeat(32), "é".repeat(16)] {
        let mut items = batch(&f, &f.queue_id, "d", 3);
        items[2].1.queue_id = queue.clone();
        let err = f.db.task_submit_many(&f.hash, &items).await.unwrap_err();
        assert!(
            matches!(&err, DbError::NotFound(m) if m.starts_with("tasks[2]: ")),
            "{queue}: {err:?}"
        );
    }
    assert_eq!(count(&f, "orbit_task").await, 0);
    // Tasks over two queues, alternating, land on their own queues.
    let mut items = batch(&f, &f.queue_id, "e", 4);
    items[1].1.queue_id = q2.clone();
    items[3].1.queue_id = q2.clone();
    let out = f.db.task_submit_many(&f.hash, &items).await.unwrap();
    let queues: Vec<&str> = out.iter().map(|s| s.task.queue_id.as_str()).collect();
    assert_eq!(queues, [f.queue_id.as_str(), &q2, &f.queue_id, &q2]);
}

#[tokio::test]
async fn keyed_tasks_in_one_batch_wait_behind_the_first_like_single_submits() {
    let f = Fixture::new().await;
    let mut items = batch(&f, &f.queue_id, "k", 4);
    for item in &mut items[..3] {
        item.1.concurrency_key = Some("object/1".into());
    }
    let out = f.db.task_submit_many(&f.hash, &items).await.unwrap();
    let lanes = [
        f.lane(out[0].task.id).await,
        f.lane(out[1].task.id).await,
        f.lane(out[2].task.id).await,
        f.lane(out[3].task.id).await,
    ];
    assert_eq!(lanes, ["ready", "blocked", "blocked", "ready"]);
    assert_eq!(count(&f, "orbit_resource").await, 1);
    let s = f.session("w", true, &[&f.queue_id]).await;
    let granted: Vec<u64> =
        f.db.task_claim(s, 10, 30_000)
            .await
            .unwrap()
            .iter()
            .map(|g| g.task.id)
            .collect();
    assert_eq!(granted.len(), 2, "the key's first task and the unkeyed one");
    assert!(granted.contains(&out[0].task.id) && granted.contains(&out[3].task.id));
}

#[tokio::test]
async fn a_full_quota_mid_batch_writes_nothing() {
    let f = Fixture::new().await;
    sqlx::query("UPDATE orbit_application_quota SET max_incomplete_tasks = 3")
        .execute(f.db.pool())
        .await
        .unwrap();
    f.submit(&f.queue_id, "").await;
    let err =
        f.db.task_submit_many(&f.hash, &batch(&f, &f.queue_id, "q", 3))
            .await
            .unwrap_err();
    assert!(
        matches!(&err, DbError::QuotaExceeded(m) if m.starts_with("tasks[2]: ")),
        "{err:?}"
    );
    assert_eq!(count(&f, "orbit_task").await, 1);
    assert_eq!(count(&f, "orbit_idempotency").await, 1);
    let incomplete = f.incomplete_tasks().await;
    assert_eq!(incomplete, 1, "the batch's charges were rolled back");
    // Two fit.
    assert_eq!(
        f.db.task_submit_many(&f.hash, &batch(&f, &f.queue_id, "q", 2))
            .await
            .unwrap()
            .len(),
        2
    );
}

/// Per slot: (counter, tasks that record the slot).
async fn slot_charges(f: &Fixture) -> Vec<(u8, i64, i64)> {
    sqlx::query_as(
        "SELECT q.slot, q.incomplete_tasks, (SELECT COUNT(*) FROM orbit_task t WHERE t.quota_slot = q.slot) \
           FROM orbit_application_quota q ORDER BY q.slot",
    )
    .fetch_all(f.db.pool())
    .await
    .unwrap()
}

#[tokio::test]
async fn a_batch_that_fits_a_slot_share_is_charged_to_that_one_slot() {
    let f = Fixture::new().await;
    f.db.task_submit_many(&f.hash, &batch(&f, &f.queue_id, "one", 7))
        .await
        .unwrap();
    let charged: Vec<_> = slot_charges(&f)
        .await
        .into_iter()
        .filter(|&(_, n, _)| n > 0)
        .collect();
    assert_eq!(
        charged.len(),
        1,
        "one slot took the whole batch: {charged:?}"
    );
    assert_eq!(
        (charged[0].1, charged[0].2),
        (7, 7),
        "and every task records it"
    );
}

#[tokio::test]
async fn a_batch_larger_than_a_slot_share_is_charged_exactly_within_the_shares() {
    let f = Fixture::new().await;
    // 40 over 16 slots: shares of 2 or 3, so no slot takes a batch of 10 alone.
    sqlx::query("UPDATE orbit_application_quota SET max_incomplete_tasks = 40")
        .execute(f.db.pool())
        .await
        .unwrap();
    for round in 0..4 {
        f.db.task_submit_many(&f.hash, &batch(&f, &f.queue_id, &format!("r{round}"), 10))
            .await
            .unwrap();
    }
    // Every slot within its share (40 DIV 16 + (slot < 40 % 16)); the total is exact.
    let slots = slot_charges(&f).await;
    assert!(
        slots
            .iter()
            .all(|&(slot, n, _)| n <= 2 + i64::from(slot < 8)),
        "a slot above its share: {slots:?}"
    );
    assert_eq!(slots.iter().map(|s| s.1).sum::<i64>(), 40);
    let err =
        f.db.task_submit_many(&f.hash, &batch(&f, &f.queue_id, "over", 1))
            .await
            .unwrap_err();
    assert!(
        matches!(&err, DbError::QuotaExceeded(m) if m.starts_with("tasks[0]: ")),
        "{err:?}"
    );
}

/// Every column a task's creation decides, and its history, for comparing two ways of creating
/// it (the creation time itself differs; its relations to the other times do not).
async fn created_rows(f: &Fixture, key: &str) -> (String, String) {
    sqlx::query_as(
        "SELECT CAST(JSON_ARRAY(t.application_id, t.namespace_id, t.queue_id, t.handler, t.handler_version,
                           t.payload_version, t.payload, t.business_key, HEX(t.concurrency_key),
                           (SELECT HEX(r.concurrency_key) FROM orbit_resource r WHERE r.id = t.resource_id),
                           t.state, t.lane, t.priority, t.max_attempts, t.attempt_count, t.retry_base_ms,
                           t.retry_max_ms, t.retry_unknown, t.run_at = t.created_at, t.updated_at = t.created_at,
                           TIMESTAMPDIFF(SECOND, t.created_at, t.deadline_at), t.plan_id, t.plan_version,
                           t.finished_at, t.current_attempt_id, t.blocked_reason, t.output, t.error)
                    AS CHAR) AS task,
                COALESCE(CAST((SELECT JSON_ARRAYAGG(JSON_ARRAY(e.event, e.to_state, e.detail, e.created_at = t.created_at))
                                 FROM orbit_task_event e WHERE e.task_id = t.id) AS CHAR), '[]') AS events
           FROM orbit_task t WHERE t.idempotency_key = ?",
    )
    .bind(key)
    .fetch_one(f.db.pool())
    .await
    .unwrap()
}

#[tokio::test]
async fn a_batch_without_keys_is_inserted_whole_with_the_rows_a_single_submit_writes() {
    let f = Fixture::new().await;
    let other_queue = f.queue("second").await;
    let mut items = batch(&f, &f.queue_id, "bulk", 50);
    items[1].1.priority = Some(1);
    items[1].1.business_key = Some("order-9".into());
    items[2].1.retry_unknown = Some(true);
    items[2].1.deadline_seconds = Some(60);
    items[2].1.max_attempts = Some(7);
    items[2].1.retry_base_ms = Some(10);
    items[2].1.retry_max_ms = Some(20);
    items[3].1.queue_id = other_queue.clone();
    let (rows, counted) = submit_many_counted(&f, &items).await;
    assert_eq!(rows.len(), 50);
    // Inserted whole: a handful of procedure calls (the credential and queue checks), not one
    // orbit_task_create per task.
    let calls = counted[CALLS];
    assert!(calls < 10, "{calls} procedure calls for a batch of 50");
    // The same definitions through the single submit, which creates each by orbit_task_create:
    // the same rows, the same history.
    for (i, (key, t)) in items.iter().enumerate().take(4) {
        f.db.task_submit(&f.hash, &format!("single-{i}"), t)
            .await
            .unwrap();
        let (bulk, single) = (
            created_rows(&f, key).await,
            created_rows(&f, &format!("single-{i}")).await,
        );
        assert_eq!(bulk, single, "task {i}");
    }
    assert!(created_rows(&f, "bulk-3").await.0.contains(&other_queue));
    // Ids in input order, each key recording its own task.
    let ids: Vec<(u64, u64)> = sqlx::query_as(
        "SELECT t.id, i.task_id FROM orbit_task t
           JOIN orbit_idempotency i ON i.application_id = t.application_id AND i.idempotency_key = t.idempotency_key
          WHERE t.idempotency_key LIKE 'bulk-%'
          ORDER BY CAST(SUBSTRING(t.idempotency_key, 6) AS UNSIGNED)",
    )
    .fetch_all(f.db.pool())
    .await
    .unwrap();
    assert_eq!(ids.len(), 50);
    assert!(ids.iter().all(|(t, i)| t == i), "{ids:?}");
    assert!(ids.windows(2).all(|w| w[0].0 < w[1].0), "{ids:?}");
}

/// Characters beyond the Basic Multilingual Plane (an emoji) in every text of a batch's tasks are
/// stored as sent, unkeyed (inserted whole) and keyed (created by key), the same as a single
/// submit stores them; two Idempotency-Keys that differ only there name two tasks, and a replay
/// finds each. (MariaDB 10.6's JSON_UNQUOTE turned them into '?', so "op-😀" and "op-😁" were one
/// key and the second task was answered with the first.)
#[tokio::test]
async fn a_batch_stores_characters_beyond_the_basic_multilingual_plane_as_sent() {
    let f = Fixture::new().await;
    let other_queue = f.queue("second").await;
    for (keyed, prefix) in [("", "op-😀"), ("key/🔑", "op-🗝")] {
        let mut items = Vec::new();
        for (i, emoji) in ["😀", "😁"].iter().enumerate() {
            let mut t = f.task(&f.queue_id, keyed);
            t.handler = format!("{emoji}.handler");
            t.handler_version = format!("v{emoji}");
            t.payload_version = format!("p{emoji}");
            t.payload = format!(r#"{{"text":"{emoji} {i}"}}"#);
            t.business_key = Some(format!("order-{emoji}"));
            items.push((format!("{prefix}{emoji}"), t));
        }
        // A task on another queue keeps a keyed batch off the whole-batch path too.
        let mut single_path = items.clone();
        single_path[1].1.queue_id = other_queue.clone();
        for (n, batch) in [items, single_path].iter().enumerate() {
            let batch: Vec<_> = batch
                .iter()
                .map(|(k, t)| (format!("{k}-{n}"), t.clone()))
                .collect();
            let out = f.db.task_submit_many(&f.hash, &batch).await.unwrap();
            assert_eq!(out.len(), 2);
            assert_ne!(
                out[0].task.id, out[1].task.id,
                "{keyed:?} {n}: two keys, two tasks"
            );
            for ((key, t), s) in batch.iter().zip(&out) {
                assert!(!s.replayed, "{key}");
                assert_eq!(
                    (
                        &s.task.handler,
                        &s.task.handler_version,
                        &s.task.payload_version
                    ),
                    (&t.handler, &t.handler_version, &t.payload_version),
                    "{key}"
                );
                assert_eq!(s.task.payload, t.payload, "{key}");
                assert_eq!(Some(&s.task.business_key), t.business_key.as_ref(), "{key}");
                assert_eq!(
                    s.task.concurrency_key.as_deref().unwrap_or(""),
                    keyed,
                    "{key}"
                );
                // The same rows as a single submit of the same definition writes (unkeyed: a
                // keyed one would wait behind the batch's).
                if keyed.is_empty() {
                    f.db.task_submit(&f.hash, &format!("single-{key}"), t)
                        .await
                        .unwrap();
                    assert_eq!(
                        created_rows(&f, key).await.0,
                        created_rows(&f, &format!("single-{key}")).await.0,
                        "{key}"
                    );
                }
            }
            let again = f.db.task_submit_many(&f.hash, &batch).await.unwrap();
            let ids = |v: &[orbit::db::tasks::Submitted]| {
                v.iter()
                    .map(|s| (s.replayed, s.task.id))
                    .collect::<Vec<_>>()
            };
            assert_eq!(
                ids(&again),
                out.iter().map(|s| (true, s.task.id)).collect::<Vec<_>>(),
                "{keyed:?} {n}: each replays its own task"
            );
        }
    }
}

#[tokio::test]
async fn a_thousand_tasks_in_one_call() {
    let f = Fixture::new().await;
    let items = batch(&f, &f.queue_id, "m", 1000);
    let out = f.db.task_submit_many(&f.hash, &items).await.unwrap();
    assert_eq!(out.len(), 1000);
    assert!(out
        .iter()
        .enumerate()
        .all(|(i, s)| s.task.payload == format!(r#"{{"i":{i}}}"#)));
    assert_eq!(count(&f, "orbit_task").await, 1000);
}

#[tokio::test]
async fn concurrent_batches_and_single_submits_sharing_keys_create_each_task_once() {
    // Unkeyed, and keyed over two concurrency keys (each task's key row before its receipt).
    for keyed in [false, true] {
        let f = Fixture::new().await;
        let mut items = batch(&f, &f.queue_id, "s", 5);
        if keyed {
            for (i, (_, t)) in items.iter_mut().enumerate() {
                t.concurrency_key = Some(format!("c-{}", i % 2));
            }
        }
        let mut reversed = items.clone();
        reversed.reverse();
        let mut handles = Vec::new();
        for i in 0..21 {
            // A third are single submits of one of the tasks; of the batches, half take the keys
            // in the opposite order: deadlocks, rolled back and retried.
            let (db, hash) = (f.db.clone(), f.hash);
            let items = match i % 3 {
                0 => vec![items[i % 5].clone()],
                1 => items.clone(),
                _ => reversed.clone(),
            };
            handles.push(tokio::spawn(async move {
                if items.len() == 1 {
                    let (key, t) = &items[0];
                    db.task_submit(&hash, key, t).await.map(|s| vec![s])
                } else {
                    db.task_submit_many(&hash, &items).await
                }
            }));
        }
        let mut created = 0;
        let mut ids = std::collections::BTreeSet::new();
        for h in handles {
            let out = h.await.unwrap().unwrap();
            created += out.iter().filter(|s| !s.replayed).count();
            ids.extend(out.iter().map(|s| s.task.id));
        }
        assert_eq!(created, 5, "keyed {keyed}: each task created once");
        assert_eq!(ids.len(), 5);
        assert_eq!(count(&f, "orbit_task").await, 5);
        assert_eq!(count(&f, "orbit_idempotency").await, 5);
        assert_eq!(f.incomplete_tasks().await, 5, "one charge a task");
    }
}

#[tokio::test]
async fn a_full_slot_respreads_the_counters_and_one_slot_charges_resume() {
    let f = Fixture::new().await;
    // 160 over 16 slots: a share of 10 each. One connection submits 11 tasks: its slot takes ten,
    // the eleventh locks every slot, checks the total (10 + 1 <= 160) and spreads the 11 evenly.
    // (The limit is set as already checked: a changed limit's first charge respreads as well.)
    sqlx::query(
        "UPDATE orbit_application_quota SET max_incomplete_tasks = 160, checked_max_incomplete_tasks = 160",
    )
        .execute(f.db.pool())
        .await
        .unwrap();
    let mut conn = f.db.pool().acquire().await.unwrap();
    let submit = |i: usize| {
        sqlx::query(
            "CALL orbit_task_submit(?, ?, ?, 'h', 'v1', 'v1', '{}', NULL, '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
        )
        .bind(&f.hash[..])
        .bind(format!("spread-{i}"))
        .bind(&f.queue_id)
    };
    for i in 0..11 {
        submit(i).execute(&mut *conn).await.unwrap();
    }
    let spread: Vec<i64> = slot_charges(&f).await.into_iter().map(|s| s.1).collect();
    let even: Vec<i64> = (0..16).map(|slot| i64::from(slot < 11)).collect();
    assert_eq!(spread, even, "slot s holds 11 DIV 16 + (s < 11 MOD 16)");
    // The next charge is a one-slot charge again: only the connection's slot moves.
    let (_, slot): (String, u8) =
        sqlx::query_as("SELECT 'slot', CAST(CONNECTION_ID() % 16 AS UNSIGNED)")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
    submit(11).execute(&mut *conn).await.unwrap();
    let after: Vec<i64> = slot_charges(&f).await.into_iter().map(|s| s.1).collect();
    let mut expected = even.clone();
    expected[usize::from(slot)] += 1;
    assert_eq!(after, expected);
}

/// A key held by a granted attempt, a key whose row keeps the holder limit of a policy that is
/// gone (3), and a key with a ready task, in `f`'s namespace; then the batch's tasks: keys `b` (a
/// delayed task first), `a` (three tasks), an unkeyed task, and one task for each prepared key.
async fn keyed_batch_ground(f: &Fixture) -> Vec<(String, orbit::db::tasks::NewTask)> {
    f.submit(&f.queue_id, "held").await;
    let s = f.session("holder", true, &[&f.queue_id]).await;
    assert_eq!(f.db.task_claim(s, 1, 30_000).await.unwrap().len(), 1);
    f.submit(&f.queue_id, "stale").await;
    let s = f.session("stale", true, &[&f.queue_id]).await;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap();
    assert_eq!(g[0].task.concurrency_key.as_deref(), Some("stale"));
    f.db.attempt_finish(
        s,
        g[0].attempt_id,
        orbit::db::workers::Outcome::Succeeded,
        false,
        None,
        None,
    )
    .await
    .unwrap();
    sqlx::query("UPDATE orbit_resource SET holder_limit = 3 WHERE concurrency_key = 'stale'")
        .execute(f.db.pool())
        .await
        .unwrap();
    f.submit(&f.queue_id, "waiting").await;
    let keys = ["b", "b", "a", "a", "", "a", "held", "stale", "waiting"];
    keys.iter()
        .enumerate()
        .map(|(i, key)| {
            let mut t = f.task(&f.queue_id, key);
            t.payload = format!(r#"{{"i":{i}}}"#);
            if i == 0 {
                t.timing.delay_seconds = Some(60);
            }
            (format!("kb-{i}"), t)
        })
        .collect()
}

#[tokio::test]
async fn a_keyed_batch_is_inserted_whole_and_placed_as_single_submits_place_it() {
    // Two databases, each with the same queue id: the rows are compared whole.
    let queue_id = orbit::auth::new_queue_id();
    let (bulk, single) = (
        Fixture::with_queue_id(&queue_id).await,
        Fixture::with_queue_id(&queue_id).await,
    );
    let items = keyed_batch_ground(&bulk).await;
    let same = keyed_batch_ground(&single).await;
    let (rows, counted) = submit_many_counted(&bulk, &items).await;
    assert_eq!(rows.len(), items.len());
    let calls = counted[CALLS];
    // The call, its token and queue checks (orbit_auth_check, orbit_auth_queue_check) and
    // orbit_task_create_keyed_many; one orbit_task_create a task would make at least
    // 3 + items.len().
    assert_eq!(calls, 4, "{calls} procedure calls: not inserted whole");
    // The same tasks one by one, through orbit_task_create, on the same ground.
    for (key, t) in &same {
        single.db.task_submit(&single.hash, key, t).await.unwrap();
    }
    let mut lanes = Vec::new();
    for (i, (key, _)) in items.iter().enumerate() {
        let (b, s) = (
            created_rows(&bulk, key).await,
            created_rows(&single, key).await,
        );
        assert_eq!(b, s, "task {i} ({key})");
        let lane: String = sqlx::query_scalar(
            "SELECT CAST(lane AS CHAR) FROM orbit_task WHERE idempotency_key = ?",
        )
        .bind(key)
        .fetch_one(bulk.db.pool())
        .await
        .unwrap();
        lanes.push(lane);
    }
    assert_eq!(
        lanes,
        [
            "scheduled", "ready", "ready", "blocked", "ready", "blocked", "blocked", "ready",
            "blocked"
        ],
        "b: delayed, then its first due; a: its first; the held key, the stale limit, the waiting key"
    );
    let limit: u16 = sqlx::query_scalar(
        "SELECT holder_limit FROM orbit_resource WHERE concurrency_key = 'stale'",
    )
    .fetch_one(bulk.db.pool())
    .await
    .unwrap();
    assert_eq!(limit, 1, "no policy: the key's row is back to one holder");
    // Each receipt names its task, and the batch replays whole.
    let named: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM orbit_idempotency i JOIN orbit_task t ON t.id = i.task_id
          WHERE i.idempotency_key LIKE 'kb-%' AND t.idempotency_key = i.idempotency_key",
    )
    .fetch_one(bulk.db.pool())
    .await
    .unwrap();
    assert_eq!(named, items.len() as i64);
    let created: Vec<u64> = rows.iter().map(|r| r.get::<u64, _>(2)).collect();
    let again = bulk.db.task_submit_many(&bulk.hash, &items).await.unwrap();
    assert!(again.iter().all(|r| r.replayed));
    assert_eq!(created, again.iter().map(|r| r.task.id).collect::<Vec<_>>());
    assert_eq!(
        bulk.incomplete_tasks().await,
        single.incomplete_tasks().await
    );
}

/// Receipts that were ever updated (a trigger logs each), and receipts that do not name a task
/// carrying their Idempotency-Key.
async fn receipts_rewritten_or_astray(f: &Fixture) -> (Vec<String>, i64) {
    let updated: Vec<String> =
        sqlx::query_scalar("SELECT CAST(idempotency_key AS CHAR) FROM receipt_update_log")
            .fetch_all(f.db.pool())
            .await
            .unwrap();
    let astray: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM orbit_idempotency i
           LEFT JOIN orbit_task t ON t.id = i.task_id AND t.idempotency_key = i.idempotency_key
          WHERE t.id IS NULL",
    )
    .fetch_one(f.db.pool())
    .await
    .unwrap();
    (updated, astray)
}

#[tokio::test]
async fn every_receipt_is_written_once_naming_its_task_on_every_submit_path() {
    let f = Fixture::new().await;
    for sql in [
        "CREATE TABLE receipt_update_log (idempotency_key VARBINARY(255) NOT NULL)",
        "CREATE TRIGGER receipt_updated AFTER UPDATE ON orbit_idempotency FOR EACH ROW
           INSERT INTO receipt_update_log VALUES (NEW.idempotency_key)",
    ] {
        sqlx::raw_sql(sql).execute(f.db.pool()).await.unwrap();
    }
    // The trigger sees an update (the check itself can fail).
    sqlx::query("UPDATE orbit_idempotency SET created_at = created_at WHERE 1 = 0")
        .execute(f.db.pool())
        .await
        .unwrap();
    let keyed = |key: &str, i: usize| {
        let mut t = f.task(&f.queue_id, key);
        t.payload = format!(r#"{{"i":{i}}}"#);
        t
    };
    // Single submits: a new key, a held key, no key; then each replayed.
    let singles = [
        ("s-new", keyed("k-new", 0)),
        ("s-held", keyed("k-new", 1)),
        ("s-free", keyed("", 2)),
    ];
    for (k, t) in &singles {
        assert!(!f.db.task_submit(&f.hash, k, t).await.unwrap().replayed);
    }
    for (k, t) in &singles {
        assert!(
            f.db.task_submit(&f.hash, k, t).await.unwrap().replayed,
            "{k}"
        );
    }
    // A keyed batch created whole, then a batch with one receipt that exists (task by task).
    let whole: Vec<_> = (0..6)
        .map(|i| (format!("b-{i}"), keyed(&format!("k-{}", i % 3), i)))
        .collect();
    let out = f.db.task_submit_many(&f.hash, &whole).await.unwrap();
    assert!(out.iter().all(|s| !s.replayed));
    let mut mixed: Vec<_> = (0..4)
        .map(|i| (format!("m-{i}"), keyed(&format!("k-{i}"), i)))
        .collect();
    mixed.push(whole[1].clone());
    let out = f.db.task_submit_many(&f.hash, &mixed).await.unwrap();
    assert_eq!(
        out.iter().map(|s| s.replayed).collect::<Vec<_>>(),
        [false, false, false, false, true]
    );
    assert_eq!(
        out[4].task.id,
        f.db.task_submit_many(&f.hash, &whole).await.unwrap()[1]
            .task
            .id
    );
    // Under a 'reject' policy (every keyed batch then goes task by task): a refused task whose
    // Idempotency-Key has a receipt replays it, in a single submit and in a batch.
    f.db.key_policy_set(
        &f.hash,
        f.namespace_id,
        &orbit::db::keys::KeyPolicySpec::new("exact", "k-busy", "reject"),
    )
    .await
    .unwrap();
    let first = keyed("k-busy", 7);
    let original = f.db.task_submit(&f.hash, "p-0", &first).await.unwrap();
    let again = f.db.task_submit(&f.hash, "p-0", &first).await.unwrap();
    assert!(again.replayed && again.task.id == original.task.id);
    let err =
        f.db.task_submit(&f.hash, "p-1", &keyed("k-busy", 8))
            .await
            .unwrap_err();
    assert!(matches!(err, DbError::KeyBusy(_)), "{err:?}");
    let out =
        f.db.task_submit_many(
            &f.hash,
            &[
                ("p-2".into(), keyed("k-9", 9)),
                ("p-0".into(), first.clone()),
            ],
        )
        .await
        .unwrap();
    assert!(!out[0].replayed && out[1].replayed && out[1].task.id == original.task.id);
    let err =
        f.db.task_submit_many(&f.hash, &[("p-3".into(), keyed("k-busy", 10))])
            .await
            .unwrap_err();
    assert!(matches!(err, DbError::KeyBusy(_)), "{err:?}");

    let (updated, astray) = receipts_rewritten_or_astray(&f).await;
    assert!(updated.is_empty(), "receipts written twice: {updated:?}");
    assert_eq!(astray, 0, "a receipt names no task of its key");
    assert_eq!(
        count(&f, "orbit_idempotency").await,
        count(&f, "orbit_task").await
    );
    assert_eq!(count(&f, "orbit_task").await, 3 + 6 + 4 + 1 + 1);
    // And the checker fails on a receipt written twice.
    sqlx::query("UPDATE orbit_idempotency SET task_id = task_id WHERE idempotency_key = 's-new'")
        .execute(f.db.pool())
        .await
        .unwrap();
    assert_eq!(receipts_rewritten_or_astray(&f).await.0, ["s-new"]);
}
