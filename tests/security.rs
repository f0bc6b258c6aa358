//! Security properties beyond the 401/403/404 matrix of `tests/http_auth.rs`: tokens are stored
//! only as hashes, SQL metacharacters in every client-set string are plain data, and every
//! WebSocket frame is authorised against the session that holds the attempt.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use reqwest::Method;
use serde_json::{json, Value};
use sqlx::{MySqlPool, Row};
use support::Api;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Strings that would change a statement if any layer spliced them into SQL (or into a LIKE
/// pattern, a JSON path, a regular expression), plus non-ASCII text. No NUL characters.
const NASTY: &[&str] = &[
    "'; DROP TABLE orbit_task; --",
    "\" OR \"1\"=\"1",
    "\\' OR 1=1 -- ",
    "%_",
    "%",
    "_",
    "'",
    "''",
    "\"",
    "\\",
    "back\\slash \\\\ \\n \\0 \\x27 \\Z",
    "`orbit_task`",
    "*/ SELECT 1; /*",
    "?, ?) -- $1 :name @v @@version",
    "$[0].a ** \\\\\"",
    "' UNION SELECT token_hash FROM orbit_credential -- ",
    "ünïcødé — 日本語 🚀 e\u{301} \u{2028}x",
    "(a+)+$ [^]* .* ^",
];

/// The documented concurrency_key rules (SPEC §3), for deciding which values the API must
/// reject: 1-191 characters, no control characters, no leading or trailing whitespace.
fn key_ok(v: &str) -> bool {
    let n = v.chars().count();
    (1..=191).contains(&n)
        && !v.chars().any(char::is_control)
        && !v.starts_with(char::is_whitespace)
        && !v.ends_with(char::is_whitespace)
}

/// Percent-encodes every byte except ASCII alphanumerics (for paths and query values).
fn enc(v: &str) -> String {
    v.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Row counts of every table of the test database, and the set of its tables.
async fn table_counts(pool: &MySqlPool) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for t in tables(pool).await {
        let n: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM `{t}`"))
            .fetch_one(pool)
            .await
            .unwrap();
        out.insert(t, n);
    }
    out
}

async fn tables(pool: &MySqlPool) -> Vec<String> {
    let rows = sqlx::query(
        "SELECT CAST(table_name AS CHAR CHARACTER SET utf8mb4) FROM information_schema.tables \
         WHERE table_schema = DATABASE() ORDER BY table_name",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    rows.iter().map(|r| r.get::<String, _>(0)).collect()
}

/// Every cell of every table, as text (lower-cased) and as the hex of its stored bytes
/// (lower-cased), one line per cell; plus the number of cells read.
async fn dump(pool: &MySqlPool) -> (String, String, usize) {
    let (mut text, mut hexes, mut cells) = (String::new(), String::new(), 0);
    for t in tables(pool).await {
        let cols: Vec<String> = sqlx::query(
            "SELECT CAST(column_name AS CHAR CHARACTER SET utf8mb4) FROM information_schema.columns \
             WHERE table_schema = DATABASE() AND table_name = ? ORDER BY ordinal_position",
        )
        .bind(&t)
        .fetch_all(pool)
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<String, _>(0))
        .collect();
        assert!(!cols.is_empty(), "table {t} has no columns?");
        for c in cols {
            let rows = sqlx::query(&format!(
                "SELECT CAST(`{c}` AS CHAR CHARACTER SET utf8mb4), HEX(`{c}`) FROM `{t}`"
            ))
            .fetch_all(pool)
            .await
            .unwrap();
            for r in rows {
                let as_text = r
                    .try_get::<Option<String>, _>(0)
                    .ok()
                    .flatten()
                    .or_else(|| {
                        r.try_get::<Option<Vec<u8>>, _>(0)
                            .ok()
                            .flatten()
                            .map(|b| String::from_utf8_lossy(&b).into_owned())
                    })
                    .unwrap_or_default();
                let as_hex: Option<String> = r.get(1);
                text.push_str(&as_text.to_lowercase());
                text.push('\n');
                hexes.push_str(&as_hex.unwrap_or_default().to_lowercase());
                hexes.push('\n');
                cells += 1;
            }
        }
    }
    (text, hexes, cells)
}

/// A raw WebSocket client that also reports the server closing the connection.
struct Ws {
    socket: support::ws::Socket,
}

impl Ws {
    async fn connect(base_url: &str, token: &str) -> Ws {
        Ws {
            socket: support::ws::connect_socket(base_url, token).await,
        }
    }

    async fn send(&mut self, frame: Value) {
        self.socket
            .send(Message::Text(frame.to_string().into()))
            .await
            .unwrap();
    }

    /// The next JSON text frame, or `None` once the server has closed the connection.
    async fn next(&mut self) -> Option<Value> {
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(20), self.socket.next())
                .await
                .expect("a frame or a close within 20 s");
            match msg {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return None,
                Some(Ok(Message::Text(t))) => return Some(serde_json::from_str(&t).unwrap()),
                Some(Ok(_)) => continue,
            }
        }
    }

    async fn recv(&mut self) -> Value {
        self.next().await.expect("the connection is still open")
    }

    /// The next frame of `kind`; any other frame in between is a failure.
    async fn expect(&mut self, kind: &str) -> Value {
        let f = self.recv().await;
        assert_eq!(f["type"], kind, "expected {kind}, got {f}");
        f
    }

    async fn hello(&mut self, worker_id: &str, queues: &[&str], resume: &[u64]) -> Value {
        self.send(
            json!({"type": "hello", "worker_id": worker_id, "capacity": 1, "queue_ids": queues,
                         "handlers": [], "concurrency_keys": true, "resume": resume}),
        )
        .await;
        self.recv().await
    }
}

