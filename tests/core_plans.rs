//! Plans (SPEC §3): immutable versions, firing idempotent per (plan, slot), keys inherited
//! verbatim, pause, and the same definition rules as a submit.

use chrono::{DateTime, Utc};
use orbit::db::plans::{NewPlan, Plan, PlanSchedule};
use orbit::db::tasks::{NewTask, Task, TaskFilter};
use orbit::db::{Db, DbError};
use orbit::schedule::{CatchUp, CronSchedule, OnBusy, CATCH_UP_ALL_MAX, MISSED_GRACE_SECONDS};
use orbit::testing::{Counters, Fixture};
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
    let incomplete = f.incomplete_tasks().await;
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
    // The view lists the times it would have once resumed: whole intervals after now.
    let now = Utc::now();
    let upcoming = f.db.plan_get(&f.hash, p.id).await.unwrap().upcoming(now, 5);
    assert!(upcoming[0] > now && upcoming[0] - now <= chrono::Duration::seconds(60));
    assert_eq!(
        (upcoming[0] - slot).num_microseconds().unwrap() % 60_000_000,
        0
    );
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
    f.db.plan_version_create(
        &f.hash,
        p.id,
        &PlanSchedule::every(60),
        &f.task(&f.queue_id, "k2"),
    )
    .await
    .unwrap();
    make_due(&f, p.id, 1).await;
    assert_eq!(f.db.plan_fire_due(100).await.unwrap().count, 1);
    f.db.plan_version_create(
        &f.hash,
        p.id,
        &PlanSchedule::every(60),
        &f.task(&f.queue_id, ""),
    )
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
        (
            Box::new(|p| p.schedule.interval_seconds = Some(0)),
            "interval_seconds",
        ),
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
        f.db.plan_version_create(
            &f.hash,
            p.id,
            &PlanSchedule::every(0),
            &f.task(&f.queue_id, ""),
        )
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
        f.db.plan_version_create(
            &other,
            p.id,
            &PlanSchedule::every(60),
            &f.task(&f.queue_id, ""),
        )
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

fn cron_plan(f: &Fixture, name: &str, key: &str, expr: &str, tz: &str) -> NewPlan {
    NewPlan {
        name: name.into(),
        schedule: PlanSchedule::cron(expr, tz),
        task: f.task(&f.queue_id, key),
    }
}

async fn schedule_after(f: &Fixture, plan_id: u64) -> Option<DateTime<Utc>> {
    let t: Option<chrono::NaiveDateTime> =
        sqlx::query_scalar("SELECT schedule_after FROM orbit_plan WHERE id = ?")
            .bind(plan_id)
            .fetch_one(f.db.pool())
            .await
            .unwrap();
    t.map(|t| t.and_utc())
}

async fn stored_next(f: &Fixture, plan_id: u64) -> Option<DateTime<Utc>> {
    let t: Option<chrono::NaiveDateTime> =
        sqlx::query_scalar("SELECT next_fire_at FROM orbit_plan WHERE id = ?")
            .bind(plan_id)
            .fetch_one(f.db.pool())
            .await
            .unwrap();
    t.map(|t| t.and_utc())
}

/// The plan's fire rows: (slot, outcome, task id), oldest first.
async fn fires(f: &Fixture, plan_id: u64) -> Vec<(DateTime<Utc>, String, u64)> {
    let rows: Vec<(chrono::NaiveDateTime, Vec<u8>, u64)> = sqlx::query_as(
        "SELECT scheduled_for, CAST(outcome AS BINARY), task_id FROM orbit_plan_fire WHERE plan_id = ? ORDER BY scheduled_for",
    )
    .bind(plan_id)
    .fetch_all(f.db.pool())
    .await
    .unwrap();
    rows.into_iter()
        .map(|(t, o, id)| (t.and_utc(), String::from_utf8(o).unwrap(), id))
        .collect()
}

#[tokio::test]
async fn a_cron_plan_gets_its_next_fire_time_from_the_server_after_each_fire() {
    let f = Fixture::new().await;
    let p = cron_plan(&f, "weekday", "k", "30 2 * * 1-5", "Europe/Berlin");
    let created = f.db.plan_create(&f.hash, &p).await.unwrap();
    assert_eq!(
        (
            created.schedule_kind.as_str(),
            created.schedule_spec.as_str(),
            created.timezone.as_str()
        ),
        ("cron", "30 2 * * 1-5", "Europe/Berlin")
    );
    assert_eq!(
        (created.catch_up.as_str(), created.on_busy.as_str()),
        ("one", "queue")
    );
    // Not computed yet: anchored at the creation time, and the view already knows the answer.
    assert_eq!(created.next_fire_at, None);
    assert_eq!(created.schedule_after, Some(created.created_at));
    let cron = CronSchedule::parse("30 2 * * 1-5", "Europe/Berlin").unwrap();
    let first = cron.after(created.created_at).unwrap();
    let upcoming = created.upcoming(Utc::now(), 5);
    assert_eq!(upcoming.len(), 5);
    assert_eq!(upcoming[0], first);
    assert_eq!(upcoming[1], cron.after(first).unwrap());
    // The scheduler's step stores it; a second round finds nothing to do.
    let stored = f.db.plan_schedule_round(100).await.unwrap();
    assert_eq!(stored.count, 1);
    assert_eq!(stored_next(&f, created.id).await, Some(first));
    assert_eq!(f.db.plan_schedule_round(100).await.unwrap().count, 0);
    let got = f.db.plan_get(&f.hash, created.id).await.unwrap();
    assert_eq!(got.upcoming(Utc::now(), 5), upcoming);

    // It fires when due: the slot is recorded, the plan waits for its next time after the slot.
    let slot = make_due(&f, created.id, 1).await;
    assert_eq!(f.db.plan_fire_due(100).await.unwrap().count, 1);
    assert_eq!(fired_tasks(&f, created.id).await.len(), 1);
    assert_eq!(stored_next(&f, created.id).await, None);
    let anchor = schedule_after(&f, created.id).await.unwrap();
    assert!(anchor > slot, "catch_up one anchors at the firing time");
    // Nothing fires while the next time is not stored (a crash here loses nothing: any
    // server's next round computes it).
    assert_eq!(f.db.plan_fire_due(100).await.unwrap().count, 0);
    assert_eq!(f.db.plan_schedule_round(100).await.unwrap().count, 1);
    assert_eq!(stored_next(&f, created.id).await, cron.after(anchor));
    assert_eq!(f.db.plan_fire_due(100).await.unwrap().count, 0);
    assert_eq!(fired_tasks(&f, created.id).await.len(), 1);
}

