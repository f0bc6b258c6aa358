//! Black-box HTTP tests against a spawned `orbit serve`: tasks, idempotency, the key matrix,
//! envelopes and bad input. Every response is validated against `/v1/openapi.json`.

mod support;

use reqwest::Method;
use serde_json::{json, Value};
use support::{note_example_body, Api};

#[tokio::test]
async fn the_design_notes_curl_example_works_verbatim() {
    let api =
        Api::over(orbit::testing::Fixture::with_queue_id("11111111111111111111111111111111").await)
            .await;
    let body = note_example_body();
    let first = api.submit("update-object-42-operation-001", &body).await;
    assert_eq!(first.status, 201, "{}", first.body);
    assert_eq!(first.body["data"]["concurrency_key"], "object/42");
    assert_eq!(first.body["data"]["state"], "WAITING");
    let replay = api.submit("update-object-42-operation-001", &body).await;
    assert_eq!(replay.status, 200);
    assert_eq!(
        replay.body["data"], first.body["data"],
        "the replay returns the original task"
    );
    let mut other = body.clone();
    other["concurrency_key"] = json!("object/43");
    let conflict = api.submit("update-object-42-operation-001", &other).await;
    assert_eq!(conflict.status, 409);
    assert_eq!(conflict.body["error"]["code"], "IDEMPOTENCY_CONFLICT");
    // Detail and list show the frozen key.
    let id = first.body["data"]["id"].as_u64().unwrap();
    let detail = api.get("/v1/tasks/{id}", &format!("/v1/tasks/{id}")).await;
    assert_eq!(detail.body["data"]["concurrency_key"], "object/42");
    let list = api
        .get(
            "/v1/tasks",
            "/v1/tasks?queue_id=11111111111111111111111111111111",
        )
        .await;
    assert_eq!(list.body["data"][0]["concurrency_key"], "object/42");
}

#[tokio::test]
async fn the_concurrency_key_matrix_over_http() {
    let api = Api::start().await;
    let q = api.fixture.queue_id.clone();
    let base = json!({"queue_id": q, "handler": "h", "handler_version": "v1", "payload_version": "v1", "payload": {}});
    let with_key = |k: Value| {
        let mut b = base.clone();
        b["concurrency_key"] = k;
        b
    };
    let bad = [
        json!(null),
        json!("x".repeat(192)),
        json!("a\u{1}b"),
        json!("\u{3000}key"),
        json!("key\u{a0}"),
        json!(42),
    ];
    for (i, key) in bad.iter().enumerate() {
        let r = api
            .submit(&format!("bad-{i}"), &with_key(key.clone()))
            .await;
        assert_eq!(r.status, 400, "{key}: {}", r.body);
        assert_eq!(r.body["error"]["code"], "INVALID_ARGUMENT");
        assert!(
            r.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("concurrency_key"),
            "{key}: {}",
            r.body
        );
    }
    let long = "\u{1F600}".repeat(191);
    let r = api.submit("long", &with_key(json!(long))).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["data"]["concurrency_key"], json!(long));
    for (i, body) in [with_key(json!("")), base.clone()].iter().enumerate() {
        let r = api.submit(&format!("none-{i}"), body).await;
        assert_eq!(r.status, 201);
        assert!(
            r.body["data"].get("concurrency_key").is_none(),
            "no key is omitted: {}",
            r.body
        );
    }
    let upper = api.submit("A", &with_key(json!("object/A"))).await;
    let lower = api.submit("a", &with_key(json!("object/a"))).await;
    assert_eq!((upper.status, lower.status), (201, 201));
    let list = api
        .get(
            "/v1/tasks",
            &format!("/v1/tasks?concurrency_key=object%2FA&queue_id={q}"),
        )
        .await;
    assert_eq!(
        list.body["data"].as_array().unwrap().len(),
        1,
        "object/A and object/a are two keys"
    );
}

#[tokio::test]
async fn fifty_concurrent_identical_submits_give_one_201() {
    let api = Api::start().await;
    let body = json!({"queue_id": api.fixture.queue_id, "handler": "h", "handler_version": "v1", "payload_version": "v1", "payload": {"n": 1}, "concurrency_key": "k"});
    let mut handles = Vec::new();
    for _ in 0..50 {
        let (http, url, token, body) = (
            api.http.clone(),
            api.server.url.clone(),
            api.token(),
            body.clone(),
        );
        handles.push(tokio::spawn(async move {
            let r = http
                .post(format!("{url}/v1/tasks"))
                .bearer_auth(token)
                .header("Idempotency-Key", "same")
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap())
        }));
    }
    let mut statuses = Vec::new();
    for h in handles {
        let (status, body) = h.await.unwrap();
        api.validate(&Method::POST, "/v1/tasks", status, &body);
        statuses.push(status);
    }
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 1);
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 49);
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orbit_task")
        .fetch_one(api.fixture.db.pool())
        .await
        .unwrap();
    assert_eq!(n, 1);
}

