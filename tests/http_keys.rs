//! The key inspector over HTTP (`GET /v1/keys`) against a spawned `orbit serve`: holders and
//! tokens, waiters per queue and the next candidate, the busiest-keys list and its cursor,
//! tenant isolation, and bad input. Every reply is validated against `/v1/openapi.json`.

mod support;

use serde_json::{json, Value};
use support::Api;

/// Submits a task of `key` to `queue` with `priority` and returns its id.
async fn submit(api: &Api, queue: &str, key: &str, priority: i64) -> u64 {
    let mut t = api.fixture.task(queue, key);
    t.priority = Some(priority);
    api.fixture.submit_task(&t).await.id
}

async fn key(api: &Api, key: &str) -> support::Reply {
    let ns = api.fixture.namespace_id;
    api.get(
        "/v1/keys",
        &format!("/v1/keys?namespace={ns}&concurrency_key={}", urlencode(key)),
    )
    .await
}

fn urlencode(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

#[tokio::test]
async fn a_held_key_shows_its_holder_waiters_and_next_holder_with_a_larger_token() {
    let api = Api::start().await;
    let f = &api.fixture;
    let (q1, q2) = (f.queue_id.clone(), f.queue("q2").await);
    let first = submit(&api, &q1, "acct/1", 5).await;
    let session = f.session("w-keys", true, &[&q1, &q2]).await;
    let grants = f.db.task_claim(session, 10, 60_000).await.unwrap();
    assert_eq!(grants.len(), 1);
    let token = grants[0].concurrency_token;
    assert!(token > 0);
    // Waiters in two queues: q1 gets two at priority 5, q2 one at 5 and a later one at 1.
    let a = submit(&api, &q1, "acct/1", 5).await;
    let b = submit(&api, &q2, "acct/1", 5).await;
    let c = submit(&api, &q2, "acct/1", 1).await;
    let d = submit(&api, &q1, "acct/1", 5).await;

    let r = key(&api, "acct/1").await;
    assert_eq!(r.status, 200, "{}", r.body);
    let k = &r.body["data"];
    assert_eq!(k["concurrency_key"], "acct/1");
    assert_eq!(k["highest_token"], token);
    let h = &k["holder"];
    assert_eq!(h["task_id"], first);
    assert_eq!(h["attempt_id"], grants[0].attempt_id);
    assert_eq!(h["queue_id"], q1.as_str());
    assert_eq!(h["worker_id"], "w-keys");
    assert_eq!(h["session_id"], session);
    assert_eq!(h["state"], "LEASED");
    assert_eq!(h["concurrency_token"], token);
    assert!(h["lease_expires_at"].is_string());
    assert_eq!(k["waiting"], 4);
    assert_eq!(k["waiting_more"], false);
    assert_eq!(k["oldest_task_id"], a, "the waiter accepted first");
    assert_eq!(
        k["next_task_id"], c,
        "priority 1 beats the older priority-5 tasks"
    );
    assert_eq!(k["next_queue_id"], q2.as_str());
    assert_eq!(k["next_lane"], "blocked");
    let mut queues: Vec<Value> = k["queues"].as_array().unwrap().clone();
    queues.sort_by_key(|q| q["queue_id"].as_str().unwrap().to_string());
    let mut expected = vec![
        json!({"queue_id": q1, "waiting": 2, "waiting_more": false, "ready": 0, "oldest_task_id": a, "next_task_id": a}),
        json!({"queue_id": q2, "waiting": 2, "waiting_more": false, "ready": 0, "oldest_task_id": b, "next_task_id": c}),
    ];
    expected.sort_by_key(|q| q["queue_id"].as_str().unwrap().to_string());
    for (got, want) in queues.iter().zip(&expected) {
        for (field, value) in want.as_object().unwrap() {
            assert_eq!(&got[field], value, "{field} of {got}");
        }
        assert!(got["oldest_waiting_since"].is_string());
    }
    assert_eq!(queues.len(), 2);

    // Cancelling the holder's task frees the key: no holder, the heads of both queues ready, the
    // priority-1 head next.
    let cancel = api
        .post(
            "/v1/tasks/{id}/cancel",
            &format!("/v1/tasks/{first}/cancel"),
            &json!({}),
        )
        .await;
    assert_eq!(cancel.status, 200, "{}", cancel.body);
    let r = key(&api, "acct/1").await;
    let k = &r.body["data"];
    assert!(k["holder"].is_null(), "{k}");
    assert_eq!(k["highest_token"], token);
    assert_eq!(k["waiting"], 4);
    assert_eq!(k["next_task_id"], c);
    assert_eq!(k["next_lane"], "ready");
    let ready: u64 = k["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["ready"].as_u64().unwrap())
        .sum();
    assert_eq!(ready, 2, "one ready head per queue: {k}");

    // The next claim takes the key with a larger token, and the inspector shows it.
    let grants = f.db.task_claim(session, 1, 60_000).await.unwrap();
    assert_eq!(grants.len(), 1);
    let r = key(&api, "acct/1").await;
    let k = &r.body["data"];
    assert_eq!(k["holder"]["task_id"], grants[0].task.id);
    assert_eq!(
        k["holder"]["concurrency_token"],
        grants[0].concurrency_token
    );
    assert!(grants[0].concurrency_token > token);
    assert_eq!(k["highest_token"], grants[0].concurrency_token);
    assert_eq!(k["waiting"], 3);
    let _ = d;

    // The recent grants, newest first: the new holder's, then the cancelled first holder's.
    let recent = k["recent_grants"].as_array().unwrap();
    assert_eq!(recent.len(), 2, "{k}");
    assert_eq!(recent[0]["attempt_id"], grants[0].attempt_id);
    assert_eq!(recent[0]["task_id"], grants[0].task.id);
    assert_eq!(recent[0]["concurrency_token"], grants[0].concurrency_token);
    assert_eq!(recent[0]["state"], "LEASED");
    assert_eq!(recent[0]["worker_id"], "w-keys");
    assert!(recent[0]["released_at"].is_null());
    assert_eq!(recent[0]["outcome"], "");
    assert_eq!(recent[1]["task_id"], first);
    assert_eq!(recent[1]["concurrency_token"], token);
    assert_eq!(recent[1]["state"], "CANCELLED");
    assert_eq!(recent[1]["outcome"], "cancelled");
    assert!(recent[1]["released_at"].is_string());
}

#[tokio::test]
async fn recent_grants_are_the_last_ten_newest_first() {
    let api = Api::start().await;
    let f = &api.fixture;
    let session = f.session("w-recent", true, &[&f.queue_id]).await;
    let mut tokens = Vec::new();
    for _ in 0..12 {
        let id = submit(&api, &f.queue_id, "recent/1", 5).await;
        let grants = f.db.task_claim(session, 1, 60_000).await.unwrap();
        assert_eq!(grants[0].task.id, id);
        tokens.push(grants[0].concurrency_token);
        let r = api
            .post(
                "/v1/tasks/{id}/cancel",
                &format!("/v1/tasks/{id}/cancel"),
                &json!({}),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let r = key(&api, "recent/1").await;
    assert_eq!(r.status, 200, "{}", r.body);
    let shown: Vec<u64> = r.body["data"]["recent_grants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["concurrency_token"].as_u64().unwrap())
        .collect();
    let expected: Vec<u64> = tokens.iter().rev().take(10).copied().collect();
    assert_eq!(shown, expected);
}

#[tokio::test]
async fn the_busiest_keys_list_walks_every_held_key_once_in_both_orders() {
    let api = Api::start().await;
    let f = &api.fixture;
    let q = f.queue_id.clone();
    // Five held keys; key k{i} then gets i waiters. Waiters of k4 are accepted first, so the
    // oldest-wait order is k4, k3, k2, k1, then k0 (nobody waits).
    let keys: Vec<String> = (0..5).map(|i| format!("busy/{i}")).collect();
    for k in &keys {
        submit(&api, &q, k, 5).await;
    }
    let session = f.session("w-list", true, &[&q]).await;
    assert_eq!(f.db.task_claim(session, 10, 60_000).await.unwrap().len(), 5);
    for i in (1..5).rev() {
        for _ in 0..i {
            submit(&api, &q, &keys[i], 5).await;
        }
    }
    let ns = f.namespace_id;
    for order in ["waiting", "oldest_wait"] {
        let mut seen = Vec::new();
        let mut path = format!("/v1/keys?namespace={ns}&order={order}&limit=2");
        let mut pages = 0;
        loop {
            let page = api.get("/v1/keys", &path).await;
            assert_eq!(page.status, 200, "{}", page.body);
            pages += 1;
            for k in page.body["data"].as_array().unwrap() {
                assert!(k["holder"]["concurrency_token"].as_u64().unwrap() > 0);
                let waits = k["waiting"].as_u64().unwrap() > 0;
                assert_eq!(k["oldest_waiting_since"].is_string(), waits, "{k}");
                assert_eq!(k["oldest_task_id"].is_u64(), waits, "{k}");
                seen.push((
                    k["concurrency_key"].as_str().unwrap().to_string(),
                    k["waiting"].as_u64().unwrap(),
                ));
            }
            match page.body["next_cursor"].as_str() {
                Some(c) => {
                    path = format!("/v1/keys?namespace={ns}&order={order}&limit=2&cursor={c}")
                }
                None => break,
            }
        }
        let expected: Vec<(String, u64)> =
            (0..5).rev().map(|i| (keys[i].clone(), i as u64)).collect();
        assert_eq!(
            seen, expected,
            "{order}: every held key once, busiest first"
        );
        assert_eq!(pages, 3, "{order}: pages of 2, 2 and 1");
    }
    // A cursor of one order is refused by the other.
    let page = api
        .get(
            "/v1/keys",
            &format!("/v1/keys?namespace={ns}&order=waiting&limit=2"),
        )
        .await;
    let cursor = page.body["next_cursor"].as_str().unwrap();
    let r = api
        .get(
            "/v1/keys",
            &format!("/v1/keys?namespace={ns}&order=oldest_wait&cursor={cursor}"),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["error"]["details"]["field"], "cursor");
}

#[tokio::test]
async fn another_tenant_sees_the_same_404_and_an_empty_list() {
    let api = Api::start().await;
    let f = &api.fixture;
    submit(&api, &f.queue_id, "secret/1", 5).await;
    let session = f.session("w-iso", true, &[&f.queue_id]).await;
    assert_eq!(f.db.task_claim(session, 1, 60_000).await.unwrap().len(), 1);
    // A second tenant (another application) with every scope.
    let (bootstrap, other) = orbit::db::queues::Bootstrap::with_new_token(
        "other-app",
        "test",
        "default",
        "q1",
        &orbit::testing::ALL_SCOPES,
        "other",
    );
    let theirs = f.db.admin_bootstrap(&bootstrap).await.unwrap();
    let ns = f.namespace_id;
    let as_other = |path: String| {
        let api = &api;
        let other = other.clone();
        async move {
            api.call(
                reqwest::Method::GET,
                "/v1/keys",
                &path,
                Some(&other),
                &[],
                None,
            )
            .await
        }
    };
    let stolen = as_other(format!(
        "/v1/keys?namespace={ns}&concurrency_key=secret%2F1"
    ))
    .await;
    let missing = key(&api, "never/used").await;
    let own_ns_missing = as_other(format!(
        "/v1/keys?namespace={}&concurrency_key=secret%2F1",
        theirs.namespace_id
    ))
    .await;
    for r in [&stolen, &missing, &own_ns_missing] {
        assert_eq!(r.status, 404, "{}", r.body);
        assert_eq!(r.body["error"]["code"], "NOT_FOUND");
        assert_eq!(r.body["error"]["message"], stolen.body["error"]["message"]);
    }
    let list = as_other(format!("/v1/keys?namespace={ns}")).await;
    assert_eq!(list.status, 200);
    assert_eq!(list.body["data"], json!([]));
    assert!(list.body["next_cursor"].is_null());
    // The owner sees it.
    assert_eq!(key(&api, "secret/1").await.status, 200);
    let list = api
        .get("/v1/keys", &format!("/v1/keys?namespace={ns}"))
        .await;
    assert_eq!(list.body["data"].as_array().unwrap().len(), 1);
    // A credential limited to some queues of the namespace does not reach its keys (a key spans
    // every queue): the same answers as another tenant's.
    let queue_token = orbit::auth::generate_token();
    f.db.credential_create(&orbit::db::credentials::NewCredential {
        application: "app".into(),
        environment: "test".into(),
        namespace: "default".into(),
        queue_ids: vec![f.queue_id.clone()],
        token_hash: orbit::auth::token_hash(&queue_token).to_vec(),
        token_hint: orbit::auth::token_hint(&queue_token),
        scopes: vec!["tasks:read".into()],
        label: "one queue".into(),
    })
    .await
    .unwrap();
    let as_queue_scoped = |path: String| {
        let api = &api;
        let t = queue_token.clone();
        async move {
            api.call(reqwest::Method::GET, "/v1/keys", &path, Some(&t), &[], None)
                .await
        }
    };
    let r = as_queue_scoped(format!(
        "/v1/keys?namespace={ns}&concurrency_key=secret%2F1"
    ))
    .await;
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(r.body["error"]["message"], stolen.body["error"]["message"]);
    let r = as_queue_scoped(format!("/v1/keys?namespace={ns}")).await;
    assert_eq!(r.body["data"], json!([]));
    // A credential without tasks:read is refused.
    let submit_only = f.credential(&["tasks:submit"]).await;
    let r = api
        .call(
            reqwest::Method::GET,
            "/v1/keys",
            &format!("/v1/keys?namespace={ns}"),
            Some(&submit_only),
            &[],
            None,
        )
        .await;
    assert_eq!(r.status, 403);
}

#[tokio::test]
async fn bad_input_is_a_400_naming_the_field() {
    let api = Api::start().await;
    let ns = api.fixture.namespace_id;
    let long = "k".repeat(192);
    let cases = [
        ("/v1/keys".to_string(), "namespace"),
        ("/v1/keys?namespace=abc".to_string(), "namespace"),
        ("/v1/keys?namespace=0".to_string(), "namespace"),
        (
            "/v1/keys?namespace=9223372036854775808".to_string(),
            "namespace",
        ),
        (
            format!("/v1/keys?namespace={ns}&concurrency_key={long}"),
            "concurrency_key",
        ),
        (
            format!("/v1/keys?namespace={ns}&concurrency_key="),
            "concurrency_key",
        ),
        (
            format!("/v1/keys?namespace={ns}&concurrency_key=a%01b"),
            "concurrency_key",
        ),
        (format!("/v1/keys?namespace={ns}&order=bogus"), "order"),
        (format!("/v1/keys?namespace={ns}&limit=0"), "limit"),
        (format!("/v1/keys?namespace={ns}&limit=1001"), "limit"),
        (format!("/v1/keys?namespace={ns}&limit=3923794307"), "limit"),
        (format!("/v1/keys?namespace={ns}&cursor=zz"), "cursor"),
        (format!("/v1/keys?namespace={ns}&cursor=773a31"), "cursor"),
        (
            format!("/v1/keys?namespace={ns}&concurrency_key=a&order=waiting"),
            "order",
        ),
        (format!("/v1/keys?namespace={ns}&bogus=1"), "bogus"),
    ];
    for (path, field) in cases {
        let r = api.get("/v1/keys", &path).await;
        assert_eq!(r.status, 400, "{path}: {}", r.body);
        assert_eq!(r.body["error"]["code"], "INVALID_ARGUMENT", "{path}");
        assert_eq!(
            r.body["error"]["details"]["field"], field,
            "{path}: {}",
            r.body
        );
    }
}

/// `/metrics` lines of `name` whose labels are exactly `labels`, as numbers.
fn metric(text: &str, name: &str, labels: &str) -> Option<f64> {
    let prefix = format!("{name}{{{labels}}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.parse().unwrap())
}

async fn scrape(api: &Api, token: &str) -> String {
    let r = api
        .http
        .get(format!("{}/metrics", api.server.url))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    r.text().await.unwrap()
}

#[tokio::test]
async fn metrics_show_held_keys_blocked_tasks_the_oldest_wait_and_hand_offs_by_ids() {
    let api = Api::start().await;
    let f = &api.fixture;
    let q = f.queue_id.clone();
    let operator = f.credential(&["metrics:read"]).await;
    let labels = format!("namespace=\"{}\",queue=\"{q}\"", f.namespace_id);
    // Two tasks of one key through a real worker: the first is granted, the second blocks.
    let first = submit(&api, &q, "metric/key-name-not-a-label", 5).await;
    let second = submit(&api, &q, "metric/key-name-not-a-label", 5).await;
    let mut w = support::ws::RawWorker::connect(&api.server.url, &f.token).await;
    assert_eq!(w.hello("w-m", &[&q], true, 4, &[]).await["type"], "welcome");
    let assign = w.recv_type("task.assign").await;
    assert_eq!(assign["task"]["id"], first);
    sqlx::query(
        "UPDATE orbit_task SET run_at = UTC_TIMESTAMP(6) - INTERVAL 90 SECOND WHERE id = ?",
    )
    .bind(second)
    .execute(&f.test_db.pool)
    .await
    .unwrap();

    let text = scrape(&api, &operator).await;
    assert!(
        !text.contains("key-name-not-a-label"),
        "key names are never labels"
    );
    assert_eq!(
        metric(&text, "orbit_key_held", &labels),
        Some(1.0),
        "{text}"
    );
    assert_eq!(metric(&text, "orbit_key_blocked_tasks", &labels), Some(1.0));
    let oldest = metric(&text, "orbit_key_oldest_wait_seconds", &labels).unwrap();
    assert!((90.0..600.0).contains(&oldest), "{oldest}");
    assert!(text.contains("# TYPE orbit_key_held gauge"));

    // The first finishes; the key is handed to the second (token 2): one hand-off observed, in
    // the histogram's 60-300 s bucket (the second task was due 90 s ago).
    let id = assign["attempt_id"].as_u64().unwrap();
    w.send(json!({"type": "task.start", "attempt_id": id}))
        .await;
    w.recv_type("task.start.ok").await;
    w.send(json!({"type": "task.result", "attempt_id": id, "outcome": "succeeded", "retryable": false, "output": {}})).await;
    let next = w.recv_type("task.assign").await;
    assert_eq!(next["task"]["id"], second);
    assert_eq!(next["concurrency_token"], "2");
    let text = scrape(&api, &operator).await;
    assert_eq!(metric(&text, "orbit_key_held", &labels), Some(1.0));
    assert_eq!(metric(&text, "orbit_key_blocked_tasks", &labels), Some(0.0));
    assert_eq!(
        metric(&text, "orbit_key_oldest_wait_seconds", &labels),
        Some(0.0)
    );
    assert!(
        text.contains("# TYPE orbit_key_handoff_wait_seconds histogram"),
        "{text}"
    );
    assert_eq!(
        metric(&text, "orbit_key_handoff_wait_seconds_count", &labels),
        Some(1.0),
        "{text}"
    );
    let bucket = |le: &str| {
        metric(
            &text,
            "orbit_key_handoff_wait_seconds_bucket",
            &format!("{labels},le=\"{le}\""),
        )
    };
    assert_eq!(bucket("60"), Some(0.0), "{text}");
    assert_eq!(bucket("300"), Some(1.0), "{text}");
}