#[tokio::test]
async fn a_stale_next_fire_time_is_not_stored() {
    let f = Fixture::new().await;
    let p =
        f.db.plan_create(&f.hash, &cron_plan(&f, "p", "", "* * * * *", "UTC"))
            .await
            .unwrap();
    let after = schedule_after(&f, p.id).await.unwrap();
    let next = after + chrono::Duration::minutes(1);
    // Computed from another anchor (the plan was resumed or re-versioned meanwhile): ignored.
    let stale = orbit::db::plans::NextFire {
        plan_id: p.id,
        after: after - chrono::Duration::seconds(1),
        next,
    };
    assert_eq!(f.db.plan_schedule_set(&[stale]).await.unwrap().count, 0);
    assert_eq!(stored_next(&f, p.id).await, None);
    let fresh = orbit::db::plans::NextFire {
        plan_id: p.id,
        after,
        next,
    };
    assert_eq!(
        f.db.plan_schedule_set(std::slice::from_ref(&fresh))
            .await
            .unwrap()
            .count,
        1
    );
    // A second server storing the same answer changes nothing.
    assert_eq!(f.db.plan_schedule_set(&[fresh]).await.unwrap().count, 0);
    assert_eq!(stored_next(&f, p.id).await, Some(next));
    let e = f.db.plan_schedule_set(&[]).await.unwrap_err();
    assert!(invalid(e).starts_with("items"));
}

#[tokio::test]
async fn versions_pause_and_resume_move_between_interval_and_cron() {
    let f = Fixture::new().await;
    let p = f.db.plan_create(&f.hash, &plan(&f, "p", "")).await.unwrap();
    // Interval -> cron: the next time is computed from now.
    let v2 =
        f.db.plan_version_create(
            &f.hash,
            p.id,
            &PlanSchedule::cron("0 12 * * *", "Asia/Tokyo"),
            &f.task(&f.queue_id, ""),
        )
        .await
        .unwrap();
    assert_eq!((v2.schedule_kind.as_str(), v2.next_fire_at), ("cron", None));
    assert_eq!(v2.schedule_after, Some(v2.updated_at));
    f.db.plan_schedule_round(100).await.unwrap();
    let cron = CronSchedule::parse("0 12 * * *", "Asia/Tokyo").unwrap();
    assert_eq!(stored_next(&f, p.id).await, cron.after(v2.updated_at));
    // Pause keeps it; resume computes it again from the moment of resuming.
    let paused = f.db.plan_set_paused(&f.hash, p.id, true).await.unwrap();
    assert_eq!(paused.next_fire_at, cron.after(v2.updated_at));
    let resumed = f.db.plan_set_paused(&f.hash, p.id, false).await.unwrap();
    assert_eq!(resumed.next_fire_at, None);
    assert_eq!(resumed.schedule_after, Some(resumed.updated_at));
    // Cron -> interval: now + interval, even while the cron time was not stored.
    let v3 =
        f.db.plan_version_create(
            &f.hash,
            p.id,
            &PlanSchedule::every(90),
            &f.task(&f.queue_id, ""),
        )
        .await
        .unwrap();
    assert_eq!(
        v3.next_fire_at.map(|n| n - v3.updated_at),
        Some(chrono::Duration::seconds(90))
    );
    assert_eq!(
        (v3.schedule_kind.as_str(), v3.schedule_after),
        ("interval", None)
    );
    assert_eq!(f.db.plan_schedule_round(100).await.unwrap().count, 0);
}

#[tokio::test]
async fn schedule_rules_name_the_field() {
    let f = Fixture::new().await;
    let cases: Vec<(PlanSchedule, &str)> = vec![
        (PlanSchedule::default(), "schedule"),
        (
            PlanSchedule {
                interval_seconds: Some(60),
                cron: Some("* * * * *".into()),
                ..Default::default()
            },
            "schedule",
        ),
        (
            PlanSchedule {
                timezone: Some("UTC".into()),
                ..PlanSchedule::every(60)
            },
            "timezone",
        ),
        (PlanSchedule::cron(&"1".repeat(192), "UTC"), "cron"),
        (PlanSchedule::cron("* * * * *", &"Z".repeat(65)), "timezone"),
        (
            PlanSchedule {
                on_busy: Some(OnBusy::Skip),
                ..PlanSchedule::every(60)
            },
            "on_busy",
        ),
        (
            PlanSchedule {
                on_busy: Some(OnBusy::ReplaceWaiting),
                ..PlanSchedule::every(60)
            },
            "on_busy",
        ),
    ];
    for (schedule, field) in cases {
        let p = NewPlan {
            name: "p".into(),
            schedule: schedule.clone(),
            task: f.task(&f.queue_id, ""),
        };
        let m = invalid(f.db.plan_create(&f.hash, &p).await.unwrap_err());
        assert!(m.starts_with(field), "{schedule:?}: {m}");
    }
    // A cron plan without a zone is read in UTC.
    let p = NewPlan {
        name: "utc".into(),
        schedule: PlanSchedule {
            cron: Some("0 * * * *".into()),
            ..Default::default()
        },
        task: f.task(&f.queue_id, ""),
    };
    assert_eq!(f.db.plan_create(&f.hash, &p).await.unwrap().timezone, "UTC");
}

