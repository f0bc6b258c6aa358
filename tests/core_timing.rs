//! Delayed and debounced submits (orbit_task_submit, orbit_task_submit_many, orbit_task_create):
//! the scheduled lane, the bounds, idempotency over the timing fields, and debounce's
//! replacement with its quota charge.

use chrono::{DateTime, Duration, Utc};
use orbit::db::tasks::{NewTask, Task, Timing};
use orbit::db::DbError;
use orbit::testing::Fixture;

fn delayed(f: &Fixture, key: &str, timing: Timing) -> NewTask {
    NewTask {
        timing,
        ..f.task(&f.queue_id, key)
    }
}

fn debounced(f: &Fixture, queue_id: &str, key: &str, seconds: i64, max: Option<i64>) -> NewTask {
    NewTask {
        timing: Timing {
            debounce_seconds: Some(seconds),
            debounce_max_seconds: max,
            ..Default::default()
        },
        ..f.task(queue_id, key)
    }
}

async fn db_now(f: &Fixture) -> DateTime<Utc> {
    let now: chrono::NaiveDateTime = sqlx::query_scalar("SELECT UTC_TIMESTAMP(6)")
        .fetch_one(f.db.pool())
        .await
        .unwrap();
    now.and_utc()
}

async fn lane(f: &Fixture, task_id: u64) -> String {
    sqlx::query_scalar("SELECT CAST(lane AS CHAR) FROM orbit_task WHERE id = ?")
        .bind(task_id)
        .fetch_one(f.db.pool())
        .await
        .unwrap()
}

async fn get(f: &Fixture, task_id: u64) -> Task {
    f.db.task_get(&f.hash, task_id).await.unwrap()
}

#[tokio::test]
async fn a_delayed_task_is_not_claimed_before_its_run_at_and_is_promoted_when_due() {
    let f = Fixture::new().await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let before = db_now(&f).await;
    let unkeyed = f
        .submit_task(&delayed(
            &f,
            "",
            Timing {
                delay_seconds: Some(3600),
                ..Default::default()
            },
        ))
        .await;
    let keyed = f
        .submit_task(&delayed(
            &f,
            "object/1",
            Timing {
                delay_seconds: Some(3600),
                ..Default::default()
            },
        ))
        .await;
    for t in [&unkeyed, &keyed] {
        assert_eq!(t.state.as_str(), "WAITING");
        assert!(
            t.blocked_reason.starts_with("DELAYED"),
            "{}",
            t.blocked_reason
        );
        assert!(t.run_at >= before + Duration::seconds(3600), "{}", t.run_at);
        assert!(t.run_at <= db_now(&f).await + Duration::seconds(3600));
        assert_eq!(lane(&f, t.id).await, "scheduled");
    }
    assert!(f.db.task_claim(s, 10, 30_000).await.unwrap().is_empty());

    // A delayed task holds nothing: the key's next task runs now.
    let now_task = f.submit(&f.queue_id, "object/1").await;
    let g = f.db.task_claim(s, 10, 30_000).await.unwrap();
    assert_eq!(g.len(), 1);
    assert_eq!(g[0].task.id, now_task.id);

    f.make_due(unkeyed.id).await;
    f.make_due(keyed.id).await;
    let promoted = f.db.task_promote_due(100).await.unwrap();
    assert_eq!(promoted.count, 2);
    assert_eq!(get(&f, unkeyed.id).await.blocked_reason, "");
    assert_eq!(lane(&f, unkeyed.id).await, "ready");
    // The keyed one waits behind the key's holder, as any other task of the key.
    assert_eq!(lane(&f, keyed.id).await, "blocked");
    let g2 = f.db.task_claim(s, 10, 30_000).await.unwrap();
    assert_eq!(
        g2.iter().map(|g| g.task.id).collect::<Vec<_>>(),
        vec![unkeyed.id]
    );
}

