//! Key policies' `limit` and `rate` at the SQL level (orbit_attempt_grant, orbit_key_release,
//! orbit_task_promote_due): up to N holders of a key, each in a slot no live holder shares and
//! with a strictly larger token; a lowered limit never ends a held permit; a rate never lets more
//! than `grants` grants through in any window, and the key waits in the blocked lane until
//! `rate_wake_at`, when promotion (not a claim) readies it.

use std::collections::BTreeSet;

use orbit::db::keys::KeyPolicySpec;
use orbit::db::workers::{Grant, Outcome};
use orbit::testing::Fixture;

async fn policy(f: &Fixture, spec: KeyPolicySpec<'_>) {
    f.db.key_policy_set(&f.hash, f.namespace_id, &spec)
        .await
        .unwrap();
}

async fn succeed(f: &Fixture, session: u64, g: &Grant) {
    f.db.attempt_finish(session, g.attempt_id, Outcome::Succeeded, false, None, None)
        .await
        .unwrap();
}

/// The key's row as the grant and release left it: (holders, holder_limit, slot rows held).
async fn key_row(f: &Fixture, key: &str) -> (i64, i64, i64) {
    sqlx::query_as(
        "SELECT CAST(r.holders AS SIGNED), CAST(r.holder_limit AS SIGNED), \
                (SELECT COUNT(*) FROM orbit_key_slot s WHERE s.resource_id = r.id AND s.attempt_id <> 0) \
           FROM orbit_resource r WHERE r.concurrency_key = ?",
    )
    .bind(key.as_bytes())
    .fetch_one(f.db.pool())
    .await
    .unwrap()
}

#[tokio::test]
async fn a_key_of_limit_three_has_three_holders_in_distinct_slots_with_rising_tokens() {
    let f = Fixture::new().await;
    let q2 = f.queue("q2").await;
    policy(&f, KeyPolicySpec::new("exact", "acct/1", "queue").limit(3)).await;
    for i in 0..6 {
        f.submit(if i % 2 == 0 { &f.queue_id } else { &q2 }, "acct/1")
            .await;
    }
    let s = f.session("w", true, &[&f.queue_id, &q2]).await;
    // One claim takes every holder the key allows, across its queues, and no more.
    let mut held: Vec<Grant> = Vec::new();
    for _ in 0..4 {
        held.extend(f.db.task_claim(s, 10, 30_000).await.unwrap());
    }
    assert_eq!(held.len(), 3, "{held:?}");
    let slots: BTreeSet<u32> = held.iter().map(|g| g.key_slot).collect();
    assert_eq!(slots, BTreeSet::from([0, 1, 2]));
    let tokens: Vec<u64> = held.iter().map(|g| g.concurrency_token).collect();
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    assert_eq!(key_row(&f, "acct/1").await, (3, 3, 2));
    // A release frees its slot; the next grant takes that slot with a larger token.
    let freed = held.remove(1);
    succeed(&f, s, &freed).await;
    let next = f.db.task_claim(s, 10, 30_000).await.unwrap();
    assert_eq!(next.len(), 1, "{next:?}");
    assert_eq!(next[0].key_slot, freed.key_slot);
    assert!(next[0].concurrency_token > *tokens.iter().max().unwrap());
    held.push(next[0].clone());
    // Every holder ends: the key drains through the same three slots, never more at once.
    let mut ended = 1;
    while let Some(g) = held.pop() {
        succeed(&f, s, &g).await;
        ended += 1;
        let more = f.db.task_claim(s, 10, 30_000).await.unwrap();
        for m in &more {
            assert!(m.key_slot < 3, "{m:?}");
        }
        held.extend(more);
        let (holders, _, _) = key_row(&f, "acct/1").await;
        assert!(holders as usize == held.len() && holders <= 3);
    }
    assert_eq!(ended, 6);
    assert_eq!(key_row(&f, "acct/1").await, (0, 3, 0));
    // The inspector shows the limit and the slots of the last grants.
    let k =
        f.db.key_get(&f.hash, f.namespace_id, "acct/1")
            .await
            .unwrap();
    assert_eq!((k.holders, k.limit, k.rate), (0, 3, None));
    assert!(k.recent_grants.iter().all(|g| g.key_slot < 3));
}

