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

#[tokio::test]
async fn a_start_on_assign_session_gets_started_assignments_and_needs_no_start() {
    let api = Api::start().await;
    let f = &api.fixture;
    f.submit(&f.queue_id, "k").await;
    f.submit(&f.queue_id, "k").await;
    let mut w = RawWorker::connect(&api.server.url, &f.token).await;
    w.send(
        json!({"type": "hello", "worker_id": "w1", "capacity": 1, "queue_ids": [f.queue_id],
                  "concurrency_keys": true, "start_on_assign": true}),
    )
    .await;
    assert_eq!(w.recv().await["type"], "welcome");
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
