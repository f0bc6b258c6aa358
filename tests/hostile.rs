//! A tenant with a credential against the others, over HTTP and the worker WebSocket of a real
//! server: one tenant's worker sessions never cost another tenant's requests, sessions whose
//! socket is gone are closed, a revoked credential's open session stops at once, and another
//! tenant's ids get exactly the answer of ids that do not exist.

mod support;

use reqwest::Method;
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

// ---------------------------------------------------------------------------------------------
// Sessions whose socket is gone (issue 27, 3d)
// ---------------------------------------------------------------------------------------------

async fn session_state(api: &Api, session: u64) -> String {
    sqlx::query_scalar("SELECT CAST(state AS CHAR) FROM orbit_session WHERE id = ?")
        .bind(session)
        .fetch_one(api.fixture.db.pool())
        .await
        .unwrap()
}

/// Moves a session's last_seen_at `seconds` into the past (a deterministic clock jump).
async fn age_session(api: &Api, session: u64, seconds: u32) {
    sqlx::query(
        "UPDATE orbit_session SET last_seen_at = UTC_TIMESTAMP(6) - INTERVAL ? SECOND WHERE id = ?",
    )
    .bind(seconds)
    .bind(session)
    .execute(api.fixture.db.pool())
    .await
    .unwrap();
}

