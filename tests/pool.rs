//! How `Db` uses its connections: a call takes the connection the last call used (kept between
//! calls, outside the pool), a connection idle for a second is pinged before use, a connection
//! whose call did not finish cleanly is closed and never reused, and closing the pool never
//! waits for the kept connections.

mod calls;

use std::time::Duration;

use calls::{call, db};
use orbit::db::{Db, DbError};
use orbit::migrate;
use orbit::testing::Fixture;

/// sqlx's pool hands out its idle connections first in, first out, and pings each on its way
/// back: a sequence of calls went round every connection of the pool (cold server threads) and
/// opened new ones while the last was being pinged. Calls one after another now use one.
#[tokio::test]
async fn calls_one_after_another_use_one_connection() {
    let f = Fixture::new().await;
    let mut observer = f.test_db.conn().await;
    let before = connections(&mut observer).await;
    let db = db(&f, 8).await;
    for _ in 0..50 {
        call(&db, &f).await;
    }
    assert_eq!(
        connections(&mut observer).await - before,
        1,
        "connections opened for 50 sequential calls"
    );
    db.close().await;
}

async fn processes(observer: &mut sqlx::MySqlConnection) -> Vec<orbit::processlist::Process> {
    orbit::processlist::read(observer)
        .await
        .expect("SHOW FULL PROCESSLIST")
}

/// The connections to the observer's database, other than the observer's own.
async fn other_connections(observer: &mut sqlx::MySqlConnection) -> Vec<u64> {
    let (me, db) = orbit::processlist::own_id(&mut *observer).await.unwrap();
    assert!(db.is_some(), "the observer uses a database");
    processes(observer)
        .await
        .into_iter()
        .filter(|p| p.id != me && p.db == db)
        .map(|p| p.id)
        .collect()
}

async fn connections(observer: &mut sqlx::MySqlConnection) -> i64 {
    other_connections(observer).await.len() as i64
}