#[tokio::test]
async fn a_run_at_in_the_past_runs_at_once_and_one_ahead_waits_until_then() {
    let f = Fixture::new().await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let now = db_now(&f).await;
    let past = f
        .submit_task(&delayed(
            &f,
            "",
            Timing {
                run_at: Some(now - Duration::days(3)),
                ..Default::default()
            },
        ))
        .await;
    assert_eq!(lane(&f, past.id).await, "ready");
    assert_eq!(past.blocked_reason, "");
    assert!(
        past.run_at >= now,
        "a past run_at becomes the acceptance time"
    );
    let at = (now + Duration::hours(5)).with_nanosecond_micros();
    let ahead = f
        .submit_task(&delayed(
            &f,
            "k",
            Timing {
                run_at: Some(at),
                ..Default::default()
            },
        ))
        .await;
    assert_eq!(ahead.run_at, at);
    assert_eq!(lane(&f, ahead.id).await, "scheduled");
    let g = f.db.task_claim(s, 10, 30_000).await.unwrap();
    assert_eq!(
        g.iter().map(|g| g.task.id).collect::<Vec<_>>(),
        vec![past.id]
    );
    // Not due: promotion leaves it where it is.
    assert_eq!(f.db.task_promote_due(100).await.unwrap().count, 0);
    assert_eq!(lane(&f, ahead.id).await, "scheduled");
}

trait Micros {
    fn with_nanosecond_micros(self) -> Self;
}

impl Micros for DateTime<Utc> {
    /// Truncated to microseconds, the precision of DATETIME(6).
    fn with_nanosecond_micros(self) -> Self {
        DateTime::from_timestamp_micros(self.timestamp_micros()).unwrap()
    }
}

#[tokio::test]
async fn timing_rules_are_enforced_in_sql_and_name_the_field() {
    let f = Fixture::new().await;
    let now = db_now(&f).await;
    let t = |key: &str, timing: Timing| delayed(&f, key, timing);
    let cases: Vec<(NewTask, &str)> = vec![
        (
            t(
                "",
                Timing {
                    run_at: Some(now),
                    delay_seconds: Some(5),
                    ..Default::default()
                },
            ),
            "run_at and delay_seconds cannot both be given",
        ),
        (
            t(
                "",
                Timing {
                    delay_seconds: Some(-1),
                    ..Default::default()
                },
            ),
            "delay_seconds must be between 0 and 31536000",
        ),
        (
            t(
                "",
                Timing {
                    delay_seconds: Some(31_536_001),
                    ..Default::default()
                },
            ),
            "delay_seconds must be between 0 and 31536000",
        ),
        (
            t(
                "",
                Timing {
                    run_at: Some(now + Duration::days(366)),
                    ..Default::default()
                },
            ),
            "run_at must be at most 365 days ahead",
        ),
        (
            t(
                "",
                Timing {
                    debounce_seconds: Some(5),
                    ..Default::default()
                },
            ),
            "debounce_seconds needs a concurrency_key",
        ),
        (
            t(
                "k",
                Timing {
                    debounce_seconds: Some(5),
                    delay_seconds: Some(5),
                    ..Default::default()
                },
            ),
            "debounce_seconds cannot be combined with run_at or delay_seconds",
        ),
        (
            t(
                "k",
                Timing {
                    debounce_seconds: Some(10),
                    debounce_max_seconds: Some(5),
                    ..Default::default()
                },
            ),
            "debounce_max_seconds must be at least debounce_seconds",
        ),
        (
            t(
                "k",
                Timing {
                    debounce_max_seconds: Some(5),
                    ..Default::default()
                },
            ),
            "debounce_max_seconds needs debounce_seconds",
        ),
        (
            t(
                "k",
                Timing {
                    debounce_seconds: Some(31_536_001),
                    ..Default::default()
                },
            ),
            "debounce_seconds must be between 0 and 31536000",
        ),
    ];
    for (i, (task, message)) in cases.into_iter().enumerate() {
        let err =
            f.db.task_submit(&f.hash, &format!("bad-{i}"), &task)
                .await
                .unwrap_err();
        match err {
            DbError::InvalidArgument(m) => assert!(m.contains(message), "{m} / {message}"),
            e => panic!("case {i}: {e:?}"),
        }
    }
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orbit_task")
        .fetch_one(f.db.pool())
        .await
        .unwrap();
    assert_eq!(n, 0, "a refused submit writes nothing");
}

