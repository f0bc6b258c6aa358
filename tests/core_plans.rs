//! Plans (SPEC §3): immutable versions, firing idempotent per (plan, slot), keys inherited
//! verbatim, pause, and the same definition rules as a submit.

use chrono::{DateTime, Utc};
use orbit::db::plans::{NewPlan, Plan, PlanSchedule};
use orbit::db::tasks::{NewTask, Task, TaskFilter};
use orbit::db::{Db, DbError};
use orbit::testing::Fixture;
use sqlx::mysql::MySqlPoolOptions;

fn plan(f: &Fixture, name: &str, key: &str) -> NewPlan {
    NewPlan {
        name: name.into(),
        schedule: PlanSchedule::every(60),
        task: f.task(&f.queue_id, key),
    }
}

/// Moves the plan's next slot into the past (a deterministic clock jump); returns the slot.
async fn make_due(f: &Fixture, plan_id: u64, seconds_ago: u32) -> DateTime<Utc> {
    sqlx::query(
        "UPDATE orbit_plan SET next_fire_at = UTC_TIMESTAMP(6) - INTERVAL ? SECOND WHERE id = ?",
    )
    .bind(seconds_ago)
    .bind(plan_id)
    .execute(f.db.pool())
    .await
    .unwrap();
    next_fire_at(f, plan_id).await
}

async fn next_fire_at(f: &Fixture, plan_id: u64) -> DateTime<Utc> {
    let t: chrono::NaiveDateTime =
        sqlx::query_scalar("SELECT next_fire_at FROM orbit_plan WHERE id = ?")
            .bind(plan_id)
            .fetch_one(f.db.pool())
            .await
            .unwrap();
    t.and_utc()
}

async fn fired_tasks(f: &Fixture, plan_id: u64) -> Vec<Task> {
    let mut tasks =
        f.db.task_list(&f.hash, &TaskFilter::default(), 1000, None)
            .await
            .unwrap();
    tasks.retain(|t| t.plan_id == plan_id);
    tasks.reverse();
    tasks
}

async fn count(f: &Fixture, sql: &str, plan_id: u64) -> i64 {
    sqlx::query_scalar(sql)
        .bind(plan_id)
        .fetch_one(f.db.pool())
        .await
        .unwrap()
}

fn invalid(err: DbError) -> String {
    match err {
        DbError::InvalidArgument(m) => m,
        other => panic!("expected INVALID_ARGUMENT, got {other:?}"),
    }
}

#[tokio::test]
async fn create_makes_version_one_and_schedules_the_first_slot() {
    let f = Fixture::new().await;
    let mut p = plan(&f, "nightly", "object/A");
    p.task.business_key = Some("report".into());
    p.task.priority = Some(2);
    let created = f.db.plan_create(&f.hash, &p).await.unwrap();
    assert_eq!(created.current_version, 1);
    assert_eq!((created.name.as_str(), created.paused), ("nightly", false));
    assert_eq!(created.queue_id, f.queue_id);
    assert_eq!(created.namespace_id, f.namespace_id);
    assert_eq!(
        (
            created.schedule_kind.as_str(),
            created.schedule_spec.as_str()
        ),
        ("interval", "60")
    );
    assert_eq!(
        created.next_fire_at.unwrap() - created.created_at,
        chrono::Duration::seconds(60)
    );
    let t = &created.task;
    assert_eq!(t.concurrency_key.as_deref(), Some("object/A"));
    assert_eq!((t.business_key.as_str(), t.priority), ("report", 2));
    // Defaults are stored as effective values, like a submit's.
    assert_eq!(
        (
            t.max_attempts,
            t.retry_base_ms,
            t.retry_max_ms,
            t.deadline_seconds
        ),
        (3, 1000, 300_000, 0)
    );
    assert_eq!(f.db.plan_get(&f.hash, created.id).await.unwrap(), created);
    assert_eq!(
        count(
            &f,
            "SELECT COUNT(*) FROM orbit_plan_version WHERE plan_id = ?",
            created.id
        )
        .await,
        1
    );
    // Names are unique per namespace.
    let err = f.db.plan_create(&f.hash, &p).await.unwrap_err();
    assert!(matches!(err, DbError::StateConflict(_)), "{err:?}");
    // Nothing fires before the slot.
    assert_eq!(f.db.plan_fire_due(100).await.unwrap().count, 0);
}

