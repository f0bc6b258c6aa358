//! Read procedures: task list (filters, cursor pages, scope), attempts, queue list/get, metrics.

use orbit::db::credentials::NewCredential;
use orbit::db::queues::Bootstrap;
use orbit::db::tasks::{Task, TaskFilter, TaskState};
use orbit::db::DbError;
use orbit::testing::{Fixture, ALL_SCOPES};

/// A credential of the fixture's namespace restricted to `queues` (empty = all) with `scopes`.
async fn credential(f: &Fixture, queues: &[&str], scopes: &[&str]) -> [u8; 32] {
    let token = orbit::auth::generate_token();
    let hash = orbit::auth::token_hash(&token);
    f.db.credential_create(&NewCredential {
        application: "app".into(),
        environment: "test".into(),
        namespace: "default".into(),
        queue_ids: queues.iter().map(|q| q.to_string()).collect(),
        token_hash: hash.to_vec(),
        token_hint: orbit::auth::token_hint(&token),
        scopes: scopes.iter().map(|s| s.to_string()).collect(),
        label: "test".into(),
    })
    .await
    .expect("credential create");
    hash
}

/// Another tenant (its own application) with one queue; returns its token hash and queue id.
async fn other_tenant(f: &Fixture) -> ([u8; 32], String) {
    let token = orbit::auth::generate_token();
    let hash = orbit::auth::token_hash(&token);
    let b =
        f.db.admin_bootstrap(&Bootstrap {
            application: "other-app".into(),
            environment: "test".into(),
            namespace: "default".into(),
            queue: "theirs".into(),
            token_hash: hash.to_vec(),
            token_hint: orbit::auth::token_hint(&token),
            scopes: ALL_SCOPES.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        })
        .await
        .unwrap();
    (hash, b.queue_id)
}

async fn list(f: &Fixture, hash: &[u8], filter: &TaskFilter) -> Vec<u64> {
    f.db.task_list(hash, filter, 1000, None)
        .await
        .unwrap()
        .iter()
        .map(|t| t.id)
        .collect()
}

fn ids_desc(tasks: &[&Task]) -> Vec<u64> {
    let mut ids: Vec<u64> = tasks.iter().map(|t| t.id).collect();
    ids.sort_unstable_by(|a, b| b.cmp(a));
    ids
}