#[tokio::test]
async fn a_replay_with_another_run_at_is_a_conflict_and_the_same_timing_replays() {
    let f = Fixture::new().await;
    let now = db_now(&f).await.with_nanosecond_micros();
    let at = |h| Timing {
        run_at: Some(now + Duration::hours(h)),
        ..Default::default()
    };
    let first =
        f.db.task_submit(&f.hash, "op-run-at", &delayed(&f, "", at(1)))
            .await
            .unwrap();
    let replay =
        f.db.task_submit(&f.hash, "op-run-at", &delayed(&f, "", at(1)))
            .await
            .unwrap();
    assert!(replay.replayed);
    assert_eq!(replay.task.id, first.task.id);
    for other in [
        at(2),
        Timing::default(),
        Timing {
            delay_seconds: Some(3600),
            ..Default::default()
        },
    ] {
        let err =
            f.db.task_submit(&f.hash, "op-run-at", &delayed(&f, "", other))
                .await
                .unwrap_err();
        assert!(matches!(err, DbError::IdempotencyConflict(_)), "{err:?}");
    }
    // A delay is hashed as given, not as the time it came to: a later replay still replays.
    let delay = Timing {
        delay_seconds: Some(60),
        ..Default::default()
    };
    let d1 =
        f.db.task_submit(&f.hash, "op-delay", &delayed(&f, "", delay.clone()))
            .await
            .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let d2 =
        f.db.task_submit(&f.hash, "op-delay", &delayed(&f, "", delay))
            .await
            .unwrap();
    assert!(d2.replayed);
    assert_eq!(d2.task.run_at, d1.task.run_at);
    // delay_seconds 0 is the default: the same request as none.
    f.db.task_submit(&f.hash, "op-zero", &delayed(&f, "", Timing::default()))
        .await
        .unwrap();
    let zero = Timing {
        delay_seconds: Some(0),
        ..Default::default()
    };
    assert!(
        f.db.task_submit(&f.hash, "op-zero", &delayed(&f, "", zero))
            .await
            .unwrap()
            .replayed
    );
}

#[tokio::test]
async fn a_debounced_burst_keeps_only_its_last_task_and_one_charge() {
    let f = Fixture::new().await;
    let before = db_now(&f).await;
    let mut submitted = Vec::new();
    for i in 0..3 {
        let s =
            f.db.task_submit(
                &f.hash,
                &format!("burst-{i}"),
                &debounced(&f, &f.queue_id, "doc/7", 600, None),
            )
            .await
            .unwrap();
        assert!(!s.replayed);
        submitted.push(s.task);
    }
    let last = submitted.last().unwrap();
    assert_eq!(last.state.as_str(), "WAITING");
    assert!(
        last.blocked_reason.starts_with("DEBOUNCED"),
        "{}",
        last.blocked_reason
    );
    assert!(last.run_at >= before + Duration::seconds(600));
    for (replaced, successor) in submitted.iter().zip(submitted.iter().skip(1)) {
        let t = get(&f, replaced.id).await;
        assert_eq!(t.state.as_str(), "CANCELLED");
        assert!(t.finished_at.is_some());
        let error: serde_json::Value = serde_json::from_str(t.error.as_deref().unwrap()).unwrap();
        assert_eq!(error["code"], "REPLACED");
        assert_eq!(error["replaced_by"], successor.id);
        assert_eq!(
            error["message"],
            format!("replaced by task {}", successor.id)
        );
    }
    // The replaced submit's receipt still answers, with the task it created, now cancelled.
    let replay =
        f.db.task_submit(
            &f.hash,
            "burst-0",
            &debounced(&f, &f.queue_id, "doc/7", 600, None),
        )
        .await
        .unwrap();
    assert!(replay.replayed);
    assert_eq!(replay.task.id, submitted[0].id);
    assert_eq!(replay.task.state.as_str(), "CANCELLED");
    assert_eq!(
        f.incomplete_tasks().await,
        1,
        "one waiting task, one charge"
    );
    let events: Vec<(u64, String, String)> =
        sqlx::query_as("SELECT task_id, CAST(event AS CHAR), CAST(detail AS CHAR) FROM orbit_task_event ORDER BY id")
            .fetch_all(f.db.pool())
            .await
            .unwrap();
    assert_eq!(
        events,
        vec![
            (
                submitted[0].id,
                "replaced".to_string(),
                format!("replaced by task {}", submitted[1].id)
            ),
            (
                submitted[1].id,
                "replaced".to_string(),
                format!("replaced by task {}", submitted[2].id)
            ),
        ]
    );
}

