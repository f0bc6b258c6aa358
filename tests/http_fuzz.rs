//! Regressions for what schemathesis (`.ci/schemathesis`) found against `/v1/openapi.json`: inputs
//! that reached the database in a form it refuses (a 500), and a document that described requests
//! the server does not read. Every response is validated against the document, as everywhere.

mod support;

use reqwest::Method;
use serde_json::{json, Value};
use support::{note_example_body, Api};

/// "été", percent-encoded for a path or a query.
const ETE: &str = "%C3%A9t%C3%A9";

/// A queue id outside ASCII reached procedures that take ids as ASCII text: MariaDB refused the
/// conversion (error 1366) and the API answered 500. It names no queue: 404, after the token and
/// scope checks, like any other unknown queue.
#[tokio::test]
async fn non_ascii_queue_ids_are_unknown_queues_not_internal_errors() {
    let api = Api::start().await;
    let token = api.token();
    let task = json!({"queue_id": "été", "handler": "h", "handler_version": "v1",
                      "payload_version": "v1", "payload": {}});
    let plan = json!({"name": "p", "queue_id": "été", "schedule": {"interval_seconds": 60},
                      "definition": {"task": {"handler": "h", "handler_version": "v1",
                                              "payload_version": "v1", "payload": {}}}});
    let cases: [(Method, &str, String, Option<&Value>); 6] = [
        (
            Method::GET,
            "/v1/queues/{id}",
            format!("/v1/queues/{ETE}"),
            None,
        ),
        (
            Method::POST,
            "/v1/queues/{id}/pause",
            format!("/v1/queues/{ETE}/pause"),
            None,
        ),
        (
            Method::POST,
            "/v1/queues/{id}/resume",
            format!("/v1/queues/{ETE}/resume"),
            None,
        ),
        (
            Method::GET,
            "/v1/tasks",
            format!("/v1/tasks?queue_id={ETE}"),
            None,
        ),
        (Method::POST, "/v1/tasks", "/v1/tasks".into(), Some(&task)),
        (Method::POST, "/v1/plans", "/v1/plans".into(), Some(&plan)),
    ];
    for (method, template, path, body) in &cases {
        let headers = [("Idempotency-Key", "fuzz-1")];
        let r = api
            .call(
                method.clone(),
                template,
                path,
                Some(&token),
                &headers,
                *body,
            )
            .await;
        assert_eq!(
            (r.status, r.body["error"]["code"].as_str()),
            (404, Some("NOT_FOUND")),
            "{method} {path}: {}",
            r.body
        );
        // The token is still checked first.
        let r = api
            .call(
                method.clone(),
                template,
                path,
                Some("nope"),
                &headers,
                *body,
            )
            .await;
        assert_eq!(
            r.status, 401,
            "{method} {path} with a bad token: {}",
            r.body
        );
    }
    // And the scope before the queue: a credential without tasks:read may not even learn that.
    let submit_only = api.fixture.credential(&["tasks:submit"]).await;
    let r = api
        .call(
            Method::GET,
            "/v1/queues/{id}",
            &format!("/v1/queues/{ETE}"),
            Some(&submit_only),
            &[],
            None,
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.body);
    // A queue-list cursor is a queue id; a non-ASCII one was never handed out.
    let r = api
        .get("/v1/queues", &format!("/v1/queues?cursor={ETE}"))
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.body["error"]["details"]["field"], "cursor");
    // The real queue still answers.
    let q = api.fixture.queue_id.clone();
    let r = api.get("/v1/queues/{id}", &format!("/v1/queues/{q}")).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

/// `priority` and `max_attempts` were read as 64-bit integers and handed to INT procedure
/// parameters: anything beyond 32 bits was a MariaDB range error (1264), a 500. Now a 400 that
/// names the field, in a submit and in a plan's definition.
#[tokio::test]
async fn integers_beyond_the_procedure_parameters_are_400_naming_the_field() {
    let api = Api::start().await;
    let q = api.fixture.queue_id.clone();
    let base = json!({"queue_id": q, "handler": "h", "handler_version": "v1",
                      "payload_version": "v1", "payload": {}});
    for (i, (field, value)) in [
        ("priority", json!(1_099_511_627_776_i64)),
        ("max_attempts", json!(-1_099_511_627_776_i64)),
        ("priority", json!(i64::MAX)),
    ]
    .into_iter()
    .enumerate()
    {
        let mut body = base.clone();
        body[field] = value.clone();
        let r = api.submit(&format!("big-{i}"), &body).await;
        assert_eq!(r.status, 400, "{field}={value}: {}", r.body);
        assert_eq!(r.body["error"]["details"]["field"], field);

        let mut task = base.clone();
        task.as_object_mut().unwrap().remove("queue_id");
        task[field] = value.clone();
        let plan = json!({"name": format!("p{i}"), "queue_id": q,
                          "schedule": {"interval_seconds": 60}, "definition": {"task": task}});
        let r = api.post("/v1/plans", "/v1/plans", &plan).await;
        assert_eq!(r.status, 400, "plan {field}={value}: {}", r.body);
        assert_eq!(
            r.body["error"]["details"]["field"],
            format!("definition.task.{field}")
        );
    }
    // In range, the same fields are accepted.
    let mut body = base.clone();
    body["priority"] = json!(9);
    body["max_attempts"] = json!(1000);
    let r = api.submit("in-range", &body).await;
    assert_eq!(r.status, 201, "{}", r.body);
}