#[tokio::test]
async fn each_filter_alone_and_combined() {
    let f = Fixture::new().await;
    let q2 = f.queue("q2").await;
    let plain = f.submit(&f.queue_id, "").await;
    let keyed1 = f.submit(&f.queue_id, "object/A").await;
    let keyed2 = f.submit(&q2, "object/A").await;
    let lower = f.submit(&q2, "object/a").await;
    let mut t = f.task(&f.queue_id, "");
    t.business_key = Some("order-7".into());
    let biz1 = f.submit_task(&t).await;
    t.queue_id = q2.clone();
    let biz2 = f.submit_task(&t).await;
    let cancelled = f.submit(&f.queue_id, "").await;
    f.db.task_cancel(&f.hash, cancelled.id).await.unwrap();

    let all = [&plain, &keyed1, &keyed2, &lower, &biz1, &biz2, &cancelled];
    assert_eq!(
        list(&f, &f.hash, &TaskFilter::default()).await,
        ids_desc(&all),
        "no filter: everything in scope, newest first"
    );
    let by_queue = TaskFilter {
        queue_id: Some(q2.clone()),
        ..Default::default()
    };
    assert_eq!(
        list(&f, &f.hash, &by_queue).await,
        ids_desc(&[&keyed2, &lower, &biz2])
    );
    let by_state = TaskFilter {
        state: Some(TaskState::Cancelled),
        ..Default::default()
    };
    assert_eq!(list(&f, &f.hash, &by_state).await, vec![cancelled.id]);
    let waiting = TaskFilter {
        state: Some(TaskState::Waiting),
        ..Default::default()
    };
    assert_eq!(list(&f, &f.hash, &waiting).await.len(), 6);
    let by_business = TaskFilter {
        business_key: Some("order-7".into()),
        ..Default::default()
    };
    assert_eq!(
        list(&f, &f.hash, &by_business).await,
        ids_desc(&[&biz1, &biz2])
    );
    let by_key = |k: &str| TaskFilter {
        concurrency_key: Some(k.into()),
        ..Default::default()
    };
    assert_eq!(
        list(&f, &f.hash, &by_key("object/A")).await,
        ids_desc(&[&keyed1, &keyed2]),
        "one key across queues of the namespace"
    );
    assert_eq!(list(&f, &f.hash, &by_key("object/a")).await, vec![lower.id]);
    assert!(
        list(&f, &f.hash, &by_key("object/A ")).await.is_empty(),
        "exact bytes: no trailing-space padding"
    );
    assert_eq!(
        list(&f, &f.hash, &by_key("")).await,
        ids_desc(&[&plain, &biz1, &biz2, &cancelled]),
        "'' = tasks without a key"
    );

    // Filters combine with AND, whichever index drives the read.
    let combined = TaskFilter {
        queue_id: Some(q2.clone()),
        concurrency_key: Some("object/A".into()),
        ..Default::default()
    };
    assert_eq!(list(&f, &f.hash, &combined).await, vec![keyed2.id]);
    let combined = TaskFilter {
        queue_id: Some(f.queue_id.clone()),
        business_key: Some("order-7".into()),
        ..Default::default()
    };
    assert_eq!(list(&f, &f.hash, &combined).await, vec![biz1.id]);
    let combined = TaskFilter {
        state: Some(TaskState::Cancelled),
        concurrency_key: Some(String::new()),
        queue_id: Some(f.queue_id.clone()),
        ..Default::default()
    };
    assert_eq!(list(&f, &f.hash, &combined).await, vec![cancelled.id]);
    let none = TaskFilter {
        state: Some(TaskState::Cancelled),
        business_key: Some("order-7".into()),
        ..Default::default()
    };
    assert!(list(&f, &f.hash, &none).await.is_empty());

    // The listed rows are the full task columns.
    let listed =
        f.db.task_list(&f.hash, &by_key("object/a"), 10, None)
            .await
            .unwrap();
    assert_eq!(
        listed,
        vec![f.db.task_get(&f.hash, lower.id).await.unwrap()]
    );
}

#[tokio::test]
async fn bad_state_and_limit_are_invalid_arguments() {
    let f = Fixture::new().await;
    for limit in [0, 1001] {
        let err =
            f.db.task_list(&f.hash, &TaskFilter::default(), limit, None)
                .await
                .unwrap_err();
        assert!(
            matches!(&err, DbError::InvalidArgument(m) if m.starts_with("limit")),
            "{err:?}"
        );
    }
    // The typed layer cannot send a bad state; a DBA calling the procedure can.
    for state in ["waiting", "DONE", ""] {
        let err = sqlx::query("CALL orbit_task_list(?, NULL, ?, NULL, NULL, 10, NULL)")
            .bind(&f.hash[..])
            .bind(state)
            .fetch_all(f.db.pool())
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("INVALID_ARGUMENT: state"),
            "{state:?}: {err}"
        );
    }
}

/// Walks every page of `filter` with page size `size`.
async fn pages(f: &Fixture, filter: &TaskFilter, size: u32) -> (Vec<u64>, usize) {
    let (mut seen, mut before, mut count) = (Vec::new(), None, 0);
    loop {
        let page = f.db.task_list(&f.hash, filter, size, before).await.unwrap();
        assert!(page.len() <= size as usize);
        if page.is_empty() {
            return (seen, count);
        }
        count += 1;
        before = page.last().map(|t| t.id);
        seen.extend(page.iter().map(|t| t.id));
    }
}

