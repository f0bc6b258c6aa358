//! Where a result's grant scans: on from the session's last scan stop, from the front every 16th
//! time and whenever a scan comes up short (a claim always starts there), better priorities first.

mod claim;

use claim::{claim_seq, ready_of_key, succeed};
use orbit::db::workers::{ClaimAfter, Grant, Outcome};
use orbit::testing::Fixture;

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