#[tokio::test]
async fn a_new_version_becomes_current_and_the_old_one_is_unchanged() {
    let f = Fixture::new().await;
    let p =
        f.db.plan_create(&f.hash, &plan(&f, "p", "k1"))
            .await
            .unwrap();
    let v1 = "SELECT CONCAT_WS('|', schedule_kind, schedule_spec, handler, HEX(concurrency_key), payload, \
              priority, created_at) FROM orbit_plan_version WHERE plan_id = ? AND version = 1";
    let before: Vec<u8> = sqlx::query_scalar(v1)
        .bind(p.id)
        .fetch_one(f.db.pool())
        .await
        .unwrap();
    let mut task = f.task(&f.queue_id, "k2");
    task.handler = "other.handler".into();
    task.payload = r#"{"v":2}"#.into();
    let v2 =
        f.db.plan_version_create(&f.hash, p.id, &PlanSchedule::every(30), &task)
            .await
            .unwrap();
    assert_eq!(v2.current_version, 2);
    assert_eq!(v2.schedule_spec, "30");
    assert_eq!(v2.task.concurrency_key.as_deref(), Some("k2"));
    assert_eq!(v2.task.handler, "other.handler");
    assert_eq!(v2.task.payload, r#"{"v":2}"#);
    assert_eq!(v2.created_at, p.created_at);
    assert!(
        v2.next_fire_at < p.next_fire_at,
        "a shorter interval brings the next slot forward"
    );
    let after: Vec<u8> = sqlx::query_scalar(v1)
        .bind(p.id)
        .fetch_one(f.db.pool())
        .await
        .unwrap();
    assert_eq!(before, after, "versions are immutable");
    // A longer interval never pushes the scheduled slot later.
    let v3 =
        f.db.plan_version_create(&f.hash, p.id, &PlanSchedule::every(3600), &task)
            .await
            .unwrap();
    assert_eq!(v3.current_version, 3);
    assert_eq!(v3.next_fire_at, v2.next_fire_at);
    assert_eq!(f.db.plan_get(&f.hash, p.id).await.unwrap(), v3);
}

#[tokio::test]
async fn firing_creates_the_task_with_the_key_verbatim_and_the_plan_version() {
    let f = Fixture::new().await;
    // e + U+0301, with a non-ASCII slash-like character: exact bytes, no normalisation.
    let key = "obj\u{2215}e\u{301}";
    let p =
        f.db.plan_create(&f.hash, &plan(&f, "p", key))
            .await
            .unwrap();
    let slot = make_due(&f, p.id, 1).await;
    let swept = f.db.plan_fire_due(100).await.unwrap();
    assert_eq!(swept.count, 1);
    let tasks = fired_tasks(&f, p.id).await;
    assert_eq!(tasks.len(), 1);
    let t = &tasks[0];
    assert_eq!(t.concurrency_key.as_deref(), Some(key));
    assert_eq!((t.plan_id, t.plan_version), (p.id, 1));
    assert_eq!(t.queue_id, f.queue_id);
    assert_eq!(t.state, orbit::db::tasks::TaskState::Waiting);
    let raw: Vec<u8> = sqlx::query_scalar("SELECT concurrency_key FROM orbit_task WHERE id = ?")
        .bind(t.id)
        .fetch_one(f.db.pool())
        .await
        .unwrap();
    assert_eq!(raw, key.as_bytes());
    // No Idempotency-Key row, one fire row for the slot, and the task counts against the quota.
    let idem: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orbit_idempotency")
        .fetch_one(f.db.pool())
        .await
        .unwrap();
    assert_eq!(idem, 0);
    let (fired_slot, task_id): (chrono::NaiveDateTime, u64) =
        sqlx::query_as("SELECT scheduled_for, task_id FROM orbit_plan_fire WHERE plan_id = ?")
            .bind(p.id)
            .fetch_one(f.db.pool())
            .await
            .unwrap();
    assert_eq!((fired_slot.and_utc(), task_id), (slot, t.id));
    let incomplete: u64 = sqlx::query_scalar(
        "SELECT CAST(SUM(incomplete_tasks) AS UNSIGNED) FROM orbit_application_quota",
    )
    .fetch_one(f.db.pool())
    .await
    .unwrap();
    assert_eq!(incomplete, 1);
    // The next slot is one interval after the fired one, and reported to the scheduler.
    let next = next_fire_at(&f, p.id).await;
    assert_eq!(next - slot, chrono::Duration::seconds(60));
    assert_eq!(swept.next_due_at, Some(next));
    // A fired keyed task is claimed like a submitted one.
    let s = f.session("w", true, &[&f.queue_id]).await;
    let g = f.db.task_claim(s, 10, 30_000).await.unwrap();
    assert_eq!(g.len(), 1);
    assert_eq!(g[0].task.id, t.id);
    assert!(g[0].concurrency_token > 0);
}

#[tokio::test]
async fn two_servers_firing_at_once_create_one_task_per_slot() {
    let f = Fixture::new().await;
    let p =
        f.db.plan_create(&f.hash, &plan(&f, "p", "k"))
            .await
            .unwrap();
    // Six "servers", each with its own connection.
    let mut servers = Vec::new();
    for _ in 0..6 {
        let pool = MySqlPoolOptions::new()
            .max_connections(1)
            .connect(&f.test_db.dsn)
            .await
            .unwrap();
        servers.push(Db::new(pool));
    }
    for round in 1..=5 {
        make_due(&f, p.id, 1).await;
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(servers.len()));
        let handles: Vec<_> = servers
            .iter()
            .map(|db| {
                let (db, barrier) = (db.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    db.plan_fire_due(100).await.unwrap().count
                })
            })
            .collect();
        let mut fired = 0;
        for h in handles {
            fired += h.await.unwrap();
        }
        assert_eq!(fired, 1, "round {round}");
        assert_eq!(fired_tasks(&f, p.id).await.len(), round);
    }
    assert_eq!(
        count(
            &f,
            "SELECT COUNT(*) FROM orbit_plan_fire WHERE plan_id = ?",
            p.id
        )
        .await,
        5
    );

    // Setting next_fire_at back to a slot that already fired fires nothing (primary key).
    let slot: chrono::NaiveDateTime =
        sqlx::query_scalar("SELECT MAX(scheduled_for) FROM orbit_plan_fire WHERE plan_id = ?")
            .bind(p.id)
            .fetch_one(f.db.pool())
            .await
            .unwrap();
    sqlx::query("UPDATE orbit_plan SET next_fire_at = ? WHERE id = ?")
        .bind(slot)
        .bind(p.id)
        .execute(f.db.pool())
        .await
        .unwrap();
    assert_eq!(f.db.plan_fire_due(100).await.unwrap().count, 0);
    assert_eq!(fired_tasks(&f, p.id).await.len(), 5);
    assert!(
        next_fire_at(&f, p.id).await > Utc::now() - chrono::Duration::seconds(5),
        "the plan still advanced"
    );
}