#[tokio::test]
async fn debounce_max_seconds_bounds_how_far_a_burst_pushes_run_at() {
    let f = Fixture::new().await;
    let first = f
        .submit_task(&debounced(&f, &f.queue_id, "k", 100, Some(100)))
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let second = f
        .submit_task(&debounced(&f, &f.queue_id, "k", 100, Some(100)))
        .await;
    // Acceptance + 100 s would be later: the burst's bound (first submit + 100 s) wins.
    assert_eq!(second.run_at, first.run_at);
    assert!(second.created_at > first.created_at);
    let until: Option<chrono::NaiveDateTime> =
        sqlx::query_scalar("SELECT debounce_until FROM orbit_task WHERE id = ?")
            .bind(second.id)
            .fetch_one(f.db.pool())
            .await
            .unwrap();
    assert_eq!(until.unwrap().and_utc(), first.run_at);

    // Without a bound, each submit pushes run_at to its own acceptance + debounce_seconds.
    let a = f
        .submit_task(&debounced(&f, &f.queue_id, "free", 100, None))
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let b = f
        .submit_task(&debounced(&f, &f.queue_id, "free", 100, None))
        .await;
    assert!(b.run_at > a.run_at);
    assert_eq!(b.run_at, b.created_at + Duration::seconds(100));
}

#[tokio::test]
async fn debounce_replaces_only_a_waiting_debounced_task_of_the_same_key_and_queue() {
    let f = Fixture::new().await;
    let q2 = f.queue("q2").await;
    let s = f.session("w", true, &[&f.queue_id, &q2]).await;
    let a = f
        .submit_task(&debounced(&f, &f.queue_id, "k", 600, None))
        .await;
    let other_queue = f.submit_task(&debounced(&f, &q2, "k", 600, None)).await;
    let other_key = f
        .submit_task(&debounced(&f, &f.queue_id, "k2", 600, None))
        .await;
    let plain = f.submit(&f.queue_id, "k").await;
    let delayed_k = f
        .submit_task(&delayed(
            &f,
            "k",
            Timing {
                delay_seconds: Some(600),
                ..Default::default()
            },
        ))
        .await;
    for t in [&a, &other_queue, &other_key, &plain, &delayed_k] {
        assert_ne!(get(&f, t.id).await.state.as_str(), "CANCELLED");
    }
    // Once due, a debounced task is past its window: the next submit starts a new burst.
    f.make_due(a.id).await;
    f.db.task_promote_due(100).await.unwrap();
    let next = f
        .submit_task(&debounced(&f, &f.queue_id, "k", 600, None))
        .await;
    assert_ne!(get(&f, a.id).await.state.as_str(), "CANCELLED");
    assert_eq!(lane(&f, next.id).await, "scheduled");
    // `plain` holds the key's ready slot; the promoted debounced task waits behind it.
    let g = f.db.task_claim(s, 10, 30_000).await.unwrap();
    assert!(g.iter().any(|g| g.task.id == plain.id));
    assert!(g.iter().all(|g| g.task.id != a.id));
    // The next debounced submit replaces `next`, not the running or delayed tasks.
    let last = f
        .submit_task(&debounced(&f, &f.queue_id, "k", 600, None))
        .await;
    assert_eq!(get(&f, next.id).await.state.as_str(), "CANCELLED");
    assert_eq!(get(&f, delayed_k.id).await.state.as_str(), "WAITING");
    assert_eq!(get(&f, last.id).await.state.as_str(), "WAITING");
}