/// Waits until the server has ended every connection of `ids` (a KILL takes effect
/// asynchronously), then for [`migrate::PING_AFTER_IDLE`]: the killed connections have been idle
/// at least that long, so their next use pings them first.
async fn gone_then_idle(observer: &mut sqlx::MySqlConnection, ids: &[u64]) {
    let list = ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !ids.is_empty() {
        let alive = processes(&mut *observer)
            .await
            .iter()
            .filter(|p| ids.contains(&p.id))
            .count();
        if alive == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "killed connections {list} still listed after 10 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(migrate::PING_AFTER_IDLE).await;
}

/// Many more concurrent calls than connections all get one, none waits out the pool's timeout,
/// and the server never sees more than the pool's size plus the kept connections.
#[tokio::test]
async fn concurrent_calls_beyond_the_pool_size_all_complete() {
    let f = Fixture::new().await;
    let mut observer = f.test_db.conn().await;
    let before = connections(&mut observer).await;
    let db = db(&f, 2).await;
    let calls = (0..64).map(|_| {
        let (db, f) = (db.clone(), &f);
        async move { call(&db, f).await }
    });
    tokio::time::timeout(
        migrate::ACQUIRE_TIMEOUT,
        futures_util::future::join_all(calls),
    )
    .await
    .expect("every call got a connection within the acquire timeout");
    let opened = connections(&mut observer).await - before;
    assert!(
        opened as usize <= 2 + orbit::db::KEPT_PER_SERVER,
        "{opened} connections for a pool of 2"
    );
    db.close().await;
}

/// A connection idle for `PING_AFTER_IDLE` or longer is pinged before use (not before every
/// call: that was a round trip in front of each): one the server dropped meanwhile (a restart, a
/// failover, `wait_timeout`) is replaced, and the call succeeds on a new connection.
#[tokio::test]
async fn a_connection_dropped_while_idle_is_replaced_before_its_next_call() {
    let f = Fixture::new().await;
    let pool = migrate::connect_pool(&f.test_db.dsn, 1).await.unwrap();
    let connection_id = "SELECT CONNECTION_ID()";
    let first: u64 = sqlx::query_scalar(connection_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    let again: u64 = sqlx::query_scalar(connection_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(again, first, "a pool of one reuses its connection");
    sqlx::query(&format!("KILL CONNECTION {first}"))
        .execute(&f.test_db.pool)
        .await
        .unwrap();
    gone_then_idle(&mut f.test_db.conn().await, &[first]).await;
    let second: u64 = sqlx::query_scalar(connection_id)
        .fetch_one(&pool)
        .await
        .expect("the idle connection is pinged and replaced, not handed out dead");
    assert_ne!(second, first);
}

/// The same for a connection `Db` keeps between calls.
#[tokio::test]
async fn a_kept_connection_dropped_while_idle_is_replaced_before_its_next_call() {
    let f = Fixture::new().await;
    let db = db(&f, 4).await;
    call(&db, &f).await;
    let mut observer = f.test_db.conn().await;
    let ids = other_connections(&mut observer).await;
    // Every other connection to the database, the kept one among them (the fixture's own pool
    // reconnects on its next use).
    for id in &ids {
        let _ = sqlx::query(&format!("KILL CONNECTION {id}"))
            .execute(&f.test_db.pool)
            .await;
    }
    gone_then_idle(&mut observer, &ids).await;
    call(&db, &f).await;
    db.close().await;
}

/// Closing the pool directly (not through `Db::close`) does not wait for the connections `Db`
/// keeps between calls: they are not the pool's. (A test bootstrapping through a `Db` and then
/// closing its pool once waited forever.)
#[tokio::test]
async fn closing_the_pool_does_not_wait_for_kept_connections() {
    let f = Fixture::new().await;
    let pool = migrate::connect_pool(&f.test_db.dsn, 2).await.unwrap();
    let db = Db::new(pool.clone());
    call(&db, &f).await;
    tokio::time::timeout(Duration::from_secs(5), pool.close())
        .await
        .expect("the pool closes while the Db still keeps a connection");
}

/// A call whose future is dropped mid-flight (its client gave up) never leaves its connection
/// for the next call: that connection is closed, and the next call gets the answer to its own
/// question. `SLEEP` keeps the first call in the server long enough to be cut off.
#[tokio::test]
async fn a_cancelled_call_closes_its_connection() {
    let f = Fixture::new().await;
    let mut observer = f.test_db.conn().await;
    let db = db(&f, 2).await;
    call(&db, &f).await;
    let discarded = db.discarded();
    let cut = tokio::time::timeout(Duration::from_millis(100), db.sleep_for_tests(1.0)).await;
    assert!(cut.is_err(), "the slow call was cut off");
    assert!(
        db.discarded() > discarded,
        "the cut-off call's connection was discarded"
    );
    // The next calls answer their own questions, on another connection.
    for _ in 0..5 {
        call(&db, &f).await;
    }
    // The server ends the abandoned statement's thread once it notices the closed socket.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while connections(&mut observer).await > 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the abandoned connection lingers"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    db.close().await;
}

/// A call that gets no answer within `CALL_TIMEOUT` answers 503 and closes its connection.
#[tokio::test]
async fn a_call_without_an_answer_is_unavailable_within_the_call_timeout() {
    let f = Fixture::new().await;
    let db = db(&f, 2).await;
    let started = std::time::Instant::now();
    let slow = orbit::db::CALL_TIMEOUT.as_secs_f64() + 2.0;
    match db.sleep_for_tests(slow).await {
        Err(DbError::Unavailable(m)) => assert!(m.contains("no answer within"), "{m}"),
        other => panic!("expected UNAVAILABLE, got {other:?}"),
    }
    assert!(started.elapsed() < orbit::db::CALL_TIMEOUT + Duration::from_secs(1));
    call(&db, &f).await;
    db.close().await;
}

/// An answer this layer cannot read as the procedure's documented result (here a procedure
/// replaced by one of another shape: what a crossed answer looks like) is an internal error and
/// closes its connection, and the next call is answered on another connection.
#[tokio::test]
async fn an_answer_of_the_wrong_shape_closes_its_connection() {
    let f = Fixture::new().await;
    let db = db(&f, 2).await;
    call(&db, &f).await;
    sqlx::raw_sql(
        "DROP PROCEDURE orbit_task_get; \
         CREATE PROCEDURE orbit_task_get(IN p_hash BINARY(32), IN p_id BIGINT UNSIGNED) \
           SELECT 'not a task id' AS task_id, NULL AS queue_id",
    )
    .execute(&f.test_db.pool)
    .await
    .unwrap();
    let discarded = db.discarded();
    match db.task_get(&f.hash, 1).await {
        Err(DbError::Internal(m)) => assert!(m.contains("result column"), "{m}"),
        other => panic!("expected INTERNAL, got {other:?}"),
    }
    assert_eq!(db.discarded(), discarded + 1, "its connection was closed");
    // A business error (a SIGNAL) leaves the connection in use.
    match db.credential_check(&[0u8; 32], "tasks:read").await {
        Err(DbError::Unauthenticated(_)) => {}
        other => panic!("expected UNAUTHENTICATED, got {other:?}"),
    }
    assert_eq!(
        db.discarded(),
        discarded + 1,
        "a SIGNAL keeps the connection"
    );
    db.close().await;
}