#[tokio::test]
async fn missed_slots_are_skipped_not_fired_in_a_burst() {
    let f = Fixture::new().await;
    let p = f.db.plan_create(&f.hash, &plan(&f, "p", "")).await.unwrap();
    // Ten and a half intervals late: one fire for the oldest slot, then the first slot after now.
    let slot = make_due(&f, p.id, 630).await;
    assert_eq!(f.db.plan_fire_due(100).await.unwrap().count, 1);
    assert_eq!(f.db.plan_fire_due(100).await.unwrap().count, 0);
    assert_eq!(fired_tasks(&f, p.id).await.len(), 1);
    assert_eq!(
        next_fire_at(&f, p.id).await - slot,
        chrono::Duration::seconds(11 * 60)
    );
}

#[tokio::test]
async fn paused_plans_do_not_fire_and_resume_skips_what_was_missed() {
    let f = Fixture::new().await;
    let p =
        f.db.plan_create(&f.hash, &plan(&f, "p", "k"))
            .await
            .unwrap();
    let paused = f.db.plan_set_paused(&f.hash, p.id, true).await.unwrap();
    assert!(paused.paused);
    assert_eq!(
        f.db.plan_set_paused(&f.hash, p.id, true).await.unwrap(),
        paused,
        "idempotent"
    );
    let slot = make_due(&f, p.id, 300).await;
    let swept = f.db.plan_fire_due(100).await.unwrap();
    assert_eq!(swept.count, 0);
    assert_eq!(swept.next_due_at, None, "no active plan");
    let resumed = f.db.plan_set_paused(&f.hash, p.id, false).await.unwrap();
    assert!(!resumed.paused);
    assert_eq!(
        resumed.next_fire_at.unwrap() - slot,
        chrono::Duration::seconds(6 * 60),
        "the first whole interval after now"
    );
    assert_eq!(f.db.plan_fire_due(100).await.unwrap().count, 0);
    assert!(fired_tasks(&f, p.id).await.is_empty());
}