#[tokio::test]
async fn cursor_pages_have_no_duplicates_or_gaps() {
    let f = Fixture::new().await;
    let q2 = f.queue("q2").await;
    let q3 = f.queue("q3").await;
    let mut expected = Vec::new();
    let mut keyed = Vec::new();
    let mut business = Vec::new();
    let mut in_q2 = Vec::new();
    for i in 0..30 {
        let queue = [&f.queue_id, &q2, &q3][i % 3];
        let mut t = f.task(queue, if i % 4 == 0 { "hot" } else { "" });
        t.business_key = Some(if i % 2 == 0 { "even" } else { "odd" }.into());
        let task = f.submit_task(&t).await;
        if i % 5 == 0 {
            f.db.task_cancel(&f.hash, task.id).await.unwrap();
        }
        if i % 4 == 0 {
            keyed.push(task.id);
        }
        if i % 2 == 0 {
            business.push(task.id);
        }
        if i % 3 == 1 {
            in_q2.push(task.id);
        }
        expected.push(task.id);
    }
    for v in [&mut expected, &mut keyed, &mut business, &mut in_q2] {
        v.sort_unstable_by(|a, b| b.cmp(a));
    }
    // Several queues and two states: the merge of many index ranges must stay exact.
    let (all, n) = pages(&f, &TaskFilter::default(), 7).await;
    assert_eq!(all, expected);
    assert_eq!(n, 5);
    let (all, _) = pages(&f, &TaskFilter::default(), 1).await;
    assert_eq!(all, expected);
    let hot = TaskFilter {
        concurrency_key: Some("hot".into()),
        ..Default::default()
    };
    assert_eq!(pages(&f, &hot, 3).await.0, keyed);
    let even = TaskFilter {
        business_key: Some("even".into()),
        ..Default::default()
    };
    assert_eq!(pages(&f, &even, 4).await.0, business);
    let q2_only = TaskFilter {
        queue_id: Some(q2.clone()),
        ..Default::default()
    };
    assert_eq!(pages(&f, &q2_only, 4).await.0, in_q2);
    // A cursor in the middle starts right below it.
    let below =
        f.db.task_list(&f.hash, &TaskFilter::default(), 3, Some(expected[10]))
            .await
            .unwrap();
    assert_eq!(
        below.iter().map(|t| t.id).collect::<Vec<_>>(),
        expected[11..14]
    );
}

#[tokio::test]
async fn listing_never_leaves_the_credential_scope() {
    let f = Fixture::new().await;
    let q2 = f.queue("q2").await;
    let (theirs_hash, theirs) = other_tenant(&f).await;
    let mine = f.submit(&f.queue_id, "shared").await;
    let mine2 = f.submit(&q2, "shared").await;
    let mut t = f.task(&theirs, "shared");
    t.business_key = Some("b".into());
    let their_task = f.db.task_submit(&theirs_hash, "x", &t).await.unwrap().task;

    // Another tenant's tasks are never listed, whatever the filter, and its queue does not exist.
    for filter in [
        TaskFilter::default(),
        TaskFilter {
            concurrency_key: Some("shared".into()),
            ..Default::default()
        },
        TaskFilter {
            business_key: Some("b".into()),
            ..Default::default()
        },
    ] {
        let ids = list(&f, &f.hash, &filter).await;
        assert!(!ids.contains(&their_task.id), "{filter:?}: {ids:?}");
    }
    let theirs_filter = TaskFilter {
        queue_id: Some(theirs.clone()),
        ..Default::default()
    };
    assert!(matches!(
        f.db.task_list(&f.hash, &theirs_filter, 10, None)
            .await
            .unwrap_err(),
        DbError::NotFound(_)
    ));
    assert_eq!(
        list(&f, &theirs_hash, &TaskFilter::default()).await,
        vec![their_task.id]
    );

    // A credential restricted to q1 sees q1 only, also through the namespace-wide key index.
    let q1_only = credential(&f, &[&f.queue_id], &["tasks:read"]).await;
    assert_eq!(
        list(&f, &q1_only, &TaskFilter::default()).await,
        vec![mine.id]
    );
    let shared = TaskFilter {
        concurrency_key: Some("shared".into()),
        ..Default::default()
    };
    assert_eq!(list(&f, &q1_only, &shared).await, vec![mine.id]);
    assert_eq!(list(&f, &f.hash, &shared).await, vec![mine2.id, mine.id]);
    let q2_filter = TaskFilter {
        queue_id: Some(q2.clone()),
        ..Default::default()
    };
    assert!(matches!(
        f.db.task_list(&q1_only, &q2_filter, 10, None)
            .await
            .unwrap_err(),
        DbError::PermissionDenied(_)
    ));

    // Scope and authentication.
    let no_read = credential(&f, &[], &["tasks:submit"]).await;
    assert!(matches!(
        f.db.task_list(&no_read, &TaskFilter::default(), 10, None)
            .await
            .unwrap_err(),
        DbError::PermissionDenied(_)
    ));
    let unknown = orbit::auth::token_hash("orbit_nobody");
    assert!(matches!(
        f.db.task_list(&unknown, &TaskFilter::default(), 10, None)
            .await
            .unwrap_err(),
        DbError::Unauthenticated(_)
    ));
}

