//! The worker WebSocket against a spawned server, frame by frame.

mod support;

use serde_json::json;
use support::ws::RawWorker;
use support::Api;

#[tokio::test]
async fn assign_start_renew_result_and_drain() {
    let api = Api::start().await;
    let f = &api.fixture;
    f.submit(&f.queue_id, "k").await;
    f.submit(&f.queue_id, "").await;
    let mut w = RawWorker::connect(&api.server.url, &f.token).await;
    let welcome = w.hello("w1", &[&f.queue_id], true, 4, &[]).await;
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    assert!(
        welcome["lease_seconds"].as_u64().unwrap()
            > welcome["renew_interval_seconds"].as_u64().unwrap()
    );
    let a = w.recv_type("task.assign").await;
    let b = w.recv_type("task.assign").await;
    let (keyed, plain) = if a["task"]["concurrency_key"].is_string() {
        (a, b)
    } else {
        (b, a)
    };
    assert_eq!(keyed["concurrency_token"], "1", "a decimal string: {keyed}");
    assert!(
        plain.get("concurrency_token").is_none() && plain["task"].get("concurrency_key").is_none(),
        "{plain}"
    );
    let id = keyed["attempt_id"].as_u64().unwrap();
    w.send(json!({"type": "task.start", "attempt_id": id}))
        .await;
    assert_eq!(w.recv_type("task.start.ok").await["attempt_id"], id);
    w.send(json!({"type": "lease.renew", "attempt_ids": [id]}))
        .await;
    let renewed = w.recv_type("lease.renewed").await;
    assert!(
        renewed["attempts"][0]["lease_expires_at"].is_string(),
        "{renewed}"
    );
    w.send(json!({"type": "task.result", "attempt_id": id, "outcome": "succeeded", "retryable": false, "output": {"ok": true}})).await;
    assert_eq!(
        w.recv_type("task.result.ack").await["task_state"],
        "SUCCEEDED"
    );
    // A duplicate result gets the same ack.
    w.send(json!({"type": "task.result", "attempt_id": id, "outcome": "succeeded", "retryable": false, "output": {"ok": true}})).await;
    assert_eq!(
        w.recv_type("task.result.ack").await["task_state"],
        "SUCCEEDED"
    );
    w.send(json!({"type": "drain"})).await;
    let pid = plain["attempt_id"].as_u64().unwrap();
    w.send(json!({"type": "task.result", "attempt_id": pid, "outcome": "failed", "retryable": false, "error": {"e": 1}})).await;
    assert_eq!(w.recv_type("task.result.ack").await["task_state"], "FAILED");
    w.recv_type("drained").await;
    // Bad frames get an error frame, the socket stays.
    w.send(json!({"type": "nonsense"})).await;
    assert_eq!(w.recv().await["type"], "error");
    w.close().await;
}

#[tokio::test]
async fn a_cut_connection_resumes_with_the_same_attempt_and_token() {
    let api = Api::start().await;
    let f = &api.fixture;
    let task = f.submit(&f.queue_id, "k").await;
    let mut w = RawWorker::connect(&api.server.url, &f.token).await;
    w.hello("w1", &[&f.queue_id], true, 1, &[]).await;
    let assign = w.recv_type("task.assign").await;
    let id = assign["attempt_id"].as_u64().unwrap();
    w.send(json!({"type": "task.start", "attempt_id": id}))
        .await;
    w.recv_type("task.start.ok").await;
    drop(w); // the connection is cut mid-task
    let mut w = RawWorker::connect(&api.server.url, &f.token).await;
    let welcome = w.hello("w1", &[&f.queue_id], true, 1, &[id]).await;
    assert_eq!(welcome["resumed"], json!([id]), "{welcome}");
    w.send(json!({"type": "lease.renew", "attempt_ids": [id]}))
        .await;
    assert!(w.recv_type("lease.renewed").await["attempts"][0]["lease_expires_at"].is_string());
    w.send(json!({"type": "task.result", "attempt_id": id, "outcome": "succeeded", "retryable": false})).await;
    assert_eq!(
        w.recv_type("task.result.ack").await["task_state"],
        "SUCCEEDED"
    );
    let attempts = api
        .get(
            "/v1/tasks/{id}/attempts",
            &format!("/v1/tasks/{}/attempts", task.id),
        )
        .await;
    let list = attempts.body["data"].as_array().unwrap();
    assert_eq!(list.len(), 1, "the same attempt finished: {attempts:?}");
    assert_eq!(list[0]["concurrency_token"], assign["concurrency_token"]);
}

