//! How `Db` uses its connections: a call takes the connection the last call used (kept checked
//! out of the pool between calls), never at the expense of a call waiting on the pool, and a
//! connection idle for a second is pinged before use.

use std::time::Duration;

use orbit::db::{Db, DbError};
use orbit::migrate;
use orbit::testing::Fixture;

/// A Db of its own on the fixture's database, with a pool of `size`.
async fn db(f: &Fixture, size: u32) -> Db {
    Db::new(migrate::connect_pool(&f.test_db.dsn, size).await.unwrap())
}

/// A cheap procedure call: the task does not exist (a signal, which leaves the connection fine).
async fn call(db: &Db, f: &Fixture) {
    match db.task_get(&f.hash, u64::MAX).await {
        Err(DbError::NotFound(_)) => {}
        other => panic!("expected NOT_FOUND, got {other:?}"),
    }
}

/// sqlx's pool hands out its idle connections first in, first out, and pings each on its way
/// back: a sequence of calls went round every connection of the pool (cold server threads) and
/// opened new ones while the last was being pinged. Calls one after another now use one.
#[tokio::test]
async fn calls_one_after_another_use_one_connection() {
    let f = Fixture::new().await;
    let db = db(&f, 8).await;
    for _ in 0..50 {
        call(&db, &f).await;
    }
    assert_eq!(
        db.pool().size(),
        1,
        "connections opened for 50 sequential calls"
    );
    db.close().await;
}

/// A kept connection holds a pool permit, so one is kept only while another permit is free:
/// many more concurrent calls than connections all get one, none waits out the pool's timeout.
#[tokio::test]
async fn concurrent_calls_beyond_the_pool_size_all_complete() {
    let f = Fixture::new().await;
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
    assert!(db.pool().size() <= 2);
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
    tokio::time::sleep(migrate::PING_AFTER_IDLE + Duration::from_millis(200)).await;
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
    let ids: Vec<i64> = sqlx::query_scalar(
        "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND ID <> CONNECTION_ID()",
    )
    .fetch_all(&f.test_db.pool)
    .await
    .unwrap();
    // Every other connection to the database, the kept one among them (the fixture's own pool
    // reconnects on its next use).
    for id in ids {
        let _ = sqlx::query(&format!("KILL CONNECTION {id}"))
            .execute(&f.test_db.pool)
            .await;
    }
    tokio::time::sleep(migrate::PING_AFTER_IDLE + Duration::from_millis(200)).await;
    call(&db, &f).await;
    db.close().await;
}
