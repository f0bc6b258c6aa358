//! Authentication and authorisation over HTTP, readiness, and the version refusal.

mod support;

use reqwest::Method;
use serde_json::json;
use support::Api;

/// Every documented route that takes a token, with a concrete path.
fn authenticated_routes(api: &Api, task_id: u64) -> Vec<(Method, &'static str, String)> {
    let q = api.fixture.queue_id.clone();
    vec![
        (Method::POST, "/v1/tasks", "/v1/tasks".into()),
        (Method::POST, "/v1/tasks/batch", "/v1/tasks/batch".into()),
        (Method::GET, "/v1/tasks", "/v1/tasks".into()),
        (
            Method::GET,
            "/v1/tasks/{id}",
            format!("/v1/tasks/{task_id}"),
        ),
        (
            Method::POST,
            "/v1/tasks/{id}/cancel",
            format!("/v1/tasks/{task_id}/cancel"),
        ),
        (
            Method::POST,
            "/v1/tasks/{id}/resolve",
            format!("/v1/tasks/{task_id}/resolve"),
        ),
        (Method::POST, "/v1/queues", "/v1/queues".into()),
        (Method::GET, "/v1/queues", "/v1/queues".into()),
        (Method::GET, "/v1/queues/{id}", format!("/v1/queues/{q}")),
        (
            Method::POST,
            "/v1/queues/{id}/pause",
            format!("/v1/queues/{q}/pause"),
        ),
        (
            Method::POST,
            "/v1/queues/{id}/resume",
            format!("/v1/queues/{q}/resume"),
        ),
        (
            Method::POST,
            "/v1/queues/{id}/retention",
            format!("/v1/queues/{q}/retention"),
        ),
        (
            Method::GET,
            "/v1/tasks/{id}/attempts",
            format!("/v1/tasks/{task_id}/attempts"),
        ),
        (Method::GET, "/v1/attempts/{id}", "/v1/attempts/1".into()),
        (Method::POST, "/v1/plans", "/v1/plans".into()),
        (Method::GET, "/v1/plans", "/v1/plans".into()),
        (
            Method::GET,
            "/v1/tasks/{id}/events",
            format!("/v1/tasks/{task_id}/events"),
        ),
        (Method::GET, "/v1/plans/{id}", "/v1/plans/1".into()),
        (
            Method::POST,
            "/v1/plans/{id}/versions",
            "/v1/plans/1/versions".into(),
        ),
        (
            Method::POST,
            "/v1/plans/{id}/pause",
            "/v1/plans/1/pause".into(),
        ),
        (
            Method::POST,
            "/v1/plans/{id}/resume",
            "/v1/plans/1/resume".into(),
        ),
        (
            Method::GET,
            "/v1/workers/connect",
            "/v1/workers/connect".into(),
        ),
        (Method::GET, "/metrics", "/metrics".into()),
        (Method::GET, "/v1/keys", "/v1/keys?namespace=1".into()),
        (
            Method::GET,
            "/v1/key-policies",
            "/v1/key-policies?namespace=1".into(),
        ),
        (Method::POST, "/v1/key-policies", "/v1/key-policies".into()),
        (
            Method::DELETE,
            "/v1/key-policies/{id}",
            "/v1/key-policies/1".into(),
        ),
    ]
}

