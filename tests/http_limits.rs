//! The HTTP façade against hostile clients: bounded metric labels, `/metrics` behind the
//! `metrics:read` scope, long strings and bad Idempotency-Keys refused with a 400 naming the
//! field, and the connection limit with header, body, request and idle timeouts. Black-box: a
//! spawned `orbit serve` over a real MariaDB, spoken to over HTTP, raw TCP and WebSocket.

mod support;

use std::time::{Duration, Instant};

use orbit::testing::Server;
use reqwest::Method;
use serde_json::{json, Value};
use support::Api;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn scrape(api: &Api) -> String {
    let r = api
        .http
        .get(format!("{}/metrics", api.server.url))
        .bearer_auth(api.token())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    r.text().await.unwrap()
}

/// The distinct values of `label` on the lines of metric `name`.
fn label_values(text: &str, name: &str, label: &str) -> std::collections::BTreeSet<String> {
    let needle = format!("{label}=\"");
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter_map(|l| {
            let rest = &l[l.find(&needle)? + needle.len()..];
            Some(rest[..rest.find('"')?].to_string())
        })
        .collect()
}

#[tokio::test]
async fn random_methods_and_paths_leave_the_metric_labels_bounded() {
    let api = Api::start().await;
    // Warm up the label sets every scrape has anyway.
    scrape(&api).await;
    let before = scrape(&api).await;
    for i in 0..300 {
        let method = Method::from_bytes(format!("X{:08x}{i}", rand::random::<u32>()).as_bytes())
            .expect("a token is a method");
        let path = format!("/{:016x}/{i}", rand::random::<u64>());
        for (method, path) in [
            (method.clone(), path.as_str()),
            (method, "/healthz"),
            (Method::GET, path.as_str()),
        ] {
            let r = api
                .http
                .request(method, format!("{}{path}", api.server.url))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_client_error(), "{}", r.status());
        }
    }
    let after = scrape(&api).await;
    let methods = label_values(&after, "orbit_http_requests_total", "method");
    let allowed = [
        "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "CONNECT", "PATCH", "TRACE", "OTHER",
    ];
    assert!(
        methods.iter().all(|m| allowed.contains(&m.as_str())),
        "unbounded method labels: {methods:?}"
    );
    assert!(methods.contains("OTHER"), "{methods:?}");
    let routes = label_values(&after, "orbit_http_requests_total", "route");
    let templates = ["unmatched", "/healthz", "/metrics", "/v1/openapi.json"];
    assert!(
        routes.iter().all(|r| templates.contains(&r.as_str())),
        "a raw path became a label: {routes:?}"
    );
    // 900 requests added a handful of series, not hundreds (a histogram's bucket lines are a
    // fixed number per series: count its `_count` line only).
    let series = |t: &str| {
        t.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty() && !l.contains("_bucket{"))
            .count()
    };
    assert!(
        series(&after) <= series(&before) + 40,
        "{} series before, {} after",
        series(&before),
        series(&after)
    );
    assert!(
        after.len() <= before.len() + 16 * 1024,
        "{} bytes before, {} after",
        before.len(),
        after.len()
    );
}