#[tokio::test]
async fn a_debounced_replacement_is_accepted_when_the_incomplete_task_quota_is_full() {
    let f = Fixture::new().await;
    sqlx::query("UPDATE orbit_application_quota SET max_incomplete_tasks = 1")
        .execute(f.db.pool())
        .await
        .unwrap();
    let first = f
        .submit_task(&debounced(&f, &f.queue_id, "k", 600, None))
        .await;
    let err =
        f.db.task_submit(&f.hash, "plain", &f.task(&f.queue_id, "other"))
            .await
            .unwrap_err();
    assert!(matches!(err, DbError::QuotaExceeded(_)), "{err:?}");
    let second = f
        .submit_task(&debounced(&f, &f.queue_id, "k", 600, None))
        .await;
    assert_eq!(get(&f, first.id).await.state.as_str(), "CANCELLED");
    assert_eq!(second.state.as_str(), "WAITING");
    assert_eq!(f.incomplete_tasks().await, 1);
    // Cancelling the survivor gives its one charge back.
    f.db.task_cancel(&f.hash, second.id).await.unwrap();
    assert_eq!(f.incomplete_tasks().await, 0);
}

#[tokio::test]
async fn a_batch_takes_the_same_timing_fields() {
    let f = Fixture::new().await;
    let now = db_now(&f).await.with_nanosecond_micros();
    let at = now + Duration::hours(2);
    let unkeyed = |i: usize, timing: Timing| (format!("b-{i}"), delayed(&f, "", timing));
    // Unkeyed: the batch's single insert.
    let items = vec![
        unkeyed(
            0,
            Timing {
                run_at: Some(at),
                ..Default::default()
            },
        ),
        unkeyed(
            1,
            Timing {
                delay_seconds: Some(30),
                ..Default::default()
            },
        ),
        unkeyed(2, Timing::default()),
    ];
    let out = f.db.task_submit_many(&f.hash, &items).await.unwrap();
    assert_eq!(out[0].task.run_at, at);
    assert_eq!(lane(&f, out[0].task.id).await, "scheduled");
    assert!(out[1].task.run_at >= now + Duration::seconds(30));
    assert_eq!(lane(&f, out[1].task.id).await, "scheduled");
    assert_eq!(lane(&f, out[2].task.id).await, "ready");
    // A batch and single submits replay each other with the timing fields too.
    let single = f.db.task_submit(&f.hash, "b-0", &items[0].1).await.unwrap();
    assert!(single.replayed);
    assert_eq!(single.task.id, out[0].task.id);

    // Keyed, with a debounce burst inside one batch: the second replaces the first, one charge.
    let before = f.incomplete_tasks().await;
    let keyed = vec![
        (
            "d-0".to_string(),
            debounced(&f, &f.queue_id, "k", 600, None),
        ),
        (
            "d-1".to_string(),
            debounced(&f, &f.queue_id, "k", 600, None),
        ),
        (
            "d-2".to_string(),
            delayed(
                &f,
                "k",
                Timing {
                    delay_seconds: Some(60),
                    ..Default::default()
                },
            ),
        ),
    ];
    let out = f.db.task_submit_many(&f.hash, &keyed).await.unwrap();
    let first = get(&f, out[0].task.id).await;
    assert_eq!(first.state.as_str(), "CANCELLED");
    assert!(first.error.unwrap().contains(&out[1].task.id.to_string()));
    assert_eq!(lane(&f, out[1].task.id).await, "scheduled");
    assert_eq!(lane(&f, out[2].task.id).await, "scheduled");
    assert_eq!(f.incomplete_tasks().await, before + 2);

    // Bad timing in a batch names the task; nothing is written.
    let bad = vec![
        unkeyed(10, Timing::default()),
        unkeyed(
            11,
            Timing {
                delay_seconds: Some(-5),
                ..Default::default()
            },
        ),
    ];
    match f.db.task_submit_many(&f.hash, &bad).await.unwrap_err() {
        DbError::InvalidArgument(m) => assert!(
            m.contains("tasks[1]: delay_seconds must be between 0"),
            "{m}"
        ),
        e => panic!("{e:?}"),
    }
}