#[tokio::test]
async fn a_lowered_limit_keeps_the_held_permits_and_holds_back_grants() {
    let f = Fixture::new().await;
    policy(&f, KeyPolicySpec::new("exact", "acct/2", "queue").limit(2)).await;
    for _ in 0..4 {
        f.submit(&f.queue_id, "acct/2").await;
    }
    let s = f.session("w", true, &[&f.queue_id]).await;
    let mut held = f.db.task_claim(s, 10, 30_000).await.unwrap();
    held.extend(f.db.task_claim(s, 10, 30_000).await.unwrap());
    assert_eq!(held.len(), 2);
    // Lowered to 1: both holders keep their permits (their renewals and results are accepted).
    policy(&f, KeyPolicySpec::new("exact", "acct/2", "queue").limit(1)).await;
    for g in &held {
        let renewed = f.db.attempt_renew(s, g.attempt_id, 30_000).await.unwrap();
        assert!(renewed.accepted, "{renewed:?}");
    }
    assert!(f.db.task_claim(s, 10, 30_000).await.unwrap().is_empty());
    // One ends: one holder left, at the new limit: nothing more.
    succeed(&f, s, &held[0]).await;
    assert!(f.db.task_claim(s, 10, 30_000).await.unwrap().is_empty());
    // The last ends: one at a time from now on.
    succeed(&f, s, &held[1]).await;
    let one = f.db.task_claim(s, 10, 30_000).await.unwrap();
    assert_eq!(one.len(), 1);
    assert!(f.db.task_claim(s, 10, 30_000).await.unwrap().is_empty());
    assert_eq!(key_row(&f, "acct/2").await.0, 1);
}

#[tokio::test]
async fn cancel_running_at_a_full_key_of_two_ends_its_oldest_holder() {
    let f = Fixture::new().await;
    policy(
        &f,
        KeyPolicySpec::new("exact", "acct/3", "cancel_running").limit(2),
    )
    .await;
    let s = f.session("w", true, &[&f.queue_id]).await;
    f.submit(&f.queue_id, "acct/3").await;
    let mut held = f.db.task_claim(s, 10, 30_000).await.unwrap();
    // Not full: a second submit cancels nothing and runs beside the first.
    f.submit(&f.queue_id, "acct/3").await;
    held.extend(f.db.task_claim(s, 10, 30_000).await.unwrap());
    assert_eq!(held.len(), 2, "{held:?}");
    for g in &held {
        let a = f.db.attempt_get(&f.hash, g.attempt_id).await.unwrap();
        assert_eq!(a.state.as_str(), "LEASED");
    }
    held.sort_by_key(|g| g.attempt_id);
    // Full: the next submit ends the oldest holder at once, and takes its slot.
    let third = f.submit(&f.queue_id, "acct/3").await;
    let oldest = f.db.attempt_get(&f.hash, held[0].attempt_id).await.unwrap();
    assert_eq!(oldest.state.as_str(), "CANCELLED");
    let younger = f.db.attempt_get(&f.hash, held[1].attempt_id).await.unwrap();
    assert_eq!(younger.state.as_str(), "LEASED");
    let g = f.db.task_claim(s, 10, 30_000).await.unwrap();
    assert_eq!(g.len(), 1);
    assert_eq!(g[0].task.id, third.id);
    assert_eq!(g[0].key_slot, held[0].key_slot);
    assert!(g[0].concurrency_token > held[1].concurrency_token);
}

/// Grants of the key in grant order: (granted_at as microseconds since the epoch).
async fn grant_times(f: &Fixture, key: &str) -> Vec<i64> {
    sqlx::query_scalar(
        "SELECT CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', a.granted_at) AS SIGNED) \
           FROM orbit_attempt a JOIN orbit_resource r ON r.id = a.resource_id \
          WHERE r.concurrency_key = ? ORDER BY a.grant_version",
    )
    .bind(key.as_bytes())
    .fetch_all(f.db.pool())
    .await
    .unwrap()
}

