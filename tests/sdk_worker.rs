//! The SDK's Worker against a spawned server, and against a fake server for protocol errors.

mod support;

use orbit::db::keys::KeyPolicySpec;
use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use orbit_sdk::client::SubmitTask;
use orbit_sdk::worker::WorkerError;
use orbit_sdk::{Client, HandlerError, ProtocolError, Worker};
use serde_json::{json, Value};
use support::Api;

fn task(queue_id: &str, key: &str, n: usize) -> SubmitTask {
    SubmitTask {
        queue_id: queue_id.into(),
        handler: "object.update".into(),
        handler_version: "v1".into(),
        payload_version: "v1".into(),
        payload: json!({ "n": n }),
        concurrency_key: (!key.is_empty()).then(|| key.to_string()),
        ..Default::default()
    }
}

#[tokio::test]
async fn the_worker_hands_handlers_key_and_token_and_drains() {
    let api = Api::start().await;
    let f = &api.fixture;
    let client = Client::new(&api.server.url, &f.token);
    for i in 0..3 {
        client
            .submit(&format!("s{i}"), &task(&f.queue_id, "object/42", i))
            .await
            .unwrap();
    }
    let plain = client
        .submit("plain", &task(&f.queue_id, "", 9))
        .await
        .unwrap();
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
    let worker = Worker::new(&api.server.url, &f.token, "sdk-worker")
        .capacity(4)
        .queue(&f.queue_id)
        .handler("object.update", "v1", move |ctx| {
            let done = done_tx.clone();
            async move {
                done.send((
                    ctx.task.id,
                    ctx.concurrency_key.clone(),
                    ctx.concurrency_token,
                ))
                .unwrap();
                Ok(json!({"seen": ctx.concurrency_token}))
            }
        })
        .start();
    let mut seen = Vec::new();
    while seen.len() < 4 {
        seen.push(
            tokio::time::timeout(std::time::Duration::from_secs(20), done_rx.recv())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    let report = worker.drain().await.unwrap();
    assert!(report.drained);
    assert_eq!(report.completed, 4);
    let mut tokens: Vec<u64> = seen
        .iter()
        .filter(|s| s.1.is_some())
        .map(|s| s.2.unwrap())
        .collect();
    assert_eq!(tokens.len(), 3);
    let in_order = tokens.clone();
    tokens.sort();
    assert_eq!(
        in_order, tokens,
        "one key: granted one at a time, tokens increasing"
    );
    let unkeyed = seen.iter().find(|s| s.0 == plain.task.id).unwrap();
    assert_eq!((unkeyed.1.clone(), unkeyed.2), (None, None));
    assert_eq!(client.task(plain.task.id).await.unwrap().state, "SUCCEEDED");
}

#[tokio::test]
async fn handler_errors_become_retry_failure_and_review() {
    let api = Api::start().await;
    let f = &api.fixture;
    let client = Client::new(&api.server.url, &f.token);
    let mut t = task(&f.queue_id, "", 0);
    t.max_attempts = Some(1);
    let permanent = client
        .submit(
            "p",
            &SubmitTask {
                payload: json!({"mode": "permanent"}),
                ..t.clone()
            },
        )
        .await
        .unwrap()
        .task
        .id;
    let unknown = client
        .submit(
            "u",
            &SubmitTask {
                payload: json!({"mode": "unknown"}),
                ..t.clone()
            },
        )
        .await
        .unwrap()
        .task
        .id;
    let worker = Worker::new(&api.server.url, &f.token, "sdk-errors")
        .capacity(2)
        .queue(&f.queue_id)
        .handler("object.update", "v1", |ctx| async move {
            match ctx.task.payload["mode"].as_str() {
                Some("permanent") => Err(HandlerError::Permanent(json!({"why": "bad input"}))),
                _ => Err(HandlerError::Unknown(json!({"why": "timeout"}))),
            }
        })
        .start();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (p, u) = (
            client.task(permanent).await.unwrap(),
            client.task(unknown).await.unwrap(),
        );
        if p.state == "FAILED" && u.state == "NEEDS_REVIEW" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} {}",
            p.state,
            u.state
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    worker.drain().await.unwrap();
}

#[tokio::test]
async fn a_hot_key_hands_over_two_hundred_tasks_one_at_a_time_across_two_queues() {
    hot_key_hand_over(false).await;
}

#[tokio::test]
async fn a_hot_key_hands_over_one_at_a_time_with_start_on_assign() {
    hot_key_hand_over(true).await;
}

async fn hot_key_hand_over(start_on_assign: bool) {
    let api = Api::start().await;
    let f = &api.fixture;
    let client = Client::new(&api.server.url, &f.token);
    let q2 = client.create_queue("second").await.unwrap().id;
    for i in 0..200 {
        let q = if i % 2 == 0 {
            f.queue_id.clone()
        } else {
            q2.clone()
        };
        client
            .submit(&format!("hot-{i}"), &task(&q, "hot", i))
            .await
            .unwrap();
    }
    let active = Arc::new(Mutex::new(0u32));
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
    let mut workers = Vec::new();
    for name in ["hot-a", "hot-b"] {
        let (active, done) = (active.clone(), done_tx.clone());
        workers.push(
            Worker::new(&api.server.url, &f.token, name)
                .capacity(4)
                .start_on_assign(start_on_assign)
                .queue(&f.queue_id)
                .queue(&q2)
                .handler("object.update", "v1", move |ctx| {
                    let (active, done) = (active.clone(), done.clone());
                    async move {
                        {
                            let mut a = active.lock().unwrap();
                            *a += 1;
                            assert_eq!(*a, 1, "two holders of one key at once");
                        }
                        tokio::task::yield_now().await;
                        *active.lock().unwrap() -= 1;
                        done.send(ctx.concurrency_token.unwrap()).unwrap();
                        Ok(Value::Null)
                    }
                })
                .start(),
        );
    }
    let mut tokens = Vec::new();
    while tokens.len() < 200 {
        tokens.push(
            tokio::time::timeout(std::time::Duration::from_secs(60), done_rx.recv())
                .await
                .expect("progress")
                .unwrap(),
        );
    }
    assert!(
        tokens.windows(2).all(|p| p[0] < p[1]),
        "strictly increasing in execution order"
    );
    for w in workers {
        assert!(w.drain().await.unwrap().drained);
    }
}

/// A fake server that welcomes the worker and then sends `frame`.
async fn fake_server(frame: Value) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut ws = tokio_tungstenite::accept_async(stream).await.unwrap();
        let _hello = ws.next().await;
        let welcome = json!({"type": "welcome", "session_id": 1, "lease_seconds": 30, "renew_interval_seconds": 10, "resumed": []});
        ws.send(tokio_tungstenite::tungstenite::Message::Text(
            welcome.to_string().into(),
        ))
        .await
        .unwrap();
        for f in frame
            .as_array()
            .cloned()
            .unwrap_or_else(|| vec![frame.clone()])
        {
            ws.send(tokio_tungstenite::tungstenite::Message::Text(
                f.to_string().into(),
            ))
            .await
            .unwrap();
        }
        while ws.next().await.is_some() {}
    });
    format!("http://{addr}")
}

