//! A tenant with a credential against the others, over HTTP and the worker WebSocket of a real
//! server: one tenant's worker sessions never cost another tenant's requests, sessions whose
//! socket is gone are closed, a revoked credential's open session stops at once, and another
//! tenant's ids get exactly the answer of ids that do not exist.

mod support;

use serde_json::{json, Value};
use support::ws::RawWorker;
use support::Api;

/// Another application (tenant) on the same database: (token, queue id, credential id).
async fn other_tenant(api: &Api, application: &str) -> (String, String, u64) {
    let (bootstrap, token) = orbit::db::queues::Bootstrap::with_new_token(
        application,
        "test",
        "default",
        "theirs",
        &orbit::testing::ALL_SCOPES,
        "other tenant",
    );
    let b = api.fixture.db.admin_bootstrap(&bootstrap).await.unwrap();
    (token, b.queue_id, b.credential_id)
}

/// The server's count of `orbit_task_claim` calls so far (`orbit_worker_claims_total`).
async fn claims(api: &Api) -> u64 {
    let text = api
        .http
        .get(format!("{}/metrics", api.server.url))
        .bearer_auth(api.token())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("orbit_worker_claims_total "))
        .map_or(0, |v| v.trim().parse::<f64>().unwrap() as u64)
}

/// A frame round trip: every frame the session got before is handled, and so is any claim it
/// started before reading this one.
async fn barrier(w: &mut RawWorker) {
    w.send(json!({"type": "lease.renew", "attempt_ids": []}))
        .await;
    w.recv_type("lease.renewed").await;
}

async fn submit(api: &Api, queue_id: &str, key: &str) -> u64 {
    let mut body = json!({"queue_id": queue_id, "handler": "h", "handler_version": "v1",
                          "payload_version": "v1", "payload": {}});
    if !key.is_empty() {
        body["concurrency_key"] = json!(key);
    }
    let idem = format!("idem-{}", rand::random::<u64>());
    let r = api.submit(&idem, &body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["data"]["id"].as_u64().unwrap()
}

// ---------------------------------------------------------------------------------------------
// Cross-tenant amplification (issue 27, 3e)
// ---------------------------------------------------------------------------------------------

/// Idle sessions of tenant B: tenant A's cancel and resolve wake A's session on the queue they
/// readied work in, and cause no claim from B's sessions (before, every session of the process
/// was woken and each called orbit_task_claim: thousands of calls per cancel).
#[tokio::test]
async fn a_cancel_or_resolve_wakes_only_the_sessions_of_the_queue_it_readied() {
    const IDLE: usize = 200;
    let api = Api::start().await;
    let f = &api.fixture;
    let (b_token, b_queue, _) = other_tenant(&api, "tenant-b").await;
    let mut idle = Vec::with_capacity(IDLE);
    for i in 0..IDLE {
        let mut w = RawWorker::connect(&api.server.url, &b_token).await;
        let welcome = w.hello(&format!("b-{i}"), &[&b_queue], true, 1, &[]).await;
        assert_eq!(welcome["type"], "welcome", "{welcome}");
        idle.push(w);
    }
    let mut a = RawWorker::connect(&api.server.url, &f.token).await;
    assert_eq!(
        a.hello("a", &[&f.queue_id], true, 2, &[]).await["type"],
        "welcome"
    );
    let t1 = submit(&api, &f.queue_id, "k").await;
    let t2 = submit(&api, &f.queue_id, "k").await;
    let first = a.recv_type("task.assign").await;
    assert_eq!(first["task"]["id"], t1, "{first}");
    for w in &mut idle {
        barrier(w).await;
    }
    barrier(&mut a).await;

    // Cancel: T1's attempt (granted, not started) ends, its key goes to T2, which A's session
    // claims when woken.
    let before = claims(&api).await;
    assert!(before >= IDLE as u64, "every hello claimed once: {before}");
    let r = api
        .post(
            "/v1/tasks/{id}/cancel",
            &format!("/v1/tasks/{t1}/cancel"),
            &json!({}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let second = a.recv_type("task.assign").await;
    assert_eq!(second["task"]["id"], t2, "A's session was woken: {second}");
    for w in &mut idle {
        barrier(w).await;
    }
    let after_cancel = claims(&api).await;
    assert!(
        after_cancel - before <= 3,
        "a cancel cost {} claims (B's {IDLE} idle sessions must cost none)",
        after_cancel - before
    );

    // Resolve: T2 ends UNKNOWN (NEEDS_REVIEW); a requeue readies it on A's queue again.
    let aid = second["attempt_id"].as_u64().unwrap();
    a.send(json!({"type": "task.start", "attempt_id": aid}))
        .await;
    a.recv_type("task.start.ok").await;
    a.send(json!({"type": "task.result", "attempt_id": aid, "outcome": "unknown"}))
        .await;
    assert_eq!(
        a.recv_type("task.result.ack").await["task_state"],
        "NEEDS_REVIEW"
    );
    barrier(&mut a).await;
    for w in &mut idle {
        barrier(w).await;
    }
    let before = claims(&api).await;
    let r = api
        .post(
            "/v1/tasks/{id}/resolve",
            &format!("/v1/tasks/{t2}/resolve"),
            &json!({"resolution": "requeue"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let third = a.recv_type("task.assign").await;
    assert_eq!(third["task"]["id"], t2, "A's session was woken: {third}");
    for w in &mut idle {
        barrier(w).await;
    }
    let after_resolve = claims(&api).await;
    assert!(
        after_resolve - before <= 3,
        "a resolve cost {} claims",
        after_resolve - before
    );
    // B's sessions are still served: work on their queue reaches one of them.
    let theirs = {
        let body = json!({"queue_id": b_queue, "handler": "h", "handler_version": "v1",
                          "payload_version": "v1", "payload": {}});
        let r = api
            .http
            .post(format!("{}/v1/tasks", api.server.url))
            .bearer_auth(&b_token)
            .header("Idempotency-Key", "b-1")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        r.json::<Value>().await.unwrap()["data"]["id"].clone()
    };
    let mut got = None;
    for w in &mut idle {
        w.send(json!({"type": "lease.renew", "attempt_ids": []}))
            .await;
        loop {
            let frame = w.recv().await;
            match frame["type"].as_str() {
                Some("task.assign") => got = Some(frame["task"]["id"].clone()),
                Some("lease.renewed") => break,
                _ => panic!("unexpected {frame}"),
            }
        }
        if got.is_some() {
            break;
        }
    }
    assert_eq!(got, Some(theirs));
    for w in idle {
        w.close().await;
    }
}
