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
        slot: None,
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

/// A write of `value` by the holder of `slot` with `token`.
fn in_slot(key: &str, slot: u32, token: u64, op: &str) -> FenceWrite {
    FenceWrite::write("default", key, token, op, format!("v{token}")).in_slot(slot)
}

/// Keys with several holders (limit N > 1): each slot is its own register, so live holders of
/// different slots are all accepted, whichever token is larger and whichever writes first; the
/// key's plain register is another register again.
#[tokio::test]
async fn each_slot_of_a_key_is_its_own_register() {
    let db = TestDb::fenced().await;
    let fence = MySqlFence::new(db.pool.clone(), "test");
    // Live holders: slot 0 with token 7, slot 1 with token 8. The newer one writes first ...
    assert_eq!(
        fence.write(&in_slot("acct/1", 1, 8, "b")).await.unwrap(),
        FenceDecision::Accepted
    );
    assert_eq!(
        fence.write(&in_slot("acct/1", 0, 7, "a")).await.unwrap(),
        FenceDecision::Accepted,
        "a live holder with a smaller token, in another slot"
    );
    // ... and in the other order on another key.
    assert_eq!(
        fence.write(&in_slot("acct/2", 0, 7, "a")).await.unwrap(),
        FenceDecision::Accepted
    );
    assert_eq!(
        fence.write(&in_slot("acct/2", 1, 8, "b")).await.unwrap(),
        FenceDecision::Accepted
    );
    // Both keep writing.
    assert_eq!(
        fence.write(&in_slot("acct/1", 0, 7, "a2")).await.unwrap(),
        FenceDecision::Accepted
    );
    assert_eq!(
        fence.write(&in_slot("acct/1", 0, 7, "a2")).await.unwrap(),
        FenceDecision::Duplicate,
        "a retry of the same operation in its slot"
    );
    assert_eq!(
        fence.read_slot("default", "acct/1", 0).await.unwrap(),
        Some((7, "v7".into()))
    );
    assert_eq!(
        fence.read_slot("default", "acct/1", 1).await.unwrap(),
        Some((8, "v8".into()))
    );
    assert_eq!(fence.read_slot("default", "acct/1", 2).await.unwrap(), None);
    // The plain register of the key is untouched, and writing it touches no slot.
    assert_eq!(fence.read("default", "acct/1").await.unwrap(), None);
    assert_eq!(
        fence
            .write(&FenceWrite::write(
                "default",
                "acct/1",
                1,
                "plain",
                "p".into()
            ))
            .await
            .unwrap(),
        FenceDecision::Accepted,
        "the plain register has seen no token"
    );
    assert_eq!(
        fence.read("default", "acct/1").await.unwrap(),
        Some((1, "p".into()))
    );
    assert_eq!(
        fence.read_slot("default", "acct/1", 0).await.unwrap(),
        Some((7, "v7".into()))
    );
    // Operation ids are per register: the same id in another slot is another operation.
    assert_eq!(
        fence.write(&in_slot("acct/1", 1, 8, "a")).await.unwrap(),
        FenceDecision::Accepted
    );
    // Rows: the slot registers are the key, byte 0x1F, the slot's digits.
    let keys: Vec<Vec<u8>> = sqlx::query_scalar(
        "SELECT resource_key FROM orbit_fence_register WHERE resource_key LIKE 'acct/1%' ORDER BY resource_key",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        keys,
        vec![
            b"acct/1".to_vec(),
            b"acct/1\x1f0".to_vec(),
            b"acct/1\x1f1".to_vec()
        ]
    );
}

/// The touch-then-read-then-write protocol per slot: slot 0 is granted again (its holder's lease
/// ran out) to a holder with a larger token; once that holder touched slot 0, the old holder's
/// late write is refused, while the live holder of slot 1, whose token is smaller than the new
/// one's, keeps writing. The SQL fence and the in-memory fence agree.
#[tokio::test]
async fn a_stale_holder_of_a_slot_is_refused_once_the_slot_s_newer_holder_wrote() {
    let db = TestDb::fenced().await;
    let sql = MySqlFence::new(db.pool.clone(), "test");
    let memory = orbit_sdk::InMemoryFence::new();
    async fn run(fence: &impl Fence) -> Vec<FenceDecision> {
        let key = "object/42";
        let write = |token: u64, slot: u32, op: &str, value: &str| {
            FenceWrite::write("default", key, token, op, value.into()).in_slot(slot)
        };
        let mut decisions = vec![
            // Slot 0: token 3; slot 1: token 4.
            fence.write(&write(3, 0, "t3/a", "x")).await.unwrap(),
            fence.write(&write(4, 1, "t4/a", "y")).await.unwrap(),
            // Token 3 pauses past its lease; slot 0 goes to token 5, which touches first.
            fence
                .write(&FenceWrite::touch("default", key, 5, "t5/touch").in_slot(0))
                .await
                .unwrap(),
        ];
        // The new holder reads slot 0 after its touch: its token, the old holder's value.
        assert_eq!(
            fence.read_slot("default", key, 0).await.unwrap(),
            Some((5, "x".into()))
        );
        decisions.extend([
            // The paused holder comes back: refused.
            fence.write(&write(3, 0, "t3/late", "lost?")).await.unwrap(),
            fence.write(&write(5, 0, "t5/a", "x z")).await.unwrap(),
            // Slot 1's holder (token 4 < 5) is live and unaffected.
            fence.write(&write(4, 1, "t4/b", "y y")).await.unwrap(),
        ]);
        decisions
    }
    for decisions in [run(&sql).await, run(&memory).await] {
        assert_eq!(
            decisions,
            vec![
                FenceDecision::Accepted,
                FenceDecision::Accepted,
                FenceDecision::Accepted,
                FenceDecision::Stale { highest: 5 },
                FenceDecision::Accepted,
                FenceDecision::Accepted,
            ]
        );
    }
    assert_eq!(
        sql.read_slot("default", "object/42", 0).await.unwrap(),
        Some((5, "x z".into()))
    );
    assert_eq!(
        sql.read_slot("default", "object/42", 1).await.unwrap(),
        Some((4, "y y".into()))
    );
}