fn assign(key: Option<&str>, token: Option<Value>) -> Value {
    let mut task = json!({"id": 1, "queue_id": "q", "state": "LEASED", "handler": "h", "handler_version": "v1",
        "payload_version": "v1", "payload": {}, "priority": 5, "max_attempts": 3, "attempt_count": 1});
    if let Some(k) = key {
        task["concurrency_key"] = json!(k);
    }
    let mut frame = json!({"type": "task.assign", "attempt_id": 7, "attempt_no": 1, "lease_expires_at": "2026-01-01T00:00:00Z", "task": task});
    if let Some(t) = token {
        frame["concurrency_token"] = t;
    }
    frame
}

/// `frame` with a `key_slot`.
fn with_slot(mut frame: Value, slot: Value) -> Value {
    frame["key_slot"] = slot;
    frame
}

/// The handler sees the grant's key slot; an assignment without one (a server that predates
/// slots) is slot 0.
#[tokio::test]
async fn the_sdk_worker_gives_the_handler_the_key_slot() {
    let started = |attempt_id: u64, slot: Option<u64>| {
        let mut frame = assign(Some("k"), Some(json!(attempt_id.to_string())));
        frame["attempt_id"] = json!(attempt_id);
        frame["started"] = json!(true);
        match slot {
            Some(s) => with_slot(frame, json!(s)),
            None => frame,
        }
    };
    let url = fake_server(json!([started(7, Some(2)), started(8, None)])).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let w = Worker::registration(&url, "token", "fake", true)
        .capacity(2)
        .queue("q")
        .handler("h", "v1", move |ctx| {
            let tx = tx.clone();
            async move {
                tx.send((ctx.attempt_id, ctx.concurrency_token, ctx.key_slot))
                    .unwrap();
                Ok(Value::Null)
            }
        })
        .start();
    let mut seen = vec![rx.recv().await.unwrap(), rx.recv().await.unwrap()];
    seen.sort();
    assert_eq!(seen, vec![(7, Some(7), Some(2)), (8, Some(8), Some(0))]);
    w.abort();
}