#[tokio::test]
async fn catch_up_all_fires_each_missed_interval_slot_up_to_the_bound() {
    let f = Fixture::new().await;
    let mut p = plan(&f, "p", "");
    p.schedule.catch_up = Some(CatchUp::All);
    let p = f.db.plan_create(&f.hash, &p).await.unwrap();
    assert_eq!(p.catch_up, "all");
    // Ten and a half intervals late: the due slot and the ten after it, oldest first.
    let slot = make_due(&f, p.id, 630).await;
    assert_eq!(f.db.plan_fire_due(1000).await.unwrap().count, 11);
    let fired = fires(&f, p.id).await;
    let expected: Vec<_> = (0..11)
        .map(|i| slot + chrono::Duration::seconds(60 * i))
        .collect();
    assert_eq!(fired.iter().map(|r| r.0).collect::<Vec<_>>(), expected);
    assert_eq!(fired_tasks(&f, p.id).await.len(), 11);
    assert_eq!(
        next_fire_at(&f, p.id).await - slot,
        chrono::Duration::seconds(11 * 60)
    );
    // After a long stop: the due slot, then only the CATCH_UP_ALL_MAX most recent.
    let slot = make_due(&f, p.id, 60 * 1000 + 30).await;
    let n = u64::from(CATCH_UP_ALL_MAX);
    assert_eq!(f.db.plan_fire_due(1000).await.unwrap().count, 1 + n);
    let recent: Vec<_> = fires(&f, p.id)
        .await
        .into_iter()
        .map(|r| r.0)
        .filter(|t| !fired.iter().any(|e| e.0 == *t))
        .collect();
    assert_eq!(recent.len() as u64, 1 + n);
    assert_eq!(recent[0], slot);
    assert_eq!(
        recent[1] - slot,
        chrono::Duration::seconds(60 * (1000 - n as i64 + 1))
    );
    assert!(next_fire_at(&f, p.id).await > Utc::now());
}

#[tokio::test]
async fn catch_up_none_fires_no_late_slot() {
    let f = Fixture::new().await;
    let mut p = plan(&f, "p", "");
    p.schedule.catch_up = Some(CatchUp::None);
    let p = f.db.plan_create(&f.hash, &p).await.unwrap();
    // Within the grace: fires.
    make_due(&f, p.id, 5).await;
    assert_eq!(f.db.plan_fire_due(100).await.unwrap().count, 1);
    // Later than the grace: missed, nothing created or recorded, the plan moves on.
    let late = MISSED_GRACE_SECONDS as u32 + 30;
    make_due(&f, p.id, late).await;
    assert_eq!(f.db.plan_fire_due(100).await.unwrap().count, 0);
    assert_eq!(fired_tasks(&f, p.id).await.len(), 1);
    assert_eq!(fires(&f, p.id).await.len(), 1);
    assert!(next_fire_at(&f, p.id).await > Utc::now());

    // The same for a cron plan: a late slot is not fired, and the next one is after now.
    let mut c = cron_plan(&f, "c", "", "* * * * *", "UTC");
    c.schedule.catch_up = Some(CatchUp::None);
    let c = f.db.plan_create(&f.hash, &c).await.unwrap();
    f.db.plan_schedule_round(100).await.unwrap();
    make_due(&f, c.id, late).await;
    assert_eq!(f.db.plan_fire_due(100).await.unwrap().count, 0);
    assert!(fires(&f, c.id).await.is_empty());
    f.db.plan_schedule_round(100).await.unwrap();
    assert!(stored_next(&f, c.id).await.unwrap() > Utc::now());
}

#[tokio::test]
async fn a_cron_plan_with_catch_up_all_fires_every_missed_minute() {
    let f = Fixture::new().await;
    let mut c = cron_plan(&f, "c", "", "* * * * *", "UTC");
    c.schedule.catch_up = Some(CatchUp::All);
    let c = f.db.plan_create(&f.hash, &c).await.unwrap();
    // The stored slot is five whole minutes ago: it and the four after it are due.
    let now = Utc::now();
    let slot = CronSchedule::parse("* * * * *", "UTC")
        .unwrap()
        .after(now - chrono::Duration::minutes(6))
        .unwrap();
    sqlx::query("UPDATE orbit_plan SET next_fire_at = ?, schedule_after = NULL WHERE id = ?")
        .bind(slot.naive_utc())
        .bind(c.id)
        .execute(f.db.pool())
        .await
        .unwrap();
    let mut rounds = 0;
    while fires(&f, c.id).await.len() < 6 && rounds < 20 {
        f.db.plan_fire_due(100).await.unwrap();
        f.db.plan_schedule_round(100).await.unwrap();
        rounds += 1;
    }
    let fired: Vec<_> = fires(&f, c.id).await.into_iter().map(|r| r.0).collect();
    let expected: Vec<_> = (0..fired.len() as i64)
        .map(|i| slot + chrono::Duration::minutes(i))
        .collect();
    assert!(fired.len() >= 5, "{fired:?}");
    assert_eq!(fired, expected, "each missed minute once, in order");
}

