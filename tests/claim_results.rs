//! Results sent together (orbit_attempt_finish): confirmed in one call, each on its own, checked
//! before anything is written; the application's quota slots; the cost of a result's grant.

mod claim;

use claim::{result, session_starting_on_assign};
use orbit::db::tasks::TaskState;
use orbit::db::workers::{AttemptResult, ClaimAfter, Grant, Outcome};
use orbit::testing::{Counters, Fixture};
use sqlx::Row;

#[tokio::test]
async fn results_sent_together_are_confirmed_in_one_call_each_on_its_own() {
    let f = Fixture::new().await;
    for key in ["", "", "k", "k"] {
        f.submit(&f.queue_id, key).await;
    }
    let s = f.session("w", true, &[&f.queue_id]).await;
    let other = f.session("other", true, &[&f.queue_id]).await;
    let held = f.db.task_claim(s, 3, 30_000).await.unwrap();
    assert_eq!(held.len(), 3, "two unkeyed tasks and the key's first task");
    let theirs = f.db.task_claim(other, 1, 30_000).await.unwrap();
    assert!(theirs.is_empty(), "the key's second task waits for the key");
    let (keyed, unkeyed): (Vec<&Grant>, Vec<&Grant>) =
        held.iter().partition(|g| g.concurrency_token > 0);
    let (keyed, u1, u2) = (
        keyed[0].attempt_id,
        unkeyed[0].attempt_id,
        unkeyed[1].attempt_id,
    );
    let results = vec![
        result(u1, Outcome::Succeeded),
        result(999_999, Outcome::Succeeded),
        result(keyed, Outcome::Succeeded),
        result(u1, Outcome::Succeeded),
        result(u2, Outcome::Failed),
    ];
    let finished =
        f.db.attempt_finish_many(
            s,
            &results,
            ClaimAfter {
                max: 3,
                lease_ms: 30_000,
            },
        )
        .await
        .unwrap();
    let acks: Vec<(u64, bool, &str)> = finished
        .acks
        .iter()
        .map(|a| (a.attempt_id, a.duplicate, a.code.as_str()))
        .collect();
    assert_eq!(
        acks,
        vec![
            (u1, false, ""),
            (999_999, false, "NOT_FOUND"),
            (keyed, false, ""),
            (u1, true, ""),
            (u2, false, ""),
        ],
        "one acknowledgement per result, in the order sent; the unknown one does not stop the rest"
    );
    assert_eq!(finished.acks[0].task_state, "SUCCEEDED");
    assert_eq!(
        finished.acks[3].task_state, "SUCCEEDED",
        "a repeat gets the same answer"
    );
    // The released key went to its next task in the same transaction, granted with the results.
    assert_eq!(finished.grants.len(), 1);
    assert_eq!(finished.grants[0].concurrency_token, 2);
    let stored: Option<String> =
        sqlx::query_scalar("SELECT CAST(output AS CHAR) FROM orbit_attempt WHERE id = ?")
            .bind(u1)
            .fetch_one(f.db.pool())
            .await
            .unwrap();
    let stored: serde_json::Value = serde_json::from_str(&stored.unwrap()).unwrap();
    assert_eq!(stored, serde_json::json!({"n": u1}));
    // A result for another session's attempt is refused on its own.
    let finished =
        f.db.attempt_finish_many(other, &[result(u2, Outcome::Succeeded)], ClaimAfter::NONE)
            .await
            .unwrap();
    assert_eq!(finished.acks[0].code, "NOT_FOUND");
}