async fn run_against(frames: Value, keys: bool) -> WorkerError {
    let url = fake_server(frames).await;
    let w = Worker::registration(&url, "token", "fake", keys)
        .queue("q")
        .handler("h", "v1", |_| async { Ok(Value::Null) })
        .start();
    tokio::time::timeout(std::time::Duration::from_secs(10), w.join())
        .await
        .expect("the worker stops")
        .unwrap_err()
}

#[tokio::test]
async fn the_sdk_refuses_each_protocol_error_from_a_fake_server() {
    let cases = [
        (assign(Some("k"), None), true, "missing token"),
        (assign(None, Some(json!("5"))), true, "token without key"),
        (
            assign(Some("k"), Some(json!("1"))),
            false,
            "keyed task, keys not declared",
        ),
        (assign(Some("k"), Some(json!("0"))), true, "zero token"),
        (
            assign(Some("k"), Some(json!("12a"))),
            true,
            "non-decimal token",
        ),
        (
            assign(Some("k"), Some(json!("18446744073709551616"))),
            true,
            "overflowing token",
        ),
        (
            assign(Some("k"), Some(json!(5))),
            true,
            "token as a JSON number",
        ),
        (
            with_slot(assign(None, None), json!(0)),
            true,
            "slot without key",
        ),
        (
            with_slot(assign(Some("k"), Some(json!("5"))), json!("1")),
            true,
            "slot as a JSON string",
        ),
        (
            json!([
                assign(Some("k"), Some(json!("3"))),
                assign(Some("k"), Some(json!("4")))
            ]),
            true,
            "repeat changes the token",
        ),
    ];
    for (frames, keys, what) in cases {
        let err = run_against(frames, keys).await;
        let ok = match (what, &err) {
            ("missing token", WorkerError::Protocol(ProtocolError::MissingToken { .. })) => true,
            ("token without key", WorkerError::Protocol(ProtocolError::TokenWithoutKey { .. })) => {
                true
            }
            (
                "keyed task, keys not declared",
                WorkerError::Protocol(ProtocolError::KeyNotDeclared { .. }),
            ) => true,
            (
                "repeat changes the token",
                WorkerError::Protocol(ProtocolError::ChangedAssignment { .. }),
            ) => true,
            (_, WorkerError::Protocol(ProtocolError::BadToken { .. })) => {
                what.contains("token") && !what.contains("without")
            }
            ("slot without key", WorkerError::Protocol(ProtocolError::SlotWithoutKey { .. })) => {
                true
            }
            ("slot as a JSON string", WorkerError::Protocol(ProtocolError::BadSlot { .. })) => true,
            _ => false,
        };
        assert!(ok, "{what}: {err:?}");
    }
}

