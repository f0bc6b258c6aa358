//! Single submits that arrive while earlier ones are being called share one call
//! (`src/http/coalesce.rs`), and each request still gets its own receipt, replay or error.
//!
//! Each test holds every quota row of the fixture's application, so that every submit waits at
//! its quota charge: the server's two rounds of calls wait there, the next submits gather in the
//! server (`orbit_submits_waiting`), and the hold's commit lets them through as one round.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};
use sqlx::mysql::MySqlConnection;
use support::{sample, Api, Reply};

/// The server's rounds called at once (`orbit::http::coalesce::CALLS`).
const CALLS: usize = orbit::http::coalesce::CALLS;
/// How long a wait for the server's state may take before the test fails instead of hanging.
const WAIT: Duration = Duration::from_secs(60);

fn task(api: &Api, i: usize) -> Value {
    json!({"queue_id": api.fixture.queue_id, "handler": "h", "handler_version": "v1",
           "payload_version": "v1", "payload": {"i": i}, "business_key": format!("b{i}")})
}

fn submit(api: &Arc<Api>, token: &str, key: &str, body: Value) -> tokio::task::JoinHandle<Reply> {
    let (api, token, key) = (api.clone(), token.to_string(), key.to_string());
    tokio::spawn(async move {
        api.call(
            Method::POST,
            "/v1/tasks",
            "/v1/tasks",
            Some(&token),
            &[("Idempotency-Key", &key)],
            Some(&body),
        )
        .await
    })
}

/// Locks every quota row of the fixture's application in an open transaction.
async fn hold_quota(api: &Api) -> MySqlConnection {
    let mut conn = api.fixture.test_db.conn().await;
    sqlx::raw_sql("START TRANSACTION")
        .execute(&mut conn)
        .await
        .unwrap();
    let rows: Vec<(u8,)> = sqlx::query_as(
        "SELECT slot FROM orbit_application_quota WHERE application_id = ? FOR UPDATE",
    )
    .bind(api.fixture.application_id)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert!(!rows.is_empty(), "the application has quota rows to hold");
    conn
}

/// Waits until `n` connections of the test database wait at a quota charge.
async fn charges_waiting(api: &Api, conn: &mut MySqlConnection, n: usize) {
    let db = api.fixture.test_db.name.clone();
    let give_up = Instant::now() + WAIT;
    loop {
        assert!(
            Instant::now() < give_up,
            "{n} submits never reached their quota charge"
        );
        let waiting = orbit::testing::processes(conn)
            .await
            .into_iter()
            .filter(|p| {
                p.db.as_deref() == Some(db.as_str())
                    && p.info.starts_with("UPDATE orbit_application_quota")
            })
            .count();
        if waiting >= n {
            return;
        }
        tokio::task::yield_now().await;
    }
}

/// Waits until the server holds `n` submits for its next round.
async fn submits_waiting(api: &Api, n: f64) {
    let give_up = Instant::now() + WAIT;
    while sample(&api.scrape().await, "orbit_submits_waiting", &[]) != Some(n) {
        assert!(
            Instant::now() < give_up,
            "the server never held {n} submits for a round"
        );
        tokio::task::yield_now().await;
    }
}

/// Fills the server's rounds with submits that wait at their quota charge (keys `blocker-i`).
async fn fill_rounds(
    api: &Arc<Api>,
    conn: &mut MySqlConnection,
) -> Vec<tokio::task::JoinHandle<Reply>> {
    let mut blockers = Vec::new();
    for i in 0..CALLS {
        blockers.push(submit(
            api,
            &api.token(),
            &format!("blocker-{i}"),
            task(api, 1000 + i),
        ));
        charges_waiting(api, conn, i + 1).await;
    }
    blockers
}

