//! orbit_task_submit: idempotency, key validation in SQL, busy keys, quota, and auth codes.

use orbit::db::DbError;
use orbit::testing::Fixture;

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
    let f = Fixture::new().await;
    let t = f.task(&f.queue_id, "object/1");
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
    assert_eq!(created, 1);
    assert_eq!(ids.len(), 1);
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orbit_task")
        .fetch_one(f.db.pool())
        .await
        .unwrap();
    assert_eq!(n, 1);
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
    let err = sqlx::query("CALL orbit_task_submit(?, 'k1', ?, 'h', 'v1', 'v1', '{}', NULL, ?, NULL, NULL, NULL, NULL, NULL, NULL)")
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
    let incomplete: u64 = sqlx::query_scalar(
        "SELECT CAST(SUM(incomplete_tasks) AS UNSIGNED) FROM orbit_application_quota",
    )
    .fetch_one(f.db.pool())
    .await
    .unwrap();
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
    // Each slot holds what its tasks charged, within its share of 37 (37 DIV 16 + (slot < 37 % 16)).
    let slots: Vec<(u8, u64, i64)> = sqlx::query_as(
        "SELECT q.slot, q.incomplete_tasks, \
                (SELECT COUNT(*) FROM orbit_task t WHERE t.quota_slot = q.slot) \
           FROM orbit_application_quota q ORDER BY q.slot",
    )
    .fetch_all(f.db.pool())
    .await
    .unwrap();
    assert_eq!(slots.len(), 16);
    for (slot, charged, tasks) in &slots {
        assert_eq!(*charged as i64, *tasks, "slot {slot}");
        assert!(
            *charged <= 2 + u64::from(*slot < 5),
            "slot {slot} above its share"
        );
    }
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
