//! The key inspector's cost does not grow with the number of tasks: with 1,000,000 tasks blocked
//! on one held key (bulk-loaded with INSERT … SELECT, as `src/bench/claim.rs` loads its backlog),
//! `orbit_key_get` and `orbit_key_list` read a bounded number of index entries. Asserted on the
//! server's own row counters (Handler_read_*, which count every row and index entry a statement
//! reads, including those inside procedures) and on the plan of the per-priority probe, never on
//! a time.

use sqlx::{Connection, MySqlConnection, Row};

/// Sum of the session's Handler_read_* counters.
async fn reads(conn: &mut MySqlConnection) -> u64 {
    let rows = sqlx::query("SHOW SESSION STATUS LIKE 'Handler_read%'")
        .fetch_all(&mut *conn)
        .await
        .unwrap();
    rows.iter()
        .map(|r| {
            let v: String = r.get(1);
            v.parse::<u64>().unwrap()
        })
        .sum()
}

/// Rows read by one CALL (the counters' difference around it), and the call's first row.
async fn call_reads(conn: &mut MySqlConnection, sql: &str, hash: &[u8]) -> (u64, usize) {
    let before = reads(conn).await;
    let rows = sqlx::query(sql)
        .bind(hash)
        .fetch_all(&mut *conn)
        .await
        .unwrap();
    let after = reads(conn).await;
    // SHOW STATUS itself reads a few rows; measured below by a call of nothing.
    (after - before, rows.len())
}

#[tokio::test]
async fn one_million_blocked_tasks_cost_the_inspector_a_bounded_number_of_reads() {
    let f = orbit::testing::Fixture::new().await;
    let q2 = f.queue("q2").await;
    // The hot key is held; 20 more keys are held with nobody waiting.
    f.submit(&f.queue_id, "hot").await;
    for i in 0..20 {
        f.submit(&f.queue_id, &format!("idle/{i}")).await;
    }
    let session = f.session("w-scale", true, &[&f.queue_id, &q2]).await;
    let mut held = 0;
    while held < 21 {
        let n = f.db.task_claim(session, 100, 600_000).await.unwrap().len();
        assert!(n > 0);
        held += n;
    }
    let mut conn = f.test_db.conn().await;
    let hot: u64 =
        sqlx::query_scalar("SELECT id FROM orbit_resource WHERE concurrency_key = 'hot'")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    sqlx::raw_sql(
        "CREATE TABLE keys_seq (n INT NOT NULL PRIMARY KEY);
         INSERT INTO keys_seq (n) SELECT a.n + 10 * b.n + 100 * c.n
           FROM (SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL
                 SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) a,
                (SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL
                 SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) b,
                (SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL
                 SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) c",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    // 1,000 x 1,000 blocked tasks of the hot key, over two queues and all ten priorities.
    for chunk in 0..10 {
        sqlx::query(
            "INSERT INTO orbit_task (application_id, namespace_id, queue_id, handler, handler_version, payload_version,
                                     payload, concurrency_key, resource_id, state, lane, priority, run_at, created_at, updated_at)
             SELECT ?, ?, IF(b.n % 2 = 0, ?, ?), 'scale.blocked', 'v1', 'v1', '{}', 'hot', ?, 'WAITING', 'blocked',
                    a.n % 10, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)
               FROM keys_seq a JOIN keys_seq b ON b.n >= ? AND b.n < ?",
        )
        .bind(f.application_id)
        .bind(f.namespace_id)
        .bind(&f.queue_id)
        .bind(&q2)
        .bind(hot)
        .bind(chunk * 100)
        .bind(chunk * 100 + 100)
        .execute(&mut conn)
        .await
        .unwrap();
    }
    sqlx::query("ANALYZE TABLE orbit_task")
        .execute(&mut conn)
        .await
        .unwrap();

    let (baseline, _) = call_reads(&mut conn, "SELECT ?", b"x").await;
    let ns = f.namespace_id;
    let (get_reads, rows) = call_reads(
        &mut conn,
        &format!("CALL orbit_key_get(?, {ns}, 'hot')"),
        &f.hash,
    )
    .await;
    assert_eq!(rows, 1);
    let get_reads = get_reads - baseline;
    // Per queue: a count of at most 10,001 index entries (read again from the derived table
    // that counts them) and about 25 one-entry probes.
    assert!(
        get_reads < 2 * 2 * 10_100 + 500,
        "orbit_key_get read {get_reads} rows with 1,000,000 tasks blocked on the key"
    );
    let (list_reads, rows) = call_reads(
        &mut conn,
        &format!("CALL orbit_key_list(?, {ns}, 'waiting', 100, NULL, NULL)"),
        &f.hash,
    )
    .await;
    assert_eq!(rows, 21);
    let list_reads = list_reads - baseline;
    // The hot key: at most 1,001 entries counted (twice, as above) plus 44 probes; each idle
    // key: a few probes.
    assert!(
        list_reads < 2 * 1_001 + 21 * 100,
        "orbit_key_list read {list_reads} rows with 1,000,000 tasks blocked on one key"
    );
    let (list_reads, _) = call_reads(
        &mut conn,
        &format!("CALL orbit_key_list(?, {ns}, 'oldest_wait', 100, NULL, NULL)"),
        &f.hash,
    )
    .await;
    assert!(list_reads - baseline < 2 * 1_001 + 21 * 100, "{list_reads}");

    // The oldest waiter of a queue comes from one ordered probe per lane and priority: an
    // index-ordered read of ix_task_key (no filesort), stopped after one entry. (The text
    // protocol and explain_format = TRADITIONAL: MySQL 9 prints a plan as a tree by default, and
    // a prepared EXPLAIN always; MariaDB has no such setting and ignores the SET's error.)
    let _ = sqlx::raw_sql("SET SESSION explain_format = 'TRADITIONAL'")
        .execute(&mut conn)
        .await;
    let plan = sqlx::raw_sql(&format!(
        "EXPLAIN SELECT t.id FROM orbit_task t FORCE INDEX (ix_task_key)
          WHERE t.resource_id = {hot} AND t.lane = 'blocked' AND t.queue_id = '{}' AND t.priority = 3
          ORDER BY t.id LIMIT 1",
        f.queue_id
    ))
    .fetch_one(&mut conn)
    .await
    .unwrap();
    let key: Option<String> = plan.try_get("key").unwrap();
    let extra: Option<String> = plan.try_get("Extra").unwrap();
    assert_eq!(key.as_deref(), Some("ix_task_key"));
    assert!(
        !extra.clone().unwrap_or_default().contains("filesort"),
        "an index-ordered probe expected: {extra:?}"
    );
    let _ = conn.close().await;
}
