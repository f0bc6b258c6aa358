//! `baseline`: the physical limit — durable single-row transactions per second on the same server:
//! a procedure doing `SELECT … FOR UPDATE` + `UPDATE` on one primary-key row per transaction, from
//! 16 connections, each on its own row (so the figure is the server's commit rate, not one row's).
//!
//! The table and procedure are benchmark scaffolding created in the benchmark database, not part
//! of the extension.

use std::time::{Duration, Instant};

use crate::db::{Db, DbError};

pub const CONNECTIONS: u32 = 16;

const SETUP: [&str; 3] = [
    "CREATE TABLE IF NOT EXISTS orbit_bench_counter (id INT NOT NULL PRIMARY KEY COMMENT 'row', n BIGINT NOT NULL COMMENT 'count') ENGINE=InnoDB COMMENT='orbit bench baseline rows'",
    "DROP PROCEDURE IF EXISTS orbit_bench_commit",
    "CREATE PROCEDURE orbit_bench_commit(IN p_id INT)
     BEGIN
       DECLARE v_n BIGINT;
       START TRANSACTION;
       SELECT c.n INTO v_n FROM orbit_bench_counter c WHERE c.id = p_id FOR UPDATE;
       UPDATE orbit_bench_counter c SET c.n = v_n + 1 WHERE c.id = p_id;
       COMMIT;
     END",
];

/// Durable commits per second over `duration`.
pub async fn measure(db: &Db, duration: Duration) -> Result<f64, DbError> {
    let internal = |e: sqlx::Error| DbError::Internal(format!("baseline setup: {e}"));
    for sql in SETUP {
        sqlx::raw_sql(sql)
            .execute(db.pool())
            .await
            .map_err(internal)?;
    }
    for id in 0..CONNECTIONS {
        sqlx::query("INSERT IGNORE INTO orbit_bench_counter (id, n) VALUES (?, 0)")
            .bind(id)
            .execute(db.pool())
            .await
            .map_err(internal)?;
    }
    let started = Instant::now();
    let mut handles = Vec::new();
    for id in 0..CONNECTIONS {
        let pool = db.pool().clone();
        handles.push(tokio::spawn(async move {
            let mut conn = pool.acquire().await?;
            let mut n = 0u64;
            while started.elapsed() < duration {
                sqlx::query("CALL orbit_bench_commit(?)")
                    .bind(id)
                    .execute(&mut *conn)
                    .await?;
                n += 1;
            }
            Ok::<u64, sqlx::Error>(n)
        }));
    }
    let mut commits = 0;
    for h in handles {
        commits += h
            .await
            .map_err(|e| DbError::Internal(e.to_string()))?
            .map_err(internal)?;
    }
    Ok(commits as f64 / started.elapsed().as_secs_f64())
}