#[tokio::test]
async fn an_attempt_repeated_in_one_call_is_ended_by_its_first_result_only() {
    // orbit_attempt_end locks a call's attempts in one read before it ends any of them, so a
    // result that repeats an attempt sees it as that read did, still active: the repeat must end
    // nothing (no second task update, key release or history row) and is kept as the late result.
    let f = Fixture::new().await;
    for key in ["", "k", "k"] {
        f.submit(&f.queue_id, key).await;
    }
    let s = f.session("w", true, &[&f.queue_id]).await;
    let held = f.db.task_claim(s, 2, 30_000).await.unwrap();
    assert_eq!(held.len(), 2, "the unkeyed task and the key's first task");
    let (keyed, plain): (Vec<&Grant>, Vec<&Grant>) =
        held.iter().partition(|g| g.concurrency_token > 0);
    let (keyed, plain) = (keyed[0].attempt_id, plain[0].attempt_id);
    let results = vec![
        result(plain, Outcome::Succeeded),
        result(keyed, Outcome::Failed),
        result(plain, Outcome::Failed),
        result(keyed, Outcome::Succeeded),
    ];
    let finished =
        f.db.attempt_finish_many(s, &results, ClaimAfter::NONE)
            .await
            .unwrap();
    let acks: Vec<(u64, bool, &str, &str)> = finished
        .acks
        .iter()
        .map(|a| {
            (
                a.attempt_id,
                a.duplicate,
                a.attempt_state.as_str(),
                a.task_state.as_str(),
            )
        })
        .collect();
    assert_eq!(
        acks,
        vec![
            (plain, false, "SUCCEEDED", "SUCCEEDED"),
            (keyed, false, "FAILED", "RETRY_WAIT"),
            (plain, true, "SUCCEEDED", "SUCCEEDED"),
            (keyed, true, "FAILED", "RETRY_WAIT"),
        ],
        "each attempt ended by its first result; the repeats answered as duplicates"
    );
    let rows: Vec<(u64, String, String)> = sqlx::query_as(
        "SELECT id, CAST(outcome AS CHAR), CAST(late_result AS CHAR)
           FROM orbit_attempt WHERE session_id = ? ORDER BY id",
    )
    .bind(s)
    .fetch_all(f.db.pool())
    .await
    .unwrap();
    let outcome = |id: u64| rows.iter().find(|r| r.0 == id).unwrap().clone();
    assert_eq!(outcome(plain).1, "succeeded");
    assert_eq!(
        outcome(plain).2,
        "failed",
        "the repeat's other outcome is the late result"
    );
    assert_eq!(outcome(keyed).1, "failed");
    assert_eq!(outcome(keyed).2, "succeeded");
    // Each attempt ended once: one ending event each, and the key released once (its version
    // counts its grant and one release), its holder gone.
    let ended: Vec<(u64, i64)> = sqlx::query_as(
        "SELECT e.attempt_id, COUNT(*) FROM orbit_task_event e
          WHERE e.attempt_id IN (?, ?) GROUP BY e.attempt_id ORDER BY e.attempt_id",
    )
    .bind(plain)
    .bind(keyed)
    .fetch_all(f.db.pool())
    .await
    .unwrap();
    assert_eq!(
        ended,
        vec![(plain.min(keyed), 1), (plain.max(keyed), 1)],
        "one ending event per attempt"
    );
    let (holders, version, holder): (u16, u64, u64) = sqlx::query_as(
        "SELECT holders, version, holder_attempt_id FROM orbit_resource WHERE id =
                (SELECT resource_id FROM orbit_attempt WHERE id = ?)",
    )
    .bind(keyed)
    .fetch_one(f.db.pool())
    .await
    .unwrap();
    assert_eq!((holders, holder), (0, 0));
    let grant_version: u64 =
        sqlx::query_scalar("SELECT grant_version FROM orbit_attempt WHERE id = ?")
            .bind(keyed)
            .fetch_one(f.db.pool())
            .await
            .unwrap();
    assert_eq!(version, grant_version + 1, "one release after the grant");
}

#[tokio::test]
async fn grouped_results_are_checked_before_anything_is_written() {
    let f = Fixture::new().await;
    f.submit(&f.queue_id, "").await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap();
    for bad in [
        "[]".to_string(),
        "{}".to_string(),
        format!(
            r#"[{{"attempt_id": {}, "outcome": "succeeded"}}, {{"attempt_id": 1, "outcome": "maybe"}}]"#,
            g[0].attempt_id
        ),
        format!(
            r#"[{{"attempt_id": {}, "outcome": "succeeded"}}, {{"outcome": "failed"}}]"#,
            g[0].attempt_id
        ),
        format!(
            r#"[{{"attempt_id": {}, "outcome": "failed", "retryable": "yes"}}]"#,
            g[0].attempt_id
        ),
        format!(
            "[{}]",
            vec![r#"{"attempt_id": 1, "outcome": "succeeded"}"#; 1001].join(",")
        ),
    ] {
        let e = sqlx::query("CALL orbit_attempt_finish(?, ?, 0, 0)")
            .bind(s)
            .bind(&bad)
            .execute(f.db.pool())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("INVALID_ARGUMENT"), "{bad}: {e}");
    }
    let state: String =
        sqlx::query_scalar("SELECT CAST(state AS CHAR) FROM orbit_attempt WHERE id = ?")
            .bind(g[0].attempt_id)
            .fetch_one(f.db.pool())
            .await
            .unwrap();
    assert_eq!(state, "LEASED", "a refused call ends no attempt");
}

