//! The upgrade from release 0.1.0, proven on live data (SPEC §9): a database installed from the
//! frozen `migrations/000001_install.sql` and holding work in every state is upgraded with the
//! `orbit migrate up` binary while no writer runs; then it must equal a fresh install (schema,
//! routines, catalog), keep every row, replay old receipts and let the old key holder finish;
//! a new server refuses it until then. A migrate stopped part-way completes when run again.
//!
//! The 0.1.0 data is written through the same stored procedures the 0.1.0 server calls: through
//! this crate's `orbit::db` layer where 000002 changes neither a procedure's parameters nor its
//! result, and with 0.1.0's own CALLs where it does (a result's and a cancel's answers gained
//! the queues to wake, and 0.1.0 knows no `metrics:read` scope).

use std::collections::BTreeMap;

use orbit::db::tasks::{NewTask, TaskState};
use orbit::db::workers::{AttemptResult, Outcome, SessionOpen};
use orbit::db::Db;
use orbit::migrate;
use orbit::testing::{Fixture, Server, TestDb};
use serde_json::{json, Value};
use sqlx::{MySqlPool, Row};

const BIN: &str = env!("CARGO_BIN_EXE_orbit");

fn migrate_up(dsn: &str) -> String {
    orbit::testing::run_cli_ok(BIN, &["migrate", "up"], dsn)
}

/// A database with release 0.1.0 installed from the frozen 000001 alone.
async fn release_0_1_0() -> TestDb {
    let db = TestDb::empty().await;
    let first = &migrate::embedded()[..1];
    assert_eq!(first[0].name, "000001_install");
    let frozen = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/000001_install.sql"),
    )
    .unwrap();
    assert_eq!(
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&frozen)),
        orbit::codegen::upgrade::FROZEN[0].sha256,
        "000001 is the released file"
    );
    let mut conn = db.conn().await;
    migrate::up(&mut conn, first, None, |_, _, _| {})
        .await
        .unwrap();
    assert_eq!(version(&db.pool).await, 1);
    db
}

/// The scopes release 0.1.0 knows (0.2 adds `metrics:read`).
const SCOPES_0_1_0: [&str; 5] = [
    "queues:manage",
    "tasks:submit",
    "tasks:read",
    "workers:connect",
    "workers:consume",
];

/// A tenant (application, namespace, queue, credential of every 0.1.0 scope) in `db`.
async fn tenant(test_db: TestDb) -> Fixture {
    let db = Db::new(test_db.pool.clone());
    let (bootstrap, token) = orbit::db::queues::Bootstrap::with_new_token(
        "app",
        "test",
        "default",
        "q1",
        &SCOPES_0_1_0,
        "upgrade",
    );
    let hash = orbit::auth::token_hash(&token);
    let b = db.admin_bootstrap(&bootstrap).await.expect("bootstrap");
    Fixture {
        test_db,
        db,
        token,
        hash,
        queue_id: b.queue_id,
        namespace_id: b.namespace_id,
        application_id: b.application_id,
    }
}

/// A worker's result as a 0.1.0 server records it: `CALL orbit_attempt_finish` granting nothing
/// (0.1.0's answer has no wake_queues column for `orbit::db` to read).
async fn finish_0_1_0(
    pool: &MySqlPool,
    session_id: u64,
    attempt_id: u64,
    outcome: Outcome,
    retryable: bool,
    error: Option<Value>,
) {
    let results = serde_json::to_string(&[AttemptResult {
        attempt_id,
        outcome,
        retryable,
        output: None,
        error,
    }])
    .unwrap();
    sqlx::query("CALL orbit_attempt_finish(?, ?, 0, 0)")
        .bind(session_id)
        .bind(results)
        .fetch_all(pool)
        .await
        .unwrap();
}