/// Waits (polling the database, at most 10 s) until `what` holds.
async fn until<F: std::future::Future<Output = bool>>(what: &str, mut check: impl FnMut() -> F) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A session left open without a socket (its close was never recorded) is closed by the
/// scheduler's sweep once silent for three leases; its attempt then ends by lease expiry as usual
/// and the task goes to a live session. A live session that renews is never swept, even when its
/// last record is older than a lease; one swept anyway is refused on its next frame and its
/// socket ends.
#[tokio::test]
async fn sessions_without_a_live_socket_are_swept_and_live_ones_are_not() {
    let api = Api::start().await;
    let f = &api.fixture;
    let task = submit(&api, &f.queue_id, "k").await;
    let dead = f.session("dead", true, &[&f.queue_id]).await;
    let held = f.db.task_claim(dead, 1, 30_000).await.unwrap().remove(0);
    assert_eq!(held.task.id, task);
    let mut live = RawWorker::connect(&api.server.url, &f.token).await;
    let welcome = live.hello("live", &[&f.queue_id], true, 1, &[]).await;
    let live_id = welcome["session_id"].as_u64().unwrap();

    // The live session was last recorded more than a lease ago (30 s: its earlier renewals did
    // not write), but renews now; the dead one has been silent past the bound (90 s).
    age_session(&api, live_id, 40).await;
    barrier(&mut live).await;
    until("the renewal records the session as heard from", || async {
        let ago: i64 = sqlx::query_scalar(
            "SELECT TIMESTAMPDIFF(SECOND, last_seen_at, UTC_TIMESTAMP(6)) FROM orbit_session WHERE id = ?",
        )
        .bind(live_id)
        .fetch_one(f.db.pool())
        .await
        .unwrap();
        ago < 5
    })
    .await;
    age_session(&api, dead, 91).await;
    until("the sweep closes the silent session", || async {
        session_state(&api, dead).await == "closed"
    })
    .await;
    assert_eq!(session_state(&api, live_id).await, "active");
    // Closing released nothing: the attempt ends by its lease, then the live session gets the task.
    let state: String =
        sqlx::query_scalar("SELECT CAST(state AS CHAR) FROM orbit_attempt WHERE id = ?")
            .bind(held.attempt_id)
            .fetch_one(f.db.pool())
            .await
            .unwrap();
    assert_eq!(state, "LEASED");
    f.expire_lease(held.attempt_id).await;
    let assign = live.recv_type("task.assign").await;
    assert_eq!(assign["task"]["id"], task);
    assert!(
        assign["concurrency_token"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > held.concurrency_token
    );

    // A session swept while its socket lives on (say its server could not reach the database
    // for longer than the bound) is refused on its next frame, and the server ends the socket.
    age_session(&api, live_id, 91).await;
    until("the sweep closes it", || async {
        session_state(&api, live_id).await == "closed"
    })
    .await;
    live.send(json!({"type": "lease.renew", "attempt_ids": [assign["attempt_id"]]}))
        .await;
    let refused = live.recv().await;
    assert_eq!(
        (refused["type"].as_str(), refused["code"].as_str()),
        (Some("error"), Some("UNAUTHENTICATED")),
        "{refused}"
    );
    assert!(live.closed().await, "the server ends the socket");
}

// ---------------------------------------------------------------------------------------------
// Revocation (issue 27, 4)
// ---------------------------------------------------------------------------------------------

/// Revoking a credential closes its open sessions: the next renewal and a result are refused
/// (UNAUTHENTICATED, the socket ends), the attempts end by lease expiry, and each task is granted
/// to another session with a larger token.
#[tokio::test]
async fn a_revoked_credentials_open_session_is_refused_at_its_next_frame() {
    let api = Api::start().await;
    let f = &api.fixture;
    let revoked = f.credential(&orbit::testing::ALL_SCOPES).await;
    let credential_id: u64 = sqlx::query_scalar("SELECT MAX(id) FROM orbit_credential")
        .fetch_one(f.db.pool())
        .await
        .unwrap();
    let mut renewer = RawWorker::connect(&api.server.url, &revoked).await;
    renewer.hello("renewer", &[&f.queue_id], true, 1, &[]).await;
    let t1 = submit(&api, &f.queue_id, "k1").await;
    let a1 = renewer.recv_type("task.assign").await;
    assert_eq!(a1["task"]["id"], t1);
    let mut finisher = RawWorker::connect(&api.server.url, &revoked).await;
    finisher
        .hello("finisher", &[&f.queue_id], true, 1, &[])
        .await;
    let t2 = submit(&api, &f.queue_id, "k2").await;
    let a2 = finisher.recv_type("task.assign").await;
    assert_eq!(a2["task"]["id"], t2);

    f.db.credential_revoke(credential_id).await.unwrap();

    renewer
        .send(json!({"type": "lease.renew", "attempt_ids": [a1["attempt_id"]]}))
        .await;
    let r = renewer.recv().await;
    assert_eq!(
        (r["type"].as_str(), r["code"].as_str()),
        (Some("error"), Some("UNAUTHENTICATED")),
        "the renewal is refused: {r}"
    );
    assert!(renewer.closed().await, "the server ends the socket");
    finisher
        .send(
            json!({"type": "task.result", "attempt_id": a2["attempt_id"], "outcome": "succeeded",
                     "output": {"after": "revocation"}}),
        )
        .await;
    let r = finisher.recv().await;
    assert_eq!(
        (r["type"].as_str(), r["code"].as_str()),
        (Some("error"), Some("UNAUTHENTICATED")),
        "the result is refused: {r}"
    );
    assert!(finisher.closed().await, "the server ends the socket");
    let attempt = api
        .get(
            "/v1/attempts/{id}",
            &format!("/v1/attempts/{}", a2["attempt_id"]),
        )
        .await;
    assert_eq!(attempt.body["data"]["state"], "LEASED", "{}", attempt.body);

    // The leases run out (a clock jump); another credential's session gets both tasks.
    let mut next = RawWorker::connect(&api.server.url, &f.token).await;
    next.hello("next", &[&f.queue_id], true, 2, &[]).await;
    for a in [&a1, &a2] {
        f.expire_lease(a["attempt_id"].as_u64().unwrap()).await;
    }
    let mut tokens = std::collections::BTreeMap::new();
    while tokens.len() < 2 {
        let g = next.recv_type("task.assign").await;
        tokens.insert(
            g["task"]["id"].as_u64().unwrap(),
            g["concurrency_token"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap(),
        );
    }
    for (t, a) in [(t1, &a1), (t2, &a2)] {
        let old: u64 = a["concurrency_token"].as_str().unwrap().parse().unwrap();
        assert!(tokens[&t] > old, "task {t}: {} after {old}", tokens[&t]);
    }
    let task = api.get("/v1/tasks/{id}", &format!("/v1/tasks/{t2}")).await;
    assert!(
        task.body["data"].get("output").is_none_or(Value::is_null),
        "{}",
        task.body
    );
}

// ---------------------------------------------------------------------------------------------
// The existence oracle (issue 27, 7)
// ---------------------------------------------------------------------------------------------

fn without(mut v: Value, field: &str) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.remove(field);
    }
    v
}