/// (slot, active_attempts) of every slot row with a charge.
async fn active_slots(f: &Fixture) -> Vec<(u8, u32)> {
    sqlx::query_as(
        "SELECT slot, active_attempts FROM orbit_application_quota WHERE active_attempts > 0 ORDER BY slot",
    )
    .fetch_all(f.db.pool())
    .await
    .unwrap()
}

#[tokio::test]
async fn a_sessions_attempts_are_charged_to_its_own_slot_and_given_back_there() {
    let f = Fixture::new().await;
    for _ in 0..6 {
        f.submit(&f.queue_id, "").await;
    }
    let a = f.session("a", false, &[&f.queue_id]).await;
    let b = f.session("b", false, &[&f.queue_id]).await;
    let ga = f.db.task_claim(a, 3, 30_000).await.unwrap();
    let gb = f.db.task_claim(b, 3, 30_000).await.unwrap();
    assert_eq!((ga.len(), gb.len()), (3, 3));
    let (sa, sb) = ((a % 16) as u8, (b % 16) as u8);
    let mut expected = vec![(sa, 3), (sb, 3)];
    expected.sort();
    if sa == sb {
        expected = vec![(sa, 6)];
    }
    assert_eq!(active_slots(&f).await, expected, "session ids {a} and {b}");
    // Whichever pooled connection runs them, a's results give back a's slot.
    let results: Vec<AttemptResult> = ga
        .iter()
        .map(|g| AttemptResult {
            attempt_id: g.attempt_id,
            outcome: Outcome::Succeeded,
            retryable: false,
            output: None,
            error: None,
        })
        .collect();
    let incomplete_before = incomplete_slots(&f).await;
    f.db.attempt_finish_many(a, &results, ClaimAfter::NONE)
        .await
        .unwrap();
    assert_eq!(active_slots(&f).await, vec![(sb, 3)], "b's three are left");
    // The three tasks' incomplete charges go back to a's slot too, wherever they were charged:
    // the result locks no slot row but its session's.
    let incomplete_after = incomplete_slots(&f).await;
    for slot in 0..16u8 {
        let (before, after) = (
            incomplete_before[slot as usize],
            incomplete_after[slot as usize],
        );
        if slot == sa {
            assert_eq!(after, before - 3, "slot {slot}");
        } else {
            assert_eq!(after, before, "slot {slot}");
        }
    }
    assert_eq!(
        incomplete_after.iter().sum::<i64>(),
        3,
        "b's three tasks are still incomplete"
    );
}

/// The incomplete-task counter of each slot, by slot.
async fn incomplete_slots(f: &Fixture) -> Vec<i64> {
    sqlx::query_scalar("SELECT incomplete_tasks FROM orbit_application_quota ORDER BY slot")
        .fetch_all(f.db.pool())
        .await
        .unwrap()
}

/// Reports attempt `attempt_id`'s success on `conn`, its grant asking for up to `grant` tasks:
/// what the call counted in `conn`'s session counters (index entries and rows read, temporary
/// tables on disk).
async fn succeed_on(
    conn: &mut sqlx::MySqlConnection,
    session: u64,
    attempt_id: u64,
    grant: u32,
) -> std::collections::HashMap<String, u64> {
    let counters = Counters::start(
        conn,
        &[
            "Handler_read_next",
            "Handler_read_rnd_next",
            "Created_tmp_disk_tables",
        ],
    )
    .await;
    sqlx::query("CALL orbit_attempt_finish(?, ?, ?, 30000)")
        .bind(session)
        .bind(format!(
            r#"[{{"attempt_id": {attempt_id}, "outcome": "succeeded"}}]"#
        ))
        .bind(grant)
        .execute(&mut *conn)
        .await
        .unwrap();
    counters.since(conn).await
}