/// The message of an `Invalid` error; panics on anything else.
fn invalid<T: std::fmt::Debug>(r: Result<T, orbit_sdk::FenceError>, what: &str) -> String {
    match r {
        Err(orbit_sdk::FenceError::Invalid(m)) => m,
        other => panic!("{what}: {other:?}"),
    }
}

/// A slot outside 0-999, an empty key, or a key that does not fit in a slot's register with its
/// separator and digits: `INVALID_ARGUMENT`, from the procedures and from the in-memory fence
/// alike; nothing is written.
#[tokio::test]
async fn a_bad_slot_or_a_key_too_long_for_a_slot_register_is_invalid() {
    let db = TestDb::fenced().await;
    let sql = MySqlFence::new(db.pool.clone(), "test");
    let memory = orbit_sdk::InMemoryFence::new();
    let max = orbit_sdk::fence::KEY_MAX_BYTES;
    // 760 key bytes + 0x1F + "999" = 764 bytes: fits; one more key byte does not.
    let fits = "k".repeat(max - 4);
    let too_long = "k".repeat(max - 3);
    async fn check(fence: &impl Fence, fits: &str, too_long: &str) {
        for slot in [1000, u32::MAX] {
            let m = invalid(
                fence.write(&in_slot("k", slot, 1, "op")).await,
                "slot out of range",
            );
            assert!(m.contains("slot"), "{m}");
            invalid(
                fence.read_slot("default", "k", slot).await,
                "read, slot out of range",
            );
        }
        invalid(fence.write(&in_slot("", 0, 1, "op")).await, "empty key");
        invalid(fence.read_slot("default", "", 0).await, "read, empty key");
        let m = invalid(
            fence.write(&in_slot(too_long, 999, 1, "op")).await,
            "key too long",
        );
        assert!(m.contains("764"), "{m}");
        invalid(
            fence.read_slot("default", too_long, 999).await,
            "read, key too long",
        );
        invalid(
            fence
                .write(&in_slot(&format!("{too_long}k"), 10, 1, "op"))
                .await,
            "key too long for a two-digit slot",
        );
        assert_eq!(
            fence.write(&in_slot(fits, 999, 1, "op")).await.unwrap(),
            FenceDecision::Accepted
        );
        assert_eq!(
            fence.write(&in_slot(too_long, 9, 1, "op")).await.unwrap(),
            FenceDecision::Accepted,
            "a one-digit slot leaves room for two more key bytes"
        );
        assert_eq!(
            fence.read_slot("default", fits, 999).await.unwrap(),
            Some((1, "v1".into()))
        );
        // The plain register of a key of the largest length is still fine.
        let full = "k".repeat(orbit_sdk::fence::KEY_MAX_BYTES);
        assert_eq!(
            fence
                .write(&FenceWrite::write("default", &full, 1, "op", "p".into()))
                .await
                .unwrap(),
            FenceDecision::Accepted
        );
    }
    check(&sql, &fits, &too_long).await;
    check(&memory, &fits, &too_long).await;
    let registers: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orbit_fence_register")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(registers, 3, "only the valid writes made registers");
    // Straight SQL: a negative or NULL slot.
    for slot in ["-1", "NULL"] {
        let e = sqlx::query(&format!(
            "CALL orbit_fence_write_slot('default', 'k', {slot}, 1, 'op', 'sql', 'v')"
        ))
        .execute(&db.pool)
        .await
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("INVALID_ARGUMENT: slot must be 0-999"),
            "{slot}: {e}"
        );
    }
}

/// The fence has no migrations: an install made before the slot procedures existed gets them by
/// running the same idempotent script again, and keeps its registers and operations.
#[tokio::test]
async fn re_running_the_install_script_adds_slot_registers_to_an_older_install() {
    let db = TestDb::fenced().await;
    // An older install: the tables and the plain procedures only.
    for p in ["orbit_fence_write_slot", "orbit_fence_read_slot"] {
        sqlx::raw_sql(&format!("DROP PROCEDURE {p}"))
            .execute(&db.pool)
            .await
            .unwrap();
    }
    let fence = MySqlFence::new(db.pool.clone(), "test");
    assert_eq!(
        fence.write(&w(5, "op-a")).await.unwrap(),
        FenceDecision::Accepted
    );
    assert!(
        fence.write(&w(6, "op-b").in_slot(0)).await.is_err(),
        "no slot procedures yet"
    );
    db.install_fence().await;
    assert_eq!(
        fence.read("default", "object/42").await.unwrap(),
        Some((5, "v5".into())),
        "the register survives"
    );
    assert_eq!(
        fence.write(&w(5, "op-a")).await.unwrap(),
        FenceDecision::Duplicate,
        "and so does the operation log"
    );
    assert_eq!(
        fence.write(&w(4, "op-c")).await.unwrap(),
        FenceDecision::Stale { highest: 5 }
    );
    assert_eq!(
        fence.write(&w(6, "op-b").in_slot(0)).await.unwrap(),
        FenceDecision::Accepted
    );
}