#[tokio::test]
async fn attempts_show_the_token_of_keyed_tasks_and_zero_otherwise() {
    let f = Fixture::new().await;
    let q2 = f.queue("q2").await;
    let keyed = f.submit(&f.queue_id, "object/1").await;
    let plain = f.submit(&q2, "").await;
    let s = f.session("w", true, &[&f.queue_id, &q2]).await;
    let grants = f.db.task_claim(s, 10, 30_000).await.unwrap();
    assert_eq!(grants.len(), 2);
    let first = grants.iter().find(|g| g.task.id == keyed.id).unwrap();
    // Cancel before start, then the next grant of the key: a second attempt, a larger token.
    f.db.task_cancel(&f.hash, keyed.id).await.unwrap();
    let again = f.submit(&f.queue_id, "object/1").await;
    let second = f.db.task_claim(s, 10, 30_000).await.unwrap().remove(0);
    assert_eq!(second.task.id, again.id);

    let attempts = f.db.attempt_list(&f.hash, keyed.id).await.unwrap();
    assert_eq!(attempts.len(), 1);
    let a = &attempts[0];
    assert_eq!(a.id, first.attempt_id);
    assert_eq!((a.task_id, a.attempt_no), (keyed.id, 1));
    assert_eq!(a.concurrency_token, first.concurrency_token);
    assert!(a.concurrency_token > 0);
    assert_eq!(a.state, orbit::db::attempts::AttemptState::Cancelled);
    assert_eq!(a.outcome.as_deref(), Some("cancelled"));
    assert!(a.released_at.is_some() && a.started_at.is_none());
    assert_eq!((a.worker_id.as_str(), a.session_id), ("w", s));
    let json = serde_json::to_value(a).unwrap();
    assert_eq!(
        json["concurrency_token"],
        serde_json::Value::String(a.concurrency_token.to_string()),
        "a decimal string, never a JSON number"
    );

    let b = f.db.attempt_get(&f.hash, second.attempt_id).await.unwrap();
    assert!(b.concurrency_token > a.concurrency_token);
    assert_eq!(b.state, orbit::db::attempts::AttemptState::Leased);
    assert!(b.outcome.is_none() && b.released_at.is_none());

    let p = f.db.attempt_list(&f.hash, plain.id).await.unwrap();
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].concurrency_token, 0, "0 = the task has no key");
    assert_eq!(p[0].queue_id, q2);
    assert!(serde_json::to_value(&p[0])
        .unwrap()
        .get("concurrency_token")
        .is_none());

    // Several attempts come in attempt_no order.
    let retried = f.submit(&f.queue_id, "object/2").await;
    for n in 1..=2u32 {
        let g = f.db.task_claim(s, 10, 30_000).await.unwrap().remove(0);
        assert_eq!((g.task.id, g.attempt_no), (retried.id, n));
        f.expire_lease(g.attempt_id).await;
        f.db.lease_recover(100).await.unwrap();
    }
    let history = f.db.attempt_list(&f.hash, retried.id).await.unwrap();
    assert_eq!(
        history.iter().map(|a| a.attempt_no).collect::<Vec<_>>(),
        [1, 2]
    );
    assert!(history[1].concurrency_token > history[0].concurrency_token);
    // A task without attempts has an empty history.
    let fresh = f.submit(&f.queue_id, "object/3").await;
    f.db.task_cancel(&f.hash, fresh.id).await.unwrap();
    assert!(f
        .db
        .attempt_list(&f.hash, fresh.id)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn attempts_out_of_reach_are_not_found() {
    let f = Fixture::new().await;
    let q2 = f.queue("q2").await;
    let t = f.submit(&q2, "k").await;
    let s = f.session("w", true, &[&q2]).await;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap().remove(0);
    let (theirs, _) = other_tenant(&f).await;
    let q1_only = credential(&f, &[&f.queue_id], &["tasks:read"]).await;
    for hash in [&theirs, &q1_only] {
        assert!(matches!(
            f.db.attempt_list(hash, t.id).await.unwrap_err(),
            DbError::NotFound(_)
        ));
        assert!(matches!(
            f.db.attempt_get(hash, g.attempt_id).await.unwrap_err(),
            DbError::NotFound(_)
        ));
    }
    assert!(matches!(
        f.db.attempt_get(&f.hash, 987_654).await.unwrap_err(),
        DbError::NotFound(_)
    ));
    assert!(matches!(
        f.db.attempt_list(&f.hash, 987_654).await.unwrap_err(),
        DbError::NotFound(_)
    ));
    let no_read = credential(&f, &[], &["tasks:submit"]).await;
    assert!(matches!(
        f.db.attempt_get(&no_read, g.attempt_id).await.unwrap_err(),
        DbError::PermissionDenied(_)
    ));
}

#[tokio::test]
async fn queue_list_and_get_stay_in_scope() {
    let f = Fixture::new().await;
    let q2 = f.queue("q2").await;
    let q3 = f.queue("q3").await;
    let (theirs_hash, theirs) = other_tenant(&f).await;
    let mut mine = vec![f.queue_id.clone(), q2.clone(), q3.clone()];
    mine.sort();

    let all = f.db.queue_list(&f.hash, 100, None).await.unwrap();
    assert_eq!(all.iter().map(|q| q.id.clone()).collect::<Vec<_>>(), mine);
    assert_eq!(all[0], f.db.queue_get(&f.hash, &mine[0]).await.unwrap());
    // Keyset pages.
    let mut paged = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = f.db.queue_list(&f.hash, 2, after.as_deref()).await.unwrap();
        if page.is_empty() {
            break;
        }
        after = page.last().map(|q| q.id.clone());
        paged.extend(page.into_iter().map(|q| q.id));
    }
    assert_eq!(paged, mine);

    // Another tenant: not listed, not found; and it sees only its own.
    assert!(matches!(
        f.db.queue_get(&f.hash, &theirs).await.unwrap_err(),
        DbError::NotFound(_)
    ));
    let listed = f.db.queue_list(&theirs_hash, 100, None).await.unwrap();
    assert_eq!(
        listed.iter().map(|q| q.id.clone()).collect::<Vec<_>>(),
        [theirs]
    );

    // A queue-list credential: its queue only; a sibling queue is NOT_FOUND.
    let q2_only = credential(&f, &[&q2], &["tasks:read"]).await;
    let listed = f.db.queue_list(&q2_only, 100, None).await.unwrap();
    assert_eq!(
        listed.iter().map(|q| q.id.as_str()).collect::<Vec<_>>(),
        [q2.as_str()]
    );
    assert_eq!(f.db.queue_get(&q2_only, &q2).await.unwrap().name, "q2");
    assert!(matches!(
        f.db.queue_get(&q2_only, &q3).await.unwrap_err(),
        DbError::NotFound(_)
    ));

    let no_read = credential(&f, &[], &["tasks:submit"]).await;
    assert!(matches!(
        f.db.queue_list(&no_read, 10, None).await.unwrap_err(),
        DbError::PermissionDenied(_)
    ));
    assert!(matches!(
        f.db.queue_list(&f.hash, 0, None).await.unwrap_err(),
        DbError::InvalidArgument(_)
    ));
}