#[tokio::test]
async fn a_result_and_its_grant_read_a_few_entries_and_need_no_disk_table() {
    let f = Fixture::new().await;
    let first = f.submit(&f.queue_id, "").await;
    f.copies(first.id, &[]).await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap();
    assert_eq!(g[0].task.id, first.id);
    // The result, its wake check and the grant of the next task, on one connection: the index
    // entries it reads (Handler_read_next; about 50, mostly quota slot rows) do not grow with the
    // ready lane.
    let mut conn = f.db.pool().acquire().await.unwrap();
    let counted = succeed_on(&mut conn, s, g[0].attempt_id, 1).await;
    let reads = counted["Handler_read_next"];
    assert!(reads < 100, "{reads} index entries read for one result");
    // Nor does it build a temporary table on disk to order its answer (the task columns are
    // TEXT, which an in-memory temporary table cannot hold): that was one per result.
    let disk = counted["Created_tmp_disk_tables"];
    assert_eq!(disk, 0, "temporary tables on disk for one result");
    // It did end the first attempt and grant the next task.
    let attempts: Vec<(u64, String)> = sqlx::query_as(
        "SELECT task_id, CAST(state AS CHAR) FROM orbit_attempt WHERE session_id = ? ORDER BY id",
    )
    .bind(s)
    .fetch_all(f.db.pool())
    .await
    .unwrap();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0], (first.id, "SUCCEEDED".to_string()));
    assert!(attempts[1].0 > first.id);
    // A result that grants nothing answers with one row of NULL grant columns, read by probes,
    // not by scanning the task and attempt tables.
    let second: u64 = sqlx::query_scalar("SELECT MAX(id) FROM orbit_attempt")
        .fetch_one(f.db.pool())
        .await
        .unwrap();
    let scanned = succeed_on(&mut conn, s, second, 0).await["Handler_read_rnd_next"];
    assert!(
        scanned < 100,
        "{scanned} rows scanned for a result without a grant"
    );
}

#[tokio::test]
async fn a_hand_off_reads_a_few_entries_whatever_waits_ready_in_its_queue() {
    // A hot key with 20,000 more tasks blocked behind its next one shares its queue with 20,000
    // ready unkeyed tasks of its priority. The release looks for the key's next task by its
    // queue's head, and the hand-off asks whether a task of a better priority is ready there by
    // one look at the ready lane's head: neither walks the tasks of the same priority.
    let f = Fixture::new().await;
    let held = f.submit(&f.queue_id, "hot").await;
    let next = f.submit(&f.queue_id, "hot").await;
    let plain = f.submit(&f.queue_id, "").await;
    f.copies(next.id, &[]).await;
    f.copies(plain.id, &[]).await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap();
    assert_eq!(g[0].task.id, held.id);
    let mut conn = f.db.pool().acquire().await.unwrap();
    let reads = succeed_on(&mut conn, s, g[0].attempt_id, 1).await["Handler_read_next"];
    assert!(reads < 100, "{reads} index entries read for one hand-off");
    // The key went on to its next task, ahead of the older ready tasks of its priority.
    let granted: u64 = sqlx::query_scalar(
        "SELECT task_id FROM orbit_attempt WHERE session_id = ? ORDER BY id DESC LIMIT 1",
    )
    .bind(s)
    .fetch_one(f.db.pool())
    .await
    .unwrap();
    assert_eq!(granted, next.id);
}

/// What ending attempt `attempt_id` wrote: its row, its task's row and the task's events, each
/// as JSON text (times as relations, since two endings differ in time).
async fn ending(f: &Fixture, attempt_id: u64) -> (String, String, String) {
    sqlx::query_as(
        "SELECT CAST(JSON_ARRAY(a.state, a.outcome, a.retryable, a.output, a.error, a.late_result,
                                a.released_at IS NOT NULL) AS CHAR),
                CAST(JSON_ARRAY(t.state, t.lane, t.output, t.error, t.finished_at = t.updated_at,
                                t.finished_at = a.released_at, t.run_at <= t.finished_at,
                                t.current_attempt_id = a.id, t.attempt_count) AS CHAR),
                CAST((SELECT JSON_ARRAYAGG(JSON_ARRAY(e.event, e.from_state, e.to_state, e.concurrency_token,
                                                      e.detail, e.attempt_id = a.id))
                        FROM orbit_task_event e WHERE e.task_id = t.id) AS CHAR)
           FROM orbit_attempt a JOIN orbit_task t ON t.id = a.task_id
          WHERE a.id = ?",
    )
    .bind(attempt_id)
    .fetch_one(f.db.pool())
    .await
    .unwrap()
}

