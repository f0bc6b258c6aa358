//! Key policies (orbit_key_policy_set, _list, _delete) and what a submit does with them
//! (orbit_task_create): the longest match, `reject` (KEY_BUSY, nothing written) and
//! `replace_waiting` (only the newest waiting task is kept).

use orbit::db::keys::KeyPolicySpec;
use orbit::db::DbError;
use orbit::testing::{Counters, Fixture};

async fn count(f: &Fixture, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(f.db.pool())
        .await
        .unwrap()
}

async fn set(f: &Fixture, match_kind: &str, key: &str, on_busy: &str) -> u64 {
    f.db.key_policy_set(
        &f.hash,
        f.namespace_id,
        &KeyPolicySpec::new(match_kind, key, on_busy),
    )
    .await
    .unwrap()
    .1
    .id
}

async fn state(f: &Fixture, task_id: u64) -> String {
    f.db.task_get(&f.hash, task_id)
        .await
        .unwrap()
        .state
        .as_str()
        .to_string()
}

#[tokio::test]
async fn a_policy_is_set_changed_listed_and_deleted() {
    let f = Fixture::new().await;
    let (created, p) =
        f.db.key_policy_set(
            &f.hash,
            f.namespace_id,
            &KeyPolicySpec::new("prefix", "customer/", "reject"),
        )
        .await
        .unwrap();
    assert!(created);
    assert_eq!(
        (p.match_kind.as_str(), p.key.as_str(), p.on_busy.as_str()),
        ("prefix", "customer/", "reject")
    );
    let (created, changed) =
        f.db.key_policy_set(
            &f.hash,
            f.namespace_id,
            &KeyPolicySpec::new("prefix", "customer/", "replace_waiting"),
        )
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(changed.id, p.id);
    assert_eq!(changed.on_busy, "replace_waiting");
    set(&f, "exact", "customer/7", "queue").await;
    let list = f.db.key_policy_list(&f.hash, f.namespace_id).await.unwrap();
    assert_eq!(
        list.iter()
            .map(|p| (p.match_kind.as_str(), p.key.as_str()))
            .collect::<Vec<_>>(),
        [("exact", "customer/7"), ("prefix", "customer/")]
    );
    let deleted = f.db.key_policy_delete(&f.hash, p.id).await.unwrap();
    assert_eq!(deleted.id, p.id);
    assert_eq!(
        f.db.key_policy_list(&f.hash, f.namespace_id)
            .await
            .unwrap()
            .len(),
        1
    );
    let again = f.db.key_policy_delete(&f.hash, p.id).await.unwrap_err();
    assert!(matches!(again, DbError::NotFound(_)), "{again:?}");
}