#[tokio::test]
async fn submits_that_wait_share_one_call_per_credential_and_each_gets_its_own_answer() {
    let api = Arc::new(Api::start().await);
    let other = api.fixture.credential(&["tasks:submit"]).await;
    let reader = api.fixture.credential(&["tasks:read"]).await;
    let mut hold = hold_quota(&api).await;
    let blockers = fill_rounds(&api, &mut hold).await;
    // Twelve submits wait for the next round: six with the fixture's token, four with another
    // that may submit, two with one that may not (refused, and only they: a call per credential).
    let token = |i: usize| match i % 6 {
        0..=2 => api.token(),
        3 | 4 => other.clone(),
        _ => reader.clone(),
    };
    let waiting: Vec<_> = (0..12)
        .map(|i| submit(&api, &token(i), &format!("shared-{i}"), task(&api, i)))
        .collect();
    submits_waiting(&api, 12.0).await;
    sqlx::raw_sql("COMMIT").execute(&mut hold).await.unwrap();

    let mut ids = std::collections::HashSet::new();
    for b in blockers {
        let r = b.await.unwrap();
        assert_eq!(r.status, 201, "{}", r.body);
        assert!(ids.insert(r.body["data"]["id"].as_u64().unwrap()));
    }
    let mut receipts = Vec::new();
    for (i, w) in waiting.into_iter().enumerate() {
        let r = w.await.unwrap();
        if i % 6 == 5 {
            assert_eq!(r.status, 403, "shared-{i}: {}", r.body);
            assert_eq!(r.body["error"]["code"], "PERMISSION_DENIED");
            continue;
        }
        assert_eq!(r.status, 201, "shared-{i}: {}", r.body);
        assert_eq!(
            r.body["data"]["business_key"],
            format!("b{i}"),
            "shared-{i} got its own task"
        );
        assert_eq!(r.body["data"]["payload"], json!({"i": i}));
        assert!(
            ids.insert(r.body["data"]["id"].as_u64().unwrap()),
            "one task each"
        );
        receipts.push(r.body["data"].clone());
    }
    let text = api.scrape().await;
    assert_eq!(
        sample(&text, "orbit_submits_shared_total", &[]),
        Some(10.0),
        "the ten that may submit shared two calls, one per credential"
    );
    assert_eq!(sample(&text, "orbit_submits_waiting", &[]), Some(0.0));

    // Each receipt replays as a single submit's would, and its key is bound to its body.
    let replay = api.submit("shared-0", &task(&api, 0)).await;
    assert_eq!(replay.status, 200);
    assert_eq!(replay.body["data"], receipts[0]);
    let conflict = api.submit("shared-1", &task(&api, 0)).await;
    assert_eq!(conflict.status, 409);
    assert_eq!(conflict.body["error"]["code"], "IDEMPOTENCY_CONFLICT");
}

#[tokio::test]
async fn a_refused_submit_in_a_shared_call_refuses_only_itself() {
    let api = Arc::new(Api::start().await);
    let first = api.submit("taken", &task(&api, 0)).await;
    assert_eq!(first.status, 201, "{}", first.body);
    let mut hold = hold_quota(&api).await;
    let blockers = fill_rounds(&api, &mut hold).await;
    // Five submits wait for the next round: three new keys, "taken" with another body (a
    // conflict), and "taken" with its own body (a replay).
    let mut waiting: Vec<_> = (1..4)
        .map(|i| submit(&api, &api.token(), &format!("new-{i}"), task(&api, i)))
        .collect();
    waiting.push(submit(&api, &api.token(), "taken", task(&api, 9)));
    waiting.push(submit(&api, &api.token(), "taken", task(&api, 0)));
    submits_waiting(&api, 5.0).await;
    sqlx::raw_sql("COMMIT").execute(&mut hold).await.unwrap();

    for b in blockers {
        assert_eq!(b.await.unwrap().status, 201);
    }
    let mut replies = Vec::new();
    for w in waiting {
        replies.push(w.await.unwrap());
    }
    for (i, r) in replies[..3].iter().enumerate() {
        assert_eq!(r.status, 201, "new-{}: {}", i + 1, r.body);
        assert_eq!(r.body["data"]["business_key"], format!("b{}", i + 1));
    }
    assert_eq!(replies[3].status, 409, "{}", replies[3].body);
    assert_eq!(replies[3].body["error"]["code"], "IDEMPOTENCY_CONFLICT");
    assert_eq!(replies[4].status, 200, "{}", replies[4].body);
    assert_eq!(replies[4].body["data"], first.body["data"]);
    assert_eq!(
        sample(&api.scrape().await, "orbit_submits_shared_total", &[]),
        Some(0.0),
        "the shared call was refused whole, and each task was then called on its own"
    );
    let tasks: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orbit_task")
        .fetch_one(&mut hold)
        .await
        .unwrap();
    assert_eq!(
        tasks,
        1 + CALLS as i64 + 3,
        "nothing was created twice or lost"
    );
}