/// A credential of the fixture's application and environment in ANOTHER namespace (with a queue
/// of its own): (token, queue id).
async fn other_namespace(api: &Api) -> (String, String) {
    let (bootstrap, token) = orbit::db::queues::Bootstrap::with_new_token(
        "app",
        "test",
        "other-namespace",
        "theirs",
        &orbit::testing::ALL_SCOPES,
        "other",
    );
    let b = api.fixture.db.admin_bootstrap(&bootstrap).await.unwrap();
    (token, b.queue_id)
}

/// A credential of the fixture's namespace restricted to `queues`, with `scopes`.
async fn queue_credential(api: &Api, scopes: &[&str], queues: &[&str]) -> String {
    let token = orbit::auth::generate_token();
    api.fixture
        .db
        .credential_create(&orbit::db::credentials::NewCredential {
            application: "app".into(),
            environment: "test".into(),
            namespace: "default".into(),
            queue_ids: queues.iter().map(|q| q.to_string()).collect(),
            token_hash: orbit::auth::token_hash(&token).to_vec(),
            token_hint: orbit::auth::token_hint(&token),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            label: "restricted".into(),
        })
        .await
        .unwrap();
    token
}

async fn attempt(api: &Api, id: u64) -> Value {
    let r = api
        .get("/v1/attempts/{id}", &format!("/v1/attempts/{id}"))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["data"].clone()
}

