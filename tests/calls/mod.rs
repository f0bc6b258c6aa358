//! Shared by the `Db` connection tests (`pool`, `pool_reuse`): a `Db` of its own and a cheap call.

#![allow(dead_code)]

use orbit::db::{Db, DbError};
use orbit::migrate;
use orbit::testing::Fixture;

/// A Db of its own on the fixture's database, with a pool of `size`.
pub async fn db(f: &Fixture, size: u32) -> Db {
    Db::new(migrate::connect_pool(&f.test_db.dsn, size).await.unwrap())
}

/// A cheap procedure call: the task does not exist (a signal, which leaves the connection fine).
pub async fn call(db: &Db, f: &Fixture) {
    match db.task_get(&f.hash, u64::MAX).await {
        Err(DbError::NotFound(_)) => {}
        other => panic!("expected NOT_FOUND, got {other:?}"),
    }
}