/// Another tenant's task, attempt and plan ids get exactly the answer of ids that do not exist,
/// on every route and worker frame that takes one (before: `queue not found` against `task not
/// found`, PERMISSION_DENIED against NOT_FOUND).
#[tokio::test]
async fn another_tenants_ids_get_the_answer_of_missing_ids() {
    let api = Api::start().await;
    let f = &api.fixture;
    let (b_token, b_queue, _) = other_tenant(&api, "tenant-b").await;
    let def =
        json!({"handler": "h", "handler_version": "v1", "payload_version": "v1", "payload": {}});
    let as_b = |method: reqwest::Method, path: String, body: Value| {
        let req = api
            .http
            .request(method, format!("{}{path}", api.server.url))
            .bearer_auth(&b_token)
            .header("Idempotency-Key", "b")
            .json(&body);
        async move {
            let r = req.send().await.unwrap();
            assert!(r.status().is_success(), "{}", r.status());
            r.json::<Value>().await.unwrap()["data"].clone()
        }
    };
    let mut task_b = def.clone();
    task_b["queue_id"] = json!(b_queue);
    task_b["concurrency_key"] = json!("k");
    let theirs = as_b(Method::POST, "/v1/tasks".into(), task_b).await["id"]
        .as_u64()
        .unwrap();
    let plan = as_b(
        Method::POST,
        "/v1/plans".into(),
        json!({"name": "p", "queue_id": b_queue, "schedule": {"interval_seconds": 3600}, "definition": {"task": def}}),
    )
    .await["id"]
        .as_u64()
        .unwrap();
    let mut b_worker = RawWorker::connect(&api.server.url, &b_token).await;
    b_worker.hello("b", &[&b_queue], true, 1, &[]).await;
    let attempt = b_worker.recv_type("task.assign").await["attempt_id"]
        .as_u64()
        .unwrap();
    let missing = 9_000_000_000_u64;

    let routes: [(Method, &str, &str, Value); 9] = [
        (Method::GET, "/v1/tasks/{id}", "/v1/tasks/ID", json!(null)),
        (
            Method::GET,
            "/v1/tasks/{id}/attempts",
            "/v1/tasks/ID/attempts",
            json!(null),
        ),
        (
            Method::POST,
            "/v1/tasks/{id}/cancel",
            "/v1/tasks/ID/cancel",
            json!({}),
        ),
        (
            Method::POST,
            "/v1/tasks/{id}/resolve",
            "/v1/tasks/ID/resolve",
            json!({"resolution": "requeue"}),
        ),
        (
            Method::GET,
            "/v1/attempts/{id}",
            "/v1/attempts/ID",
            json!(null),
        ),
        (Method::GET, "/v1/plans/{id}", "/v1/plans/ID", json!(null)),
        (
            Method::POST,
            "/v1/plans/{id}/pause",
            "/v1/plans/ID/pause",
            json!({}),
        ),
        (
            Method::POST,
            "/v1/plans/{id}/resume",
            "/v1/plans/ID/resume",
            json!({}),
        ),
        (
            Method::POST,
            "/v1/plans/{id}/versions",
            "/v1/plans/ID/versions",
            json!({"schedule": {"interval_seconds": 60}, "definition": {"task": def}}),
        ),
    ];
    for (method, template, path, body) in routes {
        let foreign = match template {
            t if t.starts_with("/v1/plans") => plan,
            t if t.starts_with("/v1/attempts") => attempt,
            _ => theirs,
        };
        let mut answers = Vec::new();
        for id in [foreign, missing] {
            let body = (!body.is_null()).then_some(&body);
            let r = api
                .call(
                    method.clone(),
                    template,
                    &path.replace("ID", &id.to_string()),
                    Some(&f.token),
                    &[("Idempotency-Key", "a")],
                    body,
                )
                .await;
            answers.push((r.status, without(r.body, "request_id")));
        }
        assert_eq!(answers[0].0, 404, "{method} {template}: {:?}", answers[0]);
        assert_eq!(
            answers[0], answers[1],
            "{method} {template}: another tenant's id and a missing id must get one answer"
        );
    }

    // The worker frames: another tenant's session's attempt against one that does not exist.
    let mut w = RawWorker::connect(&api.server.url, &f.token).await;
    w.hello("a", &[&f.queue_id], true, 1, &[]).await;
    let mut frames = Vec::new();
    for id in [attempt, missing] {
        w.send(json!({"type": "task.start", "attempt_id": id}))
            .await;
        let start = without(w.recv().await, "attempt_id");
        w.send(json!({"type": "lease.renew", "attempt_ids": [id]}))
            .await;
        let renew = w.recv_type("lease.renewed").await["attempts"][0].clone();
        w.send(json!({"type": "task.result", "attempt_id": id, "outcome": "succeeded"}))
            .await;
        let result = without(w.recv().await, "attempt_id");
        frames.push((start, without(renew, "attempt_id"), result));
    }
    assert_eq!(frames[0].0["code"], "NOT_FOUND", "{:?}", frames[0]);
    assert_eq!(frames[0], frames[1], "one answer for both");
    // B's attempt is untouched.
    b_worker
        .send(json!({"type": "task.start", "attempt_id": attempt}))
        .await;
    assert_eq!(b_worker.recv().await["type"], "task.start.ok");
}