async fn attempts_of(api: &Api, task_id: u64) -> Vec<Value> {
    let r = api
        .get(
            "/v1/tasks/{id}/attempts",
            &format!("/v1/tasks/{task_id}/attempts"),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["data"].as_array().unwrap().clone()
}

async fn task(api: &Api, id: u64) -> Value {
    let r = api.get("/v1/tasks/{id}", &format!("/v1/tasks/{id}")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["data"].clone()
}

async fn orbit_cli(args: &[&str], dsn: &str) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_orbit"))
        .args(args)
        .env("ORBIT_MYSQL_DSN", dsn)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "orbit {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// ---------------------------------------------------------------------------------------------
// 1. Tokens are stored hashed
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn no_table_holds_a_token_or_its_secret_only_its_hash() {
    let api = Api::start().await;
    let f = &api.fixture;
    let dsn = f.test_db.dsn.clone();
    let dir = tempfile::tempdir().unwrap();
    let boot = dir.path().join("boot.json");
    let made = dir.path().join("made.json");
    // The two operator paths: `admin bootstrap` and `admin credential create` (the fixture's own
    // credentials come from the same procedure through the library).
    orbit_cli(
        &[
            "admin",
            "bootstrap",
            "--application",
            "app",
            "--environment",
            "test",
            "--namespace",
            "default",
            "--queue",
            "cli-queue",
            "--worker-access",
            "--output",
            boot.to_str().unwrap(),
        ],
        &dsn,
    )
    .await;
    orbit_cli(
        &[
            "admin",
            "credential",
            "create",
            "--application",
            "app",
            "--environment",
            "test",
            "--namespace",
            "default",
            "--scope",
            "tasks:read",
            "--scope",
            "tasks:submit",
            "--queue",
            &f.queue_id,
            "--label",
            "reader",
            "--output",
            made.to_str().unwrap(),
        ],
        &dsn,
    )
    .await;
    let read_token = |p: &std::path::Path| -> String {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        v["token"].as_str().unwrap().to_string()
    };
    let tokens = vec![
        f.token.clone(),
        f.credential(&["tasks:read", "workers:connect", "workers:consume"])
            .await,
        read_token(&boot),
        read_token(&made),
    ];

    // Use every token, so anything that records a request, a session or a grant has run.
    for (i, t) in tokens.iter().enumerate() {
        let r = api
            .call(Method::GET, "/v1/tasks", "/v1/tasks", Some(t), &[], None)
            .await;
        assert_eq!(r.status, 200, "token {i} authenticates: {}", r.body);
    }
    for i in [0, 2] {
        let r = api
            .call(
                Method::POST,
                "/v1/tasks",
                "/v1/tasks",
                Some(&tokens[i]),
                &[("Idempotency-Key", &format!("use-{i}"))],
                Some(&json!({"queue_id": f.queue_id, "handler": "h", "handler_version": "v1",
                             "payload_version": "v1", "payload": {}, "concurrency_key": format!("k{i}")})),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    for (i, t) in [&tokens[0], &tokens[1]].into_iter().enumerate() {
        let mut w = Ws::connect(&api.server.url, t).await;
        let welcome = w.hello(&format!("dump-{i}"), &[&f.queue_id], &[]).await;
        assert_eq!(welcome["type"], "welcome", "{welcome}");
        w.expect("task.assign").await;
    }

    let (text, hexes, cells) = dump(f.db.pool()).await;
    assert!(cells > 100, "the dump read {cells} cells");
    for (i, token) in tokens.iter().enumerate() {
        let token = token.to_lowercase();
        let secret = token.strip_prefix("orbit_").expect("orbit_ prefix");
        assert_eq!(secret.len(), 64);
        // Positive control: the dump does reach the credential rows (their hash is there).
        let hash = hex::encode(orbit::auth::token_hash(&tokens[i]));
        assert!(hexes.contains(&hash), "token {i}: its hash is stored");
        // The token, its secret, the secret as raw bytes (whose hex would be the secret), and the
        // token's own bytes as hex: none anywhere, in any case.
        let token_hex = hex::encode(token.as_bytes());
        for (what, needle) in [("token", &token[..]), ("secret", secret)] {
            assert!(
                !text.contains(needle),
                "token {i}: the {what} is stored as text"
            );
            assert!(
                !hexes.contains(needle),
                "token {i}: the {what} is stored as bytes"
            );
        }
        assert!(!hexes.contains(&token_hex), "token {i}: stored (hex view)");
        // Only the documented 8-character hint may be kept: no 12-character run of the secret.
        for w in 0..=secret.len() - 12 {
            let run = &secret[w..w + 12];
            assert!(
                !text.contains(run) && !hexes.contains(run),
                "token {i}: secret characters {w}..{} are stored",
                w + 12
            );
        }
    }
    // And the tokens still work after all that (the test is not passing because they broke).
    for t in &tokens {
        let r = api
            .call(Method::GET, "/v1/queues", "/v1/queues", Some(t), &[], None)
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
}

// ---------------------------------------------------------------------------------------------
// 2. SQL metacharacters are data
// ---------------------------------------------------------------------------------------------

fn payload(v: &str) -> Value {
    let mut obj = serde_json::Map::new();
    obj.insert("s".into(), json!(v));
    obj.insert(v.into(), json!([v, {"nested": v}, null, 1]));
    Value::Object(obj)
}

#[tokio::test]
async fn sql_metacharacters_in_http_fields_are_stored_and_returned_verbatim() {
    let api = Api::start().await;
    let f = &api.fixture;
    let pool = f.db.pool().clone();
    let before = table_counts(&pool).await;
    let (mut tasks, mut rejected_keys) = (0i64, 0);
    for (i, v) in NASTY.iter().copied().enumerate() {
        // Queues: the name.
        let q = api
            .post("/v1/queues", "/v1/queues", &json!({"name": v}))
            .await;
        assert_eq!(q.status, 201, "queue {v:?}: {}", q.body);
        let qid = q.body["data"]["id"].as_str().unwrap().to_string();
        let got = api
            .get("/v1/queues/{id}", &format!("/v1/queues/{qid}"))
            .await;
        assert_eq!(got.body["data"]["name"], v);

        // Tasks: every string field, the payload, and the Idempotency-Key.
        let mut body = json!({"queue_id": f.queue_id, "handler": v, "handler_version": v,
                              "payload_version": v, "payload": payload(v), "business_key": v});
        if key_ok(v) {
            body["concurrency_key"] = json!(v);
        } else {
            let mut bad = body.clone();
            bad["concurrency_key"] = json!(v);
            let r = api.submit(&format!("bad-key-{i}"), &bad).await;
            assert_eq!(r.status, 400, "key {v:?}: {}", r.body);
            assert_eq!(r.body["error"]["code"], "INVALID_ARGUMENT");
            assert_eq!(r.body["error"]["details"]["field"], "concurrency_key");
            rejected_keys += 1;
        }
        // An Idempotency-Key is visible ASCII (0x21-0x7E): no spaces.
        let idem = if !v.is_empty() && v.bytes().all(|b| (0x21..0x7f).contains(&b)) {
            v.to_string()
        } else {
            format!("idem-{i}")
        };
        let r = api.submit(&idem, &body).await;
        assert_eq!(r.status, 201, "submit {v:?}: {}", r.body);
        tasks += 1;
        let id = r.body["data"]["id"].as_u64().unwrap();
        let t = task(&api, id).await;
        for field in [
            "handler",
            "handler_version",
            "payload_version",
            "business_key",
        ] {
            assert_eq!(t[field], v, "{field}");
        }
        assert_eq!(t["payload"], payload(v));
        assert_eq!(
            t["concurrency_key"],
            if key_ok(v) { json!(v) } else { Value::Null }
        );
        // The same key and body replay the original; the key is stored as its exact bytes.
        let again = api.submit(&idem, &body).await;
        assert_eq!((again.status, &again.body["data"]["id"]), (200, &json!(id)));
        let stored: Vec<u8> =
            sqlx::query_scalar("SELECT idempotency_key FROM orbit_task WHERE id = ?")
                .bind(id)
                .fetch_one(&pool)
                .await
                .unwrap();
        assert_eq!(stored, idem.as_bytes());
        // Filters match exactly (no LIKE, no padding): only this task.
        let by_bk = api
            .get("/v1/tasks", &format!("/v1/tasks?business_key={}", enc(v)))
            .await;
        assert_eq!(by_bk.status, 200, "{}", by_bk.body);
        assert_eq!(
            by_bk.body["data"].as_array().unwrap().len(),
            1,
            "business_key {v:?}"
        );
        assert_eq!(by_bk.body["data"][0]["id"], id);
        if key_ok(v) {
            let by_key = api
                .get(
                    "/v1/tasks",
                    &format!("/v1/tasks?concurrency_key={}", enc(v)),
                )
                .await;
            assert_eq!(
                by_key.body["data"].as_array().unwrap().len(),
                1,
                "key {v:?}"
            );
            assert_eq!(by_key.body["data"][0]["id"], id);
        }
        // As an id or a filter that must name an existing object: not found, not an error; longer
        // than a queue id (32), a 400 naming the field. (Ids are ASCII; non-ASCII ones are
        // `non_ascii_queue_ids_are_not_found`.)
        if v.is_ascii() {
            let (status, id_field, filter_field) = if v.len() > 32 {
                (400, json!("id"), json!("queue_id"))
            } else {
                (404, Value::Null, Value::Null)
            };
            let r = api
                .get("/v1/queues/{id}", &format!("/v1/queues/{}", enc(v)))
                .await;
            assert_eq!(r.status, status, "{}", r.body);
            assert_eq!(r.body["error"]["details"]["field"], id_field);
            let r = api
                .get("/v1/tasks", &format!("/v1/tasks?queue_id={}", enc(v)))
                .await;
            assert_eq!(r.status, status, "{}", r.body);
            assert_eq!(r.body["error"]["details"]["field"], filter_field);
            let r = api
                .get("/v1/tasks", &format!("/v1/tasks?state={}", enc(v)))
                .await;
            assert_eq!(r.status, 400, "{}", r.body);
            assert_eq!(r.body["error"]["details"]["field"], "state");
        }

        // Plans: the name and every field of the definition, in a plan and in a new version.
        let mut def = json!({"handler": v, "handler_version": v, "payload_version": v,
                             "payload": payload(v), "business_key": v});
        if key_ok(v) {
            def["concurrency_key"] = json!(v);
        } else {
            let mut bad = def.clone();
            bad["concurrency_key"] = json!(v);
            let r = api
                .post(
                    "/v1/plans",
                    "/v1/plans",
                    &json!({"name": format!("bad-{i}"), "queue_id": f.queue_id,
                        "schedule": {"interval_seconds": 3600}, "definition": {"task": bad}}),
                )
                .await;
            assert_eq!(r.status, 400, "{}", r.body);
            assert_eq!(r.body["error"]["details"]["field"], "concurrency_key");
        }
        let p = api
            .post(
                "/v1/plans",
                "/v1/plans",
                &json!({"name": v, "queue_id": f.queue_id,
                    "schedule": {"interval_seconds": 3600}, "definition": {"task": def}}),
            )
            .await;
        assert_eq!(p.status, 201, "plan {v:?}: {}", p.body);
        let pid = p.body["data"]["id"].as_u64().unwrap();
        let mut def2 = def.clone();
        def2["payload"] = json!({"version": 2, "v": v});
        let p2 = api
            .post(
                "/v1/plans/{id}/versions",
                &format!("/v1/plans/{pid}/versions"),
                &json!({"schedule": {"interval_seconds": 7200}, "definition": {"task": def2}}),
            )
            .await;
        assert_eq!(p2.status, 201, "{}", p2.body);
        let got = api.get("/v1/plans/{id}", &format!("/v1/plans/{pid}")).await;
        let plan = &got.body["data"];
        assert_eq!(plan["name"], v);
        assert_eq!(plan["current_version"], 2);
        let dt = &plan["definition"]["task"];
        for field in [
            "handler",
            "handler_version",
            "payload_version",
            "business_key",
        ] {
            assert_eq!(dt[field], v, "plan {field}");
        }
        assert_eq!(dt["payload"], json!({"version": 2, "v": v}));
        if key_ok(v) {
            assert_eq!(dt["concurrency_key"], v);
        }
    }
    assert!(
        rejected_keys >= 2,
        "some values break the documented key rules"
    );

    // Nothing else happened: the same tables, and exactly the rows these requests made.
    let after = table_counts(&pool).await;
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "the set of tables changed"
    );
    let n = NASTY.len() as i64;
    let grew = |t: &str| after[t] - before[t];
    assert_eq!(grew("orbit_task"), tasks);
    assert_eq!(grew("orbit_idempotency"), tasks);
    assert_eq!(grew("orbit_queue"), n);
    assert_eq!(grew("orbit_plan"), n);
    assert_eq!(grew("orbit_plan_version"), 2 * n);
    assert_eq!(grew("orbit_credential"), 0);
}

#[tokio::test]
async fn sql_metacharacters_in_worker_frames_are_stored_and_returned_verbatim() {
    let api = Api::start().await;
    let f = &api.fixture;
    let pool = f.db.pool().clone();
    let before = table_counts(&pool).await;
    let ids: Vec<u64> = {
        let mut ids = Vec::new();
        for (i, v) in NASTY.iter().enumerate() {
            let r = api
                .submit(
                    &format!("ws-{i}"),
                    &json!({"queue_id": f.queue_id, "handler": v,
                         "handler_version": "v1", "payload_version": "v1", "payload": payload(v)}),
                )
                .await;
            assert_eq!(r.status, 201, "{}", r.body);
            ids.push(r.body["data"]["id"].as_u64().unwrap());
        }
        ids
    };
    // Newest first, so an inexact handler match would hand out an older, still waiting task.
    for (i, v) in NASTY.iter().copied().enumerate().rev() {
        // worker_id and handlers are the registration's strings: the session runs exactly the
        // handler named `v`.
        let mut w = Ws::connect(&api.server.url, &f.token).await;
        w.send(
            json!({"type": "hello", "worker_id": v, "capacity": 1, "queue_ids": [f.queue_id],
                      "handlers": [v], "concurrency_keys": true, "resume": []}),
        )
        .await;
        let welcome = w.recv().await;
        assert_eq!(welcome["type"], "welcome", "{v:?}: {welcome}");
        let assign = w.expect("task.assign").await;
        assert_eq!(assign["task"]["id"], ids[i], "handler {v:?}");
        assert_eq!(assign["task"]["handler"], v);
        assert_eq!(assign["task"]["payload"], payload(v));
        let aid = assign["attempt_id"].as_u64().unwrap();
        w.send(json!({"type": "task.start", "attempt_id": aid}))
            .await;
        w.expect("task.start.ok").await;
        let data = payload(v);
        let (outcome, field, state) = match i % 3 {
            0 => ("succeeded", "output", "SUCCEEDED"),
            1 => ("failed", "error", "FAILED"),
            _ => ("unknown", "error", "NEEDS_REVIEW"),
        };
        let mut result = json!({"type": "task.result", "attempt_id": aid, "outcome": outcome, "retryable": false});
        result[field] = data.clone();
        w.send(result).await;
        assert_eq!(w.expect("task.result.ack").await["task_state"], state);
        let _ = w.socket.close(None).await;

        let a = attempt(&api, aid).await;
        assert_eq!(a["worker_id"], v);
        assert_eq!(a[field], data, "attempt {field}");
        let t = task(&api, ids[i]).await;
        assert_eq!(t[field], data, "task {field}");
        if state == "NEEDS_REVIEW" {
            // The resolve note is client JSON too.
            let note = json!({"note": v, v: [v]});
            let r = api
                .post(
                    "/v1/tasks/{id}/resolve",
                    &format!("/v1/tasks/{}/resolve", ids[i]),
                    &json!({"resolution": "succeeded", "note": note}),
                )
                .await;
            assert_eq!(r.status, 200, "{}", r.body);
            assert_eq!(task(&api, ids[i]).await["output"], note);
        }
    }
    // A queue id made of metacharacters in hello is simply not found, and the session ends.
    for v in ["'; DROP TABLE orbit_task; --", "%_", "\\"] {
        let mut w = Ws::connect(&api.server.url, &f.token).await;
        let refused = w.hello("w-bad-queue", &[v], &[]).await;
        assert_eq!(
            (refused["type"].as_str(), refused["code"].as_str()),
            (Some("error"), Some("NOT_FOUND")),
            "{refused}"
        );
        assert_eq!(w.next().await, None, "the server closes a refused session");
    }
    let after = table_counts(&pool).await;
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    let n = NASTY.len() as i64;
    assert_eq!(after["orbit_task"] - before["orbit_task"], n);
    assert_eq!(after["orbit_attempt"] - before["orbit_attempt"], n);
    assert_eq!(after["orbit_session"] - before["orbit_session"], n);
    assert_eq!(after["orbit_worker"] - before["orbit_worker"], n);
}

/// A queue id is 32 hex digits; any other string names no queue, whatever its characters.
#[tokio::test]
async fn non_ascii_queue_ids_are_not_found() {
    let api = Api::start().await;
    let f = &api.fixture;
    let token = f.token.clone();
    let mut failures = Vec::new();
    for v in ["ünïcødé", "日本語", "🚀", "é'; DROP TABLE orbit_task; --"] {
        let def = json!({"handler": "h", "handler_version": "v1", "payload_version": "v1", "payload": {}});
        let mut submit = def.clone();
        submit["queue_id"] = json!(v);
        let requests: Vec<(&str, Method, String, Option<Value>)> = vec![
            (
                "GET /v1/queues/{id}",
                Method::GET,
                format!("/v1/queues/{}", enc(v)),
                None,
            ),
            (
                "POST /v1/queues/{id}/pause",
                Method::POST,
                format!("/v1/queues/{}/pause", enc(v)),
                Some(json!({})),
            ),
            (
                "POST /v1/queues/{id}/resume",
                Method::POST,
                format!("/v1/queues/{}/resume", enc(v)),
                Some(json!({})),
            ),
            (
                "GET /v1/queues?cursor=",
                Method::GET,
                format!("/v1/queues?cursor={}", enc(v)),
                None,
            ),
            (
                "GET /v1/tasks?queue_id=",
                Method::GET,
                format!("/v1/tasks?queue_id={}", enc(v)),
                None,
            ),
            (
                "POST /v1/tasks",
                Method::POST,
                "/v1/tasks".into(),
                Some(submit),
            ),
            (
                "POST /v1/plans",
                Method::POST,
                "/v1/plans".into(),
                Some(json!({"name": "p", "queue_id": v,
                "schedule": {"interval_seconds": 60}, "definition": {"task": def}})),
            ),
        ];
        for (route, method, path, body) in requests {
            let mut req = api
                .http
                .request(method, format!("{}{path}", api.server.url))
                .bearer_auth(&token)
                .header("Idempotency-Key", format!("non-ascii-{}", enc(v)));
            if let Some(b) = &body {
                req = req.json(b);
            }
            let status = req.send().await.unwrap().status().as_u16();
            if status >= 500 {
                failures.push(format!("{route} with {v:?}: {status}"));
            }
        }
        let mut w = Ws::connect(&api.server.url, &token).await;
        let r = w.hello("non-ascii", &[v], &[]).await;
        if r["code"] != "NOT_FOUND" {
            failures.push(format!("hello with queue_ids [{v:?}]: {r}"));
        }
    }
    assert!(
        failures.is_empty(),
        "server errors for bad input:\n{}",
        failures.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// 3. Every WebSocket message is authorised
// ---------------------------------------------------------------------------------------------

/// What an attempt looks like to the attempts API, minus nothing: any change shows.
async fn snapshot(api: &Api, id: u64) -> Value {
    attempt(api, id).await
}

/// `w` tries to start, renew and finish attempt `aid`, which it does not hold; every try is
/// refused and the attempt (seen through the API) is exactly as before.
async fn refused_everything(api: &Api, w: &mut Ws, aid: u64, who: &str) {
    let before = snapshot(api, aid).await;
    let denied = |code: &Value| code == "PERMISSION_DENIED" || code == "NOT_FOUND";
    w.send(json!({"type": "task.start", "attempt_id": aid}))
        .await;
    let r = w.expect("task.start.rejected").await;
    assert!(denied(&r["code"]), "{who}: start {r}");
    w.send(json!({"type": "lease.renew", "attempt_ids": [aid]}))
        .await;
    let r = w.expect("lease.renewed").await;
    assert_eq!(r["attempts"][0]["attempt_id"], aid);
    assert!(denied(&r["attempts"][0]["rejected"]), "{who}: renew {r}");
    assert!(
        r["attempts"][0].get("lease_expires_at").is_none(),
        "{who}: {r}"
    );
    for outcome in ["succeeded", "failed", "unknown"] {
        w.send(
            json!({"type": "task.result", "attempt_id": aid, "outcome": outcome,
                      "retryable": true, "output": {"forged": who}, "error": {"forged": who}}),
        )
        .await;
        let r = w.expect("error").await;
        assert!(denied(&r["code"]), "{who}: result {outcome}: {r}");
    }
    assert_eq!(
        snapshot(api, aid).await,
        before,
        "{who} changed the attempt"
    );
}

#[tokio::test]
async fn a_session_cannot_start_renew_or_finish_another_sessions_attempt() {
    let api = Api::start().await;
    let f = &api.fixture;
    let other_queue = f.queue("other").await;
    let t = f.submit(&f.queue_id, "k").await;
    let mut holder = Ws::connect(&api.server.url, &f.token).await;
    let welcome = holder.hello("holder", &[&f.queue_id], &[]).await;
    let holder_session = welcome["session_id"].clone();
    let assign = holder.expect("task.assign").await;
    let aid = assign["attempt_id"].as_u64().unwrap();

    // The same credential, another credential of the namespace, and another namespace's.
    let peer = f.credential(&orbit::testing::ALL_SCOPES).await;
    let (stranger, stranger_queue) = other_namespace(&api).await;
    let mut same = Ws::connect(&api.server.url, &f.token).await;
    assert_eq!(
        same.hello("same-cred", &[&other_queue], &[]).await["type"],
        "welcome"
    );
    let mut other = Ws::connect(&api.server.url, &peer).await;
    assert_eq!(
        other.hello("other-cred", &[&f.queue_id], &[]).await["type"],
        "welcome"
    );
    let mut far = Ws::connect(&api.server.url, &stranger).await;
    assert_eq!(
        far.hello("other-ns", &[&stranger_queue], &[]).await["type"],
        "welcome"
    );

    // While LEASED.
    for (w, who) in [
        (&mut same, "same credential"),
        (&mut other, "other credential"),
        (&mut far, "other namespace"),
    ] {
        refused_everything(&api, w, aid, who).await;
    }
    let a = attempt(&api, aid).await;
    assert_eq!(
        (a["state"].as_str(), &a["session_id"]),
        (Some("LEASED"), &holder_session)
    );

    // While RUNNING.
    holder
        .send(json!({"type": "task.start", "attempt_id": aid}))
        .await;
    holder.expect("task.start.ok").await;
    for (w, who) in [
        (&mut same, "same credential"),
        (&mut other, "other credential"),
        (&mut far, "other namespace"),
    ] {
        refused_everything(&api, w, aid, who).await;
    }
    assert_eq!(task(&api, t.id).await["state"], "RUNNING");

    // The holder still owns it: renew and finish work for it.
    holder
        .send(json!({"type": "lease.renew", "attempt_ids": [aid]}))
        .await;
    assert!(holder.expect("lease.renewed").await["attempts"][0]["lease_expires_at"].is_string());
    holder.send(json!({"type": "task.result", "attempt_id": aid, "outcome": "succeeded", "retryable": false, "output": {"by": "holder"}})).await;
    assert_eq!(
        holder.expect("task.result.ack").await["task_state"],
        "SUCCEEDED"
    );

    // After it ended: a forged duplicate is still refused, and the record is the holder's.
    for (w, who) in [
        (&mut same, "same credential"),
        (&mut other, "other credential"),
        (&mut far, "other namespace"),
    ] {
        refused_everything(&api, w, aid, who).await;
    }
    let a = attempt(&api, aid).await;
    assert_eq!(a["state"], "SUCCEEDED");
    assert_eq!(a["output"], json!({"by": "holder"}));
    assert!(a.get("late_result").is_none(), "{a}");
    let all = attempts_of(&api, t.id).await;
    assert_eq!(all.len(), 1, "no other attempt was created: {all:?}");
}

#[tokio::test]
async fn hello_is_refused_without_workers_consume_on_every_named_queue() {
    let api = Api::start().await;
    let f = &api.fixture;
    let q2 = f.queue("q2").await;
    let t = f.submit(&f.queue_id, "").await;
    let no_consume = f.credential(&["workers:connect"]).await;
    let only_q2 = queue_credential(&api, &["workers:connect", "workers:consume"], &[&q2]).await;
    let (stranger, _) = other_namespace(&api).await;
    for (token, queues, code, who) in [
        (
            &no_consume,
            vec![f.queue_id.as_str()],
            "PERMISSION_DENIED",
            "no workers:consume",
        ),
        (
            &only_q2,
            vec![f.queue_id.as_str()],
            "PERMISSION_DENIED",
            "queue outside the list",
        ),
        (
            &only_q2,
            vec![q2.as_str(), f.queue_id.as_str()],
            "PERMISSION_DENIED",
            "one queue of two outside the list",
        ),
        (
            &stranger,
            vec![f.queue_id.as_str()],
            "NOT_FOUND",
            "queue of another namespace",
        ),
    ] {
        let mut w = Ws::connect(&api.server.url, token).await;
        let r = w.hello(&format!("refused-{who}"), &queues, &[]).await;
        assert_eq!(
            (r["type"].as_str(), r["code"].as_str()),
            (Some("error"), Some(code)),
            "{who}: {r}"
        );
        // The server ends the session: no task.assign ever follows.
        assert_eq!(w.next().await, None, "{who}: the connection closes");
    }
    // A credential restricted to q2 works on q2 and is never handed q1's task.
    let mut w = Ws::connect(&api.server.url, &only_q2).await;
    assert_eq!(w.hello("q2-only", &[&q2], &[]).await["type"], "welcome");
    let on_q2 = api
        .submit(
            "on-q2",
            &json!({"queue_id": q2, "handler": "h", "handler_version": "v1",
                 "payload_version": "v1", "payload": {}}),
        )
        .await;
    let a = w.expect("task.assign").await;
    assert_eq!(a["task"]["id"], on_q2.body["data"]["id"]);
    assert_eq!(task(&api, t.id).await["state"], "WAITING");
    assert!(attempts_of(&api, t.id).await.is_empty());
    // Positive control: q1's task was claimable all along, by a credential that may consume it.
    let mut ok = Ws::connect(&api.server.url, &f.token).await;
    assert_eq!(
        ok.hello("allowed", &[&f.queue_id], &[]).await["type"],
        "welcome"
    );
    assert_eq!(ok.expect("task.assign").await["task"]["id"], t.id);
}

#[tokio::test]
async fn a_revoked_token_cannot_open_a_socket() {
    let api = Api::start().await;
    let f = &api.fixture;
    let revoked = f.credential(&orbit::testing::ALL_SCOPES).await;
    let id: u64 = sqlx::query_scalar("SELECT MAX(id) FROM orbit_credential")
        .fetch_one(f.db.pool())
        .await
        .unwrap();
    f.db.credential_revoke(id).await.unwrap();
    {
        let (token, status) = (&revoked, 401);
        let url = format!(
            "{}/v1/workers/connect",
            api.server.url.replacen("http://", "ws://", 1)
        );
        let mut req = url.into_client_request().unwrap();
        req.headers_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
        match tokio_tungstenite::connect_async(req).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
                assert_eq!(resp.status().as_u16(), status)
            }
            other => panic!(
                "expected HTTP {status}, got {:?}",
                other.map(|_| "a socket")
            ),
        }
    }
}

/// `resume` hands an identity's live attempts to its new session. The identity (worker_id) is
/// shared by every credential of the application, so resume must not let a credential that may
/// not consume the attempt's queue take the attempt over.
#[tokio::test]
async fn resume_cannot_take_over_an_attempt_the_credential_may_not_consume() {
    let api = Api::start().await;
    let f = &api.fixture;
    let q2 = f.queue("q2").await;
    f.submit(&f.queue_id, "k").await;
    let mut holder = Ws::connect(&api.server.url, &f.token).await;
    let welcome = holder.hello("shared-identity", &[&f.queue_id], &[]).await;
    let holder_session = welcome["session_id"].clone();
    let aid = holder.expect("task.assign").await["attempt_id"]
        .as_u64()
        .unwrap();
    let before = attempt(&api, aid).await;
    let only_q2 = queue_credential(&api, &["workers:connect", "workers:consume"], &[&q2]).await;
    let (stranger, stranger_queue) = other_namespace(&api).await;
    for (token, queue, who) in [
        (&only_q2, q2.as_str(), "credential limited to another queue"),
        (&stranger, stranger_queue.as_str(), "another namespace"),
    ] {
        let mut w = Ws::connect(&api.server.url, token).await;
        let r = w.hello("shared-identity", &[queue], &[aid]).await;
        assert_eq!(r["type"], "welcome", "{who}: {r}");
        assert_eq!(r["resumed"], json!([]), "{who} took the attempt over: {r}");
        w.send(json!({"type": "task.start", "attempt_id": aid}))
            .await;
        let s = w.recv().await;
        assert_eq!(s["type"], "task.start.rejected", "{who}: {s}");
        assert_eq!(
            attempt(&api, aid).await["session_id"],
            holder_session,
            "{who}"
        );
    }
    assert_eq!(attempt(&api, aid).await, before);
    // Positive control: the rightful identity and credential can resume it.
    drop(holder);
    let mut back = Ws::connect(&api.server.url, &f.token).await;
    let r = back.hello("shared-identity", &[&f.queue_id], &[aid]).await;
    assert_eq!(r["resumed"], json!([aid]), "{r}");
}