#[tokio::test]
async fn the_sdk_worker_reconnects_resumes_and_finishes_the_same_attempt() {
    let api = Api::start().await;
    let f = &api.fixture;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let server =
        orbit::testing::Server::start_at(env!("CARGO_BIN_EXE_orbit"), &f.test_db.dsn, &addr).await;
    let client = Client::new(&server.url, &f.token);
    let submitted = client
        .submit("resume-1", &task(&f.queue_id, "object/7", 0))
        .await
        .unwrap();
    let (started_tx, mut started_rx) = tokio::sync::mpsc::unbounded_channel();
    let release = Arc::new(tokio::sync::Notify::new());
    let gate = release.clone();
    let worker = Worker::new(&server.url, &f.token, "resumer")
        .queue(&f.queue_id)
        .handler("object.update", "v1", move |ctx| {
            let (started, gate) = (started_tx.clone(), gate.clone());
            async move {
                started
                    .send((ctx.attempt_id, ctx.concurrency_token))
                    .unwrap();
                gate.notified().await;
                Ok(json!({"done": true}))
            }
        })
        .start();
    let (attempt_id, token) =
        tokio::time::timeout(std::time::Duration::from_secs(20), started_rx.recv())
            .await
            .unwrap()
            .unwrap();
    // The server dies mid-task and comes back on the same address.
    server.kill().await;
    let server =
        orbit::testing::Server::start_at(env!("CARGO_BIN_EXE_orbit"), &f.test_db.dsn, &addr).await;
    release.notify_one();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while client
        .task(submitted.task.id)
        .await
        .map(|t| t.state)
        .unwrap_or_default()
        != "SUCCEEDED"
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the resumed attempt did not finish"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let attempts = client.attempts(submitted.task.id).await.unwrap();
    assert_eq!(
        attempts.len(),
        1,
        "the same attempt finished after the reconnect"
    );
    assert_eq!((attempts[0].id, attempts[0].token()), (attempt_id, token));
    let report = worker.drain().await.unwrap();
    assert!(report.connections >= 2, "{report:?}");
    drop(server);
}

/// A server whose database is briefly unavailable answers a start and a result with an error
/// frame and keeps the connection: the worker sends both again with its next renewal, and the
/// handler runs once.
#[tokio::test]
async fn a_start_or_result_answered_with_an_error_frame_is_sent_again() {
    use tokio_tungstenite::tungstenite::Message;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut ws = tokio_tungstenite::accept_async(stream).await.unwrap();
        let _hello = ws.next().await;
        let unavailable =
            json!({"type": "error", "code": "UNAVAILABLE", "message": "database unavailable"});
        for f in [
            json!({"type": "welcome", "session_id": 1, "lease_seconds": 3, "renew_interval_seconds": 1, "resumed": []}),
            assign(None, None),
        ] {
            ws.send(Message::Text(f.to_string().into())).await.unwrap();
        }
        let (mut starts, mut results) = (0, 0);
        while let Some(Ok(Message::Text(t))) = ws.next().await {
            let frame: Value = serde_json::from_str(&t).unwrap();
            let kind = frame["type"].as_str().unwrap_or_default().to_string();
            let answer = match kind.as_str() {
                "task.start" => {
                    starts += 1;
                    if starts == 1 {
                        unavailable.clone()
                    } else {
                        json!({"type": "task.start.ok", "attempt_id": 7, "lease_expires_at": "2026-01-01T00:00:03Z"})
                    }
                }
                "task.result" => {
                    results += 1;
                    if results == 1 {
                        unavailable.clone()
                    } else {
                        json!({"type": "task.result.ack", "attempt_id": 7, "task_state": "SUCCEEDED"})
                    }
                }
                _ => continue,
            };
            ws.send(Message::Text(answer.to_string().into()))
                .await
                .unwrap();
            let _ = seen_tx.send(format!(
                "{kind} #{}",
                if kind == "task.start" {
                    starts
                } else {
                    results
                }
            ));
        }
    });
    let runs = Arc::new(Mutex::new(0));
    let counter = runs.clone();
    let w = Worker::registration(&url, "token", "fake", false)
        .queue("q")
        .handler("h", "v1", move |_| {
            *counter.lock().unwrap() += 1;
            async { Ok(json!("done")) }
        })
        .start();
    let mut seen = Vec::new();
    while seen.len() < 4 {
        let s = tokio::time::timeout(std::time::Duration::from_secs(10), seen_rx.recv())
            .await
            .expect("the worker sends again within a renewal")
            .unwrap();
        seen.push(s);
    }
    w.abort();
    assert_eq!(
        seen,
        [
            "task.start #1",
            "task.start #2",
            "task.result #1",
            "task.result #2"
        ]
    );
    assert_eq!(*runs.lock().unwrap(), 1, "the handler ran once");
}

