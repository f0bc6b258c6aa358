//! Delayed and debounced submits over HTTP against a spawned `orbit serve`, and a delayed task
//! pushed to a connected worker once due. Every response is validated against
//! `/v1/openapi.json`.

mod support;

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use support::ws::RawWorker;
use support::Api;

fn body(api: &Api, extra: Value) -> Value {
    let mut b = json!({"queue_id": api.fixture.queue_id, "handler": "h", "handler_version": "v1",
                       "payload_version": "v1", "payload": {}});
    for (k, v) in extra.as_object().unwrap() {
        b[k] = v.clone();
    }
    b
}

fn time(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().unwrap())
        .unwrap()
        .with_timezone(&Utc)
}

#[tokio::test]
async fn run_at_takes_any_rfc3339_offset_and_waits_as_delayed() {
    let api = Api::start().await;
    let at = Utc::now() + chrono::Duration::hours(3);
    let at = DateTime::from_timestamp(at.timestamp(), 0).unwrap();
    let local = at
        .with_timezone(&chrono::FixedOffset::east_opt(2 * 3600).unwrap())
        .to_rfc3339();
    assert!(local.ends_with("+02:00"), "{local}");
    let r = api
        .submit("delayed-1", &body(&api, json!({"run_at": local})))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(time(&r.body["data"]["run_at"]), at);
    assert_eq!(r.body["data"]["state"], "WAITING");
    assert!(
        r.body["data"]["blocked_reason"]
            .as_str()
            .unwrap()
            .starts_with("DELAYED"),
        "{}",
        r.body
    );
    // The same instant written in UTC is the same request.
    let replay = api
        .submit("delayed-1", &body(&api, json!({"run_at": at.to_rfc3339()})))
        .await;
    assert_eq!(replay.status, 200, "{}", replay.body);
    let later = (at + chrono::Duration::seconds(1)).to_rfc3339();
    let conflict = api
        .submit("delayed-1", &body(&api, json!({"run_at": later})))
        .await;
    assert_eq!(conflict.status, 409, "{}", conflict.body);
    assert_eq!(conflict.body["error"]["code"], "IDEMPOTENCY_CONFLICT");
}

