//! Where a result's grant scans: on from the session's last scan stop, from the front every 16th
//! time and whenever a scan comes up short (a claim always starts there), better priorities first.

mod claim;

use claim::{claim_seq, ready_of_key, succeed};
use orbit::db::workers::{ClaimAfter, Grant, Outcome, SessionOpen};
use orbit::testing::{Counters, Fixture};
use sqlx::Row;

/// Where session `s`'s last scan stopped: (position, priority, task id).
async fn scan_stop(f: &Fixture, s: u64) -> (u32, u8, u64) {
    sqlx::query_as(
        "SELECT scan_position, scan_priority, scan_task_id FROM orbit_session WHERE id = ?",
    )
    .bind(s)
    .fetch_one(f.db.pool())
    .await
    .unwrap()
}

/// A keyed task readied behind session `s`'s scan stop: `other` holds key `k` with a task
/// submitted first, a second task of the key waits blocked; `s` claims two of the unkeyed
/// tasks submitted after both; then `other`'s result releases the key, which readies the
/// second task, older than where `s`'s scan stopped. Returns (the readied task, `s`'s grants).
async fn readied_behind_the_stop(f: &Fixture, s: u64, unkeyed: usize) -> (u64, Vec<Grant>) {
    let other = f.session("other", true, &[&f.queue_id]).await;
    f.submit(&f.queue_id, "k").await;
    let held = f.db.task_claim(other, 1, 30_000).await.unwrap();
    let behind = f.submit(&f.queue_id, "k").await;
    for _ in 0..unkeyed {
        f.submit(&f.queue_id, "").await;
    }
    let g = f.db.task_claim(s, 2, 30_000).await.unwrap();
    assert_eq!(g.len(), 2);
    assert_eq!(scan_stop(f, s).await, (0, 5, g[1].task.id));
    f.db.attempt_finish(
        other,
        held[0].attempt_id,
        Outcome::Succeeded,
        false,
        None,
        None,
    )
    .await
    .unwrap();
    assert_eq!(ready_of_key(f, "k").await, [behind.id]);
    (behind.id, g)
}

/// A result's grant of up to `max` more tasks.
fn up_to(max: u32) -> ClaimAfter {
    ClaimAfter {
        max,
        lease_ms: 30_000,
    }
}

#[tokio::test]
async fn a_result_s_grant_scans_on_from_where_the_last_scan_stopped_and_from_the_front_every_16th()
{
    let f = Fixture::new().await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let (behind, g) = readied_behind_the_stop(&f, s, 40).await;
    // Each result grants one more: the scans go on from where the last one stopped, past the
    // task readied behind it, until the session's 16th grant starts at the front of the lane.
    let mut running = g[1].attempt_id;
    let mut finish = g[0].attempt_id;
    let mut passed_over = 0;
    loop {
        let (_, grants) = succeed(&f, s, finish, up_to(1)).await.unwrap();
        assert_eq!(grants.len(), 1);
        let seq = claim_seq(&f, s).await;
        if grants[0].task.id == behind {
            assert_eq!(seq % 16, 0, "the restart comes with the 16th grant");
            break;
        }
        assert!(grants[0].task.id > behind);
        assert_ne!(
            seq % 16,
            0,
            "a grant from the front takes the oldest ready task"
        );
        passed_over += 1;
        (finish, running) = (running, grants[0].attempt_id);
    }
    assert_eq!(passed_over, 14, "grants 2 to 15 went on from the stop");
}