#[tokio::test]
async fn an_unstarted_attempt_expires_and_the_next_grant_gets_a_larger_token() {
    let api = Api::start().await;
    let f = &api.fixture;
    f.submit(&f.queue_id, "k").await;
    let mut slow = RawWorker::connect(&api.server.url, &f.token).await;
    slow.hello("slow", &[&f.queue_id], true, 1, &[]).await;
    let first = slow.recv_type("task.assign").await;
    let first_id = first["attempt_id"].as_u64().unwrap();
    // The holder never starts; its lease runs out (moved in the database), the server recovers it.
    f.expire_lease(first_id).await;
    let mut other = RawWorker::connect(&api.server.url, &f.token).await;
    other.hello("other", &[&f.queue_id], true, 1, &[]).await;
    let second = other.recv_type("task.assign").await;
    let t1: u64 = first["concurrency_token"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let t2: u64 = second["concurrency_token"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(t2 > t1, "{t1} then {t2}");
    assert_eq!(second["attempt_no"], 2);
    slow.send(json!({"type": "task.start", "attempt_id": first_id}))
        .await;
    let late = slow.recv_type("task.start.rejected").await;
    assert_eq!(late["code"], "STATE_CONFLICT", "{late}");
}

#[tokio::test]
async fn an_old_style_session_gets_unkeyed_tasks_only() {
    let api = Api::start().await;
    let f = &api.fixture;
    let keyed = f.submit(&f.queue_id, "k").await;
    let plain = f.submit(&f.queue_id, "").await;
    let mut old = RawWorker::connect(&api.server.url, &f.token).await;
    old.hello("legacy", &[&f.queue_id], false, 4, &[]).await;
    let a = old.recv_type("task.assign").await;
    assert_eq!(a["task"]["id"], plain.id);
    // The keyed task waits for a capable worker.
    let mut new = RawWorker::connect(&api.server.url, &f.token).await;
    new.hello("modern", &[&f.queue_id], true, 4, &[]).await;
    assert_eq!(new.recv_type("task.assign").await["task"]["id"], keyed.id);
    // The registration is fixed per worker_id.
    let mut again = RawWorker::connect(&api.server.url, &f.token).await;
    let refused = again.hello("legacy", &[&f.queue_id], true, 4, &[]).await;
    assert_eq!(
        (refused["type"].as_str(), refused["code"].as_str()),
        (Some("error"), Some("STATE_CONFLICT")),
        "{refused}"
    );
}

#[tokio::test]
async fn a_submit_is_pushed_to_a_waiting_worker() {
    let api = Api::start().await;
    let f = &api.fixture;
    let mut w = RawWorker::connect(&api.server.url, &f.token).await;
    w.hello("w1", &[&f.queue_id], true, 1, &[]).await;
    let r = api.submit("push-1", &json!({"queue_id": f.queue_id, "handler": "h", "handler_version": "v1", "payload_version": "v1", "payload": {}})).await;
    let a = w.recv_type("task.assign").await;
    assert_eq!(a["task"]["id"], r.body["data"]["id"]);
}

#[tokio::test]
async fn work_submitted_through_another_server_reaches_this_servers_workers() {
    let api = Api::start().await;
    let f = &api.fixture;
    let other = orbit::testing::Server::start(env!("CARGO_BIN_EXE_orbit"), &f.test_db.dsn).await;
    let mut w = RawWorker::connect(&other.url, &f.token).await;
    w.hello("w-on-b", &[&f.queue_id], true, 1, &[]).await;
    // Submitted through server A: server B learns of it from its dispatch probe.
    let r = api.submit("cross", &json!({"queue_id": f.queue_id, "handler": "h", "handler_version": "v1", "payload_version": "v1", "payload": {}})).await;
    let a = w.recv_type("task.assign").await;
    assert_eq!(a["task"]["id"], r.body["data"]["id"]);
}

/// A session whose queues had nothing ready at its last scan asks its results only for their
/// keys' next tasks (the hand-off), so a hot key goes on without a scan of the ready lane. Work
/// that becomes ready without waking it (written straight to the database, as another server's
/// submit is) still reaches it through the dispatch probe, and a submit through this server
/// wakes it at once.
#[tokio::test]
async fn an_idle_sessions_results_hand_keys_on_and_new_work_still_reaches_it() {
    let api = Api::start().await;
    let f = &api.fixture;
    for _ in 0..3 {
        f.submit(&f.queue_id, "k").await;
    }
    let mut w = RawWorker::connect(&api.server.url, &f.token).await;
    let welcome = w.hello_started("w1", &[&f.queue_id], 4).await;
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    // The claim finds the key's first task and nothing more: the session's queues are idle.
    let first = w.recv_type("task.assign").await;
    assert_eq!(first["concurrency_token"], "1", "{first}");
    let plain = f.submit(&f.queue_id, "").await;
    w.send(json!({"type": "task.result", "attempt_id": first["attempt_id"], "outcome": "succeeded", "retryable": false}))
        .await;
    // The scheduler's dispatch probe may find the new task and wake the session before the
    // result is handled: its assignment can come before the acknowledgement, so it is kept.
    let mut early = Vec::new();
    let ack = loop {
        let frame = w.recv().await;
        match frame["type"].as_str() {
            Some("task.result.ack") => break frame,
            Some("task.assign") => early.push(frame),
            _ => assert_ne!(frame["type"], "error", "{frame}"),
        }
    };
    assert_eq!(ack["task_state"], "SUCCEEDED");
    // The key's next task, handed on by the result, and the task no wake-up announced.
    let (mut next, mut plain_seen) = (None, false);
    while next.is_none() || !plain_seen {
        let a = match early.pop() {
            Some(a) => a,
            None => w.recv_type("task.assign").await,
        };
        if a["task"]["id"] == plain.id {
            assert!(a.get("concurrency_token").is_none(), "{a}");
            plain_seen = true;
        } else {
            assert_eq!(a["concurrency_token"], "2", "the key's next task: {a}");
            assert!(next.is_none(), "one grant per key: {a}");
            next = Some(a);
        }
    }
    let next = next.unwrap();
    w.send(json!({"type": "task.result", "attempt_id": next["attempt_id"], "outcome": "succeeded", "retryable": false}))
        .await;
    w.recv_type("task.result.ack").await;
    assert_eq!(w.recv_type("task.assign").await["concurrency_token"], "3");
    // A submit through this server wakes the session.
    let r = api.submit("wake", &json!({"queue_id": f.queue_id, "handler": "h", "handler_version": "v1", "payload_version": "v1", "payload": {}})).await;
    let woken = w.recv_type("task.assign").await;
    assert_eq!(woken["task"]["id"], r.body["data"]["id"], "{woken}");
    w.close().await;
}

#[tokio::test]
async fn a_start_on_assign_session_gets_started_assignments_and_needs_no_start() {
    let api = Api::start().await;
    let f = &api.fixture;
    f.submit(&f.queue_id, "k").await;
    f.submit(&f.queue_id, "k").await;
    let mut w = RawWorker::connect(&api.server.url, &f.token).await;
    let welcome = w.hello_started("w1", &[&f.queue_id], 1).await;
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    let first = w.recv_type("task.assign").await;
    assert_eq!(first["started"], true, "{first}");
    assert_eq!(first["task"]["state"], "RUNNING", "{first}");
    let id = first["attempt_id"].as_u64().unwrap();
    w.send(json!({"type": "task.result", "attempt_id": id, "outcome": "succeeded", "retryable": false}))
        .await;
    assert_eq!(
        w.recv_type("task.result.ack").await["task_state"],
        "SUCCEEDED"
    );
    // The key's next task follows the acknowledgement, granted by the same transaction.
    let next = w.recv_type("task.assign").await;
    assert_eq!(next["started"], true, "{next}");
    assert_eq!(next["concurrency_token"], "2", "{next}");
    w.close().await;

    // Without the flag, assignments wait for task.start.
    f.submit(&f.queue_id, "").await;
    let mut w = RawWorker::connect(&api.server.url, &f.token).await;
    w.hello("w2", &[&f.queue_id], true, 1, &[]).await;
    let plain = w.recv_type("task.assign").await;
    assert_eq!(plain["started"], false, "{plain}");
    assert_eq!(plain["task"]["state"], "LEASED", "{plain}");
    w.close().await;
}

#[tokio::test]
async fn a_grant_whose_answer_was_lost_is_delivered_with_the_next_renewal() {
    let api = Api::start().await;
    let f = &api.fixture;
    f.submit(&f.queue_id, "").await;
    let mut w = RawWorker::connect(&api.server.url, &f.token).await;
    let welcome = w.hello("w1", &[&f.queue_id], true, 1, &[]).await;
    let session = welcome["session_id"].as_u64().unwrap();
    let held = w.recv_type("task.assign").await["attempt_id"]
        .as_u64()
        .unwrap();
    // The session is at capacity, so the server claims nothing more for it; a grant made for it
    // now stands for a claim that committed but whose answer was lost on the way back.
    let lost_task = f.submit(&f.queue_id, "k").await;
    let lost = f.db.task_claim(session, 1, 30_000).await.unwrap().remove(0);
    assert_eq!(lost.task.id, lost_task.id);
    w.send(json!({"type": "lease.renew", "attempt_ids": [held]}))
        .await;
    w.recv_type("lease.renewed").await;
    let delivered = w.recv_type("task.assign").await;
    assert_eq!(delivered["attempt_id"], lost.attempt_id, "{delivered}");
    assert_eq!(
        delivered["concurrency_token"],
        lost.concurrency_token.to_string()
    );
    // Delivered once: it is in flight now, and it runs like any other assignment.
    w.send(json!({"type": "task.start", "attempt_id": lost.attempt_id}))
        .await;
    w.recv_type("task.start.ok").await;
    w.send(json!({"type": "lease.renew", "attempt_ids": []}))
        .await;
    let renewed = w.recv().await;
    assert_eq!(renewed["type"], "lease.renewed", "{renewed}");
    assert_eq!(
        renewed["attempts"],
        json!([]),
        "an empty renewal is a heartbeat"
    );
    w.send(json!({"type": "task.result", "attempt_id": lost.attempt_id, "outcome": "succeeded"}))
        .await;
    // Strictly the next frame: a second delivery of the same grant would come first.
    let ack = w.recv().await;
    assert_eq!(ack["type"], "task.result.ack", "{ack}");
    assert_eq!(ack["task_state"], "SUCCEEDED");
    w.close().await;
}

#[tokio::test]
async fn results_sent_back_to_back_are_each_answered_in_order() {
    let api = Api::start().await;
    let f = &api.fixture;
    for _ in 0..3 {
        f.submit(&f.queue_id, "").await;
    }
    let mut w = RawWorker::connect(&api.server.url, &f.token).await;
    w.hello("w1", &[&f.queue_id], true, 3, &[]).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(
            w.recv_type("task.assign").await["attempt_id"]
                .as_u64()
                .unwrap(),
        );
    }
    // Starts sent back to back (plus one for an unknown attempt) are answered in order too.
    for id in ids.iter().chain([&999_999_999u64]) {
        w.send(json!({"type": "task.start", "attempt_id": id}))
            .await;
    }
    for id in &ids {
        let ok = w.recv().await;
        assert_eq!(
            (&ok["type"], &ok["attempt_id"]),
            (&json!("task.start.ok"), &json!(id)),
            "{ok}"
        );
    }
    let rejected = w.recv().await;
    assert_eq!(rejected["type"], "task.start.rejected", "{rejected}");
    assert_eq!(rejected["code"], "NOT_FOUND", "{rejected}");
    // Sent without waiting: the server may confirm them in one call; each still gets its answer,
    // in the order sent, and the frame after them is handled after them.
    let outcomes = ["succeeded", "failed", "succeeded"];
    for (id, outcome) in ids.iter().zip(outcomes) {
        w.send(
            json!({"type": "task.result", "attempt_id": id, "outcome": outcome, "error": {"e": 1}}),
        )
        .await;
    }
    w.send(json!({"type": "task.result", "attempt_id": 999_999_999u64, "outcome": "succeeded"}))
        .await;
    w.send(json!({"type": "lease.renew", "attempt_ids": []}))
        .await;
    let mut answers = Vec::new();
    while answers.len() < 5 {
        let frame = w.recv().await;
        if frame["type"] != "task.assign" {
            answers.push(frame);
        }
    }
    let seen: Vec<(String, u64)> = answers
        .iter()
        .map(|a| {
            (
                a["type"].as_str().unwrap().to_string(),
                a["attempt_id"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            ("task.result.ack".to_string(), ids[0]),
            ("task.result.ack".to_string(), ids[1]),
            ("task.result.ack".to_string(), ids[2]),
            ("error".to_string(), 999_999_999),
            ("lease.renewed".to_string(), 0),
        ],
        "{answers:?}"
    );
    assert_eq!(answers[1]["task_state"], "FAILED");
    assert_eq!(answers[3]["code"], "NOT_FOUND");
    w.close().await;
}

/// The resident memory of a process, in KiB (Linux).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// A renewal naming far more attempts than the session's capacity is refused with an error frame
/// before any call: it answers at once although a call would wait for a row locked here (so no
/// call ran), ten of them leave the server's memory where it was, and the session keeps working.
#[tokio::test]
async fn a_renewal_over_capacity_is_refused_before_any_call() {
    let api = Api::start().await;
    let f = &api.fixture;
    f.submit(&f.queue_id, "").await;
    let mut w = RawWorker::connect(&api.server.url, &f.token).await;
    w.hello("w1", &[&f.queue_id], true, 2, &[]).await;
    let held = w.recv_type("task.assign").await["attempt_id"]
        .as_u64()
        .unwrap();
    // Any renewal of `held` would wait on this lock (innodb_lock_wait_timeout, 50 s by default).
    let mut lock = f.test_db.conn().await;
    sqlx::raw_sql("START TRANSACTION")
        .execute(&mut lock)
        .await
        .unwrap();
    sqlx::query("SELECT id FROM orbit_attempt WHERE id = ? FOR UPDATE")
        .bind(held)
        .execute(&mut lock)
        .await
        .unwrap();
    let pid = api.server.pid();
    let before = rss_kib(pid);
    let mut ids = vec![held];
    ids.extend(1..100_000u64);
    let frame = json!({"type": "lease.renew", "attempt_ids": ids});
    for _ in 0..10 {
        let started = std::time::Instant::now();
        w.send(frame.clone()).await;
        let refused = tokio::time::timeout(std::time::Duration::from_secs(5), w.recv())
            .await
            .expect("an answer at once, not after a call");
        assert_eq!(refused["type"], "error", "{refused}");
        assert_eq!(refused["code"], "INVALID_ARGUMENT", "{refused}");
        let message = refused["message"].as_str().unwrap();
        assert!(
            message.contains("attempt_ids") && message.contains("capacity"),
            "{message}"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }
    let after = rss_kib(pid);
    assert!(
        after < before + 64 * 1024,
        "serve grew from {before} KiB to {after} KiB"
    );
    // Duplicates count against the capacity, too.
    w.send(json!({"type": "lease.renew", "attempt_ids": [held, held, held]}))
        .await;
    assert_eq!(w.recv().await["code"], "INVALID_ARGUMENT");
    sqlx::raw_sql("ROLLBACK").execute(&mut lock).await.unwrap();
    w.send(json!({"type": "lease.renew", "attempt_ids": [held, held]}))
        .await;
    let renewed = w.recv().await;
    assert_eq!(renewed["type"], "lease.renewed", "{renewed}");
    assert!(
        renewed["attempts"][0]["lease_expires_at"].is_string(),
        "{renewed}"
    );
    w.close().await;
}

/// A hello that breaks a bound gets an INVALID_ARGUMENT error frame naming the field, then a Close
/// frame with code 1007; one the credential may not open gets its error and 1008. Never a 1006.
#[tokio::test]
async fn a_refused_hello_names_the_field_and_closes_with_a_code() {
    let api = Api::start().await;
    let f = &api.fixture;
    let long = "x".repeat(64 * 1024);
    let many_queues: Vec<String> = (0..101).map(|_| f.queue_id.clone()).collect();
    let many_handlers: Vec<String> = (0..101).map(|i| format!("h{i}")).collect();
    let hello = |worker_id: &str| json!({"type": "hello", "worker_id": worker_id, "capacity": 2, "queue_ids": [f.queue_id]});
    let with = |field: &str, value: serde_json::Value| {
        let mut h = hello("w1");
        h[field] = value;
        h
    };
    let cases = [
        (hello(&long), "worker_id"),
        (hello(""), "worker_id"),
        (with("capacity", json!(0)), "capacity"),
        (with("capacity", json!(10_001)), "capacity"),
        (with("queue_ids", json!([])), "queue_ids"),
        (with("queue_ids", json!(many_queues)), "queue_ids"),
        (with("queue_ids", json!([long])), "queue_ids[0]"),
        (with("handlers", json!(many_handlers)), "handlers"),
        (with("handlers", json!(["ok", long])), "handlers[1]"),
        (with("resume", json!([1, 2, 3])), "resume"),
    ];
    for (frame, field) in cases {
        let mut w = RawWorker::connect(&api.server.url, &f.token).await;
        w.send(frame).await;
        let refused = w.recv().await;
        assert_eq!(refused["type"], "error", "{field}: {refused}");
        assert_eq!(refused["code"], "INVALID_ARGUMENT", "{field}: {refused}");
        let message = refused["message"].as_str().unwrap();
        assert!(message.starts_with(field), "{field}: {message}");
        assert!(message.len() < 200, "{field}: the message stays short");
        assert_eq!(w.recv_close().await, 1007, "{field}");
    }
    // No scope on the queue: a policy refusal.
    let connect_only = f.credential(&["workers:connect"]).await;
    let mut w = RawWorker::connect(&api.server.url, &connect_only).await;
    w.send(hello("w2")).await;
    let refused = w.recv().await;
    assert_eq!(refused["type"], "error", "{refused}");
    assert_eq!(w.recv_close().await, 1008, "{refused}");
    // A registration conflict, too.
    let mut first = RawWorker::connect(&api.server.url, &f.token).await;
    assert_eq!(
        first.hello("w3", &[&f.queue_id], true, 1, &[]).await["type"],
        "welcome"
    );
    let mut again = RawWorker::connect(&api.server.url, &f.token).await;
    let refused = again.hello("w3", &[&f.queue_id], false, 1, &[]).await;
    assert_eq!(refused["code"], "STATE_CONFLICT", "{refused}");
    assert_eq!(again.recv_close().await, 1008);
}

/// SPEC §5 and §9: a worker written before keys sends no `concurrency_keys` (nor `handlers`,
/// `start_on_assign`, `resume`); it is welcomed and gets unkeyed tasks, never keyed ones.
#[tokio::test]
async fn a_hello_without_concurrency_keys_gets_unkeyed_tasks_only() {
    let api = Api::start().await;
    let f = &api.fixture;
    f.submit(&f.queue_id, "k").await;
    let plain = f.submit(&f.queue_id, "").await;
    let mut w = RawWorker::connect(&api.server.url, &f.token).await;
    w.send(
        json!({"type": "hello", "worker_id": "legacy", "capacity": 4, "queue_ids": [f.queue_id]}),
    )
    .await;
    let welcome = w.recv().await;
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    let a = w.recv().await;
    assert_eq!(a["type"], "task.assign", "{a}");
    assert_eq!(a["task"]["id"], plain.id, "{a}");
    assert!(a.get("concurrency_token").is_none(), "{a}");
    // Nothing else was assigned although capacity is free: the next frame answers the renewal.
    w.send(json!({"type": "lease.renew", "attempt_ids": [a["attempt_id"]]}))
        .await;
    let next = w.recv().await;
    assert_eq!(next["type"], "lease.renewed", "{next}");
    w.close().await;
}

/// A result whose output nests too deep for the database is refused alone, with an error frame
/// naming its attempt; a good result sent with it is acknowledged; the refused attempt can still
/// be ended (it does not hold its task).
#[tokio::test]
async fn a_result_too_deep_fails_alone_and_names_its_attempt() {
    let api = Api::start().await;
    let f = &api.fixture;
    let deep_task = f.submit(&f.queue_id, "").await;
    f.submit(&f.queue_id, "").await;
    let mut w = RawWorker::connect(&api.server.url, &f.token).await;
    w.hello("w1", &[&f.queue_id], true, 2, &[]).await;
    let (a, b) = (
        w.recv_type("task.assign").await,
        w.recv_type("task.assign").await,
    );
    let (deep, good) = if a["task"]["id"] == deep_task.id {
        (a, b)
    } else {
        (b, a)
    };
    let (deep, good) = (
        deep["attempt_id"].as_u64().unwrap(),
        good["attempt_id"].as_u64().unwrap(),
    );
    for id in [deep, good] {
        w.send(json!({"type": "task.start", "attempt_id": id}))
            .await;
        w.recv_type("task.start.ok").await;
    }
    let mut output = json!("leaf");
    for _ in 0..30 {
        output = json!([output]);
    }
    // Back to back: the server may take them in one call.
    w.send(json!({"type": "task.result", "attempt_id": deep, "outcome": "succeeded", "output": output}))
        .await;
    w.send(json!({"type": "task.result", "attempt_id": good, "outcome": "succeeded", "output": {"ok": [[1]]}}))
        .await;
    let refused = w.recv().await;
    assert_eq!(
        (&refused["type"], &refused["code"], &refused["attempt_id"]),
        (&json!("error"), &json!("INVALID_ARGUMENT"), &json!(deep)),
        "{refused}"
    );
    assert!(
        refused["message"].as_str().unwrap().contains("output"),
        "{refused}"
    );
    let ack = w.recv().await;
    assert_eq!(
        (&ack["type"], &ack["attempt_id"], &ack["task_state"]),
        (&json!("task.result.ack"), &json!(good), &json!("SUCCEEDED")),
        "{ack}"
    );
    assert_eq!(
        f.db.task_get(&f.hash, deep_task.id).await.unwrap().state,
        orbit::db::tasks::TaskState::Running
    );
    // An output at the limit is taken.
    let mut output = json!(1);
    for _ in 0..orbit::http::ws::MAX_RESULT_DEPTH {
        output = json!({ "a": output });
    }
    w.send(json!({"type": "task.result", "attempt_id": deep, "outcome": "failed", "output": output, "error": {"code": "INVALID_ARGUMENT"}}))
        .await;
    let ack = w.recv_type("task.result.ack").await;
    assert_eq!(
        (&ack["attempt_id"], &ack["task_state"]),
        (&json!(deep), &json!("FAILED")),
        "{ack}"
    );
    w.close().await;
}

/// An attempt whose start or renewal is rejected no longer counts against the session's
/// capacity: a capacity-1 session gets its next task right after the rejection.
#[tokio::test]
async fn a_rejected_start_or_renewal_frees_the_slot() {
    let api = Api::start().await;
    let f = &api.fixture;
    f.submit(&f.queue_id, "").await;
    let mut w = RawWorker::connect(&api.server.url, &f.token).await;
    w.hello("w1", &[&f.queue_id], true, 1, &[]).await;
    let first = w.recv_type("task.assign").await["attempt_id"]
        .as_u64()
        .unwrap();
    f.expire_lease(first).await;
    // Waiting work the full session cannot take yet.
    f.submit(&f.queue_id, "").await;
    w.send(json!({"type": "task.start", "attempt_id": first}))
        .await;
    let rejected = w.recv().await;
    assert_eq!(rejected["type"], "task.start.rejected", "{rejected}");
    let second = w.recv().await;
    assert_eq!(second["type"], "task.assign", "{second}");
    let second = second["attempt_id"].as_u64().unwrap();
    assert_ne!(second, first);
    w.send(json!({"type": "task.start", "attempt_id": second}))
        .await;
    w.recv_type("task.start.ok").await;
    f.expire_lease(second).await;
    f.submit(&f.queue_id, "").await;
    w.send(json!({"type": "lease.renew", "attempt_ids": [second]}))
        .await;
    let renewed = w.recv().await;
    assert_eq!(renewed["type"], "lease.renewed", "{renewed}");
    // LEASE_EXPIRED, or STATE_CONFLICT when the server's lease recovery ended the attempt first
    // (its periodic round may fall between the expiry and the renewal): either frees the slot.
    let code = renewed["attempts"][0]["rejected"]
        .as_str()
        .unwrap_or_default();
    assert!(
        ["LEASE_EXPIRED", "STATE_CONFLICT"].contains(&code),
        "{renewed}"
    );
    let third = w.recv().await;
    assert_eq!(third["type"], "task.assign", "{third}");
    assert!(![first, second].contains(&third["attempt_id"].as_u64().unwrap()));
    // The expired attempt is not handed back as a lost grant with later renewals.
    w.send(json!({"type": "lease.renew", "attempt_ids": [third["attempt_id"]]}))
        .await;
    let renewed = w.recv().await;
    assert_eq!(renewed["type"], "lease.renewed", "{renewed}");
    w.send(json!({"type": "lease.renew", "attempt_ids": []}))
        .await;
    let next = w.recv().await;
    assert_eq!(next["type"], "lease.renewed", "not a re-delivery: {next}");
    w.close().await;
}

/// A frame over the 1 MiB frame limit gets an error frame and a Close frame with 1009, not a
/// broken connection; the worker's attempts stay its own for a reconnect.
#[tokio::test]
async fn a_frame_over_the_limit_is_answered_with_close_1009() {
    let api = Api::start().await;
    let f = &api.fixture;
    let mut w = RawWorker::connect(&api.server.url, &f.token).await;
    w.hello("w1", &[&f.queue_id], true, 1, &[]).await;
    let big = "x".repeat(orbit::http::ws::MAX_FRAME_BYTES + 1);
    w.send(json!({"type": "task.result", "attempt_id": 1, "outcome": "succeeded", "output": big}))
        .await;
    let refused = w.recv().await;
    assert_eq!(
        (&refused["type"], &refused["code"]),
        (&json!("error"), &json!("INVALID_ARGUMENT")),
        "{refused}"
    );
    assert_eq!(w.recv_close().await, 1009);
}
