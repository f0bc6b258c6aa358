//! The MySQL-backed Fence (generated-sql/fence) through the SDK, on a real database.

use std::sync::Arc;

use orbit::testing::TestDb;
use orbit_sdk::fence::mysql::MySqlFence;
use orbit_sdk::{Fence, FenceDecision, FenceWrite};

fn w(token: u64, op: &str) -> FenceWrite {
    FenceWrite {
        namespace: "default".into(),
        key: "object/42".into(),
        token,
        operation_id: op.into(),
        value: Some(format!("v{token}")),
    }
}

#[tokio::test]
async fn stale_tokens_are_rejected_and_operations_deduplicated() {
    let db = TestDb::fenced().await;
    let fence = MySqlFence::new(db.pool.clone(), "test");
    assert_eq!(
        fence.write(&w(5, "op-a")).await.unwrap(),
        FenceDecision::Accepted
    );
    assert_eq!(
        fence.write(&w(5, "op-a")).await.unwrap(),
        FenceDecision::Duplicate,
        "same op, same token"
    );
    assert_eq!(
        fence.write(&w(3, "op-b")).await.unwrap(),
        FenceDecision::Stale { highest: 5 },
        "a stale token"
    );
    assert_eq!(
        fence.write(&w(9, "op-a")).await.unwrap(),
        FenceDecision::Stale { highest: 5 },
        "an op keeps its token"
    );
    assert_eq!(
        fence.write(&w(6, "op-c")).await.unwrap(),
        FenceDecision::Accepted
    );
    assert_eq!(
        fence.read("default", "object/42").await.unwrap(),
        Some((6, "v6".into()))
    );
    assert_eq!(
        fence.read("default", "object/43").await.unwrap(),
        None,
        "keys are separate registers"
    );
    // Keys compare by exact bytes here too.
    let mut upper = w(1, "op-u");
    upper.key = "object/A".into();
    assert_eq!(fence.write(&upper).await.unwrap(), FenceDecision::Accepted);
    let mut lower = w(1, "op-l");
    lower.key = "object/a".into();
    assert_eq!(fence.write(&lower).await.unwrap(), FenceDecision::Accepted);
    assert!(
        fence.write(&w(0, "zero")).await.is_err(),
        "a zero token is invalid"
    );
}

#[tokio::test]
async fn sixteen_concurrent_writers_leave_a_strictly_increasing_accepted_sequence() {
    let db = TestDb::fenced().await;
    let fence = Arc::new(MySqlFence::new(db.pool.clone(), "test"));
    let mut handles = Vec::new();
    for writer in 0..16u64 {
        let fence = fence.clone();
        handles.push(tokio::spawn(async move {
            let mut decisions = Vec::new();
            for i in 0..20u64 {
                let token = i * 16 + writer + 1;
                decisions.push(
                    fence
                        .write(&w(token, &format!("op-{token}")))
                        .await
                        .unwrap(),
                );
            }
            decisions
        }));
    }
    let mut accepted = 0;
    for h in handles {
        accepted += h
            .await
            .unwrap()
            .iter()
            .filter(|d| **d == FenceDecision::Accepted)
            .count();
    }
    let tokens: Vec<u64> =
        sqlx::query_scalar("SELECT token FROM orbit_fence_operation ORDER BY id")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert_eq!(tokens.len(), accepted);
    assert!(tokens.len() >= 20, "the largest tokens always get through");
    assert!(
        tokens.windows(2).all(|p| p[0] < p[1]),
        "accepted tokens strictly increase: {tokens:?}"
    );
    let highest: u64 = sqlx::query_scalar("SELECT highest_token FROM orbit_fence_register")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(highest, *tokens.last().unwrap());
}

/// The touch-then-read-then-write protocol a successor uses against a paused predecessor: once
/// the successor has touched, the predecessor's late write is refused, and the touch itself
/// never changes the value (SQL fence and in-memory fence agree).
#[tokio::test]
async fn a_touch_raises_the_token_keeps_the_value_and_fences_off_the_predecessor() {
    let db = TestDb::fenced().await;
    let sql = MySqlFence::new(db.pool.clone(), "test");
    let memory = orbit_sdk::InMemoryFence::new();
    async fn run(fence: &impl Fence) -> Vec<FenceDecision> {
        let key = "object/42";
        vec![
            fence
                .write(&FenceWrite::write(
                    "default",
                    key,
                    1,
                    "a1/append",
                    "x".into(),
                ))
                .await
                .unwrap(),
            fence
                .write(&FenceWrite::touch("default", key, 2, "a2/touch"))
                .await
                .unwrap(),
            // The paused holder (token 1) comes back and writes what it read before the touch.
            fence
                .write(&FenceWrite::write(
                    "default",
                    key,
                    1,
                    "a1/late",
                    "lost?".into(),
                ))
                .await
                .unwrap(),
            fence
                .write(&FenceWrite::write(
                    "default",
                    key,
                    2,
                    "a2/append",
                    "x y".into(),
                ))
                .await
                .unwrap(),
        ]
    }
    for decisions in [run(&sql).await, run(&memory).await] {
        assert_eq!(
            decisions,
            vec![
                FenceDecision::Accepted,
                FenceDecision::Accepted,
                FenceDecision::Stale { highest: 2 },
                FenceDecision::Accepted
            ]
        );
    }
    assert_eq!(
        sql.read("default", "object/42").await.unwrap(),
        Some((2, "x y".into()))
    );
    // A touch on a register that was never written leaves it empty.
    sql.write(&FenceWrite::touch("default", "object/new", 7, "t"))
        .await
        .unwrap();
    assert_eq!(
        sql.read("default", "object/new").await.unwrap(),
        Some((7, String::new()))
    );
}