#[tokio::test]
async fn bad_timing_is_a_400_naming_the_field() {
    let api = Api::start().await;
    let cases = [
        (json!({"run_at": "tomorrow"}), "run_at"),
        (json!({"run_at": null}), "run_at"),
        (json!({"delay_seconds": "5"}), "delay_seconds"),
        (json!({"delay_seconds": 31_536_001}), "delay_seconds"),
        (
            json!({"run_at": (Utc::now() + chrono::Duration::days(400)).to_rfc3339()}),
            "run_at",
        ),
        (json!({"debounce_seconds": 5}), "debounce_seconds"),
        (
            json!({"concurrency_key": "k", "debounce_seconds": 5, "delay_seconds": 5}),
            "debounce_seconds",
        ),
        (
            json!({"concurrency_key": "k", "debounce_seconds": 5, "debounce_max_seconds": 2}),
            "debounce_max_seconds",
        ),
    ];
    for (i, (extra, field)) in cases.into_iter().enumerate() {
        let r = api
            .submit(&format!("bad-{i}"), &body(&api, extra.clone()))
            .await;
        assert_eq!(r.status, 400, "{extra}: {}", r.body);
        assert_eq!(r.body["error"]["code"], "INVALID_ARGUMENT");
        assert!(
            r.body["error"]["message"].as_str().unwrap().contains(field),
            "{extra}: {}",
            r.body
        );
    }
    // A batch names the task.
    let r = api
        .post(
            "/v1/tasks/batch",
            "/v1/tasks/batch",
            &json!({"tasks": [
                {"idempotency_key": "b-0", "queue_id": api.fixture.queue_id, "handler": "h",
                 "handler_version": "v1", "payload_version": "v1", "payload": {}},
                {"idempotency_key": "b-1", "queue_id": api.fixture.queue_id, "handler": "h",
                 "handler_version": "v1", "payload_version": "v1", "payload": {}, "run_at": "soon"},
            ]}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("tasks[1].run_at"),
        "{}",
        r.body
    );
}

#[tokio::test]
async fn a_debounced_burst_over_http_runs_only_its_last_task() {
    let api = Api::start().await;
    let extra = json!({"concurrency_key": "doc/1", "debounce_seconds": 1});
    let mut ids = Vec::new();
    for i in 0..3 {
        let r = api
            .submit(&format!("edit-{i}"), &body(&api, extra.clone()))
            .await;
        assert_eq!(r.status, 201, "{}", r.body);
        assert!(r.body["data"]["blocked_reason"]
            .as_str()
            .unwrap()
            .starts_with("DEBOUNCED"));
        ids.push(r.body["data"]["id"].as_u64().unwrap());
    }
    for (replaced, successor) in ids.iter().zip(ids.iter().skip(1)) {
        let t = api
            .get("/v1/tasks/{id}", &format!("/v1/tasks/{replaced}"))
            .await;
        assert_eq!(t.body["data"]["state"], "CANCELLED", "{}", t.body);
        assert_eq!(t.body["data"]["error"]["code"], "REPLACED");
        assert_eq!(t.body["data"]["error"]["replaced_by"], *successor);
    }
    // The first submit's receipt still answers with its task, now cancelled.
    let replay = api.submit("edit-0", &body(&api, extra.clone())).await;
    assert_eq!(replay.status, 200);
    assert_eq!(replay.body["data"]["id"], ids[0]);
    assert_eq!(replay.body["data"]["state"], "CANCELLED");

    // Only the last one reaches a worker, once its second has passed.
    let f = &api.fixture;
    let mut w = RawWorker::connect(&api.server.url, &f.token).await;
    w.hello("w1", &[&f.queue_id], true, 4, &[]).await;
    let a = w.recv_type("task.assign").await;
    assert_eq!(a["task"]["id"], ids[2], "{a}");
    let last = api
        .get("/v1/tasks/{id}", &format!("/v1/tasks/{}", ids[2]))
        .await;
    assert_eq!(last.body["data"]["state"], "LEASED");
    assert!(Utc::now() >= time(&last.body["data"]["run_at"]));
}

#[tokio::test]
async fn a_delayed_task_reaches_a_waiting_worker_once_due() {
    let api = Api::start().await;
    let f = &api.fixture;
    let mut w = RawWorker::connect(&api.server.url, &f.token).await;
    let welcome = w.hello("w1", &[&f.queue_id], true, 4, &[]).await;
    assert_eq!(welcome["type"], "welcome");
    let sent = Instant::now();
    let r = api
        .post(
            "/v1/tasks/batch",
            "/v1/tasks/batch",
            &json!({"tasks": [
                {"idempotency_key": "d-0", "queue_id": f.queue_id, "handler": "h",
                 "handler_version": "v1", "payload_version": "v1", "payload": {}, "delay_seconds": 2},
                {"idempotency_key": "d-1", "queue_id": f.queue_id, "handler": "h",
                 "handler_version": "v1", "payload_version": "v1", "payload": {},
                 "concurrency_key": "k", "delay_seconds": 1},
            ]}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let first = w.recv_type("task.assign").await;
    let keyed_at = sent.elapsed();
    let second = w.recv_type("task.assign").await;
    let unkeyed_at = sent.elapsed();
    assert_eq!(first["task"]["id"], r.body["data"][1]["task"]["id"]);
    assert_eq!(second["task"]["id"], r.body["data"][0]["task"]["id"]);
    // Not before its time, and not long after: the scheduler looks at least every 250 ms.
    assert!(keyed_at >= Duration::from_millis(900), "{keyed_at:?}");
    assert!(unkeyed_at >= Duration::from_millis(1900), "{unkeyed_at:?}");
    assert!(unkeyed_at < Duration::from_secs(6), "{unkeyed_at:?}");
    for a in [&first, &second] {
        let id = a["task"]["id"].as_u64().unwrap();
        let t = api.get("/v1/tasks/{id}", &format!("/v1/tasks/{id}")).await;
        let attempts = api
            .get(
                "/v1/tasks/{id}/attempts",
                &format!("/v1/tasks/{id}/attempts"),
            )
            .await;
        let granted = time(&attempts.body["data"][0]["granted_at"]);
        assert!(
            granted >= time(&t.body["data"]["run_at"]),
            "{}",
            attempts.body
        );
    }
}