#[tokio::test]
async fn later_fires_use_the_new_version_and_earlier_tasks_keep_theirs() {
    let f = Fixture::new().await;
    let p =
        f.db.plan_create(&f.hash, &plan(&f, "p", "k1"))
            .await
            .unwrap();
    make_due(&f, p.id, 1).await;
    assert_eq!(f.db.plan_fire_due(100).await.unwrap().count, 1);
    f.db.plan_version_create(&f.hash, p.id, &PlanSchedule::every(60), &f.task(&f.queue_id, "k2"))
        .await
        .unwrap();
    make_due(&f, p.id, 1).await;
    assert_eq!(f.db.plan_fire_due(100).await.unwrap().count, 1);
    f.db.plan_version_create(&f.hash, p.id, &PlanSchedule::every(60), &f.task(&f.queue_id, ""))
        .await
        .unwrap();
    make_due(&f, p.id, 1).await;
    assert_eq!(f.db.plan_fire_due(100).await.unwrap().count, 1);
    let fired: Vec<(Option<String>, u32)> = fired_tasks(&f, p.id)
        .await
        .into_iter()
        .map(|t| (t.concurrency_key, t.plan_version))
        .collect();
    assert_eq!(
        fired,
        [(Some("k1".into()), 1), (Some("k2".into()), 2), (None, 3)]
    );
}

#[tokio::test]
async fn a_full_quota_skips_the_slot_and_the_call_goes_on() {
    let f = Fixture::new().await;
    let a =
        f.db.plan_create(&f.hash, &plan(&f, "a", "k"))
            .await
            .unwrap();
    let b = f.db.plan_create(&f.hash, &plan(&f, "b", "")).await.unwrap();
    f.submit(&f.queue_id, "").await;
    sqlx::query("UPDATE orbit_application_quota SET max_incomplete_tasks = 1")
        .execute(f.db.pool())
        .await
        .unwrap();
    make_due(&f, a.id, 1).await;
    make_due(&f, b.id, 2).await;
    let swept = f.db.plan_fire_due(100).await.unwrap();
    assert_eq!(swept.count, 0);
    for p in [&a, &b] {
        assert!(fired_tasks(&f, p.id).await.is_empty());
        assert_eq!(
            count(
                &f,
                "SELECT COUNT(*) FROM orbit_plan_fire WHERE plan_id = ?",
                p.id
            )
            .await,
            0,
            "nothing recorded for a skipped slot"
        );
        assert!(next_fire_at(&f, p.id).await > Utc::now() - chrono::Duration::seconds(5));
    }
    let resources: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orbit_resource")
        .fetch_one(f.db.pool())
        .await
        .unwrap();
    assert_eq!(resources, 0, "the refused task's writes were rolled back");
    // With room again, the next slot fires.
    sqlx::query("UPDATE orbit_application_quota SET max_incomplete_tasks = 10")
        .execute(f.db.pool())
        .await
        .unwrap();
    make_due(&f, a.id, 1).await;
    assert_eq!(f.db.plan_fire_due(100).await.unwrap().count, 1);
}

