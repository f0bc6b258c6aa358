//! `/v1/key-policies` and a submit's 409 KEY_BUSY over HTTP against a spawned `orbit serve`.
//! Every response is validated against `/v1/openapi.json`.

mod support;

use reqwest::Method;
use serde_json::{json, Value};
use support::Api;

fn task(api: &Api, key: &str) -> Value {
    json!({"queue_id": api.fixture.queue_id, "handler": "h", "handler_version": "v1",
           "payload_version": "v1", "payload": {}, "concurrency_key": key})
}

#[tokio::test]
async fn key_policies_are_set_listed_applied_and_deleted() {
    let api = Api::start().await;
    let ns = api.fixture.namespace_id;
    let created = api
        .post(
            "/v1/key-policies",
            "/v1/key-policies",
            &json!({"namespace": ns, "match": "prefix", "key": "customer/", "on_busy": "reject"}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.body["data"]["match"], "prefix");
    let id = created.body["data"]["id"].as_u64().unwrap();
    let changed = api
        .post(
            "/v1/key-policies",
            "/v1/key-policies",
            &json!({"namespace": ns, "match": "prefix", "key": "customer/", "on_busy": "replace_waiting"}),
        )
        .await;
    assert_eq!(changed.status, 200, "{}", changed.body);
    assert_eq!(changed.body["data"]["id"], id);
    let list = api
        .get(
            "/v1/key-policies",
            &format!("/v1/key-policies?namespace={ns}"),
        )
        .await;
    assert_eq!(list.status, 200);
    assert_eq!(list.body["data"][0]["on_busy"], "replace_waiting");

    // reject: the second submit for a busy key is a 409 KEY_BUSY, and nothing is accepted.
    api.post(
        "/v1/key-policies",
        "/v1/key-policies",
        &json!({"namespace": ns, "match": "exact", "key": "customer/1", "on_busy": "reject"}),
    )
    .await;
    let first = api.submit("c1-a", &task(&api, "customer/1")).await;
    assert_eq!(first.status, 201, "{}", first.body);
    let busy = api.submit("c1-b", &task(&api, "customer/1")).await;
    assert_eq!(busy.status, 409, "{}", busy.body);
    assert_eq!(busy.body["error"]["code"], "KEY_BUSY");
    // replace_waiting (the prefix): the newer task replaces the waiting one.
    let a = api.submit("c2-a", &task(&api, "customer/2")).await;
    let b = api.submit("c2-b", &task(&api, "customer/2")).await;
    let a_id = a.body["data"]["id"].as_u64().unwrap();
    let replaced = api
        .get("/v1/tasks/{id}", &format!("/v1/tasks/{a_id}"))
        .await;
    assert_eq!(replaced.body["data"]["state"], "CANCELLED");
    assert_eq!(replaced.body["data"]["error"]["code"], "REPLACED");
    assert_eq!(
        replaced.body["data"]["error"]["replaced_by"],
        b.body["data"]["id"]
    );

    let deleted = api
        .call(
            Method::DELETE,
            "/v1/key-policies/{id}",
            &format!("/v1/key-policies/{id}"),
            Some(&api.token()),
            &[],
            None,
        )
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    let gone = api
        .call(
            Method::DELETE,
            "/v1/key-policies/{id}",
            &format!("/v1/key-policies/{id}"),
            Some(&api.token()),
            &[],
            None,
        )
        .await;
    assert_eq!(gone.status, 404);

    // A limit and a rate (on_busy defaults to queue): both keys of a limit of 2 run at once,
    // and the key inspector shows what the key's next grant applies.
    let limited = api
        .post(
            "/v1/key-policies",
            "/v1/key-policies",
            &json!({"namespace": ns, "match": "prefix", "key": "api/", "limit": 2,
                    "rate": {"grants": 10, "per_seconds": 60}}),
        )
        .await;
    assert_eq!(limited.status, 201, "{}", limited.body);
    assert_eq!(limited.body["data"]["on_busy"], "queue");
    assert_eq!(limited.body["data"]["limit"], 2);
    assert_eq!(
        limited.body["data"]["rate"],
        json!({"grants": 10, "per_seconds": 60})
    );
    let key = api
        .get(
            "/v1/keys",
            &format!("/v1/keys?namespace={ns}&concurrency_key=api%2F1"),
        )
        .await;
    assert_eq!(key.status, 404, "{}", key.body);
    api.submit("api-1", &task(&api, "api/1")).await;
    let key = api
        .get(
            "/v1/keys",
            &format!("/v1/keys?namespace={ns}&concurrency_key=api%2F1"),
        )
        .await;
    assert_eq!(key.status, 200, "{}", key.body);
    assert_eq!(key.body["data"]["limit"], 2, "{}", key.body);
    assert_eq!(
        key.body["data"]["rate"],
        json!({"grants": 10, "per_seconds": 60})
    );
    assert_eq!(key.body["data"]["holders"], 0);
}

#[tokio::test]
async fn bad_policies_are_400s_and_other_namespaces_404s() {
    let api = Api::start().await;
    let ns = api.fixture.namespace_id;
    for (body, field) in [
        (
            json!({"namespace": ns, "match": "fuzzy", "key": "k", "on_busy": "queue"}),
            "match",
        ),
        (
            json!({"namespace": ns, "match": "exact", "key": "k", "on_busy": "skip"}),
            "on_busy",
        ),
        (
            json!({"namespace": ns, "match": "exact", "key": "x".repeat(192), "on_busy": "queue"}),
            "key",
        ),
        (
            json!({"namespace": ns, "match": "exact", "key": "", "on_busy": "queue"}),
            "key",
        ),
        (
            json!({"namespace": 0, "match": "exact", "key": "k", "on_busy": "queue"}),
            "namespace",
        ),
        (
            json!({"namespace": ns, "match": "exact", "key": "k", "limit": 0}),
            "limit",
        ),
        (
            json!({"namespace": ns, "match": "exact", "key": "k", "limit": 1001}),
            "limit",
        ),
        (
            json!({"namespace": ns, "match": "exact", "key": "k", "limit": -1}),
            "limit",
        ),
        (
            // Beyond 32 bits signed: the procedure's own rule answers (its parameters are BIGINT).
            json!({"namespace": ns, "match": "exact", "key": "k", "limit": 3_923_794_307u64}),
            "limit must be between 1 and",
        ),
        (
            json!({"namespace": ns, "match": "exact", "key": "k", "rate": {"grants": 3_923_794_307u64, "per_seconds": 1}}),
            "rate.grants must be between",
        ),
        (
            json!({"namespace": ns, "match": "exact", "key": "k", "rate": {"grants": 5}}),
            "rate",
        ),
        (
            json!({"namespace": ns, "match": "exact", "key": "k", "rate": {"grants": 0, "per_seconds": 1}}),
            "rate",
        ),
        (
            json!({"namespace": ns, "match": "exact", "key": "k", "rate": {"grants": 5, "per_seconds": 86401}}),
            "rate",
        ),
    ] {
        let r = api
            .post("/v1/key-policies", "/v1/key-policies", &body)
            .await;
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert!(
            r.body["error"]["message"].as_str().unwrap().contains(field),
            "{body}: {}",
            r.body
        );
    }
    let r = api
        .post(
            "/v1/key-policies",
            "/v1/key-policies",
            &json!({"namespace": ns + 1000, "match": "exact", "key": "k", "on_busy": "queue"}),
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
    let r = api
        .get("/v1/key-policies", "/v1/key-policies?namespace=abc")
        .await;
    assert_eq!(r.status, 400);
    let r = api.get("/v1/key-policies", "/v1/key-policies").await;
    assert_eq!(r.status, 400);
}