#[tokio::test]
async fn metrics_need_a_token_with_the_metrics_read_scope() {
    let api = Api::start().await;
    // Another tenant, whose application name must not reach an unauthenticated scraper.
    let other = api
        .fixture
        .db
        .admin_bootstrap(&orbit::db::queues::Bootstrap {
            application: "acme-confidential-tenant".into(),
            environment: "prod".into(),
            namespace: "default".into(),
            queue: "q".into(),
            token_hash: orbit::auth::token_hash("orbit_other_tenant_token").to_vec(),
            token_hint: "orbit_ot".into(),
            scopes: vec!["tasks:submit".into()],
            label: "other".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    api.fixture
        .db
        .task_submit(
            &orbit::auth::token_hash("orbit_other_tenant_token"),
            "k1",
            &api.fixture.task(&other.queue_id, ""),
        )
        .await
        .unwrap();

    let anonymous = api
        .call(Method::GET, "/metrics", "/metrics", None, &[], None)
        .await;
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    assert_eq!(anonymous.body["error"]["code"], "UNAUTHENTICATED");
    assert!(!anonymous.body.to_string().contains("acme-confidential"));

    let reader = api.fixture.credential(&["tasks:read"]).await;
    let denied = api
        .call(
            Method::GET,
            "/metrics",
            "/metrics",
            Some(&reader),
            &[],
            None,
        )
        .await;
    assert_eq!(denied.status, 403, "{}", denied.body);
    assert_eq!(denied.body["error"]["code"], "PERMISSION_DENIED");
    assert!(denied.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("metrics:read"));
    assert!(!denied.body.to_string().contains("acme-confidential"));

    let operator = api.fixture.credential(&["metrics:read"]).await;
    let r = api
        .http
        .get(format!("{}/metrics", api.server.url))
        .bearer_auth(&operator)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let text = r.text().await.unwrap();
    assert!(text.contains("orbit_database_up 1"), "{text}");
    assert!(text.contains("acme-confidential-tenant"), "{text}");
}

/// Rows the refused requests must not have written.
async fn written(api: &Api) -> Vec<i64> {
    let mut counts = Vec::new();
    for table in [
        "orbit_task",
        "orbit_queue",
        "orbit_plan",
        "orbit_plan_version",
        "orbit_idempotency",
    ] {
        counts.push(
            sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
                .fetch_one(&api.fixture.test_db.pool)
                .await
                .unwrap(),
        );
    }
    counts
}

#[tokio::test]
async fn a_string_of_64_kib_in_any_field_is_a_400_naming_it_and_writes_nothing() {
    let api = Api::start().await;
    let q = api.fixture.queue_id.clone();
    let long = "x".repeat(64 * 1024);
    // Under hyper's limit of 65534 bytes for a request target.
    let long_in_url = "x".repeat(60 * 1024);
    let def =
        json!({"handler": "h", "handler_version": "v1", "payload_version": "v1", "payload": {}});
    let plan = api
        .post(
            "/v1/plans",
            "/v1/plans",
            &json!({"name": "p", "queue_id": q, "schedule": {"interval_seconds": 3600}, "definition": {"task": def}}),
        )
        .await;
    assert_eq!(plan.status, 201, "{}", plan.body);
    let plan_id = plan.body["data"]["id"].as_u64().unwrap();
    let before = written(&api).await;

    let task_fields = [
        "handler",
        "handler_version",
        "payload_version",
        "business_key",
        "concurrency_key",
    ];
    let with = |base: &Value, field: &str| {
        let mut v = base.clone();
        v[field] = json!(long);
        v
    };
    let mut submit = def.clone();
    submit["queue_id"] = json!(q);
    let mut batch_task = submit.clone();
    batch_task["idempotency_key"] = json!("batch-1");
    let plan_body = |task: Value, name: &str, queue: &str| json!({"name": name, "queue_id": queue, "schedule": {"interval_seconds": 60}, "definition": {"task": task}});
    let versions = format!("/v1/plans/{plan_id}/versions");

    // (method, template, path, headers, body, field)
    let mut cases: Vec<(
        Method,
        &str,
        String,
        Vec<(&str, String)>,
        Option<Value>,
        String,
    )> = Vec::new();
    let key = || vec![("Idempotency-Key", "k-long".to_string())];
    for f in task_fields {
        cases.push((
            Method::POST,
            "/v1/tasks",
            "/v1/tasks".into(),
            key(),
            Some(with(&submit, f)),
            f.to_string(),
        ));
        cases.push((
            Method::POST,
            "/v1/tasks/batch",
            "/v1/tasks/batch".into(),
            vec![],
            Some(json!({"tasks": [batch_task.clone(), with(&batch_task, f)]})),
            format!("tasks[1].{f}"),
        ));
        cases.push((
            Method::POST,
            "/v1/plans",
            "/v1/plans".into(),
            vec![],
            Some(plan_body(with(&def, f), "p2", &q)),
            format!("definition.task.{f}"),
        ));
        cases.push((
            Method::POST,
            "/v1/plans/{id}/versions",
            versions.clone(),
            vec![],
            Some(json!({"schedule": {"interval_seconds": 60}, "definition": {"task": with(&def, f)}})),
            format!("definition.task.{f}"),
        ));
    }
    cases.extend([
        (
            Method::POST,
            "/v1/tasks",
            "/v1/tasks".into(),
            key(),
            Some(with(&submit, "queue_id")),
            "queue_id".to_string(),
        ),
        (
            Method::POST,
            "/v1/tasks",
            "/v1/tasks".into(),
            vec![("Idempotency-Key", long.clone())],
            Some(submit.clone()),
            "Idempotency-Key".to_string(),
        ),
        (
            Method::POST,
            "/v1/tasks/batch",
            "/v1/tasks/batch".into(),
            vec![],
            Some(json!({"tasks": [with(&batch_task, "queue_id")]})),
            "tasks[0].queue_id".to_string(),
        ),
        (
            Method::POST,
            "/v1/tasks/batch",
            "/v1/tasks/batch".into(),
            vec![],
            Some(json!({"tasks": [with(&batch_task, "idempotency_key")]})),
            "tasks[0].idempotency_key".to_string(),
        ),
        (
            Method::POST,
            "/v1/queues",
            "/v1/queues".into(),
            vec![],
            Some(json!({ "name": long })),
            "name".to_string(),
        ),
        (
            Method::POST,
            "/v1/plans",
            "/v1/plans".into(),
            vec![],
            Some(plan_body(def.clone(), &long, &q)),
            "name".to_string(),
        ),
        (
            Method::POST,
            "/v1/plans",
            "/v1/plans".into(),
            vec![],
            Some(plan_body(def.clone(), "p3", &long)),
            "queue_id".to_string(),
        ),
    ]);
    for (template, field) in [
        ("/v1/queues/{id}", format!("/v1/queues/{long_in_url}")),
        (
            "/v1/queues/{id}/pause",
            format!("/v1/queues/{long_in_url}/pause"),
        ),
        (
            "/v1/queues/{id}/resume",
            format!("/v1/queues/{long_in_url}/resume"),
        ),
    ] {
        let method = if template == "/v1/queues/{id}" {
            Method::GET
        } else {
            Method::POST
        };
        cases.push((method, template, field, vec![], None, "id".into()));
    }
    for field in ["queue_id", "business_key", "concurrency_key"] {
        cases.push((
            Method::GET,
            "/v1/tasks",
            format!("/v1/tasks?{field}={long_in_url}"),
            vec![],
            None,
            field.to_string(),
        ));
    }
    cases.push((
        Method::GET,
        "/v1/queues",
        format!("/v1/queues?cursor={long_in_url}"),
        vec![],
        None,
        "cursor".into(),
    ));

    for (method, template, path, headers, body, field) in &cases {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let r = api
            .call(
                method.clone(),
                template,
                path,
                Some(&api.token()),
                &headers,
                body.as_ref(),
            )
            .await;
        assert_eq!(
            (r.status, r.body["error"]["code"].as_str()),
            (400, Some("INVALID_ARGUMENT")),
            "{method} {template} with a long {field}: {}",
            r.body
        );
        assert_eq!(
            r.body["error"]["details"]["field"], *field,
            "{method} {template}: {}",
            r.body
        );
    }
    assert_eq!(written(&api).await, before, "a refused request wrote rows");
}

#[tokio::test]
async fn the_database_layer_answers_a_too_long_parameter_with_invalid_argument() {
    // The backstop behind the façade's checks: MySQL error 1406 is a 400 naming the field.
    let f = orbit::testing::Fixture::new().await;
    let mut task = f.task(&f.queue_id, "");
    task.handler = "h".repeat(70 * 1024);
    let e = f.db.task_submit(&f.hash, "k", &task).await.unwrap_err();
    assert_eq!(e.code(), "INVALID_ARGUMENT", "{e:?}");
    assert!(e.message().starts_with("handler "), "{e:?}");
}

#[tokio::test]
async fn idempotency_keys_are_visible_ascii_only() {
    let api = Api::start().await;
    let mut submit =
        json!({"handler": "h", "handler_version": "v1", "payload_version": "v1", "payload": {}});
    submit["queue_id"] = json!(api.fixture.queue_id);
    let before = written(&api).await;
    // (A header value's leading and trailing whitespace is not part of it, so " ab" is tried in
    // the batch only.)
    for key in ["a b", "a\tb", " ab", &"k".repeat(256)] {
        if !key.starts_with(' ') {
            let r = api.submit(key, &submit).await;
            assert_eq!(r.status, 400, "{key:?}: {}", r.body);
            assert_eq!(r.body["error"]["details"]["field"], "Idempotency-Key");
        }
        let mut task = submit.clone();
        task["idempotency_key"] = json!(key);
        let r = api
            .post(
                "/v1/tasks/batch",
                "/v1/tasks/batch",
                &json!({"tasks": [task]}),
            )
            .await;
        assert_eq!(r.status, 400, "{key:?}: {}", r.body);
        assert_eq!(
            r.body["error"]["details"]["field"],
            "tasks[0].idempotency_key"
        );
    }
    // Control characters inside a batch key (a header cannot carry them at all).
    let mut task = submit.clone();
    task["idempotency_key"] = json!("a\u{7f}b");
    let r = api
        .post(
            "/v1/tasks/batch",
            "/v1/tasks/batch",
            &json!({"tasks": [task]}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(written(&api).await, before, "a refused request wrote rows");
    let ok = api.submit("a-b_c:d/e!~", &submit).await;
    assert_eq!(ok.status, 201, "{}", ok.body);
}

/// The number of open file descriptors of a process.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Reads until the server closes the connection; the time it took.
async fn until_closed(mut s: TcpStream, deadline: Duration) -> Result<Duration, String> {
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at((started + deadline).into(), s.read(&mut buf)).await {
            Err(_) => return Err(format!("still open after {deadline:?}")),
            Ok(Ok(0)) | Ok(Err(_)) => return Ok(started.elapsed()),
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn partial_and_idle_connections_are_capped_and_closed_by_the_header_timeout() {
    let f = orbit::testing::Fixture::new().await;
    let cap = 32;
    let server = Server::start_with_args(
        env!("CARGO_BIN_EXE_orbit"),
        &f.test_db.dsn,
        &[
            "--max-connections",
            &cap.to_string(),
            "--header-timeout",
            "1",
        ],
    )
    .await;
    let addr = server.url.trim_start_matches("http://").to_string();
    let pid = server.pid();
    let baseline = open_fds(pid);

    // 300 connections that send half a request line and never finish it.
    let mut partial = Vec::new();
    for _ in 0..300 {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(b"GET /healthz HT").await.unwrap();
        partial.push(s);
    }
    let opened = Instant::now();
    // Watch the server's descriptors while they are served and closed.
    let watcher = tokio::spawn(async move {
        let mut most = 0;
        for _ in 0..400 {
            most = most.max(open_fds(pid));
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        most
    });
    let closes: Vec<_> = partial
        .into_iter()
        .map(|s| tokio::spawn(until_closed(s, Duration::from_secs(60))))
        .collect();
    // /healthz answers once the cap has room again: each wave of `cap` partial connections is
    // closed by the 1 s header timeout, so the 300 ahead of it are gone after about 10 s.
    let health = reqwest::Client::new()
        .get(format!("{}/healthz", server.url))
        .timeout(Duration::from_secs(40))
        .send()
        .await
        .expect("/healthz answers");
    assert_eq!(health.status().as_u16(), 200);
    let mut closed = Vec::new();
    for c in closes {
        closed.push(
            c.await
                .unwrap()
                .expect("the server closed every partial connection"),
        );
    }
    closed.sort();
    // The first wave was accepted at once and closed by the header timeout (1 s), not later.
    assert!(
        closed[cap - 1] < Duration::from_millis(2500),
        "the first {cap} closed after {:?}",
        closed[cap - 1]
    );
    assert!(
        opened.elapsed() < Duration::from_secs(40),
        "{:?}",
        opened.elapsed()
    );
    // Never more than `cap` client sockets open in the server (plus slack for database
    // connections the pool opens meanwhile).
    let most = watcher.await.unwrap();
    assert!(
        most <= baseline + cap + 12,
        "{most} descriptors with a baseline of {baseline} and a cap of {cap}"
    );

    // An idle keep-alive connection is closed after the same timeout.
    let mut s = TcpStream::connect(&addr).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: orbit\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&answer).contains("\"status\":\"ok\"") {
        let n = s.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed before the answer");
        answer.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"));
    let idle = until_closed(s, Duration::from_secs(10)).await.unwrap();
    assert!(
        idle >= Duration::from_millis(800) && idle < Duration::from_millis(3000),
        "an idle keep-alive connection closed after {idle:?}"
    );
}

/// Sends `head` and `partial_body` on a raw connection and reads the whole answer (the server
/// closes or answers with Content-Length; read until the body is complete).
async fn raw_answer(addr: &str, request: &[u8]) -> (Duration, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(request).await.unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(20), s.read(&mut buf))
            .await
            .expect("an answer within 20 s")
            .unwrap_or(0);
        answer.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&answer).to_string();
        if n == 0 || text.contains("\"request_id\"") {
            return (started.elapsed(), text);
        }
    }
}

#[tokio::test]
async fn a_slow_body_gets_408_and_a_slow_request_503_but_a_websocket_session_lives_on() {
    let f = orbit::testing::Fixture::new().await;
    let token = f.token.clone();
    let q = f.queue_id.clone();
    let partial = format!(
        "POST /v1/tasks HTTP/1.1\r\nHost: orbit\r\nAuthorization: Bearer {token}\r\n\
         Idempotency-Key: slow\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{{\"queue_id\":"
    );

    let server = Server::start_with_args(
        env!("CARGO_BIN_EXE_orbit"),
        &f.test_db.dsn,
        &["--body-timeout", "1", "--request-timeout", "5"],
    )
    .await;
    let addr = server.url.trim_start_matches("http://").to_string();
    let (took, answer) = raw_answer(&addr, partial.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"code\":\"INVALID_ARGUMENT\""), "{answer}");
    assert!(took < Duration::from_secs(4), "{took:?}");
    drop(server);

    let server = Server::start_with_args(
        env!("CARGO_BIN_EXE_orbit"),
        &f.test_db.dsn,
        &["--body-timeout", "30", "--request-timeout", "1"],
    )
    .await;
    let addr = server.url.trim_start_matches("http://").to_string();
    let (took, answer) = raw_answer(&addr, partial.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("\"code\":\"UNAVAILABLE\""), "{answer}");
    assert!(took < Duration::from_secs(4), "{took:?}");

    // A worker session outlives the 1 s request timeout: after 2.5 s it still gets its task.
    let mut worker = support::ws::RawWorker::connect(&server.url, &token).await;
    let welcome = worker.hello("w-timeout", &[&q], false, 1, &[]).await;
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let r = reqwest::Client::new()
        .post(format!("{}/v1/tasks", server.url))
        .bearer_auth(&token)
        .header("Idempotency-Key", "after-the-timeout")
        .json(&json!({"queue_id": q, "handler": "h", "handler_version": "v1", "payload_version": "v1", "payload": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let assign = worker.recv_type("task.assign").await;
    assert_eq!(assign["task"]["handler"], "h", "{assign}");
    worker.close().await;
}