/// A submit as a 0.1.0 server makes it: `CALL orbit_task_submit` with 0.1.0's parameters (no
/// timing). Returns the task's id.
async fn submit_0_1_0(pool: &MySqlPool, hash: &[u8], idempotency_key: &str, t: &NewTask) -> u64 {
    let row = sqlx::query("CALL orbit_task_submit(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        .bind(hash)
        .bind(idempotency_key.as_bytes())
        .bind(&t.queue_id)
        .bind(&t.handler)
        .bind(&t.handler_version)
        .bind(&t.payload_version)
        .bind(&t.payload)
        .bind(&t.business_key)
        .bind(t.concurrency_key.as_deref().map(str::as_bytes))
        .bind(t.priority)
        .bind(t.max_attempts)
        .bind(t.retry_base_ms)
        .bind(t.retry_max_ms)
        .bind(t.retry_unknown.map(i64::from))
        .bind(t.deadline_seconds)
        .fetch_one(pool)
        .await
        .unwrap();
    row.get::<u64, _>(1)
}

/// A grant as 0.1.0's orbit_task_claim returns it (0.2 adds key_slot after the token).
struct Grant0_1_0 {
    attempt_id: u64,
    concurrency_token: u64,
    task_id: u64,
}

/// 0.1.0's orbit_task_claim of one task, read in 0.1.0's column order.
async fn claim_0_1_0(pool: &MySqlPool, session_id: u64, lease_ms: u32) -> Grant0_1_0 {
    let rows = sqlx::query("CALL orbit_task_claim(?, 1, ?)")
        .bind(session_id)
        .bind(lease_ms)
        .fetch_all(pool)
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    Grant0_1_0 {
        attempt_id: rows[0].get(0),
        concurrency_token: rows[0].get(3),
        task_id: rows[0].get(4),
    }
}

async fn version(pool: &MySqlPool) -> u64 {
    sqlx::query("CALL orbit_extension_version()")
        .fetch_one(pool)
        .await
        .unwrap()
        .get(0)
}

/// Everything information_schema says about the extension's objects, one text line per fact
/// (the resource-side fence, installed in the same database here, is not the extension's).
async fn schema(pool: &MySqlPool) -> BTreeMap<&'static str, Vec<String>> {
    let not_fence = |col: &str| format!("{col} NOT LIKE 'orbit\\_fence\\_%'");
    let queries: Vec<(&'static str, String)> = vec![
        ("tables", format!(
            "SELECT CONCAT_WS(' | ', table_name, table_type, engine, row_format, table_collation, create_options, table_comment)
               FROM information_schema.tables WHERE table_schema = DATABASE() AND {}", not_fence("table_name"))),
        ("columns", format!(
            "SELECT CONCAT_WS(' | ', table_name, column_name, ordinal_position, COALESCE(column_default, 'NULL'), is_nullable,
                    column_type, COALESCE(character_set_name, '-'), COALESCE(collation_name, '-'), column_key, extra,
                    column_comment, COALESCE(generation_expression, '-'))
               FROM information_schema.columns WHERE table_schema = DATABASE() AND {}", not_fence("table_name"))),
        ("indexes", format!(
            "SELECT CONCAT_WS(' | ', table_name, index_name, seq_in_index, column_name, non_unique, COALESCE(sub_part, '-'),
                    index_type, COALESCE(collation, '-'), index_comment)
               FROM information_schema.statistics WHERE table_schema = DATABASE() AND {}", not_fence("table_name"))),
        ("constraints", format!(
            "SELECT CONCAT_WS(' | ', table_name, constraint_name, constraint_type)
               FROM information_schema.table_constraints WHERE table_schema = DATABASE() AND {}", not_fence("table_name"))),
        ("checks", format!(
            "SELECT CONCAT_WS(' | ', table_name, constraint_name, check_clause)
               FROM information_schema.check_constraints WHERE constraint_schema = DATABASE() AND {}", not_fence("table_name"))),
        ("routines", format!(
            "SELECT CONCAT_WS(' | ', routine_name, routine_type, COALESCE(data_type, '-'), is_deterministic, sql_data_access,
                    security_type, sql_mode, routine_comment, character_set_client, collation_connection, database_collation,
                    routine_definition)
               FROM information_schema.routines WHERE routine_schema = DATABASE() AND {}", not_fence("routine_name"))),
        ("parameters", format!(
            "SELECT CONCAT_WS(' | ', specific_name, ordinal_position, COALESCE(parameter_mode, '-'), COALESCE(parameter_name, '-'), dtd_identifier)
               FROM information_schema.parameters WHERE specific_schema = DATABASE() AND {}", not_fence("specific_name"))),
        ("triggers", "SELECT CONCAT_WS(' | ', trigger_name, event_object_table, action_statement)
               FROM information_schema.triggers WHERE trigger_schema = DATABASE()".into()),
        ("views", "SELECT CONCAT_WS(' | ', table_name, view_definition)
               FROM information_schema.views WHERE table_schema = DATABASE()".into()),
        ("events", "SELECT CONCAT_WS(' | ', event_name, event_definition)
               FROM information_schema.events WHERE event_schema = DATABASE()".into()),
        ("catalog", "SELECT CONCAT_WS(' | ', kind, name, version, checksum) FROM orbit_extension".into()),
    ];
    let mut out = BTreeMap::new();
    for (what, sql) in queries {
        let rows: Vec<Vec<u8>> = sqlx::query_scalar(&sql).fetch_all(pool).await.unwrap();
        let mut lines: Vec<String> = rows
            .into_iter()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .collect();
        lines.sort();
        out.insert(what, lines);
    }
    out
}

/// Asserts two schemas are equal, naming the first differing facts of each kind.
fn assert_same_schema(
    got: &BTreeMap<&str, Vec<String>>,
    want: &BTreeMap<&str, Vec<String>>,
    what: &str,
) {
    for (kind, lines) in want {
        let have = &got[kind];
        let missing: Vec<&String> = lines.iter().filter(|l| !have.contains(l)).collect();
        let extra: Vec<&String> = have.iter().filter(|l| !lines.contains(l)).collect();
        let cut = |v: Vec<&String>| {
            v.iter()
                .take(3)
                .map(|l| l.chars().take(300).collect::<String>())
                .collect::<Vec<_>>()
        };
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{what}: {kind} differ\n  expected but absent: {:?}\n  present but unexpected: {:?}",
            cut(missing),
            cut(extra)
        );
    }
    assert!(
        want["tables"].len() > 15 && want["routines"].len() > 40 && want["catalog"].len() > 60,
        "the comparison saw the objects"
    );
}

/// The full install of the current version from generated-sql/install.sql, statement by statement
/// as `migrate up` sends them (the mariadb client strips comments from routine bodies by default).
async fn squashed_install() -> TestDb {
    let db = TestDb::empty().await;
    let script = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("generated-sql/install.sql"),
    )
    .unwrap();
    let mut conn = db.conn().await;
    for s in orbit::sqlscript::split(&script) {
        sqlx::raw_sql(&s.sql)
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("install.sql line {}: {e}", s.line));
    }
    db
}

/// Installs the resource-side fence into the same database (a resource that shares it).
async fn install_fence(pool: &MySqlPool) {
    let script = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("generated-sql/fence/install.sql"),
    )
    .unwrap();
    let mut conn = pool.acquire().await.unwrap();
    for s in orbit::sqlscript::split(&script) {
        sqlx::raw_sql(&s.sql).execute(&mut *conn).await.unwrap();
    }
}

async fn fence_write(pool: &MySqlPool, token: u64, op: &str) -> String {
    let row = sqlx::query("CALL orbit_fence_write('default', 'k1', ?, ?, 'upgrade-test', 'v')")
        .bind(token)
        .bind(op)
        .fetch_one(pool)
        .await
        .unwrap();
    String::from_utf8_lossy(&row.try_get::<Vec<u8>, _>(0).unwrap()).into_owned()
}

/// Every row of every table (except the catalog, which the upgrade rewrites), as checksums.
async fn table_checksums(pool: &MySqlPool) -> BTreeMap<String, (i64, String)> {
    let tables: Vec<Vec<u8>> = sqlx::query_scalar(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name <> 'orbit_extension'",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let mut out = BTreeMap::new();
    for t in tables {
        let t = String::from_utf8(t).unwrap();
        let n: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {t}"))
            .fetch_one(pool)
            .await
            .unwrap();
        // orbit_queue (retention_seconds), orbit_resource (holder_attempt_id, compared by
        // attempts_and_permits) and orbit_task (debounce_seconds, debounce_until) gain columns:
        // their rows are compared on the columns 0.1.0 had (NULL spelled out, as CONCAT_WS
        // would skip it), every other table on every column.
        let columns = match t.as_str() {
            "orbit_queue" => Some(
                "id, application_id, environment_id, namespace_id, name, paused, max_active_attempts, created_at, updated_at",
            ),
            "orbit_resource" => Some(
                "id, namespace_id, HEX(concurrency_key), highest_token, version, created_at, updated_at",
            ),
            "orbit_task" => Some(
                "id, application_id, namespace_id, queue_id, handler, handler_version, payload_version, payload, \
                 business_key, HEX(concurrency_key), resource_id, state, lane, priority, max_attempts, attempt_count, \
                 quota_slot, retry_base_ms, retry_max_ms, retry_unknown, run_at, IFNULL(deadline_at, 'NULL'), \
                 current_attempt_id, blocked_reason, IFNULL(output, 'NULL'), IFNULL(error, 'NULL'), \
                 HEX(idempotency_key), plan_id, plan_version, created_at, updated_at, IFNULL(finished_at, 'NULL')",
            ),
            _ => None,
        };
        if let Some(columns) = columns {
            let sum: Option<Vec<u8>> = sqlx::query_scalar(&format!(
                "SELECT MD5(GROUP_CONCAT(CONCAT_WS('|', {columns}) ORDER BY id SEPARATOR '\\n')) FROM {t}"
            ))
            .fetch_one(pool)
            .await
            .unwrap();
            out.insert(t, (n, format!("{sum:?}")));
            continue;
        }
        let row = sqlx::query(&format!("CHECKSUM TABLE {t} EXTENDED"))
            .fetch_one(pool)
            .await
            .unwrap();
        let sum: Option<i64> = row.try_get(1).ok();
        out.insert(t, (n, format!("{sum:?}")));
    }
    out
}

/// The attempts' 0.1.0 columns, row by row, and the permits: as permit rows before the upgrade
/// (`after` false); after it, key permits as the resource rows' holder_attempt_id and queue
/// permits as the attempts without released_at. 000002 moves the permits, so orbit_attempt's
/// checksum changes by design; these must not.
async fn attempts_and_permits(
    pool: &MySqlPool,
    after: bool,
) -> (String, Vec<(u64, u64)>, Vec<u64>) {
    let attempts: String = sqlx::query_scalar(
        "SELECT CAST(COALESCE(JSON_ARRAYAGG(JSON_ARRAY(id, task_id, attempt_no, application_id, namespace_id, queue_id,
                      resource_id, concurrency_token, grant_version, release_version, session_id, worker_id,
                      claim_seq, quota_slot, state, granted_at, lease_expires_at, started_at, released_at,
                      outcome, retryable, output, error, late_result)), '[]') AS CHAR)
           FROM (SELECT * FROM orbit_attempt ORDER BY id) a",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    let (keys, queues) = if after {
        (
            "SELECT id, holder_attempt_id FROM orbit_resource WHERE holder_attempt_id <> 0 ORDER BY id",
            "SELECT id FROM orbit_attempt WHERE released_at IS NULL ORDER BY id",
        )
    } else {
        (
            "SELECT resource_id, attempt_id FROM orbit_key_permit ORDER BY resource_id",
            "SELECT attempt_id FROM orbit_queue_permit ORDER BY attempt_id",
        )
    };
    (
        attempts,
        sqlx::query_as(keys).fetch_all(pool).await.unwrap(),
        sqlx::query_scalar(queues).fetch_all(pool).await.unwrap(),
    )
}

/// The tables the 0.2 upgrade adds plan columns to.
const PLAN_TABLES: [&str; 3] = ["orbit_plan", "orbit_plan_version", "orbit_plan_fire"];

/// The plan tables' rows, in their 0.1 columns.
async fn plan_rows(pool: &MySqlPool) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for sql in [
        "SELECT CONCAT_WS('|', id, application_id, namespace_id, queue_id, name, current_version, paused, next_fire_at, created_at, updated_at) FROM orbit_plan ORDER BY id",
        "SELECT CONCAT_WS('|', plan_id, version, schedule_kind, schedule_spec, handler, handler_version, payload_version, payload, business_key, HEX(concurrency_key), priority, max_attempts, retry_base_ms, retry_max_ms, retry_unknown, deadline_seconds, created_at) FROM orbit_plan_version ORDER BY plan_id, version",
        "SELECT CONCAT_WS('|', plan_id, scheduled_for, version, task_id, fired_at) FROM orbit_plan_fire ORDER BY plan_id, scheduled_for",
    ] {
        let rows: Vec<Vec<u8>> = sqlx::query_scalar(sql).fetch_all(pool).await.unwrap();
        out.extend(rows);
    }
    out
}

fn task(f: &Fixture, queue_id: &str, key: Option<&str>) -> NewTask {
    NewTask {
        concurrency_key: Some(key.unwrap_or("").to_string()),
        ..f.task(queue_id, "")
    }
}

/// The tasks' ids and states, and the largest token ever granted.
async fn tasks(pool: &MySqlPool) -> Vec<(u64, String)> {
    sqlx::query("SELECT id, CAST(state AS BINARY) FROM orbit_task ORDER BY id")
        .fetch_all(pool)
        .await
        .unwrap()
        .iter()
        .map(|r| {
            (
                r.get::<u64, _>(0),
                String::from_utf8(r.get::<Vec<u8>, _>(1)).unwrap(),
            )
        })
        .collect()
}

async fn max_token(pool: &MySqlPool) -> u64 {
    sqlx::query_scalar(
        "SELECT CAST(COALESCE(MAX(concurrency_token), 0) AS UNSIGNED) FROM orbit_attempt",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn an_upgrade_of_a_live_0_1_0_database_loses_nothing_and_equals_a_fresh_install() {
    // --- Release 0.1.0 with work in every state. ---
    let f = tenant(release_0_1_0().await).await;
    let pool = f.test_db.pool.clone();
    install_fence(&pool).await;
    let q1 = f.queue_id.clone();
    // 0.1.0's orbit_queue_create (five parameters, no retention).
    let q2: Vec<u8> = sqlx::query_scalar("CALL orbit_queue_create(?, NULL, 'q2', NULL, NULL)")
        .bind(&f.hash[..])
        .fetch_one(&pool)
        .await
        .unwrap();
    let q2 = String::from_utf8(q2).unwrap();
    let worker =
        f.db.session_open(
            &f.hash,
            &SessionOpen {
                worker_id: "w-old".into(),
                node: "old-server".into(),
                capacity: 100,
                concurrency_keys: true,
                queue_ids: vec![q1.clone(), q2.clone()],
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .session_id;
    let lease_ms = 600_000;
    // One task at a time is ready, so each claim takes the task just submitted.
    let submit = async |t: &NewTask| {
        submit_0_1_0(&pool, &f.hash, &format!("old-{}", rand::random::<u64>()), t).await
    };
    let claim_next = async |t: NewTask| {
        let id = submit(&t).await;
        let grant = claim_0_1_0(&pool, worker, lease_ms).await;
        assert_eq!(grant.task_id, id);
        grant
    };
    let succeeded = claim_next(task(&f, &q1, None)).await;
    f.db.attempt_start(worker, succeeded.attempt_id)
        .await
        .unwrap();
    finish_0_1_0(
        &pool,
        worker,
        succeeded.attempt_id,
        Outcome::Succeeded,
        false,
        None,
    )
    .await;
    let review = claim_next(task(&f, &q1, None)).await;
    finish_0_1_0(
        &pool,
        worker,
        review.attempt_id,
        Outcome::Unknown,
        false,
        None,
    )
    .await;
    let retry = claim_next(NewTask {
        retry_base_ms: Some(3_600_000),
        retry_max_ms: Some(3_600_000),
        ..task(&f, &q1, None)
    })
    .await;
    finish_0_1_0(
        &pool,
        worker,
        retry.attempt_id,
        Outcome::Failed,
        true,
        Some(json!({"e": 1})),
    )
    .await;
    // The key k1's holder: RUNNING, and a task blocked behind it.
    let holder = claim_next(task(&f, &q2, Some("k1"))).await;
    f.db.attempt_start(worker, holder.attempt_id).await.unwrap();
    assert!(holder.concurrency_token > 0);
    assert_eq!(
        fence_write(&pool, holder.concurrency_token, "op-1").await,
        "accepted"
    );
    let blocked = submit(&task(&f, &q1, Some("k1"))).await;
    let leased = claim_next(task(&f, &q1, None)).await;
    let cancelled = submit(&task(&f, &q1, None)).await;
    sqlx::query("CALL orbit_task_cancel(?, ?)")
        .bind(f.hash.as_slice())
        .bind(cancelled)
        .fetch_all(&pool)
        .await
        .unwrap();
    // A receipt to replay: its request exactly as the HTTP body below spells it.
    let receipt_task = NewTask {
        queue_id: q1.clone(),
        handler: "h".into(),
        handler_version: "v1".into(),
        payload_version: "v1".into(),
        payload: "{\"n\":1}".into(),
        // What the HTTP body's omitted key means.
        concurrency_key: Some(String::new()),
        ..Default::default()
    };
    let waiting = submit_0_1_0(&pool, &f.hash, "receipt-1", &receipt_task).await;
    // A 0.1 plan (the 0.1 signature of orbit_plan_create), fired once: its version and its fire
    // row get the new columns' defaults, which keep its 0.1 behaviour.
    let plan_id: u64 = sqlx::query(
        "CALL orbit_plan_create(?, ?, 'nightly', 86400, 'h', 'v1', 'v1', '{}', '', '', NULL, NULL, NULL, NULL, NULL, NULL)",
    )
    .bind(&f.hash[..])
    .bind(&q2)
    .fetch_one(&pool)
    .await
    .unwrap()
    .get(0);
    sqlx::query(
        "UPDATE orbit_plan SET next_fire_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE id = ?",
    )
    .bind(plan_id)
    .execute(&pool)
    .await
    .unwrap();
    let fired: i64 = sqlx::query("CALL orbit_plan_fire_due(10)")
        .fetch_one(&pool)
        .await
        .unwrap()
        .get(0);
    assert_eq!(fired, 1);
    let plans_before = plan_rows(&pool).await;
    let before = tasks(&pool).await;
    let states: BTreeMap<u64, &str> = before.iter().map(|(i, s)| (*i, s.as_str())).collect();
    for (id, state) in [
        (succeeded.task_id, TaskState::Succeeded),
        (review.task_id, TaskState::NeedsReview),
        (retry.task_id, TaskState::RetryWait),
        (holder.task_id, TaskState::Running),
        (blocked, TaskState::Waiting),
        (leased.task_id, TaskState::Leased),
        (cancelled, TaskState::Cancelled),
        (waiting, TaskState::Waiting),
    ] {
        assert_eq!(states[&id], state.as_str(), "task {id} before the upgrade");
    }
    assert_eq!(f.lane(blocked).await, "blocked");
    let token_before = max_token(&pool).await;
    let mut rows_before = table_checksums(&pool).await;
    assert!(rows_before["orbit_idempotency"].0 >= 8 && rows_before["orbit_session"].0 == 1);
    let permits_before = attempts_and_permits(&pool, false).await;
    assert!(
        !permits_before.1.is_empty() && permits_before.2.len() > permits_before.1.len(),
        "keyed and unkeyed attempts hold permits: {:?}",
        (&permits_before.1, &permits_before.2)
    );
    // The tables 000002 rewrites, compared by attempts_and_permits instead.
    for t in ["orbit_attempt", "orbit_key_permit", "orbit_queue_permit"] {
        rows_before.remove(t);
    }

    // --- A 0.2 server refuses the 0.1 database, and says what to do. ---
    let refused = Server::try_start(BIN, &f.test_db.dsn)
        .await
        .err()
        .expect("the new server must refuse a 0.1 database");
    assert!(
        refused.contains("extension version 1")
            && refused.contains(&format!(
                "serves version {}",
                orbit::codegen::EXTENSION_VERSION
            ))
            && refused.contains("orbit migrate up"),
        "{refused}"
    );

    // --- Writers stopped (nothing runs against the database): migrate with the binary. ---
    let out = migrate_up(&f.test_db.dsn);
    assert!(out.contains("000002_upgrade"), "{out}");
    assert_eq!(
        version(&pool).await,
        u64::from(orbit::codegen::EXTENSION_VERSION)
    );

    // --- The schema equals a fresh install's: `migrate up` on an empty database, and install.sql. ---
    let upgraded = schema(&pool).await;
    let fresh = TestDb::installed().await;
    assert_same_schema(
        &upgraded,
        &schema(&fresh.pool).await,
        "upgraded vs migrate up",
    );
    let squashed = squashed_install().await;
    assert_same_schema(
        &upgraded,
        &schema(&squashed.pool).await,
        "upgraded vs generated-sql/install.sql",
    );

    // --- Nothing lost: every row of every table as it was; every task keeps its id and state. ---
    let mut rows_after = table_checksums(&pool).await;
    rows_after.remove("orbit_attempt");
    // The tables 0.1.0 did not have start empty: every key keeps 0.1's behaviour (one holder,
    // in slot 0 on its resource row; no policy).
    assert_eq!(rows_after.remove("orbit_key_policy").unwrap().0, 0);
    assert_eq!(rows_after.remove("orbit_key_slot").unwrap().0, 0);
    assert_eq!(rows_after.remove("orbit_key_rate_log").unwrap().0, 0);
    // The plan tables gained columns (so their checksums change): their 0.1 columns are compared
    // instead, and the new columns hold the defaults that keep 0.1 behaviour.
    for t in PLAN_TABLES {
        assert_eq!(
            rows_after.remove(t).unwrap().0,
            rows_before.remove(t).unwrap().0,
            "{t}"
        );
    }
    assert_eq!(rows_after, rows_before);
    // Each copied permit counts as its key's one holder.
    let holders: Vec<(u64, u16)> =
        sqlx::query_as("SELECT holder_attempt_id, holders FROM orbit_resource ORDER BY id")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert!(!holders.is_empty());
    for (attempt, count) in holders {
        assert_eq!(u16::from(attempt != 0), count, "{attempt}");
    }
    let debounced: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM orbit_task WHERE debounce_seconds <> 0 OR debounce_until IS NOT NULL",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(debounced, 0, "every 0.1 task is not debounced");
    assert_eq!(
        attempts_and_permits(&pool, true).await,
        permits_before,
        "every attempt as it was, every key permit moved onto its resource row, every queue permit onto its attempt"
    );
    assert_eq!(plan_rows(&pool).await, plans_before);
    let defaults: Vec<u8> = sqlx::query_scalar(
        "SELECT CONCAT_WS('|', IFNULL(p.schedule_after, 'NULL'), v.schedule_kind, v.timezone, v.catch_up, v.on_busy, f.outcome)
           FROM orbit_plan p JOIN orbit_plan_version v ON v.plan_id = p.id JOIN orbit_plan_fire f ON f.plan_id = p.id
          WHERE p.id = ?",
    )
    .bind(plan_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        String::from_utf8(defaults).unwrap(),
        "NULL|interval||one|queue|created"
    );
    assert_eq!(tasks(&pool).await, before);
    // Every queue got the default retention (7 days).
    let retention: Vec<(Vec<u8>, u32)> =
        sqlx::query_as("SELECT id, retention_seconds FROM orbit_queue ORDER BY id")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(retention.len(), 2);
    assert!(
        retention.iter().all(|(_, r)| *r == 604_800),
        "{retention:?}"
    );

    // --- The new server serves the upgraded database. ---
    let server = Server::start(BIN, &f.test_db.dsn).await;
    let http = reqwest::Client::new();
    for (id, state) in &before {
        let r = http
            .get(format!("{}/v1/tasks/{id}", server.url))
            .bearer_auth(&f.token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["data"]["id"], json!(id), "{body}");
        assert_eq!(body["data"]["state"], json!(state), "{body}");
    }
    let r = http
        .get(format!("{}/v1/queues/{q2}", server.url))
        .bearer_auth(&f.token)
        .send()
        .await
        .unwrap();
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["data"]["retention_seconds"], 604_800, "{body}");
    // Replaying the old Idempotency-Key returns the original receipt.
    let r = http
        .post(format!("{}/v1/tasks", server.url))
        .bearer_auth(&f.token)
        .header("Idempotency-Key", "receipt-1")
        .json(&json!({"queue_id": q1, "handler": "h", "handler_version": "v1", "payload_version": "v1", "payload": {"n": 1}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "a replay, not a new acceptance");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["data"]["id"], json!(waiting), "{body}");
    // The plan is still there: an interval plan with the 0.1 behaviour.
    let r = http
        .get(format!("{}/v1/plans/{}", server.url, plan_id))
        .bearer_auth(&f.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["data"]["schedule"],
        json!({"interval_seconds": 86400, "catch_up": "one"}),
        "{body}"
    );
    assert_eq!(body["data"]["on_busy"], json!("queue"), "{body}");
    assert_eq!(
        body["data"]["next_fire_times"].as_array().unwrap().len(),
        5,
        "{body}"
    );

    // The key's old holder finishes; the key goes on with a larger token than any before.
    let ack =
        f.db.attempt_finish(
            worker,
            holder.attempt_id,
            Outcome::Succeeded,
            false,
            None,
            None,
        )
        .await
        .unwrap();
    assert_eq!(ack.task_state, "SUCCEEDED");
    assert!(!ack.duplicate);
    let next = f.db.task_claim(worker, 10, lease_ms).await.unwrap();
    let granted = next
        .iter()
        .find(|g| g.task.id == blocked)
        .expect("the blocked task is granted once its key is released");
    assert!(
        granted.concurrency_token > token_before,
        "token {} after the upgrade, {} before",
        granted.concurrency_token,
        token_before
    );
    // The fence (left alone by the upgrade) accepts the new token and refuses the old one.
    assert_eq!(
        fence_write(&pool, granted.concurrency_token, "op-2").await,
        "accepted"
    );
    assert_eq!(
        fence_write(&pool, holder.concurrency_token, "op-3").await,
        "stale"
    );
    // The leased task from before the upgrade can still be finished by its holder.
    let ack =
        f.db.attempt_finish(
            worker,
            leased.attempt_id,
            Outcome::Succeeded,
            false,
            None,
            None,
        )
        .await
        .unwrap();
    assert_eq!(ack.task_state, "SUCCEEDED");
    // Running it again changes nothing.
    let out = migrate_up(&f.test_db.dsn);
    assert!(out.contains("nothing to do"), "{out}");
    server.stop().await;
}

#[tokio::test]
async fn a_migrate_stopped_part_way_completes_when_run_again() {
    let f = tenant(release_0_1_0().await).await;
    let pool = f.test_db.pool.clone();
    let keyed = submit_0_1_0(&pool, &f.hash, "k1-op", &task(&f, &f.queue_id, Some("k1"))).await;
    let upgrade = migrate::embedded()
        .into_iter()
        .find(|m| m.name == "000002_upgrade")
        .unwrap();
    let statements = orbit::sqlscript::split(&upgrade.text);
    // Stop right after the first re-created procedure was dropped, before it is created again
    // (MySQL commits each DDL statement: this is what a killed `migrate up` leaves). The tables
    // are altered before that, so running again meets indexes and columns already changed.
    let cut = statements
        .iter()
        .position(|s| {
            s.sql.contains("DROP PROCEDURE IF EXISTS")
                && !s.sql.contains("CREATE PROCEDURE")
                && !s.sql.contains("orbit_upgrade_")
        })
        .expect("000002 re-creates a procedure");
    assert!(
        statements[..cut]
            .iter()
            .any(|s| s.sql.starts_with("CALL orbit_upgrade_000002_indexes")),
        "the cut falls after the session indexes were added"
    );
    let dropped = statements[cut]
        .sql
        .lines()
        .find_map(|l| l.strip_prefix("DROP PROCEDURE IF EXISTS "))
        .unwrap()
        .trim()
        .trim_end_matches(';')
        .to_string();
    let mut conn = f.test_db.conn().await;
    for s in &statements[..=cut] {
        sqlx::raw_sql(&s.sql).execute(&mut conn).await.unwrap();
    }
    let exists: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.routines WHERE routine_schema = DATABASE() AND routine_name = ?",
    )
    .bind(&dropped)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(exists, 0, "{dropped} is gone half-way");
    assert_eq!(
        version(&pool).await,
        1,
        "a half-applied migration never claims its version"
    );
    let status = migrate::status(&mut conn, &migrate::embedded())
        .await
        .unwrap();
    assert_eq!(status.pending, ["000002_upgrade"]);
    // Run again: it completes.
    let out = migrate_up(&f.test_db.dsn);
    assert!(out.contains("applied 000002_upgrade"), "{out}");
    assert_eq!(version(&pool).await, 2);
    let fresh = TestDb::installed().await;
    assert_same_schema(
        &schema(&pool).await,
        &schema(&fresh.pool).await,
        "resumed vs fresh",
    );
    assert_eq!(tasks(&pool).await, vec![(keyed, "WAITING".to_string())]);
}

#[tokio::test]
async fn the_version_is_the_same_in_the_binary_and_the_catalog() {
    let (code, out, _) = orbit::testing::run_cli(BIN, &["--version"], &[], None);
    assert_eq!(code, 0);
    assert_eq!(
        out.trim(),
        format!(
            "orbit {} (extension {})",
            env!("CARGO_PKG_VERSION"),
            orbit::codegen::EXTENSION_VERSION
        )
    );
    let db = TestDb::installed().await;
    assert_eq!(
        version(&db.pool).await,
        u64::from(orbit::codegen::EXTENSION_VERSION)
    );
    // The newest migration's number is the extension version.
    assert_eq!(
        migrate::embedded().last().unwrap().version,
        orbit::codegen::EXTENSION_VERSION
    );
}

#[tokio::test]
async fn the_schema_comparison_sees_what_000002_changes() {
    // Guards the comparison itself: 0.1.0 and a fresh install must differ exactly where 000002
    // changes something (column definitions and comments, two indexes, re-created routine
    // bodies), so an upgrade that skipped a change would fail the tests above.
    let old = release_0_1_0().await;
    let new = squashed_install().await;
    let (old, new) = (schema(&old.pool).await, schema(&new.pool).await);
    let differs = |kind: &str| old[kind] != new[kind];
    assert!(differs("columns"), "orbit_extension.version's comment");
    assert!(differs("routines"), "the re-created procedures' bodies");
    assert!(differs("catalog"));
    assert!(
        differs("indexes"),
        "orbit_session's and orbit_attempt's indexes"
    );
    assert!(differs("tables"), "the permit tables are dropped");
}