#[tokio::test]
async fn policy_input_is_checked_in_sql_and_bounded_per_namespace() {
    let f = Fixture::new().await;
    let bad = [
        ("fuzzy", "k", "queue", "match must be exact or prefix"),
        ("exact", "", "queue", "key must be 1-191 characters"),
        (
            "exact",
            " k",
            "queue",
            "key must not start or end with whitespace",
        ),
        (
            "prefix",
            "a\u{1}",
            "queue",
            "key must not contain control characters",
        ),
        (
            "exact",
            "k",
            "skip",
            "on_busy must be queue, reject, replace_waiting or cancel_running",
        ),
    ];
    for (m, k, o, message) in bad {
        match f
            .db
            .key_policy_set(&f.hash, f.namespace_id, &KeyPolicySpec::new(m, k, o))
            .await
            .unwrap_err()
        {
            DbError::InvalidArgument(got) => assert!(got.contains(message), "{got} / {message}"),
            e => panic!("{m} {k:?} {o}: {e:?}"),
        }
    }
    let limits = [
        (
            KeyPolicySpec::new("exact", "k", "queue").limit(0),
            "limit must be between 1 and 1000",
        ),
        (
            KeyPolicySpec::new("exact", "k", "queue").limit(1001),
            "limit must be between 1 and 1000",
        ),
        (
            KeyPolicySpec::new("exact", "k", "queue").rate(1001, 1),
            "rate.grants must be between 1 and 1000",
        ),
        (
            KeyPolicySpec::new("exact", "k", "queue").rate(5, 86_401),
            "rate.per_seconds must be between 1 and 86400",
        ),
        (
            KeyPolicySpec::new("exact", "k", "queue").rate(5, 0),
            "rate needs both grants and per_seconds",
        ),
        (
            KeyPolicySpec::new("exact", "k", "queue").rate(0, 5),
            "rate needs both grants and per_seconds",
        ),
    ];
    for (spec, message) in limits {
        match f
            .db
            .key_policy_set(&f.hash, f.namespace_id, &spec)
            .await
            .unwrap_err()
        {
            DbError::InvalidArgument(got) => assert!(got.contains(message), "{got} / {message}"),
            e => panic!("{spec:?}: {e:?}"),
        }
    }
    assert_eq!(count(&f, "SELECT COUNT(*) FROM orbit_key_policy").await, 0);
    // 1,000 policies a namespace: the bound of the read every keyed submit makes.
    sqlx::query(
        "INSERT INTO orbit_key_policy (namespace_id, match_kind, key_pattern, on_busy, created_at, updated_at)
         SELECT ?, 'exact', CONCAT('k', a.seq), 'queue', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)
           FROM (SELECT ones.n + 10 * tens.n + 100 * hundreds.n AS seq
                   FROM (SELECT 0 n UNION SELECT 1 UNION SELECT 2 UNION SELECT 3 UNION SELECT 4 UNION SELECT 5 UNION SELECT 6 UNION SELECT 7 UNION SELECT 8 UNION SELECT 9) ones,
                        (SELECT 0 n UNION SELECT 1 UNION SELECT 2 UNION SELECT 3 UNION SELECT 4 UNION SELECT 5 UNION SELECT 6 UNION SELECT 7 UNION SELECT 8 UNION SELECT 9) tens,
                        (SELECT 0 n UNION SELECT 1 UNION SELECT 2 UNION SELECT 3 UNION SELECT 4 UNION SELECT 5 UNION SELECT 6 UNION SELECT 7 UNION SELECT 8 UNION SELECT 9) hundreds) a",
    )
    .bind(f.namespace_id)
    .execute(f.db.pool())
    .await
    .unwrap();
    let full =
        f.db.key_policy_set(
            &f.hash,
            f.namespace_id,
            &KeyPolicySpec::new("exact", "one-more", "reject"),
        )
        .await
        .unwrap_err();
    assert!(matches!(full, DbError::QuotaExceeded(_)), "{full:?}");
    // Changing an existing one is still allowed.
    f.db.key_policy_set(
        &f.hash,
        f.namespace_id,
        &KeyPolicySpec::new("exact", "k5", "reject"),
    )
    .await
    .unwrap();
}

/// Another tenant in the same database: its token's hash and its namespace.
async fn other_tenant(f: &Fixture) -> ([u8; 32], u64) {
    let token = orbit::auth::generate_token();
    let b =
        f.db.admin_bootstrap(&orbit::db::queues::Bootstrap {
            application: "other-app".into(),
            environment: "test".into(),
            namespace: "default".into(),
            queue: "theirs".into(),
            token_hash: orbit::auth::token_hash(&token).to_vec(),
            token_hint: orbit::auth::token_hint(&token),
            scopes: orbit::testing::ALL_SCOPES
                .iter()
                .map(|s| s.to_string())
                .collect(),
            ..Default::default()
        })
        .await
        .unwrap();
    (orbit::auth::token_hash(&token), b.namespace_id)
}

#[tokio::test]
async fn another_tenants_namespace_and_policies_are_not_found() {
    let f = Fixture::new().await;
    let (other_hash, other_ns) = other_tenant(&f).await;
    let theirs =
        f.db.key_policy_set(
            &other_hash,
            other_ns,
            &KeyPolicySpec::new("exact", "k", "reject"),
        )
        .await
        .unwrap()
        .1
        .id;
    let other = (other_hash, other_ns);
    let e =
        f.db.key_policy_set(&f.hash, other.1, &KeyPolicySpec::new("exact", "k", "queue"))
            .await
            .unwrap_err();
    assert!(matches!(e, DbError::NotFound(_)), "{e:?}");
    let e = f.db.key_policy_list(&f.hash, other.1).await.unwrap_err();
    assert!(matches!(e, DbError::NotFound(_)), "{e:?}");
    let e = f.db.key_policy_delete(&f.hash, theirs).await.unwrap_err();
    assert!(matches!(e, DbError::NotFound(_)), "{e:?}");
    assert_eq!(
        f.db.key_policy_list(&other.0, other.1).await.unwrap().len(),
        1,
        "their policy is untouched"
    );
}