#[tokio::test]
async fn metrics_snapshot_counts_a_known_setup() {
    let f = Fixture::new().await;
    let other = f.queue("other").await;
    f.submit(&f.queue_id, "m/1").await;
    f.submit(&f.queue_id, "m/1").await; // blocked behind the first
    f.submit(&f.queue_id, "").await;
    f.submit(&other, "").await;
    let cancelled = f.submit(&f.queue_id, "").await;
    f.db.task_cancel(&f.hash, cancelled.id).await.unwrap();
    let s = f.session("w", true, &[&f.queue_id]).await;
    assert_eq!(f.db.task_claim(s, 10, 30_000).await.unwrap().len(), 2);
    let idle = f.session("idle", false, &[&f.queue_id]).await;
    f.db.session_close(idle, true).await.unwrap();
    f.db.queue_set_paused(&f.hash, &other, true).await.unwrap();

    let rows = f.db.metrics_snapshot().await.unwrap();
    let get = |metric: &str, queue: &str, label: &str| {
        rows.iter()
            .find(|r| r.metric == metric && r.queue_id == queue && r.label == label)
            .map(|r| r.value)
            .unwrap_or_else(|| panic!("no {metric}/{queue}/{label} in {rows:?}"))
    };
    for (queue, state, n) in [
        (&f.queue_id, "WAITING", 1),
        (&f.queue_id, "LEASED", 2),
        (&f.queue_id, "RUNNING", 0),
        (&f.queue_id, "RETRY_WAIT", 0),
        (&f.queue_id, "NEEDS_REVIEW", 0),
        (&other, "WAITING", 1),
        (&other, "LEASED", 0),
    ] {
        assert_eq!(get("tasks", queue, state), n, "tasks {queue} {state}");
    }
    // Live states only, for every queue (finished tasks are counted as results happen).
    assert_eq!(rows.iter().filter(|r| r.metric == "tasks").count(), 2 * 5);
    assert!(!rows
        .iter()
        .any(|r| r.metric == "tasks" && ["SUCCEEDED", "CANCELLED"].contains(&r.label.as_str())));
    assert_eq!(get("queue_permits", &f.queue_id, ""), 2);
    assert_eq!(get("queue_permits", &other, ""), 0);
    assert_eq!(get("queue_paused", &other, "other"), 1);
    assert_eq!(get("queue_paused", &f.queue_id, "q1"), 0);
    assert_eq!(get("key_permits", "", ""), 1);
    assert_eq!(get("sessions", "", "active"), 1);
    assert_eq!(get("sessions", "", "draining"), 1);
    assert_eq!(get("application_active_attempts", "", "app"), 2);
    assert_eq!(get("application_incomplete_tasks", "", "app"), 4);
}