#[tokio::test]
async fn on_busy_skip_records_the_tick_and_creates_nothing_while_the_key_is_busy() {
    let f = Fixture::new().await;
    let mut p = plan(&f, "p", "busy/1");
    p.schedule.on_busy = Some(OnBusy::Skip);
    let p = f.db.plan_create(&f.hash, &p).await.unwrap();
    assert_eq!(p.on_busy, "skip");
    // A never-used key is free: the first tick creates the task.
    let slot1 = make_due(&f, p.id, 1).await;
    assert_eq!(f.db.plan_fire_due(100).await.unwrap().count, 1);
    let first = fired_tasks(&f, p.id).await;
    assert_eq!(first.len(), 1);
    // That task waits for the key: the next tick is skipped, and the history says so.
    let slot2 = make_due(&f, p.id, 1).await;
    assert_eq!(f.db.plan_fire_due(100).await.unwrap().count, 1);
    assert_eq!(fired_tasks(&f, p.id).await.len(), 1);
    // Claimed and running (the key is held): skipped again.
    let s = f.session("w", true, &[&f.queue_id]).await;
    let g = f.db.task_claim(s, 10, 30_000).await.unwrap();
    assert_eq!(g.len(), 1);
    let slot3 = make_due(&f, p.id, 1).await;
    f.db.plan_fire_due(100).await.unwrap();
    assert_eq!(fired_tasks(&f, p.id).await.len(), 1);
    // A task of the same key submitted by hand counts too (the key, not the plan, is busy).
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
    let other = f.submit(&f.queue_id, "busy/1").await;
    let slot4 = make_due(&f, p.id, 1).await;
    f.db.plan_fire_due(100).await.unwrap();
    assert_eq!(fired_tasks(&f, p.id).await.len(), 1);
    // Free again: the tick creates a task.
    f.db.task_cancel(&f.hash, other.id).await.unwrap();
    let slot5 = make_due(&f, p.id, 1).await;
    f.db.plan_fire_due(100).await.unwrap();
    let tasks = fired_tasks(&f, p.id).await;
    assert_eq!(tasks.len(), 2);
    assert_eq!(
        fires(&f, p.id).await,
        [
            (slot1, "created".into(), first[0].id),
            (slot2, "skipped".into(), 0),
            (slot3, "skipped".into(), 0),
            (slot4, "skipped".into(), 0),
            (slot5, "created".into(), tasks[1].id),
        ]
    );
}

#[tokio::test]
async fn on_busy_replace_waiting_keeps_one_waiting_task_per_plan_and_key() {
    let f = Fixture::new().await;
    // Another task holds the key.
    let holder = f.submit(&f.queue_id, "rw/1").await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap();
    assert_eq!(g[0].task.id, holder.id);
    let mut p = plan(&f, "p", "rw/1");
    p.schedule.on_busy = Some(OnBusy::ReplaceWaiting);
    let p = f.db.plan_create(&f.hash, &p).await.unwrap();
    // The first tick queues a task behind the holder.
    let slot1 = make_due(&f, p.id, 1).await;
    f.db.plan_fire_due(100).await.unwrap();
    let waiting = fired_tasks(&f, p.id).await;
    assert_eq!(waiting.len(), 1);
    assert_eq!(f.lane(waiting[0].id).await, "blocked");
    // The next ticks keep that waiting task instead of adding more.
    let slot2 = make_due(&f, p.id, 1).await;
    f.db.plan_fire_due(100).await.unwrap();
    let slot3 = make_due(&f, p.id, 1).await;
    f.db.plan_fire_due(100).await.unwrap();
    assert_eq!(fired_tasks(&f, p.id).await.len(), 1);
    // Once it runs (no longer waiting), the next tick queues a new one.
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
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap();
    assert_eq!(g[0].task.id, waiting[0].id);
    let slot4 = make_due(&f, p.id, 1).await;
    f.db.plan_fire_due(100).await.unwrap();
    let tasks = fired_tasks(&f, p.id).await;
    assert_eq!(tasks.len(), 2);
    assert_eq!(
        fires(&f, p.id).await,
        [
            (slot1, "created".into(), waiting[0].id),
            (slot2, "kept".into(), waiting[0].id),
            (slot3, "kept".into(), waiting[0].id),
            (slot4, "created".into(), tasks[1].id),
        ]
    );
}