#[tokio::test]
async fn a_rate_lets_at_most_its_grants_through_in_any_window_and_wakes_the_key() {
    let f = Fixture::new().await;
    // Two holders at once, at most 2 grants per second.
    policy(
        &f,
        KeyPolicySpec::new("exact", "api/1", "queue")
            .limit(2)
            .rate(2, 1),
    )
    .await;
    for _ in 0..5 {
        f.submit(&f.queue_id, "api/1").await;
    }
    let s = f.session("w", true, &[&f.queue_id]).await;
    let mut granted = 0;
    let first = f.db.task_claim(s, 10, 30_000).await.unwrap();
    for g in &first {
        succeed(&f, s, g).await;
    }
    granted += first.len();
    // The first two in the window are let through; the next claims find nothing ready: the
    // key's next task waits in the blocked lane (never scanned), with a wake time on the key.
    let mut claims = 0;
    while granted < 2 {
        let more = f.db.task_claim(s, 10, 30_000).await.unwrap();
        for g in &more {
            succeed(&f, s, g).await;
        }
        granted += more.len();
        claims += 1;
        assert!(claims < 10);
    }
    assert!(f.db.task_claim(s, 10, 30_000).await.unwrap().is_empty());
    let k =
        f.db.key_get(&f.hash, f.namespace_id, "api/1")
            .await
            .unwrap();
    let wake = k.rate_wake_at.expect("the key waits for its rate");
    assert_eq!(k.waiting, 3);
    let lanes: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(lane AS CHAR) FROM orbit_task WHERE state = 'WAITING' ORDER BY id",
    )
    .fetch_all(f.db.pool())
    .await
    .unwrap();
    assert!(lanes.iter().all(|l| l == "blocked"), "{lanes:?}");
    // Nothing but promotion readies it: at the wake time, promote_due does.
    while chrono::Utc::now() < wake {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let promoted = f.db.task_promote_due(100).await.unwrap();
    assert!(promoted.count >= 1, "{promoted:?}");
    // Drain the rest, waking the key as promote_due promises.
    while granted < 5 {
        let more = f.db.task_claim(s, 10, 30_000).await.unwrap();
        for g in &more {
            succeed(&f, s, g).await;
        }
        granted += more.len();
        if more.is_empty() {
            let k =
                f.db.key_get(&f.hash, f.namespace_id, "api/1")
                    .await
                    .unwrap();
            if let Some(wake) = k.rate_wake_at {
                while chrono::Utc::now() < wake {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
            }
            f.db.task_promote_due(100).await.unwrap();
        }
    }
    // Never more than 2 grants in any 1-second window, by the database's grant times.
    let times = grant_times(&f, "api/1").await;
    assert_eq!(times.len(), 5);
    for w in times.windows(3) {
        assert!(
            w[2] - w[0] >= 1_000_000,
            "3 grants within a second: {times:?}"
        );
    }
}

#[tokio::test]
async fn a_changed_rate_counts_the_grants_made_before_the_change() {
    let f = Fixture::new().await;
    let spec = KeyPolicySpec::new("exact", "api/9", "queue").limit(5);
    // A window of 4 s, so the claims below fit in it on a busy machine.
    policy(&f, spec.rate(3, 4)).await;
    for _ in 0..4 {
        f.submit(&f.queue_id, "api/9").await;
    }
    let s = f.session("w", true, &[&f.queue_id]).await;
    let mut held = Vec::new();
    for _ in 0..6 {
        held.extend(f.db.task_claim(s, 10, 30_000).await.unwrap());
    }
    assert_eq!(held.len(), 3, "{held:?}");
    // Now 2 per 4 s: grant 4 must come 4 s after grant 2, which the ring written at 3 per 4 s
    // does not hold where 2 per 4 s looks (the grant reads it from the attempts).
    policy(&f, spec.rate(2, 4)).await;
    for _ in 0..3 {
        assert!(f.db.task_claim(s, 10, 30_000).await.unwrap().is_empty());
    }
    // The key waits for the time its last refused grant computed: under the old rate when the
    // task was refused before the change (grant 1 + 4 s). Woken then, the grant applies the new
    // rate and may refuse it once more, until grant 2 + 4 s.
    let mut fourth = Vec::new();
    for _ in 0..3 {
        let k =
            f.db.key_get(&f.hash, f.namespace_id, "api/9")
                .await
                .unwrap();
        let wake = k.rate_wake_at.expect("the key waits for its rate");
        while chrono::Utc::now() < wake {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        f.db.task_promote_due(100).await.unwrap();
        fourth = f.db.task_claim(s, 10, 30_000).await.unwrap();
        if !fourth.is_empty() {
            break;
        }
    }
    assert_eq!(fourth.len(), 1);
    let times = grant_times(&f, "api/9").await;
    assert_eq!(times.len(), 4);
    assert!(times[3] - times[1] >= 4_000_000, "{times:?}");
}