/// Polls until the task reaches `state` (20 s at most).
async fn wait_state(client: &Client, task_id: u64, state: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let t = client.task(task_id).await.unwrap();
        if t.state == state {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "task {task_id} is {}, not {state}",
            t.state
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A handler whose output nests too deep for the server ends its attempt as a permanent failure
/// carrying the reason, instead of holding the task RUNNING; a good result beside it succeeds.
#[tokio::test]
async fn an_output_the_server_cannot_read_ends_the_attempt_failed() {
    let api = Api::start().await;
    let f = &api.fixture;
    let client = Client::new(&api.server.url, &f.token);
    let deep = client
        .submit("deep", &task(&f.queue_id, "object/1", 1))
        .await
        .unwrap()
        .task
        .id;
    let fine = client
        .submit("fine", &task(&f.queue_id, "", 2))
        .await
        .unwrap()
        .task
        .id;
    let worker = Worker::new(&api.server.url, &f.token, "deep-output")
        .capacity(2)
        .queue(&f.queue_id)
        .handler("object.update", "v1", |ctx| async move {
            if ctx.task.payload["n"] == 1 {
                let mut v = json!("leaf");
                for _ in 0..30 {
                    v = json!([v]);
                }
                Ok(v)
            } else {
                Ok(json!({"ok": true}))
            }
        })
        .start();
    wait_state(&client, deep, "FAILED").await;
    wait_state(&client, fine, "SUCCEEDED").await;
    let attempts = client.attempts(deep).await.unwrap();
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    let error = &attempts[0].rest["error"];
    assert_eq!(error["code"], "INVALID_ARGUMENT", "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("output"),
        "{error}"
    );
    let report = worker.drain().await.unwrap();
    assert_eq!(report.completed, 2, "{report:?}");
}

/// When the server refuses a result with an error frame naming its attempt, the SDK sends the
/// attempt's failure with the server's code and message instead of sending the result forever.
#[tokio::test]
async fn a_result_refused_by_the_server_is_replaced_by_a_failure() {
    use tokio_tungstenite::tungstenite::Message;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut ws = tokio_tungstenite::accept_async(stream).await.unwrap();
        let _hello = ws.next().await;
        for f in [
            json!({"type": "welcome", "session_id": 1, "lease_seconds": 30, "renew_interval_seconds": 10, "resumed": []}),
            assign(None, None),
        ] {
            ws.send(Message::Text(f.to_string().into())).await.unwrap();
        }
        let mut results = 0;
        while let Some(Ok(Message::Text(t))) = ws.next().await {
            let frame: Value = serde_json::from_str(&t).unwrap();
            let answer = match frame["type"].as_str() {
                Some("task.start") => {
                    json!({"type": "task.start.ok", "attempt_id": 7, "lease_expires_at": "2026-01-01T00:00:30Z"})
                }
                Some("task.result") => {
                    results += 1;
                    let _ = seen_tx.send(frame);
                    if results == 1 {
                        json!({"type": "error", "code": "INVALID_ARGUMENT", "message": "output cannot be read", "attempt_id": 7})
                    } else {
                        json!({"type": "task.result.ack", "attempt_id": 7, "task_state": "FAILED"})
                    }
                }
                _ => continue,
            };
            ws.send(Message::Text(answer.to_string().into()))
                .await
                .unwrap();
        }
    });
    let w = Worker::registration(&url, "token", "fake", false)
        .queue("q")
        .handler("h", "v1", |_| async {
            Ok(json!({"fine": "to the worker"}))
        })
        .start();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        seen.push(
            tokio::time::timeout(std::time::Duration::from_secs(10), seen_rx.recv())
                .await
                .expect("the failure follows the refusal at once")
                .unwrap(),
        );
    }
    w.abort();
    assert_eq!(seen[0]["outcome"], "succeeded", "{:?}", seen[0]);
    assert_eq!(
        seen[1],
        json!({"type": "task.result", "attempt_id": 7, "outcome": "failed", "retryable": false, "output": null,
               "error": {"code": "INVALID_ARGUMENT", "message": "output cannot be read"}})
    );
}

