//! Helpers shared by the claim tests (`claim_grant`, `claim_handoff`, `claim_results`,
//! `claim_scan`).
#![allow(dead_code)]

use orbit::db::workers::{AttemptResult, ClaimAfter, FinishAck, Grant, Outcome};
use orbit::db::DbError;
use orbit::testing::Fixture;
use sqlx::Row;

pub async fn resource(f: &Fixture, key: &str) -> (u64, u64) {
    let row =
        sqlx::query("SELECT highest_token, version FROM orbit_resource WHERE concurrency_key = ?")
            .bind(key.as_bytes())
            .fetch_one(f.db.pool())
            .await
            .unwrap();
    (row.get(0), row.get(1))
}

/// The ready tasks of key `key`, by task id.
pub async fn ready_of_key(f: &Fixture, key: &str) -> Vec<u64> {
    sqlx::query_scalar(
        "SELECT t.id FROM orbit_task t JOIN orbit_resource r ON r.id = t.resource_id \
          WHERE r.concurrency_key = ? AND t.lane = 'ready' ORDER BY t.id",
    )
    .bind(key.as_bytes())
    .fetch_all(f.db.pool())
    .await
    .unwrap()
}

/// Fsyncs are not observable per call, but a claim that writes nothing leaves no trace: the
/// session's claim_seq does not move.
pub async fn claim_seq(f: &Fixture, session: u64) -> u64 {
    sqlx::query_scalar("SELECT claim_seq FROM orbit_session WHERE id = ?")
        .bind(session)
        .fetch_one(f.db.pool())
        .await
        .unwrap()
}

/// A `succeeded` result for an attempt of session `s`, granting what `claim` allows.
pub async fn succeed(
    f: &Fixture,
    s: u64,
    attempt_id: u64,
    claim: ClaimAfter,
) -> Result<(FinishAck, Vec<Grant>), DbError> {
    f.db.attempt_finish_and_claim(s, attempt_id, Outcome::Succeeded, false, None, None, claim)
        .await
}

pub async fn session_starting_on_assign(f: &Fixture, worker_id: &str, queues: &[&str]) -> u64 {
    f.db.session_open(
        &f.hash,
        &orbit::db::workers::SessionOpen {
            worker_id: worker_id.into(),
            node: "test".into(),
            capacity: 10,
            concurrency_keys: true,
            start_on_assign: true,
            queue_ids: queues.iter().map(|q| q.to_string()).collect(),
            ..Default::default()
        },
    )
    .await
    .unwrap()
    .session_id
}

pub fn result(attempt_id: u64, outcome: Outcome) -> AttemptResult {
    AttemptResult {
        attempt_id,
        outcome,
        retryable: outcome == Outcome::Failed,
        output: Some(serde_json::json!({"n": attempt_id})),
        error: None,
    }
}