#[tokio::test]
async fn a_scan_that_comes_up_short_goes_on_from_the_front_and_a_claim_always_starts_there() {
    let f = Fixture::new().await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let (behind, g) = readied_behind_the_stop(&f, s, 3).await;
    // The stop is past the second unkeyed task: one more is left after it.
    let (_, grants) = succeed(&f, s, g[0].attempt_id, up_to(2)).await.unwrap();
    let mut granted: Vec<u64> = grants.iter().map(|g| g.task.id).collect();
    assert!(granted[0] > behind, "the scan went on from the stop first");
    granted.sort_unstable();
    assert_eq!(
        granted[0], behind,
        "then from the front for the rest: {granted:?}"
    );
    // A claim on its own starts at the front, whatever the stop.
    let f = Fixture::new().await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    let (behind, _) = readied_behind_the_stop(&f, s, 3).await;
    assert_eq!(
        f.db.task_claim(s, 1, 30_000).await.unwrap()[0].task.id,
        behind
    );
}

#[tokio::test]
async fn a_scan_from_the_last_stop_still_takes_better_priorities_first_and_worse_ones_whole() {
    let f = Fixture::new().await;
    let mut worse = f.task(&f.queue_id, "");
    worse.priority = Some(9);
    let worse = f.submit_task(&worse).await;
    let usual: Vec<u64> = {
        let mut ids = Vec::new();
        for _ in 0..3 {
            ids.push(f.submit(&f.queue_id, "").await.id);
        }
        ids
    };
    let s = f.session("w", true, &[&f.queue_id]).await;
    let g = f.db.task_claim(s, 1, 30_000).await.unwrap();
    assert_eq!(g[0].task.id, usual[0]);
    assert_eq!(scan_stop(&f, s).await, (0, 5, usual[0]));
    let mut better = f.task(&f.queue_id, "");
    better.priority = Some(0);
    let better = f.submit_task(&better).await;
    let (_, grants) = succeed(&f, s, g[0].attempt_id, up_to(4)).await.unwrap();
    assert_eq!(
        grants.iter().map(|g| g.task.id).collect::<Vec<_>>(),
        [better.id, usual[1], usual[2], worse.id]
    );
}

/// A session on `queues` that runs `handlers` only.
async fn session_running(f: &Fixture, worker_id: &str, handlers: &[&str]) -> u64 {
    f.db.session_open(
        &f.hash,
        &SessionOpen {
            worker_id: worker_id.into(),
            node: "test".into(),
            capacity: 100,
            concurrency_keys: true,
            handlers: handlers.iter().map(|h| h.to_string()).collect(),
            queue_ids: vec![f.queue_id.clone()],
            ..Default::default()
        },
    )
    .await
    .unwrap()
    .session_id
}

/// A task of `handler` at `priority` in the fixture's queue.
async fn submit_of(f: &Fixture, handler: &str, priority: u8) -> u64 {
    let mut t = f.task(&f.queue_id, "");
    t.handler = handler.into();
    t.priority = Some(priority.into());
    f.submit_task(&t).await.id
}

/// A claim of up to `max` tasks for `session` on `conn`: the task ids granted and the index
/// entries the call read (`Handler_read_next`).
async fn claim_reading(
    conn: &mut sqlx::MySqlConnection,
    session: u64,
    max: u32,
) -> (Vec<u64>, u64) {
    let counters = Counters::start(conn, &["Handler_read_next"]).await;
    let rows = sqlx::query("CALL orbit_task_claim(?, ?, 30000)")
        .bind(session)
        .bind(max)
        .fetch_all(&mut *conn)
        .await
        .unwrap();
    // attempt_id, attempt_no, lease_expires_at, concurrency_token, key_slot, then task_id.
    let granted = rows.iter().map(|r| r.get::<u64, _>(5)).collect();
    (granted, counters.since(conn).await["Handler_read_next"])
}