#[tokio::test]
async fn a_group_of_results_ends_in_one_end_call_writing_what_a_single_result_writes() {
    let f = Fixture::new().await;
    for _ in 0..4 {
        f.submit(&f.queue_id, "").await;
    }
    let s = session_starting_on_assign(&f, "w", &[&f.queue_id]).await;
    let other = f.session("other", true, &[&f.queue_id]).await;
    let held = f.db.task_claim(s, 4, 30_000).await.unwrap();
    assert_eq!(held.len(), 4);
    let ids: Vec<u64> = held.iter().map(|g| g.attempt_id).collect();
    let output = r#"{"a":1,  "b" : [1, 2.50, "\u00e9"]}"#;
    let mut conn = f.db.pool().acquire().await.unwrap();
    // Finishes `results` on one connection; returns its acks and the procedure calls it made.
    async fn finish(
        conn: &mut sqlx::MySqlConnection,
        session: u64,
        results: String,
    ) -> (serde_json::Value, u64) {
        let counters = Counters::start(conn, &["Com_call_procedure"]).await;
        let rows = sqlx::query("CALL orbit_attempt_finish(?, ?, 0, 0)")
            .bind(session)
            .bind(results)
            .fetch_all(&mut *conn)
            .await
            .unwrap();
        let acks: Vec<u8> = rows[0].try_get(0).unwrap();
        (
            serde_json::from_slice(&acks).unwrap(),
            counters.since(conn).await["Com_call_procedure"],
        )
    }
    let ok =
        |id: u64| format!(r#"{{"attempt_id": {id}, "outcome": "succeeded", "output": {output}}}"#);
    // Successes of the session's own attempts: ended by one orbit_attempt_end call for the group.
    let (acks, calls) = finish(&mut conn, s, format!("[{}, {}]", ok(ids[0]), ok(ids[1]))).await;
    assert_eq!(calls, 2, "the CALL and its orbit_attempt_end");
    assert_eq!(
        acks,
        serde_json::json!([
            {"attempt_id": ids[0], "task_id": held[0].task.id, "task_state": "SUCCEEDED",
             "attempt_state": "SUCCEEDED", "duplicate": 0, "code": ""},
            {"attempt_id": ids[1], "task_id": held[1].task.id, "task_state": "SUCCEEDED",
             "attempt_state": "SUCCEEDED", "duplicate": 0, "code": ""}
        ])
    );
    // A group with an attempt that is not the session's and one that does not exist: the same
    // one call ends the success and refuses the others.
    let theirs = f.submit(&f.queue_id, "").await;
    let g = f.db.task_claim(other, 1, 30_000).await.unwrap();
    assert_eq!(g[0].task.id, theirs.id);
    let (acks, calls) = finish(
        &mut conn,
        s,
        format!("[{}, {}, {}]", ok(ids[2]), ok(g[0].attempt_id), ok(999_999)),
    )
    .await;
    assert_eq!(calls, 2, "the CALL and its orbit_attempt_end");
    let codes: Vec<&str> = acks
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["", "NOT_FOUND", "NOT_FOUND"]);
    assert_eq!(
        f.db.task_get(&f.hash, theirs.id).await.unwrap().state,
        TaskState::Leased,
        "the other session's task is untouched"
    );
    // A single result takes the same path.
    let (_, calls) = finish(&mut conn, s, format!("[{}]", ok(ids[3]))).await;
    assert_eq!(calls, 2, "the CALL and its orbit_attempt_end");
    // The same rows either way: attempt, task and history.
    assert_eq!(ending(&f, ids[0]).await, ending(&f, ids[2]).await);
    assert_eq!(ending(&f, ids[1]).await, ending(&f, ids[2]).await);
    assert_eq!(ending(&f, ids[3]).await, ending(&f, ids[2]).await);
    // Each attempt's queue permit and quota charges were given back once: one attempt of the
    // other session is still active; five tasks, four done.
    let permits: Vec<u64> =
        sqlx::query_scalar("SELECT id FROM orbit_attempt WHERE released_at IS NULL ORDER BY id")
            .fetch_all(f.db.pool())
            .await
            .unwrap();
    assert_eq!(permits, [g[0].attempt_id]);
    let active: Vec<(u8, u32)> = active_slots(&f).await;
    assert_eq!(active.iter().map(|s| s.1).sum::<u32>(), 1, "{active:?}");
    assert_eq!(incomplete_slots(&f).await.iter().sum::<i64>(), 1);
}