#[tokio::test]
async fn invalid_definitions_name_the_field() {
    let f = Fixture::new().await;
    type Mutate = Box<dyn Fn(&mut NewPlan)>;
    let cases: Vec<(Mutate, &str)> = vec![
        (
            Box::new(|p| p.task.concurrency_key = None),
            "concurrency_key",
        ),
        (
            Box::new(|p| p.task.concurrency_key = Some(" lead".into())),
            "concurrency_key",
        ),
        (
            Box::new(|p| p.task.concurrency_key = Some("a\u{7}b".into())),
            "concurrency_key",
        ),
        (
            Box::new(|p| p.task.concurrency_key = Some("x".repeat(192))),
            "concurrency_key",
        ),
        (Box::new(|p| p.schedule.interval_seconds = Some(0)), "interval_seconds"),
        (
            Box::new(|p| p.schedule.interval_seconds = Some(31_536_001)),
            "interval_seconds",
        ),
        (Box::new(|p| p.name = String::new()), "name"),
        (Box::new(|p| p.task.handler = String::new()), "handler"),
        (Box::new(|p| p.task.payload = "{nope".into()), "payload"),
        (Box::new(|p| p.task.priority = Some(10)), "priority"),
        (Box::new(|p| p.task.max_attempts = Some(0)), "max_attempts"),
        (
            Box::new(|p| p.task.deadline_seconds = Some(-1)),
            "deadline_seconds",
        ),
    ];
    for (mutate, field) in &cases {
        let mut p = plan(&f, "p", "k");
        mutate(&mut p);
        let m = invalid(f.db.plan_create(&f.hash, &p).await.unwrap_err());
        assert!(m.starts_with(field), "{field}: {m}");
    }
    // The same rules for a new version.
    let p =
        f.db.plan_create(&f.hash, &plan(&f, "p", "k"))
            .await
            .unwrap();
    let mut null_key: NewTask = f.task(&f.queue_id, "");
    null_key.concurrency_key = None;
    let m = invalid(
        f.db.plan_version_create(&f.hash, p.id, &PlanSchedule::every(60), &null_key)
            .await
            .unwrap_err(),
    );
    assert!(m.starts_with("concurrency_key"), "{m}");
    let m = invalid(
        f.db.plan_version_create(&f.hash, p.id, &PlanSchedule::every(0), &f.task(&f.queue_id, ""))
            .await
            .unwrap_err(),
    );
    assert!(m.starts_with("interval_seconds"), "{m}");
    assert_eq!(
        count(
            &f,
            "SELECT COUNT(*) FROM orbit_plan_version WHERE plan_id = ?",
            p.id
        )
        .await,
        1,
        "no version was added"
    );
}

#[tokio::test]
async fn plans_stay_within_the_credential_scope() {
    let f = Fixture::new().await;
    let p: Plan = f.db.plan_create(&f.hash, &plan(&f, "p", "")).await.unwrap();
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
    .unwrap();
    let other = orbit::auth::token_hash(&other);
    for err in [
        f.db.plan_get(&other, p.id).await.unwrap_err(),
        f.db.plan_set_paused(&other, p.id, true).await.unwrap_err(),
        f.db.plan_version_create(&other, p.id, &PlanSchedule::every(60), &f.task(&f.queue_id, ""))
            .await
            .unwrap_err(),
        f.db.plan_get(&f.hash, 424_242).await.unwrap_err(),
    ] {
        assert!(matches!(err, DbError::NotFound(_)), "{err:?}");
    }
    // Creating needs queues:manage; reading needs tasks:read.
    let reader = orbit::auth::generate_token();
    f.db.credential_create(&orbit::db::credentials::NewCredential {
        application: "app".into(),
        environment: "test".into(),
        namespace: "default".into(),
        token_hash: orbit::auth::token_hash(&reader).to_vec(),
        token_hint: orbit::auth::token_hint(&reader),
        scopes: vec!["tasks:read".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    let reader = orbit::auth::token_hash(&reader);
    assert!(matches!(
        f.db.plan_create(&reader, &plan(&f, "q", ""))
            .await
            .unwrap_err(),
        DbError::PermissionDenied(_)
    ));
    assert_eq!(f.db.plan_get(&reader, p.id).await.unwrap().id, p.id);
}