#[tokio::test]
async fn reject_refuses_a_busy_key_and_writes_nothing() {
    let f = Fixture::new().await;
    let q2 = f.queue("q2").await;
    let s = f.session("w", true, &[&f.queue_id, &q2]).await;
    set(&f, "prefix", "customer/", "reject").await;
    // A free key: accepted.
    let first = f.submit(&f.queue_id, "customer/1").await;
    // Now the key has a waiting task: refused, nothing written, in any queue.
    let before = count(&f, "SELECT COUNT(*) FROM orbit_task").await;
    let receipts = count(&f, "SELECT COUNT(*) FROM orbit_idempotency").await;
    for q in [&f.queue_id, &q2] {
        let e =
            f.db.task_submit(&f.hash, "second", &f.task(q, "customer/1"))
                .await
                .unwrap_err();
        assert!(matches!(e, DbError::KeyBusy(_)), "{e:?}");
    }
    assert_eq!(count(&f, "SELECT COUNT(*) FROM orbit_task").await, before);
    assert_eq!(
        count(&f, "SELECT COUNT(*) FROM orbit_idempotency").await,
        receipts
    );
    assert_eq!(f.incomplete_tasks().await, 1);
    // Held (granted, running): still busy.
    let g = f.db.task_claim(s, 10, 30_000).await.unwrap();
    assert_eq!(g[0].task.id, first.id);
    let e =
        f.db.task_submit(&f.hash, "second", &f.task(&f.queue_id, "customer/1"))
            .await
            .unwrap_err();
    assert!(matches!(e, DbError::KeyBusy(_)), "{e:?}");
    // Other keys, and keys no policy matches, are not affected.
    f.submit(&f.queue_id, "customer/2").await;
    f.submit(&f.queue_id, "vendor/1").await;
    f.submit(&f.queue_id, "vendor/1").await;
    // Free again: the refused request is decided again, and now accepted under its key.
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
    let accepted =
        f.db.task_submit(&f.hash, "second", &f.task(&f.queue_id, "customer/1"))
            .await
            .unwrap();
    assert!(!accepted.replayed);
    // A batch with a refused task names it and writes nothing.
    let items = vec![
        ("b-0".to_string(), f.task(&f.queue_id, "customer/3")),
        ("b-1".to_string(), f.task(&f.queue_id, "customer/1")),
    ];
    let before = count(&f, "SELECT COUNT(*) FROM orbit_task").await;
    match f.db.task_submit_many(&f.hash, &items).await.unwrap_err() {
        DbError::KeyBusy(m) => assert!(m.starts_with("tasks[1]: "), "{m}"),
        e => panic!("{e:?}"),
    }
    assert_eq!(count(&f, "SELECT COUNT(*) FROM orbit_task").await, before);
}

#[tokio::test]
async fn the_longest_matching_pattern_wins() {
    let f = Fixture::new().await;
    set(&f, "prefix", "customer/", "reject").await;
    set(&f, "prefix", "customer/vip/", "queue").await;
    set(&f, "exact", "customer/vip/9", "reject").await;
    // An exact policy wins over a prefix of the same length.
    set(&f, "prefix", "customer/7", "reject").await;
    set(&f, "exact", "customer/7", "queue").await;
    let outcome = |key: &'static str| {
        let f = &f;
        async move {
            f.submit(&f.queue_id, key).await;
            match f
                .db
                .task_submit(&f.hash, &format!("again-{key}"), &f.task(&f.queue_id, key))
                .await
            {
                Ok(_) => "queued",
                Err(DbError::KeyBusy(_)) => "rejected",
                Err(e) => panic!("{key}: {e:?}"),
            }
        }
    };
    assert_eq!(outcome("customer/1").await, "rejected");
    assert_eq!(outcome("customer/vip/1").await, "queued");
    assert_eq!(outcome("customer/vip/9").await, "rejected");
    assert_eq!(outcome("customer/7").await, "queued");
    assert_eq!(outcome("customer/77").await, "rejected");
    assert_eq!(outcome("other").await, "queued");
}