#[tokio::test]
async fn malformed_results_are_refused_first_fault_first_and_write_nothing() {
    let f = Fixture::new().await;
    f.submit(&f.queue_id, "").await;
    let s = f.session("w", false, &[&f.queue_id]).await;
    let held = f.db.task_claim(s, 1, 30_000).await.unwrap();
    let a = held[0].attempt_id;
    let finish = |results: String| {
        let pool = f.test_db.pool.clone();
        async move {
            sqlx::query("CALL orbit_attempt_finish(?, ?, 0, 30000)")
                .bind(s)
                .bind(results)
                .execute(&pool)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
    };
    let ok = format!(r#"{{"attempt_id": {a}, "outcome": "succeeded"}}"#);
    // Each refusal names the first faulty result's first fault, in input order.
    for (results, fault) in [
        (
            format!(r#"[{ok}, {{"attempt_id": "7", "outcome": "nope"}}]"#),
            "attempt_id must be a positive integer",
        ),
        (
            format!(r#"[{{"attempt_id": {a}, "outcome": "maybe"}}, {{"attempt_id": 0}}]"#),
            "outcome must be succeeded, failed or unknown",
        ),
        (
            format!(r#"[{ok}, {{"attempt_id": {a}, "outcome": "failed", "retryable": "yes"}}]"#),
            "retryable must be true or false",
        ),
        (
            r#"[{"attempt_id": 1.5, "outcome": "succeeded"}]"#.to_string(),
            "attempt_id must be a positive integer",
        ),
        (
            format!(r#"[{ok}, 5]"#),
            "attempt_id must be a positive integer",
        ),
        (
            r#"[{"outcome": "succeeded"}]"#.to_string(),
            "attempt_id must be a positive integer",
        ),
        (
            format!(r#"[{{"attempt_id": {a}, "outcome": 1}}]"#),
            "outcome must be succeeded, failed or unknown",
        ),
        (
            format!(r#"[{{"attempt_id": {a}, "outcome": "failed", "retryable": 1}}]"#),
            "retryable must be true or false",
        ),
        (
            "[]".to_string(),
            "results must be a JSON array of 1-1000 results",
        ),
    ] {
        let err = finish(results.clone()).await.expect_err(&results);
        assert!(
            err.contains(&format!("INVALID_ARGUMENT: {fault}")),
            "{results}: {err}"
        );
    }
    let state = || {
        sqlx::query_scalar::<_, String>(
            "SELECT CAST(state AS CHAR) FROM orbit_attempt WHERE id = ?",
        )
        .bind(a)
        .fetch_one(&f.test_db.pool)
    };
    assert_eq!(
        state().await.unwrap(),
        "LEASED",
        "a refused call writes nothing"
    );
    // retryable may be null or missing; a valid call ends the attempt.
    finish(format!(
        r#"[{{"attempt_id": {a}, "outcome": "failed", "retryable": null}}]"#
    ))
    .await
    .unwrap();
    assert_eq!(state().await.unwrap(), "FAILED");
}

#[tokio::test]
async fn acknowledgements_are_whole_under_mysqls_default_group_concat_max_len() {
    // The acknowledgements are one GROUP_CONCAT, which stops at group_concat_max_len: 1,024 bytes
    // by default on MySQL (1 MB on MariaDB). The procedure raises the session's limit when it is
    // lower, so 40 acknowledgements (about 5 KB) come back whole and in order.
    let f = Fixture::new().await;
    for _ in 0..40 {
        f.submit(&f.queue_id, "").await;
    }
    let s = f.session("w", true, &[&f.queue_id]).await;
    let held = f.db.task_claim(s, 40, 30_000).await.unwrap();
    assert_eq!(held.len(), 40);
    let results: Vec<String> = held
        .iter()
        .map(|g| {
            format!(
                r#"{{"attempt_id": {}, "outcome": "succeeded"}}"#,
                g.attempt_id
            )
        })
        .collect();
    let mut conn = f.db.pool().acquire().await.unwrap();
    sqlx::raw_sql("SET SESSION group_concat_max_len = 1024")
        .execute(&mut *conn)
        .await
        .unwrap();
    let rows = sqlx::query("CALL orbit_attempt_finish(?, ?, 0, 0)")
        .bind(s)
        .bind(format!("[{}]", results.join(",")))
        .fetch_all(&mut *conn)
        .await
        .unwrap();
    let acks: Vec<u8> = rows[0].try_get(0).unwrap();
    assert!(acks.len() > 1024, "{} bytes", acks.len());
    let acks: serde_json::Value = serde_json::from_slice(&acks).unwrap();
    let ids: Vec<u64> = acks
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["attempt_id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, held.iter().map(|g| g.attempt_id).collect::<Vec<_>>());
}
