//! How `Db` reuses its connections under concurrent callers, counted by
//! `orbit::db::CONNECTIONS_OPENED`: a process-wide count, so this test has a binary of its own
//! (in `tests/pool.rs` the other tests' pools, opened in parallel, would count too).

mod calls;

use std::time::Duration;

use calls::{call, db};
use orbit::testing::Fixture;

/// Concurrent callers, each making calls one after another, reuse the pool's connections: a
/// connection kept between calls is never closed for want of room (it was, and under 16 clients
/// the pool opened a connection every few calls, which halved single submits).
#[tokio::test]
async fn concurrent_callers_reuse_their_connections() {
    let f = Fixture::new().await;
    let db = db(&f, 8).await;
    let opened = orbit::db::CONNECTIONS_OPENED.load(std::sync::atomic::Ordering::Relaxed);
    // Callers that pause between calls, as clients do: how many calls are out at once varies.
    let callers = (0..8u64).map(|i| {
        let (db, f) = (db.clone(), &f);
        async move {
            for n in 0..60u64 {
                call(&db, f).await;
                tokio::time::sleep(Duration::from_micros(200 * ((i + n) % 5))).await;
            }
        }
    });
    futures_util::future::join_all(callers).await;
    let opened = orbit::db::CONNECTIONS_OPENED.load(std::sync::atomic::Ordering::Relaxed) - opened;
    assert!(
        opened as usize <= 8 + orbit::db::KEPT_PER_SERVER,
        "{opened} connections opened for 480 calls over a pool of 8"
    );
    db.close().await;
}