#[tokio::test]
async fn several_schedulers_fire_each_cron_tick_once() {
    let f = Fixture::new().await;
    // Every second, catch_up all: no tick may be lost or fired twice, even when a scheduler
    // falls behind.
    let mut ids = Vec::new();
    for i in 0..20 {
        let mut c = cron_plan(&f, &format!("p{i}"), "", "* * * * * *", "UTC");
        c.schedule.catch_up = Some(CatchUp::All);
        ids.push(f.db.plan_create(&f.hash, &c).await.unwrap().id);
    }
    let start = Utc::now();
    let until = start + chrono::Duration::seconds(4);
    // Four "servers", each with its own pool, run the scheduler's round until every plan has
    // fired the slots up to `until`.
    let mut handles = Vec::new();
    for _ in 0..4 {
        let pool = MySqlPoolOptions::new()
            .max_connections(1)
            .connect(&f.test_db.dsn)
            .await
            .unwrap();
        let db = Db::new(pool);
        let ids = ids.clone();
        handles.push(tokio::spawn(async move {
            loop {
                let (_, sleep) = orbit::scheduler::tick(&db, 60_000).await.unwrap();
                let done: i64 = sqlx::query_scalar(
                    "SELECT COUNT(*) FROM orbit_plan p WHERE p.next_fire_at > ?",
                )
                .bind(until.naive_utc())
                .fetch_one(db.pool())
                .await
                .unwrap();
                if done as usize == ids.len() {
                    break;
                }
                tokio::time::sleep(sleep).await;
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    for id in ids {
        let fired = fires(&f, id).await;
        assert!(fired.len() >= 4, "plan {id}: {fired:?}");
        for pair in fired.windows(2) {
            assert_eq!(
                pair[1].0 - pair[0].0,
                chrono::Duration::seconds(1),
                "plan {id}: consecutive seconds, none lost"
            );
        }
        assert!(fired.iter().all(|r| r.1 == "created"));
        let tasks = count(&f, "SELECT COUNT(*) FROM orbit_task WHERE plan_id = ?", id).await;
        assert_eq!(tasks as usize, fired.len(), "plan {id}: one task per tick");
    }
}

#[tokio::test]
async fn unkeyed_plans_fire_in_batches_and_keyed_ones_alone_each_once() {
    let f = Fixture::new().await;
    let mut ids = Vec::new();
    for i in 0..50 {
        // Every tenth plan has a key: it fires in a transaction of its own, between batches.
        let key = if i % 10 == 5 {
            format!("k/{i}")
        } else {
            String::new()
        };
        ids.push(
            f.db.plan_create(&f.hash, &plan(&f, &format!("p{i}"), &key))
                .await
                .unwrap()
                .id,
        );
    }
    sqlx::query("UPDATE orbit_plan SET next_fire_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND")
        .execute(f.db.pool())
        .await
        .unwrap();
    assert_eq!(f.db.plan_fire_due(1000).await.unwrap().count, 50);
    for (i, id) in ids.iter().enumerate() {
        let tasks = fired_tasks(&f, *id).await;
        assert_eq!(tasks.len(), 1, "plan {i}");
        assert_eq!(tasks[0].concurrency_key.is_some(), i % 10 == 5, "plan {i}");
        assert_eq!(fires(&f, *id).await.len(), 1);
    }
    // A limit smaller than a batch stops there, and commits what it fired.
    sqlx::query("UPDATE orbit_plan SET next_fire_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND")
        .execute(f.db.pool())
        .await
        .unwrap();
    assert_eq!(f.db.plan_fire_due(7).await.unwrap().count, 7);
    assert_eq!(f.db.plan_fire_due(1000).await.unwrap().count, 43);
    assert_eq!(f.db.plan_fire_due(1000).await.unwrap().count, 0);
}

/// A server of its own: one connection, so its session counters are its calls'.
async fn server(f: &Fixture) -> Db {
    let pool = MySqlPoolOptions::new()
        .max_connections(1)
        .connect(&f.test_db.dsn)
        .await
        .unwrap();
    Db::new(pool)
}

/// `CALL orbit_plan_fire_due(limit)` on `conn`: the slots it fired, and how many procedures it
/// called (orbit_task_create and orbit_task_charge per plan fired one at a time; none for a batch).
async fn fire_due_on(conn: &mut sqlx::MySqlConnection, limit: u32) -> (i64, u64) {
    let counters = Counters::start(conn, &["Com_call_procedure"]).await;
    let row = sqlx::query("CALL orbit_plan_fire_due(?)")
        .bind(limit)
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    let fired: i64 = sqlx::Row::get(&row, 0);
    // The CALL itself counts once.
    (fired, counters.since(conn).await["Com_call_procedure"] - 1)
}

async fn scalar(f: &Fixture, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(f.db.pool())
        .await
        .unwrap()
}

/// Fire rows and tasks that do not match: a fire row per plan's task and a task per 'created' fire row,
/// the task being the one the fire row names, with its plan's id, tenancy and the definition of
/// the version that fired, as orbit_task_create writes an unkeyed task due at the fire.
const MISMATCHED_FIRES: &str = "
    SELECT (SELECT COUNT(*) FROM orbit_task t
             WHERE t.plan_id <> 0 AND NOT EXISTS (SELECT 1 FROM orbit_plan_fire f WHERE f.task_id = t.id AND f.plan_id = t.plan_id))
         + (SELECT COUNT(*) FROM orbit_plan_fire f
              LEFT JOIN orbit_task t ON t.id = f.task_id
              JOIN orbit_plan p ON p.id = f.plan_id
              JOIN orbit_plan_version v ON v.plan_id = f.plan_id AND v.version = f.version
             WHERE f.outcome = 'created'
               AND NOT (t.plan_id <=> f.plan_id AND t.plan_version <=> f.version AND t.queue_id <=> p.queue_id
                        AND t.namespace_id <=> p.namespace_id AND t.application_id <=> p.application_id
                        AND t.handler <=> v.handler AND t.handler_version <=> v.handler_version
                        AND t.payload_version <=> v.payload_version AND t.payload <=> v.payload
                        AND t.business_key <=> v.business_key AND t.concurrency_key <=> v.concurrency_key
                        AND t.priority <=> v.priority AND t.max_attempts <=> v.max_attempts
                        AND t.retry_base_ms <=> v.retry_base_ms AND t.retry_max_ms <=> v.retry_max_ms
                        AND t.retry_unknown <=> v.retry_unknown AND t.idempotency_key <=> ''
                        AND t.created_at <=> f.fired_at AND t.run_at <=> f.fired_at
                        AND t.deadline_at <=> IF(v.deadline_seconds > 0,
                                                 f.fired_at + INTERVAL v.deadline_seconds SECOND, NULL)))";

#[tokio::test]
async fn a_batch_of_unkeyed_plans_fires_each_slot_once_with_its_versions_definition() {
    let f = Fixture::new().await;
    let other_queue = f.queue("other").await;
    let mut ids = Vec::new();
    for i in 0..250_i64 {
        let queue = if i % 7 == 3 {
            &other_queue
        } else {
            &f.queue_id
        };
        let mut task = f.task(queue, "");
        task.payload = format!(r#"{{"i":{i}}}"#);
        task.business_key = Some(format!("b{i}"));
        task.priority = Some(i % 10);
        task.max_attempts = Some(1 + i % 5);
        task.retry_unknown = Some(i % 3 == 0);
        task.deadline_seconds = Some(if i % 2 == 0 { 0 } else { 3600 + i });
        // Every fifth a cron plan, the others interval plans of 60, 90 or 120 s.
        let schedule = if i % 5 == 4 {
            PlanSchedule::cron("* * * * *", "UTC")
        } else {
            PlanSchedule::every(60 + i % 3 * 30)
        };
        let p = NewPlan {
            name: format!("p{i}"),
            schedule,
            task,
        };
        ids.push(f.db.plan_create(&f.hash, &p).await.unwrap().id);
    }
    // Every tenth plan fires its second version.
    for id in ids.iter().step_by(10) {
        let mut task = f.task(&f.queue_id, "");
        task.payload = format!(r#"{{"v2":{id}}}"#);
        f.db.plan_version_create(&f.hash, *id, &PlanSchedule::every(60), &task)
            .await
            .unwrap();
    }
    // All due, each at a slot of its own within the last minute (cron plans too).
    sqlx::query(
        "UPDATE orbit_plan SET next_fire_at = UTC_TIMESTAMP(6) - INTERVAL (1 + id MOD 50) SECOND",
    )
    .execute(f.db.pool())
    .await
    .unwrap();
    let slots: Vec<(u64, chrono::NaiveDateTime)> =
        sqlx::query_as("SELECT id, next_fire_at FROM orbit_plan ORDER BY id")
            .fetch_all(f.db.pool())
            .await
            .unwrap();

    let mut conn = f.test_db.conn().await;
    // Set-based: no task created through orbit_task_create, nor charged one by one.
    assert_eq!(fire_due_on(&mut conn, 10_000).await, (250, 0));

    // One fire row per plan, at its slot, naming a task with the version's definition.
    let fired: Vec<(u64, chrono::NaiveDateTime, u32)> = sqlx::query_as(
        "SELECT plan_id, scheduled_for, version FROM orbit_plan_fire ORDER BY plan_id",
    )
    .fetch_all(f.db.pool())
    .await
    .unwrap();
    assert_eq!(fired.len(), 250);
    for ((id, slot), (plan_id, scheduled_for, version)) in slots.iter().zip(&fired) {
        assert_eq!((plan_id, scheduled_for), (id, slot));
        let expected = if ids.iter().step_by(10).any(|p| p == id) {
            2
        } else {
            1
        };
        assert_eq!(*version, expected, "plan {id}");
    }
    assert_eq!(scalar(&f, "SELECT COUNT(*) FROM orbit_task").await, 250);
    assert_eq!(scalar(&f, MISMATCHED_FIRES).await, 0);
    let (payload, plan_version): (Vec<u8>, u32) =
        sqlx::query_as("SELECT payload, plan_version FROM orbit_task WHERE plan_id = ?")
            .bind(ids[10])
            .fetch_one(f.db.pool())
            .await
            .unwrap();
    assert_eq!(
        (String::from_utf8(payload).unwrap(), plan_version),
        (format!(r#"{{"v2":{}}}"#, ids[10]), 2)
    );
    // Claimable at once, and each counted once against the quota.
    assert_eq!(
        scalar(
            &f,
            "SELECT COUNT(*) FROM orbit_task WHERE state = 'WAITING' AND lane = 'ready' AND resource_id = 0"
        )
        .await,
        250
    );
    assert_eq!(f.incomplete_tasks().await, 250);
    // Every plan advanced: an interval plan by one interval (its slot was within the interval),
    // a cron plan waits for the server with schedule_after at the fire (its slot was earlier).
    assert_eq!(
        scalar(
            &f,
            "SELECT COUNT(*) FROM orbit_plan p
               JOIN orbit_plan_version v ON v.plan_id = p.id AND v.version = p.current_version
               JOIN orbit_plan_fire f ON f.plan_id = p.id
              WHERE IF(v.schedule_kind = 'interval',
                       p.next_fire_at = f.scheduled_for + INTERVAL v.schedule_spec SECOND AND p.schedule_after IS NULL,
                       p.next_fire_at IS NULL AND p.schedule_after = f.fired_at)"
        )
        .await,
        250
    );
    assert_eq!(fire_due_on(&mut conn, 10_000).await, (0, 0));
}

#[tokio::test]
async fn a_batch_writes_the_rows_one_plan_at_a_time_writes() {
    let f = Fixture::new().await;
    let mut task = f.task(&f.queue_id, "");
    task.business_key = Some("same".into());
    task.priority = Some(3);
    task.deadline_seconds = Some(600);
    task.retry_unknown = Some(true);
    let mut ids = Vec::new();
    for name in ["batched", "alone", "refused"] {
        let p = NewPlan {
            name: name.into(),
            schedule: PlanSchedule::every(60),
            task: task.clone(),
        };
        ids.push(f.db.plan_create(&f.hash, &p).await.unwrap().id);
    }
    // One connection: every task records its quota slot.
    let mut conn = f.test_db.conn().await;
    // The first fires in a batch.
    make_due(&f, ids[0], 1).await;
    assert_eq!(fire_due_on(&mut conn, 100).await, (1, 0), "set-based");
    // Room for one more: the batch of the other two does not fit, so it is rolled back and its
    // plans fire one at a time (orbit_task_create and orbit_task_charge each): the earlier slot
    // fits, the later one is refused.
    sqlx::query("UPDATE orbit_application_quota SET max_incomplete_tasks = 2")
        .execute(f.db.pool())
        .await
        .unwrap();
    make_due(&f, ids[1], 2).await;
    make_due(&f, ids[2], 1).await;
    assert_eq!(fire_due_on(&mut conn, 100).await, (1, 4), "one at a time");
    assert!(fires(&f, ids[2]).await.is_empty());
    // The same row either way, but for the plan, the id and the times (each relative to its own
    // creation).
    let row = |plan_id: u64| {
        let db = f.db.clone();
        async move {
            let r: Vec<u8> = sqlx::query_scalar(
                "SELECT CONCAT_WS('|', application_id, namespace_id, queue_id, handler, handler_version,
                        payload_version, payload, business_key, HEX(concurrency_key), resource_id, state,
                        lane, priority, max_attempts, attempt_count, retry_base_ms, retry_max_ms,
                        retry_unknown, TIMESTAMPDIFF(MICROSECOND, created_at, run_at),
                        TIMESTAMPDIFF(MICROSECOND, created_at, deadline_at), current_attempt_id,
                        blocked_reason, COALESCE(output, 'NULL'), COALESCE(error, 'NULL'),
                        HEX(idempotency_key), plan_version, quota_slot, created_at = updated_at,
                        COALESCE(finished_at, 'NULL'), debounce_seconds, COALESCE(debounce_until, 'NULL'))
                   FROM orbit_task WHERE plan_id = ?",
            )
            .bind(plan_id)
            .fetch_one(db.pool())
            .await
            .unwrap();
            String::from_utf8(r).unwrap()
        }
    };
    assert_eq!(row(ids[0]).await, row(ids[1]).await);
    assert_eq!(scalar(&f, MISMATCHED_FIRES).await, 0);
    assert_eq!(f.incomplete_tasks().await, 2);
}

#[tokio::test]
async fn concurrent_callers_fire_every_due_slot_exactly_once() {
    let f = Fixture::new().await;
    let mut ids = Vec::new();
    for i in 0..300 {
        // Every thirtieth plan has a key: it fires alone, between the others' batches.
        let key = if i % 30 == 7 {
            format!("k/{i}")
        } else {
            String::new()
        };
        ids.push(
            f.db.plan_create(&f.hash, &plan(&f, &format!("p{i}"), &key))
                .await
                .unwrap()
                .id,
        );
    }
    let mut servers = Vec::new();
    for _ in 0..3 {
        servers.push(server(&f).await);
    }
    for round in 1..=3_i64 {
        sqlx::query("UPDATE orbit_plan SET next_fire_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND")
            .execute(f.db.pool())
            .await
            .unwrap();
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(servers.len()));
        let handles: Vec<_> = servers
            .iter()
            .map(|db| {
                let (db, barrier) = (db.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    db.plan_fire_due(10_000).await.unwrap().count
                })
            })
            .collect();
        let mut fired = 0;
        for h in handles {
            fired += h.await.unwrap();
        }
        assert_eq!(fired, 300, "round {round}");
        assert_eq!(
            scalar(&f, "SELECT COUNT(*) FROM orbit_plan_fire").await,
            300 * round
        );
        assert_eq!(
            scalar(&f, "SELECT COUNT(*) FROM orbit_task").await,
            300 * round
        );
        assert_eq!(
            scalar(
                &f,
                "SELECT COUNT(*) FROM orbit_plan WHERE next_fire_at <= UTC_TIMESTAMP(6)"
            )
            .await,
            0,
            "round {round}: every plan advanced"
        );
    }
    // Each plan: three slots, each fired once, each naming a task of its own.
    let per_plan: Vec<(u64, i64, i64)> = sqlx::query_as(
        "SELECT f.plan_id, COUNT(*), COUNT(DISTINCT f.task_id) FROM orbit_plan_fire f GROUP BY f.plan_id",
    )
    .fetch_all(f.db.pool())
    .await
    .unwrap();
    assert_eq!(per_plan.len(), 300);
    assert!(
        per_plan.iter().all(|r| (r.1, r.2) == (3, 3)),
        "{per_plan:?}"
    );
    assert_eq!(scalar(&f, MISMATCHED_FIRES).await, 0);
    assert_eq!(f.incomplete_tasks().await, 900);
}

#[tokio::test]
async fn a_quota_with_room_for_some_fires_the_earliest_slots_and_skips_the_rest() {
    let f = Fixture::new().await;
    let mut ids = Vec::new();
    for i in 0..10_u32 {
        let id =
            f.db.plan_create(&f.hash, &plan(&f, &format!("p{i}"), ""))
                .await
                .unwrap()
                .id;
        // Plan i is i + 1 seconds late: the last one's slot is the earliest.
        make_due(&f, id, i + 1).await;
        ids.push(id);
    }
    f.submit(&f.queue_id, "").await;
    sqlx::query("UPDATE orbit_application_quota SET max_incomplete_tasks = 5")
        .execute(f.db.pool())
        .await
        .unwrap();
    // Room for four: the four earliest slots fire, the other six are skipped, nothing recorded.
    assert_eq!(f.db.plan_fire_due(100).await.unwrap().count, 4);
    for (i, id) in ids.iter().enumerate() {
        let fires = fires(&f, *id).await;
        let tasks = count(&f, "SELECT COUNT(*) FROM orbit_task WHERE plan_id = ?", *id).await;
        let expected = usize::from(i >= 6);
        assert_eq!(
            (fires.len(), tasks as usize),
            (expected, expected),
            "plan {i}"
        );
        assert!(
            next_fire_at(&f, *id).await > Utc::now(),
            "plan {i} advanced either way"
        );
    }
    assert_eq!(f.incomplete_tasks().await, 5);
    assert_eq!(scalar(&f, MISMATCHED_FIRES).await, 0);
    // With room again, the next slots fire in a batch, though ten are more than the connection's
    // slot's share of 100 (6 or 7 of 16 slots): charged on the exact total.
    sqlx::query("UPDATE orbit_application_quota SET max_incomplete_tasks = 100")
        .execute(f.db.pool())
        .await
        .unwrap();
    sqlx::query("UPDATE orbit_plan SET next_fire_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND")
        .execute(f.db.pool())
        .await
        .unwrap();
    let mut conn = f.test_db.conn().await;
    assert_eq!(fire_due_on(&mut conn, 100).await, (10, 0));
    assert_eq!(f.incomplete_tasks().await, 15);
}

#[tokio::test]
async fn an_already_recorded_slot_among_a_batch_fires_nothing_and_the_rest_fire() {
    let f = Fixture::new().await;
    let mut ids = Vec::new();
    for i in 0..30 {
        ids.push(
            f.db.plan_create(&f.hash, &plan(&f, &format!("p{i}"), ""))
                .await
                .unwrap()
                .id,
        );
    }
    sqlx::query("UPDATE orbit_plan SET next_fire_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND")
        .execute(f.db.pool())
        .await
        .unwrap();
    assert_eq!(f.db.plan_fire_due(100).await.unwrap().count, 30);
    // All due again, but plan 15 back at the slot it already fired.
    sqlx::query("UPDATE orbit_plan SET next_fire_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND")
        .execute(f.db.pool())
        .await
        .unwrap();
    let recorded = fires(&f, ids[15]).await[0].0;
    sqlx::query("UPDATE orbit_plan SET next_fire_at = ? WHERE id = ?")
        .bind(recorded.naive_utc())
        .bind(ids[15])
        .execute(f.db.pool())
        .await
        .unwrap();
    assert_eq!(f.db.plan_fire_due(100).await.unwrap().count, 29);
    for (i, id) in ids.iter().enumerate() {
        let expected = if i == 15 { 1 } else { 2 };
        assert_eq!(fires(&f, *id).await.len(), expected, "plan {i}");
        assert_eq!(
            count(&f, "SELECT COUNT(*) FROM orbit_task WHERE plan_id = ?", *id).await,
            expected as i64,
            "plan {i}"
        );
        assert!(
            next_fire_at(&f, *id).await > Utc::now(),
            "plan {i} advanced"
        );
    }
    assert_eq!(scalar(&f, MISMATCHED_FIRES).await, 0);
}

#[tokio::test]
async fn a_batch_charges_each_application_for_its_own_tasks() {
    let f = Fixture::new().await;
    let (bootstrap, token) = orbit::db::queues::Bootstrap::with_new_token(
        "other-app",
        "test",
        "default",
        "q1",
        &orbit::testing::ALL_SCOPES,
        "other",
    );
    let other = f.db.admin_bootstrap(&bootstrap).await.unwrap();
    let other_hash = orbit::auth::token_hash(&token);
    // Twenty plans of each application, their slots interleaved.
    for i in 0..40_u32 {
        let (hash, queue) = if i % 2 == 0 {
            (f.hash, f.queue_id.clone())
        } else {
            (other_hash, other.queue_id.clone())
        };
        let p = NewPlan {
            name: format!("p{i}"),
            schedule: PlanSchedule::every(60),
            task: f.task(&queue, ""),
        };
        let id = f.db.plan_create(&hash, &p).await.unwrap().id;
        make_due(&f, id, 1 + i).await;
    }
    let charged = |application_id: u64| {
        let db = f.db.clone();
        async move {
            let n: i64 = sqlx::query_scalar(
                "SELECT CAST(SUM(incomplete_tasks) AS SIGNED) FROM orbit_application_quota WHERE application_id = ?",
            )
            .bind(application_id)
            .fetch_one(db.pool())
            .await
            .unwrap();
            n
        }
    };
    let mut conn = f.test_db.conn().await;
    assert_eq!(fire_due_on(&mut conn, 100).await, (40, 0), "one batch");
    assert_eq!(charged(f.application_id).await, 20);
    assert_eq!(charged(other.application_id).await, 20);
    assert_eq!(scalar(&f, MISMATCHED_FIRES).await, 0);
    // The other application full: the batch is rolled back (the first application's charge
    // with it) and fires one plan at a time; only the other application's slots are skipped.
    sqlx::query(
        "UPDATE orbit_application_quota SET max_incomplete_tasks = 20 WHERE application_id = ?",
    )
    .bind(other.application_id)
    .execute(f.db.pool())
    .await
    .unwrap();
    sqlx::query("UPDATE orbit_plan SET next_fire_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND")
        .execute(f.db.pool())
        .await
        .unwrap();
    assert_eq!(fire_due_on(&mut conn, 100).await.0, 20);
    assert_eq!(charged(f.application_id).await, 40);
    assert_eq!(charged(other.application_id).await, 20);
    let fired_by_application: Vec<(u64, i64)> = sqlx::query_as(
        "SELECT t.application_id, COUNT(*) FROM orbit_task t GROUP BY t.application_id ORDER BY t.application_id",
    )
    .fetch_all(f.db.pool())
    .await
    .unwrap();
    assert_eq!(
        fired_by_application,
        [(f.application_id, 40), (other.application_id, 20)]
    );
    assert_eq!(scalar(&f, MISMATCHED_FIRES).await, 0);
}
