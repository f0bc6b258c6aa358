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
            .header("Idempotency-Key", what)
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