#[tokio::test]
async fn replace_waiting_keeps_only_the_newest_waiting_task_of_the_queue() {
    let f = Fixture::new().await;
    let q2 = f.queue("q2").await;
    let s = f.session("w", true, &[&f.queue_id, &q2]).await;
    let holder = f.submit(&f.queue_id, "doc/1").await;
    let g = f.db.task_claim(s, 10, 30_000).await.unwrap();
    assert_eq!(g[0].task.id, holder.id);
    let mut waiting = Vec::new();
    for _ in 0..3 {
        waiting.push(f.submit(&f.queue_id, "doc/1").await.id);
    }
    let other_queue = f.submit(&q2, "doc/1").await;
    set(&f, "exact", "doc/1", "replace_waiting").await;
    assert_eq!(f.incomplete_tasks().await, 5);
    let newest = f.submit(&f.queue_id, "doc/1").await;
    for id in &waiting {
        let t = f.db.task_get(&f.hash, *id).await.unwrap();
        assert_eq!(t.state.as_str(), "CANCELLED");
        let error: serde_json::Value = serde_json::from_str(t.error.as_deref().unwrap()).unwrap();
        assert_eq!(error["code"], "REPLACED");
        assert_eq!(error["replaced_by"], newest.id);
    }
    assert_eq!(
        state(&f, holder.id).await,
        "LEASED",
        "the holder is not waiting"
    );
    assert_eq!(
        state(&f, other_queue.id).await,
        "WAITING",
        "another queue's"
    );
    assert_eq!(state(&f, newest.id).await, "WAITING");
    // Holder, the other queue's task and the newest: three charges.
    assert_eq!(f.incomplete_tasks().await, 3);
    // The key goes on to the survivors once the holder ends.
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
    let next = f.db.task_claim(s, 10, 30_000).await.unwrap();
    assert_eq!(next.len(), 1);
    assert!([newest.id, other_queue.id].contains(&next[0].task.id));
}

#[tokio::test]
async fn replacing_the_ready_task_leaves_the_new_one_ready() {
    let f = Fixture::new().await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    set(&f, "exact", "k", "replace_waiting").await;
    let old = f.submit(&f.queue_id, "k").await;
    let new = f.submit(&f.queue_id, "k").await;
    assert_eq!(state(&f, old.id).await, "CANCELLED");
    let g = f.db.task_claim(s, 10, 30_000).await.unwrap();
    assert_eq!(
        g.len(),
        1,
        "the new task is claimable, not stuck behind nothing"
    );
    assert_eq!(g[0].task.id, new.id);
    assert_eq!(f.incomplete_tasks().await, 1);
}

