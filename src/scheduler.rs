//! The maintenance loop of `orbit serve`: lease recovery, retry promotion, deadline expiry,
//! plan firing, the sweep of silent worker sessions, the purge of finished tasks past their
//! queue's retention, and the dispatch probe that wakes local sessions for work from other servers.
//! Every step is a procedure that is safe to run from several servers at once; the loop sleeps
//! until the earliest thing any of them reported as next due, at most [`MAX_SLEEP`].

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;

use crate::db::Db;
use crate::dispatch::Dispatch;

/// The longest the loop sleeps: the bound on how late this server notices work accepted or
/// released by another server on the same database (the dispatch probe), and on how late an
/// expired lease is recovered.
pub const MAX_SLEEP: Duration = Duration::from_millis(250);
const MIN_SLEEP: Duration = Duration::from_millis(5);
const BATCH: u32 = 500;

/// Finished tasks one purge call deletes at most (`orbit_task_purge` works in transactions of
/// 50 tasks). A call that stops at this or at [`PURGE_BUDGET`] is followed by another after
/// [`PURGE_PAUSE`].
pub const PURGE_LIMIT: u32 = 1000;
/// The time after which a purge call starts no new batch: it answers well within
/// [`crate::db::CALL_TIMEOUT`] however slow the database is.
pub const PURGE_BUDGET: Duration = Duration::from_millis(250);
/// The pause between purge calls while there is more to purge: the purge works at most about
/// half the time, so a large backlog (the first start after an upgrade, a shortened retention)
/// is worked off without taking the database's I/O and CPU from claims and results for long.
pub const PURGE_PAUSE: Duration = Duration::from_millis(250);
/// How often the purge looks for finished tasks past their retention when the last call found
/// fewer than [`PURGE_LIMIT`]: retention is counted in minutes to years, so a task is purged at
/// most this much after its time, and a quiet database pays one index probe per queue this often.
pub const PURGE_INTERVAL: Duration = Duration::from_secs(10);

/// A worker session not heard from (hello, lease renewals) for this many leases is closed by the
/// sweep: its socket is gone although its server never recorded the close (that write failed,
/// or the server died). A live worker renews three times per lease, and its server records that
/// at least once per lease, so a live session is never this silent.
pub const SESSION_SILENT_LEASES: u32 = 3;

/// The sweep's bound for a lease of `lease_seconds`, in milliseconds.
pub fn session_idle_ms(lease_seconds: u32) -> u32 {
    lease_seconds.saturating_mul(SESSION_SILENT_LEASES * 1000)
}

/// Runs forever (the caller aborts it on shutdown). `lease_seconds` is the lease sessions get.
/// The purge of finished tasks runs beside the maintenance rounds, so a long purge never delays
/// lease recovery or the dispatch probe.
pub async fn run(db: Db, dispatch: Arc<Dispatch>, lease_seconds: u32) {
    tokio::join!(
        maintain(db.clone(), dispatch, lease_seconds),
        purge_loop(db)
    );
}

async fn maintain(db: Db, dispatch: Arc<Dispatch>, lease_seconds: u32) {
    let idle_ms = session_idle_ms(lease_seconds);
    loop {
        let sleep = match tick(&db, idle_ms).await {
            Ok((_worked, next)) => {
                // Whatever the steps readied (a recovered lease's key, a due retry, a fired plan)
                // shows in the probe, which wakes only the sessions of queues with ready work:
                // one application's sessions never pay for another's changes.
                match db.task_ready_queues(10_000).await {
                    Ok(ready) => dispatch.notify_queues(ready.into_iter().collect()),
                    Err(e) => tracing::warn!(error = %e, "dispatch probe failed"),
                }
                next
            }
            Err(e) => {
                tracing::warn!(error = %e, "maintenance step failed; retrying");
                MAX_SLEEP
            }
        };
        tokio::time::sleep(sleep).await;
    }
}

/// Purges every [`PURGE_INTERVAL`], and after [`PURGE_PAUSE`] while a call stops early.
async fn purge_loop(db: Db) {
    loop {
        let more = match purge(&db).await {
            Ok(p) => p.more,
            Err(e) => {
                tracing::warn!(error = %e, "purge of finished tasks failed; retrying");
                false
            }
        };
        tokio::time::sleep(if more { PURGE_PAUSE } else { PURGE_INTERVAL }).await;
    }
}

/// One purge call: deletes up to [`PURGE_LIMIT`] finished tasks kept longer than their queue's
/// retention, starting no new batch after [`PURGE_BUDGET`] (`orbit_task_purge`, safe with
/// several servers: each takes different tasks), and counts them in `orbit_tasks_purged_total`.
pub async fn purge(db: &Db) -> Result<crate::db::maintenance::Purged, crate::db::DbError> {
    let purged = db.task_purge(None, PURGE_LIMIT, PURGE_BUDGET).await?;
    crate::telemetry::purged(purged.count);
    Ok(purged)
}

/// One round; returns whether anything changed and how long to sleep. Sessions silent for
/// `session_idle_ms` are closed.
pub async fn tick(db: &Db, session_idle_ms: u32) -> Result<(bool, Duration), crate::db::DbError> {
    let swept = db.session_sweep(session_idle_ms, BATCH).await?;
    let recovered = db.lease_recover(BATCH).await?;
    let promoted = db.task_promote_due(BATCH).await?;
    let expired = db.task_expire_due(BATCH).await?;
    let fired = db.plan_fire_due(BATCH).await?;
    // Cron plans that fired (or were created, resumed, given a new version) get their next fire
    // time computed here and stored on the plan row; a crash before that leaves them for the next
    // round of any server.
    let scheduled = db.plan_schedule_round(BATCH).await?;
    crate::telemetry::swept(recovered.count, expired.count);
    let counts = [
        swept.count,
        recovered.count,
        promoted.count,
        expired.count,
        fired.count,
        scheduled.count,
    ];
    let worked = counts.iter().sum::<u64>() > 0;
    let full = counts.iter().any(|c| *c >= u64::from(BATCH));
    let next = [
        swept.next_due_at,
        recovered.next_due_at,
        promoted.next_due_at,
        expired.next_due_at,
        fired.next_due_at,
        scheduled.next_due_at,
    ]
    .into_iter()
    .flatten()
    .min();
    let sleep = if full {
        MIN_SLEEP
    } else {
        next.map_or(MAX_SLEEP, |at| {
            (at - Utc::now())
                .to_std()
                .unwrap_or(MIN_SLEEP)
                .clamp(MIN_SLEEP, MAX_SLEEP)
        })
    };
    Ok((worked, sleep))
}