/// An attempt whose lease is lost (moved past its expiry in the database) is cancelled at its
/// next renewal: the handler observes it, its result is not sent, and the worker's only slot
/// takes a new task.
#[tokio::test]
async fn a_lost_lease_cancels_the_handler_and_frees_its_slot() {
    let f = orbit::testing::Fixture::new().await;
    // A 3 s lease: renewals every second.
    let server = orbit::testing::Server::start_with_args(
        env!("CARGO_BIN_EXE_orbit"),
        &f.test_db.dsn,
        &["--lease-seconds", "3"],
    )
    .await;
    let client = Client::new(&server.url, &f.token);
    let first = client
        .submit("lost-1", &task(&f.queue_id, "object/9", 1))
        .await
        .unwrap()
        .task
        .id;
    let (started_tx, mut started_rx) = tokio::sync::mpsc::unbounded_channel();
    let (cancelled_tx, mut cancelled_rx) = tokio::sync::mpsc::unbounded_channel();
    let worker = Worker::new(&server.url, &f.token, "loses-a-lease")
        .capacity(1)
        .queue(&f.queue_id)
        .handler("object.update", "v1", move |ctx| {
            let (started, cancelled) = (started_tx.clone(), cancelled_tx.clone());
            async move {
                started.send((ctx.task.id, ctx.attempt_id)).unwrap();
                if ctx.task.payload["n"] == 1 {
                    ctx.cancelled().await;
                    assert!(ctx.is_cancelled());
                    cancelled
                        .send(ctx.cancellation.reason().unwrap_or_default())
                        .unwrap();
                    // Returned after the cancellation: never sent.
                    return Ok(json!({"late": true}));
                }
                Ok(json!({"n": ctx.task.payload["n"]}))
            }
        })
        .start();
    let within = |s| std::time::Duration::from_secs(s);
    let (task_id, attempt_id) = tokio::time::timeout(within(20), started_rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(task_id, first);
    f.expire_lease(attempt_id).await;
    let expired_at = std::time::Instant::now();
    let reason = tokio::time::timeout(within(5), cancelled_rx.recv())
        .await
        .expect("the handler is cancelled within about one renew interval")
        .unwrap();
    assert!(
        expired_at.elapsed() < within(3),
        "{:?}",
        expired_at.elapsed()
    );
    assert!(reason.contains("lease renewal rejected"), "{reason}");
    // The slot is free: a new task runs on this capacity-1 worker while the old handler's
    // attempt is gone.
    let second = client
        .submit("lost-2", &task(&f.queue_id, "", 2))
        .await
        .unwrap()
        .task
        .id;
    let (task_id, _) = tokio::time::timeout(within(20), started_rx.recv())
        .await
        .expect("the freed slot takes a new task")
        .unwrap();
    assert_eq!(task_id, second);
    wait_state(&client, second, "SUCCEEDED").await;
    assert_ne!(client.task(first).await.unwrap().state, "SUCCEEDED");
    let attempts = client.attempts(first).await.unwrap();
    assert_ne!(
        attempts[0].rest.get("late_result").and_then(|v| v.as_str()),
        Some("succeeded"),
        "the cancelled handler's result was not sent: {attempts:?}"
    );
    let report = worker.drain().await.unwrap();
    assert_eq!((report.lost, report.completed), (1, 1), "{report:?}");
}

/// A submit under a `cancel_running` key policy ends the key's running attempt at once: its
/// worker gets `task.cancel` (well before any renewal: the lease here is 30 s), the handler's
/// cancellation fires with the reason, its result is not sent, and the new task runs with a
/// larger token.
#[tokio::test]
async fn a_cancel_running_policy_cancels_the_running_handler_at_once() {
    let f = orbit::testing::Fixture::new().await;
    let server = orbit::testing::Server::start(env!("CARGO_BIN_EXE_orbit"), &f.test_db.dsn).await;
    let client = Client::new(&server.url, &f.token);
    f.db.key_policy_set(
        &f.hash,
        f.namespace_id,
        &KeyPolicySpec::new("exact", "acct/7", "cancel_running"),
    )
    .await
    .unwrap();
    let (started_tx, mut started_rx) = tokio::sync::mpsc::unbounded_channel();
    let (cancelled_tx, mut cancelled_rx) = tokio::sync::mpsc::unbounded_channel();
    let worker = Worker::new(&server.url, &f.token, "cancellable")
        .capacity(2)
        .queue(&f.queue_id)
        .handler("object.update", "v1", move |ctx| {
            let (started, cancelled) = (started_tx.clone(), cancelled_tx.clone());
            async move {
                started
                    .send((ctx.task.id, ctx.concurrency_token.unwrap_or(0)))
                    .unwrap();
                if ctx.task.payload["n"] == 1 {
                    ctx.cancelled().await;
                    cancelled
                        .send(ctx.cancellation.reason().unwrap_or_default())
                        .unwrap();
                    return Ok(json!({"late": true}));
                }
                Ok(json!({"n": ctx.task.payload["n"]}))
            }
        })
        .start();
    let within = |s| std::time::Duration::from_secs(s);
    let first = client
        .submit("acct-1", &task(&f.queue_id, "acct/7", 1))
        .await
        .unwrap()
        .task
        .id;
    let (id, old_token) = tokio::time::timeout(within(20), started_rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(id, first);
    wait_state(&client, first, "RUNNING").await;
    let sent = std::time::Instant::now();
    let second = client
        .submit("acct-2", &task(&f.queue_id, "acct/7", 2))
        .await
        .unwrap()
        .task
        .id;
    let reason = tokio::time::timeout(within(5), cancelled_rx.recv())
        .await
        .expect("the handler is cancelled at once")
        .unwrap();
    assert!(sent.elapsed() < within(5), "{:?}", sent.elapsed());
    assert!(reason.contains("cancelled by the server"), "{reason}");
    let (id, new_token) = tokio::time::timeout(within(20), started_rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(id, second);
    assert!(new_token > old_token);
    wait_state(&client, second, "SUCCEEDED").await;
    assert_eq!(client.task(first).await.unwrap().state, "CANCELLED");
    let report = worker.drain().await.unwrap();
    assert_eq!((report.lost, report.completed), (1, 1), "{report:?}");
}