#[tokio::test]
async fn every_route_without_a_token_is_401_and_the_document_covers_them() {
    let api = Api::start().await;
    let task = api.fixture.submit(&api.fixture.queue_id, "").await;
    let doc: serde_json::Value = api
        .http
        .get(format!("{}/v1/openapi.json", api.server.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let documented: usize = doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .map(|p| p.as_object().unwrap().len())
        .sum();
    let routes = authenticated_routes(&api, task.id);
    // /healthz, /readyz and /v1/openapi.json are the only routes without a token.
    assert_eq!(
        documented,
        routes.len() + 3,
        "a route is missing from this test or from the document"
    );
    for (method, template, path) in routes {
        let r = api
            .call(method.clone(), template, &path, None, &[], Some(&json!({})))
            .await;
        assert_eq!(r.status, 401, "{method} {path}: {}", r.body);
        assert_eq!(r.body["error"]["code"], "UNAUTHENTICATED");
        // A well-formed request, so the procedure (which authenticates) is reached.
        let task = json!({"handler": "h", "handler_version": "v1", "payload_version": "v1", "payload": {}});
        let mut submit = task.clone();
        submit["queue_id"] = json!(api.fixture.queue_id);
        let mut batch_task = submit.clone();
        batch_task["idempotency_key"] = json!("k");
        let body = match template {
            "/v1/tasks" => submit,
            "/v1/tasks/batch" => json!({ "tasks": [batch_task] }),
            "/v1/tasks/{id}/resolve" => json!({"resolution": "requeue"}),
            "/v1/queues" => json!({"name": "x"}),
            "/v1/queues/{id}/retention" => json!({"retention_seconds": 3600}),
            "/v1/plans" => {
                json!({"name": "p", "queue_id": api.fixture.queue_id, "schedule": {"interval_seconds": 60}, "definition": {"task": task}})
            }
            "/v1/plans/{id}/versions" => {
                json!({"schedule": {"interval_seconds": 60}, "definition": {"task": task}})
            }
            "/v1/key-policies" => {
                json!({"namespace": api.fixture.namespace_id, "match": "exact", "key": "k", "on_busy": "queue"})
            }
            _ => json!({}),
        };
        let r = api
            .call(
                method.clone(),
                template,
                &path,
                Some("orbit_wrong"),
                &[("Idempotency-Key", "k")],
                Some(&body),
            )
            .await;
        assert_eq!(
            r.status, 401,
            "{method} {path} with an unknown token: {}",
            r.body
        );
    }
    for path in ["/healthz", "/readyz", "/v1/openapi.json"] {
        let r = api
            .http
            .get(format!("{}{path}", api.server.url))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{path}");
    }
}

#[tokio::test]
async fn a_credential_without_the_scope_gets_403() {
    let api = Api::start().await;
    let task = api.fixture.submit(&api.fixture.queue_id, "").await;
    let reader = api.fixture.credential(&["tasks:read"]).await;
    let q = api.fixture.queue_id.clone();
    let body = json!({"queue_id": q, "handler": "h", "handler_version": "v1", "payload_version": "v1", "payload": {}});
    for (method, template, path, body) in [
        (
            Method::POST,
            "/v1/tasks",
            "/v1/tasks".to_string(),
            body.clone(),
        ),
        (
            Method::POST,
            "/v1/tasks/{id}/cancel",
            format!("/v1/tasks/{}/cancel", task.id),
            json!({}),
        ),
        (
            Method::POST,
            "/v1/queues",
            "/v1/queues".to_string(),
            json!({"name": "new"}),
        ),
        (
            Method::POST,
            "/v1/queues/{id}/pause",
            format!("/v1/queues/{q}/pause"),
            json!({}),
        ),
    ] {
        let r = api
            .call(
                method.clone(),
                template,
                &path,
                Some(&reader),
                &[("Idempotency-Key", "x")],
                Some(&body),
            )
            .await;
        assert_eq!(r.status, 403, "{method} {path}: {}", r.body);
        assert_eq!(r.body["error"]["code"], "PERMISSION_DENIED");
    }
    let writer = api.fixture.credential(&["tasks:submit"]).await;
    let r = api
        .call(
            Method::GET,
            "/v1/tasks/{id}",
            &format!("/v1/tasks/{}", task.id),
            Some(&writer),
            &[],
            None,
        )
        .await;
    assert_eq!(r.status, 403);
    // The reader can read.
    let r = api
        .call(
            Method::GET,
            "/v1/tasks/{id}",
            &format!("/v1/tasks/{}", task.id),
            Some(&reader),
            &[],
            None,
        )
        .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn another_tenants_objects_are_404() {
    let api = Api::start().await;
    let mine = api.fixture.submit(&api.fixture.queue_id, "").await;
    let (bootstrap, other) = orbit::db::queues::Bootstrap::with_new_token(
        "app",
        "test",
        "other-namespace",
        "theirs",
        &orbit::testing::ALL_SCOPES,
        "other",
    );
    let theirs = api.fixture.db.admin_bootstrap(&bootstrap).await.unwrap();
    for (template, path) in [
        ("/v1/tasks/{id}", format!("/v1/tasks/{}", mine.id)),
        (
            "/v1/queues/{id}",
            format!("/v1/queues/{}", api.fixture.queue_id),
        ),
    ] {
        let r = api
            .call(Method::GET, template, &path, Some(&other), &[], None)
            .await;
        assert_eq!(r.status, 404, "{path}: {}", r.body);
    }
    let listed = api
        .call(
            Method::GET,
            "/v1/tasks",
            "/v1/tasks",
            Some(&other),
            &[],
            None,
        )
        .await;
    assert_eq!(
        listed.body["data"].as_array().unwrap().len(),
        0,
        "another namespace sees none of our tasks"
    );
    let body = json!({"queue_id": theirs.queue_id, "handler": "h", "handler_version": "v1", "payload_version": "v1", "payload": {}});
    let r = api.submit("into-theirs", &body).await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn queues_create_list_pause_resume() {
    let api = Api::start().await;
    let created = api
        .post(
            "/v1/queues",
            "/v1/queues",
            &json!({"name": "emails", "max_active_attempts": 5}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.body["data"]["id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 32);
    assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
    let dup = api
        .post("/v1/queues", "/v1/queues", &json!({"name": "emails"}))
        .await;
    assert_eq!(dup.status, 409);
    let list = api.get("/v1/queues", "/v1/queues").await;
    assert_eq!(list.body["data"].as_array().unwrap().len(), 2);
    let paused = api
        .post(
            "/v1/queues/{id}/pause",
            &format!("/v1/queues/{id}/pause"),
            &json!({}),
        )
        .await;
    assert_eq!(paused.body["data"]["paused"], true);
    let resumed = api
        .post(
            "/v1/queues/{id}/resume",
            &format!("/v1/queues/{id}/resume"),
            &json!({}),
        )
        .await;
    assert_eq!(resumed.body["data"]["paused"], false);
    let missing = api
        .get(
            "/v1/queues/{id}",
            "/v1/queues/00000000000000000000000000000000",
        )
        .await;
    assert_eq!(missing.status, 404);
}

#[tokio::test]
async fn readyz_fails_and_serve_refuses_at_another_extension_version() {
    let api = Api::start().await;
    let ready = api
        .http
        .get(format!("{}/readyz", api.server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status().as_u16(), 200);
    sqlx::query("UPDATE orbit_extension SET version = version + 1 WHERE kind = 'extension'")
        .execute(api.fixture.db.pool())
        .await
        .unwrap();
    let r = api
        .call(Method::GET, "/readyz", "/readyz", None, &[], None)
        .await;
    assert_eq!(r.status, 503);
    assert_eq!(r.body["error"]["code"], "UNAVAILABLE");
    let refused =
        orbit::testing::Server::try_start(env!("CARGO_BIN_EXE_orbit"), &api.fixture.test_db.dsn)
            .await;
    let err = refused
        .err()
        .expect("serve must refuse a database at another version");
    let v = orbit::codegen::EXTENSION_VERSION;
    assert!(
        err.contains(&format!("extension version {}", v + 1))
            && err.contains(&format!("serves version {v}")),
        "{err}"
    );
}

#[tokio::test]
async fn serve_stops_gracefully_on_sigterm() {
    let api = Api::start().await;
    let status = api.server.stop().await;
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn the_schema_check_itself_rejects_a_wrong_body() {
    let api = Api::start().await;
    let wrong = json!({"data": {"id": "not-a-number"}, "request_id": "x"});
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        api.validate(&Method::GET, "/v1/tasks/{id}", 200, &wrong);
    }));
    assert!(
        caught.is_err(),
        "a body that breaks the document must fail validation"
    );
}

#[tokio::test]
async fn every_route_with_a_wrong_scope_is_403() {
    let api = Api::start().await;
    let f = &api.fixture;
    let task = f.submit(&f.queue_id, "k").await;
    let session = f.session("w", true, &[&f.queue_id]).await;
    let attempt =
        f.db.task_claim(session, 1, 30_000)
            .await
            .unwrap()
            .remove(0)
            .attempt_id;
    let def =
        json!({"handler": "h", "handler_version": "v1", "payload_version": "v1", "payload": {}});
    let plan = api
        .post("/v1/plans", "/v1/plans", &json!({"name": "p", "queue_id": f.queue_id, "schedule": {"interval_seconds": 60}, "definition": {"task": def}}))
        .await;
    let plan_id = plan.body["data"]["id"].as_u64().unwrap();
    // A credential of the same namespace holding only a scope no HTTP route accepts.
    let wrong = f.credential(&["workers:consume"]).await;
    let mut submit = def.clone();
    submit["queue_id"] = json!(f.queue_id);
    for (method, template, path) in authenticated_routes(&api, task.id) {
        let path = path
            .replace("/v1/attempts/1", &format!("/v1/attempts/{attempt}"))
            .replace("/v1/plans/1", &format!("/v1/plans/{plan_id}"));
        let mut batch_task = submit.clone();
        batch_task["idempotency_key"] = json!("k");
        let body = match template {
            "/v1/tasks" => submit.clone(),
            "/v1/tasks/batch" => json!({ "tasks": [batch_task] }),
            "/v1/tasks/{id}/resolve" => json!({"resolution": "requeue"}),
            "/v1/queues" => json!({"name": "x"}),
            "/v1/queues/{id}/retention" => json!({"retention_seconds": 3600}),
            "/v1/plans" => {
                json!({"name": "p2", "queue_id": f.queue_id, "schedule": {"interval_seconds": 60}, "definition": {"task": def}})
            }
            "/v1/plans/{id}/versions" => {
                json!({"schedule": {"interval_seconds": 60}, "definition": {"task": def}})
            }
            "/v1/key-policies" => {
                json!({"namespace": f.namespace_id, "match": "exact", "key": "k", "on_busy": "queue"})
            }
            _ => json!({}),
        };
        let r = api
            .call(
                method.clone(),
                template,
                &path,
                Some(&wrong),
                &[("Idempotency-Key", "k")],
                Some(&body),
            )
            .await;
        assert_eq!(r.status, 403, "{method} {path}: {}", r.body);
        assert_eq!(r.body["error"]["code"], "PERMISSION_DENIED");
    }
}