/// A fleet that is down leaves 20,000 ready tasks of its handler in a queue it shares. A session
/// that does not run that handler reads none of them: its claim finds that no task of its own
/// handlers waits there (one probe of ix_task_handler), and once one does, starts its scan at
/// that task. A session that runs both handlers still gets the oldest task first.
#[tokio::test]
async fn a_claim_reads_none_of_the_ready_tasks_of_handlers_its_session_does_not_run() {
    let f = Fixture::new().await;
    let foreign = submit_of(&f, "other.handler", 5).await;
    f.copies(foreign, &[]).await;
    let s = session_running(&f, "w", &["test.handler"]).await;
    let mut conn = f.db.pool().acquire().await.unwrap();
    let (granted, reads) = claim_reading(&mut conn, s, 10).await;
    assert!(granted.is_empty(), "{granted:?}");
    assert!(
        reads < 100,
        "{reads} index entries read by a claim that takes nothing"
    );

    let own = submit_of(&f, "test.handler", 5).await;
    let (granted, reads) = claim_reading(&mut conn, s, 10).await;
    assert_eq!(granted, [own]);
    assert!(
        reads < 100,
        "{reads} index entries read by a claim of one task"
    );

    let both = session_running(&f, "both", &["test.handler", "other.handler"]).await;
    let (granted, _) = claim_reading(&mut conn, both, 1).await;
    assert_eq!(
        granted,
        [foreign],
        "the oldest ready task of the session's handlers"
    );
}

/// The start at the first ready task of the session's handlers keeps priority first: of two
/// handlers the session runs (one named in characters beyond Latin-1), the better priority goes
/// first whatever its age, behind ready tasks of a handler it does not run.
#[tokio::test]
async fn a_claim_that_starts_at_its_handlers_first_task_still_takes_the_best_priority_first() {
    let f = Fixture::new().await;
    // Names beyond Latin-1 and up to the column's 191 characters.
    let b = format!("{}{}", "é".repeat(100), "😀".repeat(91));
    let older = submit_of(&f, "a.handler", 5).await;
    let foreign = submit_of(&f, "other.handler", 0).await;
    f.copies(foreign, &[]).await;
    let better = submit_of(&f, &b, 2).await;
    let worse = submit_of(&f, &b, 7).await;
    let s = session_running(&f, "w", &["a.handler", &b]).await;
    let mut conn = f.db.pool().acquire().await.unwrap();
    let (granted, reads) = claim_reading(&mut conn, s, 10).await;
    assert_eq!(granted, [better, older, worse]);
    assert!(reads < 100, "{reads} index entries read");
}

/// A database whose default character set is Latin-1 (as `CREATE DATABASE` gives on a server
/// configured so): procedures created there read a JSON_TABLE string column in Latin-1, which
/// turns a handler name beyond it into question marks. The claim still finds the session's
/// handler named in emoji.
#[tokio::test]
async fn a_claim_finds_its_handlers_in_a_database_whose_default_character_set_is_latin1() {
    let f = Fixture::new().await;
    let mut conn = f.db.pool().acquire().await.unwrap();
    sqlx::raw_sql(&format!(
        "ALTER DATABASE `{}` CHARACTER SET latin1 COLLATE latin1_swedish_ci",
        f.test_db.name
    ))
    .execute(&mut *conn)
    .await
    .unwrap();
    // orbit_task_grant again, now created in the Latin-1 database.
    let script = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/generated-sql/procedures/orbit_task_grant.sql"
    ))
    .unwrap();
    sqlx::raw_sql("DROP PROCEDURE orbit_task_grant")
        .execute(&mut *conn)
        .await
        .unwrap();
    for statement in orbit::sqlscript::split(&script) {
        sqlx::raw_sql(&statement.sql)
            .execute(&mut *conn)
            .await
            .unwrap();
    }
    let collation: String = sqlx::query_scalar(
        "SELECT DATABASE_COLLATION FROM information_schema.ROUTINES
          WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = 'orbit_task_grant'",
    )
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    assert_eq!(collation, "latin1_swedish_ci");
    let handler = "😀.handler";
    let task = submit_of(&f, handler, 5).await;
    let s = session_running(&f, "w", &[handler]).await;
    let (granted, _) = claim_reading(&mut conn, s, 10).await;
    assert_eq!(granted, [task]);
}