#[tokio::test]
async fn a_delayed_task_replaces_the_waiting_ones_and_waits_for_its_run_at() {
    // The new task is inserted before the waiting ones are replaced: it must not count as one
    // of them (a task due later waits in the 'scheduled' lane, where the replacement looks).
    let f = Fixture::new().await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    set(&f, "exact", "k", "replace_waiting").await;
    let old = f.submit(&f.queue_id, "k").await;
    let delayed = f
        .submit_task(&orbit::db::tasks::NewTask {
            timing: orbit::db::tasks::Timing {
                delay_seconds: Some(3600),
                ..Default::default()
            },
            ..f.task(&f.queue_id, "k")
        })
        .await;
    assert_eq!(state(&f, old.id).await, "CANCELLED");
    let t = f.db.task_get(&f.hash, delayed.id).await.unwrap();
    assert_eq!(t.state.as_str(), "WAITING", "the new task replaced itself");
    assert!(
        t.blocked_reason.starts_with("DELAYED"),
        "{}",
        t.blocked_reason
    );
    assert_eq!(
        count(
            &f,
            &format!(
                "SELECT COUNT(*) FROM orbit_task WHERE id = {} AND lane = 'scheduled'",
                delayed.id
            )
        )
        .await,
        1
    );
    assert_eq!(f.incomplete_tasks().await, 1);
    assert!(f.db.task_claim(s, 10, 30_000).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_plans_task_follows_its_plan_not_the_key_policy() {
    let f = Fixture::new().await;
    set(&f, "exact", "nightly", "reject").await;
    f.submit(&f.queue_id, "nightly").await;
    let plan =
        f.db.plan_create(
            &f.hash,
            &orbit::db::plans::NewPlan {
                name: "p".into(),
                schedule: orbit::db::plans::PlanSchedule {
                    interval_seconds: Some(60),
                    ..Default::default()
                },
                task: f.task(&f.queue_id, "nightly"),
            },
        )
        .await
        .unwrap();
    sqlx::query(
        "UPDATE orbit_plan SET next_fire_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE id = ?",
    )
    .bind(plan.id)
    .execute(f.db.pool())
    .await
    .unwrap();
    f.db.plan_fire_due(100).await.unwrap();
    assert_eq!(
        count(
            &f,
            "SELECT COUNT(*) FROM orbit_task WHERE plan_id <> 0 AND state = 'WAITING'"
        )
        .await,
        1,
        "the plan's on_busy is queue: its task waits although the key policy rejects"
    );
}

#[tokio::test]
async fn cancel_running_ends_the_holder_at_once_and_fences_its_late_writes() {
    let f = Fixture::new().await;
    // The resource's fence, in the same database for the test.
    f.test_db.install_fence().await;
    let fence = |token: u64, op: &'static str, value: &'static str| {
        let pool = f.db.pool().clone();
        async move {
            let row = sqlx::query("CALL orbit_fence_write('default', 'acct/1', ?, ?, 'acct', ?)")
                .bind(token)
                .bind(op)
                .bind(value)
                .fetch_one(&pool)
                .await
                .unwrap();
            let decision: Vec<u8> = sqlx::Row::get(&row, 0);
            String::from_utf8(decision).unwrap()
        }
    };
    let old_session = f.session("old", true, &[&f.queue_id]).await;
    let new_session = f.session("new", true, &[&f.queue_id]).await;
    let first = f.submit(&f.queue_id, "acct/1").await;
    let old =
        f.db.task_claim(old_session, 1, 30_000)
            .await
            .unwrap()
            .remove(0);
    assert_eq!(old.task.id, first.id);
    assert!(
        f.db.attempt_start(old_session, old.attempt_id)
            .await
            .unwrap()
            .accepted
    );
    assert_eq!(
        fence(old.concurrency_token, "old-1", "old").await,
        "accepted"
    );
    let waiting = f.submit(&f.queue_id, "acct/1").await;
    set(&f, "exact", "acct/1", "cancel_running").await;

    // The next submit ends the RUNNING holder at once and names it for its worker.
    let s =
        f.db.task_submit(&f.hash, "newest", &f.task(&f.queue_id, "acct/1"))
            .await
            .unwrap();
    let c = s.cancelled.expect("the holder was cancelled");
    assert_eq!((c.attempt_id, c.session_id), (old.attempt_id, old_session));
    assert_eq!(state(&f, first.id).await, "CANCELLED");
    assert_eq!(
        state(&f, waiting.id).await,
        "CANCELLED",
        "replaced as with replace_waiting"
    );
    let attempt: String =
        sqlx::query_scalar("SELECT CAST(state AS CHAR) FROM orbit_attempt WHERE id = ?")
            .bind(old.attempt_id)
            .fetch_one(f.db.pool())
            .await
            .unwrap();
    assert_eq!(attempt, "CANCELLED");
    // The newest task is next, with a larger token.
    let new =
        f.db.task_claim(new_session, 1, 30_000)
            .await
            .unwrap()
            .remove(0);
    assert_eq!(new.task.id, s.task.id);
    assert!(new.concurrency_token > old.concurrency_token);
    assert_eq!(
        fence(new.concurrency_token, "new-1", "new").await,
        "accepted"
    );

    // The old holder ignores the cancel and keeps going: its writes are fenced off, its renewal
    // and its result are refused, and nothing of it changes the task.
    assert_eq!(fence(old.concurrency_token, "old-2", "old").await, "stale");
    let renew =
        f.db.attempt_renew(old_session, old.attempt_id, 30_000)
            .await
            .unwrap();
    assert!(!renew.accepted, "{renew:?}");
    let late =
        f.db.attempt_finish(
            old_session,
            old.attempt_id,
            orbit::db::workers::Outcome::Succeeded,
            false,
            Some("{}"),
            None,
        )
        .await
        .unwrap();
    assert!(late.duplicate, "{late:?}");
    assert_eq!(state(&f, first.id).await, "CANCELLED");
    let register: (u64, Vec<u8>) = sqlx::query_as(
        "SELECT highest_token, value FROM orbit_fence_register WHERE resource_key = 'acct/1'",
    )
    .fetch_one(f.db.pool())
    .await
    .unwrap();
    assert_eq!(register, (new.concurrency_token, b"new".to_vec()));
    // Quota: the cancelled task and attempt gave their charges back.
    assert_eq!(f.incomplete_tasks().await, 1);
    let active: i64 = count(
        &f,
        "SELECT CAST(SUM(active_attempts) AS SIGNED) FROM orbit_application_quota",
    )
    .await;
    assert_eq!(active, 1);
}

#[tokio::test]
async fn a_batch_names_the_holder_its_cancel_running_task_ended_beside_a_replay() {
    let f = Fixture::new().await;
    let session = f.session("old", true, &[&f.queue_id]).await;
    f.submit(&f.queue_id, "acct/1").await;
    let old = f.db.task_claim(session, 1, 30_000).await.unwrap().remove(0);
    set(&f, "exact", "acct/1", "cancel_running").await;
    let earlier =
        f.db.task_submit(&f.hash, "earlier", &f.task(&f.queue_id, ""))
            .await
            .unwrap()
            .task;
    // A replay (its key's receipt exists), the task that cancels the holder, a plain task.
    let items = vec![
        ("earlier".to_string(), f.task(&f.queue_id, "")),
        ("newest".to_string(), f.task(&f.queue_id, "acct/1")),
        ("plain".to_string(), f.task(&f.queue_id, "")),
    ];
    // One connection, so every call below meets what the calls before it left on it.
    let db = f.own_pool(1).await;
    let out = db.task_submit_many(&f.hash, &items).await.unwrap();
    assert!(out[0].replayed);
    assert_eq!(out[0].task.id, earlier.id);
    assert!(out[0].cancelled.is_none());
    assert!(!out[1].replayed);
    let c = out[1].cancelled.as_ref().expect("the holder was cancelled");
    assert_eq!((c.attempt_id, c.session_id), (old.attempt_id, session));
    assert!(!out[2].replayed && out[2].cancelled.is_none());
    assert_eq!(state(&f, old.task.id).await, "CANCELLED");
    // The receipts name the new tasks: the batch replays whole.
    let again = db.task_submit_many(&f.hash, &items).await.unwrap();
    assert!(again.iter().all(|s| s.replayed && s.cancelled.is_none()));
    let ids = |v: &[orbit::db::tasks::Submitted]| v.iter().map(|s| s.task.id).collect::<Vec<_>>();
    assert_eq!(ids(&again), ids(&out));
    // A call that fails after noting a replay leaves nothing for the next call to read.
    let conflicting = vec![
        ("earlier".to_string(), f.task(&f.queue_id, "")),
        ("plain".to_string(), f.task(&f.queue_id, "other-key")),
    ];
    let err = db
        .task_submit_many(&f.hash, &conflicting)
        .await
        .unwrap_err();
    assert!(matches!(err, DbError::IdempotencyConflict(_)), "{err:?}");
    let fresh = vec![
        ("fresh-0".to_string(), f.task(&f.queue_id, "")),
        ("fresh-1".to_string(), f.task(&f.queue_id, "k2")),
    ];
    let out = db.task_submit_many(&f.hash, &fresh).await.unwrap();
    assert!(out.iter().all(|s| !s.replayed && s.cancelled.is_none()));
}

#[tokio::test]
async fn the_key_inspector_shows_the_policy_a_submit_meets() {
    let f = Fixture::new().await;
    f.submit(&f.queue_id, "customer/9").await;
    let none =
        f.db.key_get(&f.hash, f.namespace_id, "customer/9")
            .await
            .unwrap();
    assert_eq!((none.policy_id, none.on_busy.as_str()), (None, "queue"));
    let prefix = set(&f, "prefix", "customer/", "reject").await;
    let k =
        f.db.key_get(&f.hash, f.namespace_id, "customer/9")
            .await
            .unwrap();
    assert_eq!((k.policy_id, k.on_busy.as_str()), (Some(prefix), "reject"));
    let exact = set(&f, "exact", "customer/9", "cancel_running").await;
    let k =
        f.db.key_get(&f.hash, f.namespace_id, "customer/9")
            .await
            .unwrap();
    assert_eq!(
        (k.policy_id, k.on_busy.as_str()),
        (Some(exact), "cancel_running")
    );
}

/// A cancel_running submit that finds the holder's attempt row taken by another transaction (a
/// result, a renewal...) does not wait under the key's lock: it is answered as a deadlock victim
/// is, rolled back and retried, and succeeds once the row is free. The rolled-back call's
/// connection is closed, not reused (on MariaDB 10.6 such a connection was seen still inside a
/// transaction).
#[tokio::test]
async fn a_cancel_running_submit_retries_while_the_holder_is_changing() {
    let f = Fixture::new().await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    f.submit(&f.queue_id, "acct/5").await;
    let holder = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    set(&f, "exact", "acct/5", "cancel_running").await;
    let mut other = f.test_db.conn().await;
    sqlx::raw_sql("START TRANSACTION")
        .execute(&mut other)
        .await
        .unwrap();
    sqlx::query("SELECT id FROM orbit_attempt WHERE id = ? FOR UPDATE")
        .bind(holder.attempt_id)
        .fetch_all(&mut other)
        .await
        .unwrap();
    let retried = orbit::db::RETRIED.load(std::sync::atomic::Ordering::Relaxed);
    let discarded = f.db.discarded();
    let submit = {
        let (db, hash, t) = (f.db.clone(), f.hash, f.task(&f.queue_id, "acct/5"));
        tokio::spawn(async move { db.task_submit(&hash, "while-changing", &t).await })
    };
    // The signal: the submit met the locked row and was answered as a deadlock victim (retried).
    while orbit::db::RETRIED.load(std::sync::atomic::Ordering::Relaxed) == retried {
        assert!(
            !submit.is_finished(),
            "the submit finished without meeting the lock"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert!(
        !submit.is_finished(),
        "the submit waits for the holder's row to be free"
    );
    assert!(
        f.db.discarded() > discarded,
        "the rolled-back call's connection is closed"
    );
    sqlx::raw_sql("COMMIT").execute(&mut other).await.unwrap();
    let s = submit.await.unwrap().unwrap();
    assert_eq!(s.cancelled.map(|c| c.attempt_id), Some(holder.attempt_id));
    let attempt: String =
        sqlx::query_scalar("SELECT CAST(state AS CHAR) FROM orbit_attempt WHERE id = ?")
            .bind(holder.attempt_id)
            .fetch_one(f.db.pool())
            .await
            .unwrap();
    assert_eq!(attempt, "CANCELLED");
}

#[tokio::test]
async fn replacing_a_long_backlog_reads_each_waiting_task_once() {
    // A replace_waiting policy set on a key with 2,000 waiting tasks: the next submit replaces
    // them all in one scan of the key's index entries. (Before, each replacement looked for the
    // oldest task left, sorting the rest: 1,000 tasks took 1.7 s, 3,000 ran past the call's time
    // limit, so the submit could never be accepted.)
    let f = Fixture::new().await;
    for c in 0..2 {
        let chunk: Vec<(String, orbit::db::tasks::NewTask)> = (0..1000)
            .map(|n| (format!("backlog-{c}-{n}"), f.task(&f.queue_id, "k")))
            .collect();
        f.db.task_submit_many(&f.hash, &chunk).await.unwrap();
    }
    set(&f, "exact", "k", "replace_waiting").await;
    // One connection, so that its session counters are the submit's.
    let db = orbit::db::Db::connect(&f.test_db.dsn, 1).await.unwrap();
    let counters = Counters::start(
        &mut db.pool().acquire().await.unwrap(),
        &["Handler_read_next", "Sort_rows"],
    )
    .await;
    let newest = db
        .task_submit(&f.hash, "the-newest", &f.task(&f.queue_id, "k"))
        .await
        .unwrap()
        .task;
    let mut conn = db.pool().acquire().await.unwrap();
    let counted = counters.since(&mut conn).await;
    let (read, sorted) = (counted["Handler_read_next"], counted["Sort_rows"]);
    drop(conn);
    assert!(
        read < 10_000,
        "{read} index entries read to replace 2,000 tasks"
    );
    assert!(
        sorted < 3_000,
        "{sorted} rows sorted to replace 2,000 tasks"
    );
    let states: Vec<(String, i64)> = sqlx::query_as(
        "SELECT CAST(state AS CHAR), COUNT(*) FROM orbit_task GROUP BY state ORDER BY 1",
    )
    .fetch_all(f.db.pool())
    .await
    .unwrap();
    assert_eq!(
        states,
        [("CANCELLED".to_string(), 2000), ("WAITING".to_string(), 1)]
    );
    assert_eq!(state(&f, newest.id).await, "WAITING");
    let replaced_by: Vec<u64> = sqlx::query_scalar(
        "SELECT DISTINCT CAST(JSON_EXTRACT(error, '$.replaced_by') AS UNSIGNED) FROM orbit_task \
          WHERE state = 'CANCELLED'",
    )
    .fetch_all(f.db.pool())
    .await
    .unwrap();
    assert_eq!(replaced_by, [newest.id]);
    assert_eq!(
        f.incomplete_tasks().await,
        1,
        "every replaced task's charge went back or over"
    );
}

#[tokio::test]
async fn a_debounce_under_replace_waiting_replaces_each_waiting_task_once() {
    // A debounced submit under a replace_waiting policy replaces the key's debounced task (the
    // debounce's choice, whose charge it takes) and every other waiting task of the queue, each
    // once: one history row, one charge given back.
    let f = Fixture::new().await;
    set(&f, "exact", "k", "replace_waiting").await;
    let debounced = orbit::db::tasks::NewTask {
        timing: orbit::db::tasks::Timing {
            debounce_seconds: Some(60),
            ..Default::default()
        },
        ..f.task(&f.queue_id, "k")
    };
    let plain = f.submit(&f.queue_id, "k").await;
    let first = f.submit_task(&debounced).await;
    assert_eq!(state(&f, plain.id).await, "CANCELLED");
    // A plain task accepted after the debounced one: also waiting when the next one comes.
    let later =
        f.db.task_submit(&f.hash, "later", &f.task(&f.queue_id, "k"))
            .await
            .unwrap()
            .task;
    assert_eq!(
        state(&f, first.id).await,
        "CANCELLED",
        "replaced by the later task"
    );
    let second = f.submit_task(&debounced).await;
    let third = f.submit_task(&debounced).await;
    for id in [later.id, second.id] {
        assert_eq!(state(&f, id).await, "CANCELLED");
        let replaced: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM orbit_task_event WHERE task_id = ? AND event = 'replaced'",
        )
        .bind(id)
        .fetch_one(f.db.pool())
        .await
        .unwrap();
        assert_eq!(replaced, 1, "task {id} replaced once");
    }
    assert_eq!(state(&f, third.id).await, "WAITING");
    assert_eq!(
        f.incomplete_tasks().await,
        1,
        "one charge left, the waiting task's"
    );
}

/// Twenty identical submits (one Idempotency-Key, one request) at once on a key whose policy
/// replaces or cancels: the first creates the task, and every other creates one too, under the
/// key's lock, before its receipt's insert finds the first's: what it wrote is undone (its
/// replacement of the first's task, and its cancel). Exactly one task is created, the waiting
/// task is replaced once, the holder is cancelled once and named to one caller, and the quota
/// counts what is left.
#[tokio::test]
async fn identical_submits_racing_under_a_replacing_policy_create_and_replace_once() {
    for on_busy in ["replace_waiting", "cancel_running"] {
        let f = Fixture::new().await;
        let session = f.session("holder", true, &[&f.queue_id]).await;
        let first = f.submit(&f.queue_id, "k").await;
        let holder = f.db.task_claim(session, 1, 30_000).await.unwrap().remove(0);
        assert_eq!(holder.task.id, first.id);
        let waiting = f.submit(&f.queue_id, "k").await;
        set(&f, "exact", "k", on_busy).await;
        let t = f.task(&f.queue_id, "k");
        let mut handles = Vec::new();
        for _ in 0..20 {
            let (db, hash, t) = (f.db.clone(), f.hash, t.clone());
            handles.push(tokio::spawn(async move {
                db.task_submit(&hash, "same", &t).await
            }));
        }
        let (mut created, mut ids, mut cancels) =
            (0, std::collections::BTreeSet::new(), Vec::new());
        for h in handles {
            let s = h.await.unwrap().unwrap();
            created += usize::from(!s.replayed);
            ids.insert(s.task.id);
            cancels.extend(s.cancelled.map(|c| c.attempt_id));
        }
        assert_eq!((created, ids.len()), (1, 1), "{on_busy}");
        let new = *ids.first().unwrap();
        assert_eq!(state(&f, new).await, "WAITING", "{on_busy}");
        assert_eq!(state(&f, waiting.id).await, "CANCELLED", "{on_busy}");
        let replaced_by: i64 = count(
            &f,
            &format!(
                "SELECT CAST(JSON_VALUE(error, '$.replaced_by') AS SIGNED) FROM orbit_task WHERE id = {}",
                waiting.id
            ),
        )
        .await;
        assert_eq!(
            replaced_by as u64, new,
            "{on_busy}: replaced by the task that stays"
        );
        let replaced_events = count(
            &f,
            "SELECT COUNT(*) FROM orbit_task_event WHERE event = 'replaced'",
        )
        .await;
        assert_eq!(replaced_events, 1, "{on_busy}: one replacement kept");
        assert_eq!(count(&f, "SELECT COUNT(*) FROM orbit_task").await, 3);
        if on_busy == "cancel_running" {
            assert_eq!(
                cancels,
                [holder.attempt_id],
                "the holder named to one caller"
            );
            assert_eq!(state(&f, first.id).await, "CANCELLED");
            assert_eq!(
                f.incomplete_tasks().await,
                1,
                "only the new task is unfinished"
            );
        } else {
            assert!(cancels.is_empty());
            assert_eq!(state(&f, first.id).await, "LEASED");
            assert_eq!(
                f.incomplete_tasks().await,
                2,
                "the holder's and the new task"
            );
        }
    }
}