/// The handler reads (index and row reads) of one `CALL orbit_metrics_snapshot()`.
async fn snapshot_reads(pool: &sqlx::MySqlPool) -> u64 {
    let mut conn = pool.acquire().await.unwrap();
    async fn status(conn: &mut sqlx::MySqlConnection) -> u64 {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SHOW SESSION STATUS WHERE Variable_name IN ('Handler_read_next', 'Handler_read_rnd_next', 'Handler_read_key')",
        )
        .fetch_all(conn)
        .await
        .unwrap();
        rows.iter().map(|(_, v)| v.parse::<u64>().unwrap()).sum()
    }
    let before = status(&mut conn).await;
    sqlx::raw_sql("CALL orbit_metrics_snapshot()")
        .execute(&mut *conn)
        .await
        .unwrap();
    let after = status(&mut conn).await;
    after - before
}

/// A scrape reads what is unfinished, not the history: 3,000 finished tasks add no index reads.
#[tokio::test]
async fn metrics_snapshot_does_not_read_finished_tasks() {
    let f = Fixture::new().await;
    for i in 0..5 {
        f.submit(&f.queue_id, &format!("k{i}")).await;
    }
    let small = snapshot_reads(&f.test_db.pool).await;
    // 3,000 finished tasks in the same queue, written directly (as a long history would be).
    sqlx::raw_sql(&format!(
        "INSERT INTO orbit_task (application_id, namespace_id, queue_id, handler, handler_version, \
           payload_version, payload, state, lane, run_at, created_at, updated_at, finished_at) \
         SELECT {app}, {ns}, '{q}', 'h', '1', '1', '{{}}', 'SUCCEEDED', 'none', NOW(6), NOW(6), NOW(6), NOW(6) \
           FROM (SELECT a.n * 100 + b.n * 10 + c.n AS n FROM \
                 (SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) a, \
                 (SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) b, \
                 (SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) c) x \
           CROSS JOIN (SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3) y",
        app = f.application_id,
        ns = f.namespace_id,
        q = f.queue_id
    ))
    .execute(&f.test_db.pool)
    .await
    .unwrap();
    sqlx::raw_sql("ANALYZE TABLE orbit_task")
        .execute(&f.test_db.pool)
        .await
        .unwrap();
    let large = snapshot_reads(&f.test_db.pool).await;
    assert!(
        large <= small + 20,
        "{small} handler reads with 5 tasks, {large} with 3,000 more finished ones"
    );
}