#[tokio::test]
async fn a_full_quota_mid_batch_names_the_first_task_it_cannot_charge_past_a_replacement() {
    let f = Fixture::new().await;
    sqlx::query("UPDATE orbit_application_quota SET max_incomplete_tasks = 2")
        .execute(f.db.pool())
        .await
        .unwrap();
    // Three charges: d-1 replaces d-0 and takes its charge.
    let items = vec![
        (
            "d-0".to_string(),
            debounced(&f, &f.queue_id, "k", 600, None),
        ),
        (
            "d-1".to_string(),
            debounced(&f, &f.queue_id, "k", 600, None),
        ),
        ("p-2".to_string(), f.task(&f.queue_id, "")),
        ("p-3".to_string(), f.task(&f.queue_id, "")),
    ];
    match f.db.task_submit_many(&f.hash, &items).await.unwrap_err() {
        DbError::QuotaExceeded(m) => assert!(m.starts_with("tasks[3]: "), "{m}"),
        e => panic!("{e:?}"),
    }
    assert_eq!(f.incomplete_tasks().await, 0, "nothing was written");
    sqlx::query("UPDATE orbit_application_quota SET max_incomplete_tasks = 3")
        .execute(f.db.pool())
        .await
        .unwrap();
    let out = f.db.task_submit_many(&f.hash, &items).await.unwrap();
    assert_eq!(get(&f, out[0].task.id).await.state.as_str(), "CANCELLED");
    assert_eq!(f.incomplete_tasks().await, 3);
}

#[tokio::test]
async fn the_batch_procedure_reads_run_at_strictly() {
    let f = Fixture::new().await;
    let base = serde_json::json!({
        "idempotency_key": "x", "queue_id": f.queue_id, "handler": "h", "handler_version": "v1",
        "payload_version": "v1", "payload": "{}"
    });
    for (run_at, ok) in [
        (serde_json::json!("2027-01-02 03:04:05"), true),
        (serde_json::json!("2027-01-02 03:04:05.123456"), true),
        (serde_json::json!("2030-02-30 03:04:05"), false),
        (serde_json::json!("2030-01-02T03:04:05Z"), false),
        (serde_json::json!(12345), false),
    ] {
        let mut task = base.clone();
        task["run_at"] = run_at.clone();
        task["idempotency_key"] = format!("x-{run_at}").into();
        let tasks = serde_json::Value::Array(vec![task]).to_string();
        let r = sqlx::query("CALL orbit_task_submit_many(?, ?)")
            .bind(&f.hash[..])
            .bind(&tasks)
            .fetch_all(f.db.pool())
            .await;
        match (r, ok) {
            (Ok(_), true) => {}
            (Err(e), false) => assert!(
                e.to_string()
                    .contains("tasks[0]: run_at must be a UTC time"),
                "{run_at}: {e}"
            ),
            (r, _) => panic!("{run_at}: {r:?}"),
        }
    }
}