/// The document described the list filters as required path parameters, the submit body as
/// `{"queue_id", "task": {…}}` (the server reads one flat object), and optional fields as nullable
/// (the server refuses `null`). It now describes what the server reads.
#[tokio::test]
async fn the_document_describes_the_requests_the_server_reads() {
    let api = Api::start().await;
    let doc: Value = api
        .http
        .get(format!("{}/v1/openapi.json", api.server.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();

    for path in ["/v1/tasks", "/v1/queues"] {
        let params = doc["paths"][path]["get"]["parameters"].as_array().unwrap();
        assert!(!params.is_empty());
        for p in params {
            assert_eq!(p["in"], "query", "GET {path}: {p}");
            assert_eq!(p["required"], false, "GET {path}: {p}");
        }
        let limit = params.iter().find(|p| p["name"] == "limit").unwrap();
        assert_eq!(
            (&limit["schema"]["minimum"], &limit["schema"]["maximum"]),
            (&json!(1), &json!(500))
        );
    }
    for (path, method) in [
        ("/v1/tasks/{id}", "get"),
        ("/v1/attempts/{id}", "get"),
        ("/v1/plans/{id}", "get"),
    ] {
        let id = &doc["paths"][path][method]["parameters"][0];
        assert_eq!(id["schema"]["minimum"], 1, "{path}: {id}");
    }

    let schema = |name: &str| {
        let mut root = doc["components"]["schemas"][name].clone();
        root["components"] = doc["components"].clone();
        jsonschema::draft202012::new(&root).expect("the document's schema compiles")
    };
    let submit = schema("SubmitTask");
    let flat = note_example_body();
    assert!(submit.is_valid(&flat), "the flat body the server reads");
    let nested = json!({"queue_id": flat["queue_id"], "task": {"handler": "h",
        "handler_version": "v1", "payload_version": "v1", "payload": {}}});
    assert!(
        !submit.is_valid(&nested),
        "the nested shape the server refuses"
    );
    for field in [
        "business_key",
        "concurrency_key",
        "priority",
        "retry_unknown",
    ] {
        let mut with_null = flat.clone();
        with_null[field] = Value::Null;
        assert!(!submit.is_valid(&with_null), "{field}: null is refused");
    }

    let batch = schema("SubmitBatch");
    let mut task = flat.clone();
    task["idempotency_key"] = json!("op-1");
    assert!(
        batch.is_valid(&json!({"tasks": [task]})),
        "a batch task: the flat body and its key"
    );
    assert!(
        !batch.is_valid(&json!({"tasks": [flat]})),
        "the key is required"
    );
    assert!(!batch.is_valid(&json!({"tasks": []})), "at least one task");
    let many: Vec<Value> = (0..1001).map(|_| task.clone()).collect();
    assert!(!batch.is_valid(&json!({ "tasks": many })), "at most 1000");
    for key in ["", " k", "k\u{1}", "clé"] {
        let mut bad = task.clone();
        bad["idempotency_key"] = json!(key);
        assert!(!batch.is_valid(&json!({"tasks": [bad]})), "{key:?}");
    }
    let mut extra = task.clone();
    extra["colour"] = json!("red");
    assert!(
        !batch.is_valid(&json!({"tasks": [extra]})),
        "no other fields"
    );

    let plan = schema("CreatePlan");
    let definition = json!({"task": {"handler": "h", "handler_version": "v1",
                                     "payload_version": "v1", "payload": {}}});
    let body = json!({"name": "p", "queue_id": flat["queue_id"],
                      "schedule": {"interval_seconds": 60}, "definition": definition});
    assert!(plan.is_valid(&body));
    let mut extra = body.clone();
    extra["definition"]["colour"] = json!("red");
    assert!(!plan.is_valid(&extra), "definition has no other fields");

    // The server agrees with the document on both shapes.
    let r = api.submit("flat", &flat_for(&api, &flat)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let mut nested = nested;
    nested["queue_id"] = json!(api.fixture.queue_id);
    let r = api.submit("nested", &nested).await;
    assert_eq!(r.status, 400, "{}", r.body);
}

/// The design note's body, on this fixture's queue.
fn flat_for(api: &Api, body: &Value) -> Value {
    let mut body = body.clone();
    body["queue_id"] = json!(api.fixture.queue_id);
    body
}