#[tokio::test]
async fn bad_input_is_a_400_envelope_naming_the_field_never_a_500() {
    let api = Api::start().await;
    let q = api.fixture.queue_id.clone();
    let url = format!("{}/v1/tasks", api.server.url);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("malformed JSON", b"{\"queue_id\": ".to_vec(), ""),
        ("wrong type", format!(r#"{{"queue_id":"{q}","handler":5,"handler_version":"v1","payload_version":"v1","payload":{{}}}}"#).into_bytes(), "handler"),
        ("unknown field", format!(r#"{{"queue_id":"{q}","handler":"h","handler_version":"v1","payload_version":"v1","payload":{{}},"colour":"red"}}"#).into_bytes(), "colour"),
        ("missing field", format!(r#"{{"queue_id":"{q}","handler_version":"v1","payload_version":"v1","payload":{{}}}}"#).into_bytes(), "handler"),
        ("null string", format!(r#"{{"queue_id":"{q}","handler":"h","handler_version":"v1","payload_version":"v1","payload":{{}},"business_key":null}}"#).into_bytes(), "business_key"),
        ("invalid UTF-8", [b"{\"queue_id\":\"".as_slice(), &[0xff, 0xfe], b"\"}"].concat(), ""),
        ("priority out of range", format!(r#"{{"queue_id":"{q}","handler":"h","handler_version":"v1","payload_version":"v1","payload":{{}},"priority":99}}"#).into_bytes(), "priority"),
    ];
    for (what, body, field) in cases {
        let r = api
            .http
            .post(&url)
            .bearer_auth(api.token())
            .header("Idempotency-Key", what.replace(' ', "-"))
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let body: Value = r.json().await.unwrap();
        assert_eq!(status, 400, "{what}: {body}");
        api.validate(&Method::POST, "/v1/tasks", status, &body);
        assert!(
            body["error"]["message"].as_str().unwrap().contains(field),
            "{what}: {body}"
        );
    }
    // Too large: 413 in the envelope.
    let huge = json!({"queue_id": q, "handler": "h", "handler_version": "v1", "payload_version": "v1", "payload": "x".repeat(2 * 1024 * 1024)});
    let r = api.submit("huge", &huge).await;
    assert_eq!(r.status, 413);
    // No Idempotency-Key; bad path ids; unknown route.
    let r = api
        .call(
            Method::POST,
            "/v1/tasks",
            "/v1/tasks",
            Some(&api.token()),
            &[],
            Some(&json!({})),
        )
        .await;
    assert_eq!(r.status, 400);
    let r = api.get("/v1/tasks/{id}", "/v1/tasks/not-a-number").await;
    assert_eq!(r.status, 400);
    let r = api
        .http
        .get(format!("{}/v1/nowhere", api.server.url))
        .bearer_auth(api.token())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "NOT_FOUND");
}

#[tokio::test]
async fn cancel_and_list_pagination() {
    let api = Api::start().await;
    let q = api.fixture.queue_id.clone();
    let mut ids = Vec::new();
    for i in 0..5 {
        let r = api.submit(&format!("t{i}"), &json!({"queue_id": q, "handler": "h", "handler_version": "v1", "payload_version": "v1", "payload": {"i": i}, "business_key": "order-7"})).await;
        ids.push(r.body["data"]["id"].as_u64().unwrap());
    }
    let mut seen = Vec::new();
    let mut path = format!("/v1/tasks?queue_id={q}&limit=2");
    loop {
        let page = api.get("/v1/tasks", &path).await;
        assert_eq!(page.status, 200, "{}", page.body);
        seen.extend(
            page.body["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["id"].as_u64().unwrap()),
        );
        match page.body["next_cursor"].as_str() {
            Some(c) => path = format!("/v1/tasks?queue_id={q}&limit=2&cursor={c}"),
            None => break,
        }
    }
    ids.reverse();
    assert_eq!(seen, ids, "newest first, every task once");
    let by_business = api.get("/v1/tasks", "/v1/tasks?business_key=order-7").await;
    assert_eq!(by_business.body["data"].as_array().unwrap().len(), 5);
    let c = api
        .post(
            "/v1/tasks/{id}/cancel",
            &format!("/v1/tasks/{}/cancel", ids[0]),
            &json!({}),
        )
        .await;
    assert_eq!(c.status, 200, "{}", c.body);
    assert_eq!(c.body["data"]["state"], "CANCELLED");
    let cancelled = api
        .get(
            "/v1/tasks",
            &format!("/v1/tasks?queue_id={q}&state=CANCELLED"),
        )
        .await;
    assert_eq!(cancelled.body["data"].as_array().unwrap().len(), 1);
    let r = api
        .post(
            "/v1/tasks/{id}/resolve",
            &format!("/v1/tasks/{}/resolve", ids[1]),
            &json!({"resolution": "succeeded"}),
        )
        .await;
    assert_eq!(r.status, 409, "only NEEDS_REVIEW tasks resolve: {}", r.body);
}

/// `POST /v1/tasks/batch` with the fixture's token.
async fn submit_batch(api: &Api, body: &Value) -> support::Reply {
    api.post("/v1/tasks/batch", "/v1/tasks/batch", body).await
}

fn batch_task(api: &Api, key: &str, i: usize) -> Value {
    json!({"idempotency_key": key, "queue_id": api.fixture.queue_id, "handler": "h",
           "handler_version": "v1", "payload_version": "v1", "payload": {"i": i, "nested": [1, {"a": "é"}]}})
}

#[tokio::test]
async fn a_batch_answers_its_tasks_in_order_and_replays_like_single_submits() {
    let api = Api::start().await;
    let tasks: Vec<Value> = (0..3)
        .map(|i| batch_task(&api, &format!("b-{i}"), i))
        .collect();
    let first = submit_batch(&api, &json!({ "tasks": tasks })).await;
    assert_eq!(first.status, 201, "{}", first.body);
    let data = first.body["data"].as_array().unwrap();
    assert_eq!(data.len(), 3);
    for (i, d) in data.iter().enumerate() {
        assert_eq!(d["replayed"], false);
        assert_eq!(
            d["task"]["payload"], tasks[i]["payload"],
            "in request order"
        );
        assert_eq!(d["task"]["state"], "WAITING");
    }
    // The same batch again: 200, every task the original.
    let again = submit_batch(&api, &json!({ "tasks": tasks })).await;
    assert_eq!(again.status, 200, "{}", again.body);
    for (a, b) in again.body["data"].as_array().unwrap().iter().zip(data) {
        assert_eq!(a["replayed"], true);
        assert_eq!(a["task"]["id"], b["task"]["id"]);
    }
    // A single submit of a batch task's key and body replays it, and the other way round.
    let mut flat = tasks[1].clone();
    flat.as_object_mut().unwrap().remove("idempotency_key");
    let single = api.submit("b-1", &flat).await;
    assert_eq!(single.status, 200, "{}", single.body);
    assert_eq!(single.body["data"]["id"], data[1]["task"]["id"]);
    let mut solo = flat.clone();
    solo["payload"] = json!({"solo": true});
    let created = api.submit("solo", &solo).await;
    assert_eq!(created.status, 201);
    let mut solo_task = solo.clone();
    solo_task["idempotency_key"] = json!("solo");
    let mixed = submit_batch(
        &api,
        &json!({"tasks": [solo_task, batch_task(&api, "b-3", 3)]}),
    )
    .await;
    assert_eq!(mixed.status, 201, "one task is new: {}", mixed.body);
    assert_eq!(mixed.body["data"][0]["replayed"], true);
    assert_eq!(
        mixed.body["data"][0]["task"]["id"],
        created.body["data"]["id"]
    );
    assert_eq!(mixed.body["data"][1]["replayed"], false);

    // The SDK's batch.
    let client = orbit_sdk::Client::new(&api.server.url, &api.token());
    let task = |i: u8| orbit_sdk::client::SubmitTask {
        queue_id: api.fixture.queue_id.clone(),
        handler: "h".into(),
        handler_version: "v1".into(),
        payload_version: "v1".into(),
        payload: json!({"sdk": i}),
        priority: Some(i),
        concurrency_key: Some("sdk-key".into()),
        ..Default::default()
    };
    let items: Vec<(String, orbit_sdk::client::SubmitTask)> =
        (0..3).map(|i| (format!("sdk-{i}"), task(i))).collect();
    let out = client.submit_many(&items).await.unwrap();
    assert!(out.iter().all(|s| s.created));
    assert_eq!(
        out.iter().map(|s| s.task.priority).collect::<Vec<_>>(),
        [0, 1, 2]
    );
    let again = client.submit_many(&items).await.unwrap();
    assert!(again.iter().all(|s| !s.created));
    assert_eq!(again[2].task.id, out[2].task.id);
    let err = client
        .submit_many(&[(items[0].0.clone(), task(9))])
        .await
        .unwrap_err();
    assert_eq!(
        (err.status, err.code.as_str()),
        (409, "IDEMPOTENCY_CONFLICT")
    );
}

#[tokio::test]
async fn a_bad_batch_is_refused_whole_naming_the_task() {
    let api = Api::start().await;
    let good = |i: usize| batch_task(&api, &format!("g-{i}"), i);
    let with = |field: &str, value: Value| {
        let mut t = good(2);
        t[field] = value;
        json!({"tasks": [good(0), good(1), t]})
    };
    let mut unknown = good(2);
    unknown["colour"] = json!("red");
    let mut no_key = good(2);
    no_key.as_object_mut().unwrap().remove("idempotency_key");
    let cases: Vec<(&str, Value, &str)> = vec![
        ("empty", json!({"tasks": []}), "tasks"),
        (
            "1001 tasks",
            json!({"tasks": (0..1001).map(good).collect::<Vec<_>>()}),
            "tasks",
        ),
        (
            "unknown top-level field",
            json!({"tasks": [good(0)], "x": 1}),
            "x",
        ),
        (
            "unknown task field",
            json!({"tasks": [good(0), good(1), unknown]}),
            "tasks[2].colour",
        ),
        (
            "missing key",
            json!({"tasks": [good(0), good(1), no_key]}),
            "tasks[2]",
        ),
        ("wrong type", with("handler", json!(5)), "tasks[2].handler"),
        ("null", with("priority", Value::Null), "tasks[2].priority"),
        (
            "empty key",
            with("idempotency_key", json!("")),
            "tasks[2].idempotency_key",
        ),
        (
            "non-ASCII key",
            with("idempotency_key", json!("clé")),
            "tasks[2].idempotency_key",
        ),
        (
            "key with an edge space",
            with("idempotency_key", json!(" k")),
            "tasks[2].idempotency_key",
        ),
        (
            "long key",
            with("idempotency_key", json!("k".repeat(256))),
            "tasks[2].idempotency_key",
        ),
        (
            "priority out of range",
            with("priority", json!(10)),
            "tasks[2].priority",
        ),
        (
            "empty handler",
            with("handler", json!("")),
            "tasks[2].handler",
        ),
        (
            "bad key",
            with("concurrency_key", json!("k\u{1}")),
            "tasks[2].concurrency_key",
        ),
        (
            "huge integer",
            with("retry_base_ms", json!(i64::MAX)),
            "tasks[2].retry_base_ms",
        ),
        (
            "task not an object",
            json!({"tasks": [good(0), 5]}),
            "tasks[1]",
        ),
    ];
    for (what, body, field) in cases {
        let r = submit_batch(&api, &body).await;
        assert_eq!(r.status, 400, "{what}: {}", r.body);
        assert_eq!(r.body["error"]["code"], "INVALID_ARGUMENT", "{what}");
        assert_eq!(
            r.body["error"]["details"]["field"], field,
            "{what}: {}",
            r.body
        );
    }
    let r = submit_batch(&api, &json!({})).await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`tasks`"),
        "{}",
        r.body
    );
    // Other queues: unknown, not ASCII, another tenant's: 404 naming the task.
    for queue in ["0".repeat(32), "é".repeat(16), "x".into()] {
        let r = submit_batch(&api, &with("queue_id", json!(queue))).await;
        assert_eq!(r.status, 404, "{queue}: {}", r.body);
        assert!(
            r.body["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("tasks[2]: "),
            "{}",
            r.body
        );
    }
    // A conflict in one task: 409, and nothing of the batch was kept.
    let first = api
        .submit("used", &{
            let mut t = good(9);
            t.as_object_mut().unwrap().remove("idempotency_key");
            t
        })
        .await;
    assert_eq!(first.status, 201);
    let r = submit_batch(&api, &with("idempotency_key", json!("used"))).await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(r.body["error"]["code"], "IDEMPOTENCY_CONFLICT");
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("tasks[2]: "));
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orbit_task")
        .fetch_one(api.fixture.db.pool())
        .await
        .unwrap();
    assert_eq!(n, 1, "only the single submit");
    // Without a token: 401; with a reader's: 403; a full quota: 429.
    let body = json!({"tasks": [good(0)]});
    let r = api
        .call(
            Method::POST,
            "/v1/tasks/batch",
            "/v1/tasks/batch",
            None,
            &[],
            Some(&body),
        )
        .await;
    assert_eq!(r.status, 401, "{}", r.body);
    let reader = api.fixture.credential(&["tasks:read"]).await;
    let r = api
        .call(
            Method::POST,
            "/v1/tasks/batch",
            "/v1/tasks/batch",
            Some(&reader),
            &[],
            Some(&body),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.body);
    sqlx::query("UPDATE orbit_application_quota SET max_incomplete_tasks = 2")
        .execute(api.fixture.db.pool())
        .await
        .unwrap();
    let r = submit_batch(&api, &json!({"tasks": [good(0), good(1)]})).await;
    assert_eq!(r.status, 429, "{}", r.body);
    // Too large: 413.
    let mut huge = good(0);
    huge["payload"] = json!("x".repeat(2 * 1024 * 1024));
    let r = submit_batch(&api, &json!({"tasks": [huge]})).await;
    assert_eq!(r.status, 413);
}

/// `GET /v1/tasks/{id}/events` lists what the task and attempt rows do not keep (here the cancel
/// of a granted attempt), oldest first, a page at a time, only within the credential's reach; and
/// a queue's read carries its live counts and the sessions serving it.
#[tokio::test]
async fn a_tasks_events_and_its_queues_live_counts() {
    let api = Api::start().await;
    let f = &api.fixture;
    let first = f.submit(&f.queue_id, "ev/1").await.id;
    let second = f.submit(&f.queue_id, "ev/1").await.id;
    let session = f.session("w-events", true, &[&f.queue_id]).await;
    let grants = f.db.task_claim(session, 10, 60_000).await.unwrap();
    assert_eq!(grants.len(), 1);
    let token = grants[0].concurrency_token;

    let q = api
        .get("/v1/queues/{id}", &format!("/v1/queues/{}", f.queue_id))
        .await;
    assert_eq!(q.status, 200, "{}", q.body);
    assert_eq!(
        q.body["data"]["counts"],
        json!({"waiting": 1, "leased": 1, "running": 0, "retry_wait": 0, "needs_review": 0,
               "sessions": 1, "workers": 1})
    );
    let list = api.get("/v1/queues", "/v1/queues").await;
    assert_eq!(list.body["data"][0]["counts"], q.body["data"]["counts"]);

    let r = api
        .post(
            "/v1/tasks/{id}/cancel",
            &format!("/v1/tasks/{first}/cancel"),
            &json!({}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let events = api
        .get(
            "/v1/tasks/{id}/events",
            &format!("/v1/tasks/{first}/events"),
        )
        .await;
    assert_eq!(events.status, 200, "{}", events.body);
    let data = events.body["data"].as_array().unwrap();
    let last = data.last().unwrap();
    assert_eq!(last["to_state"], "CANCELLED", "{data:?}");
    let ids: Vec<u64> = data.iter().map(|e| e["id"].as_u64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "oldest first: {ids:?}");
    assert!(
        data.iter()
            .any(|e| e["concurrency_token"] == token.to_string()),
        "the granted attempt's token is in its history: {data:?}"
    );
    // Pages of one walk the same events.
    let mut seen = Vec::new();
    let mut path = format!("/v1/tasks/{first}/events?limit=1");
    loop {
        let page = api.get("/v1/tasks/{id}/events", &path).await;
        assert_eq!(page.status, 200, "{}", page.body);
        seen.extend(
            page.body["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["id"].as_u64().unwrap()),
        );
        match page.body["next_cursor"].as_str() {
            Some(c) => path = format!("/v1/tasks/{first}/events?limit=1&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(seen, ids);
    for bad in ["limit=0", "limit=1001", "cursor=x", "other=1"] {
        let r = api
            .get(
                "/v1/tasks/{id}/events",
                &format!("/v1/tasks/{second}/events?{bad}"),
            )
            .await;
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
    // Another tenant gets the answer of a task that does not exist.
    let (bootstrap, other) = orbit::db::queues::Bootstrap::with_new_token(
        "other-app",
        "prod",
        "default",
        "theirs",
        &orbit::testing::ALL_SCOPES,
        "other",
    );
    f.db.admin_bootstrap(&bootstrap).await.unwrap();
    let r = api
        .call(
            Method::GET,
            "/v1/tasks/{id}/events",
            &format!("/v1/tasks/{first}/events"),
            Some(&other),
            &[],
            None,
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
}
