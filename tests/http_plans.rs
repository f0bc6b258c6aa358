//! Plans over HTTP: versions, firing with the version's key, and two servers firing each slot once.

mod support;

use orbit::testing::Server;
use serde_json::json;
use support::Api;

#[tokio::test]
async fn a_plan_fires_tasks_carrying_its_versions_key_once_per_slot_across_two_servers() {
    let api = Api::start().await;
    let second = Server::start(env!("CARGO_BIN_EXE_orbit"), &api.fixture.test_db.dsn).await;
    let task = json!({"handler": "report.build", "handler_version": "v1", "payload_version": "v1", "payload": {"r": 1}, "concurrency_key": "report/daily"});
    let created = api
        .post("/v1/plans", "/v1/plans", &json!({"name": "daily", "queue_id": api.fixture.queue_id, "schedule": {"interval_seconds": 3600}, "definition": {"task": task}}))
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.body["data"]["current_version"], 1);
    assert_eq!(
        created.body["data"]["definition"]["task"]["concurrency_key"],
        "report/daily"
    );
    let id = created.body["data"]["id"].as_u64().unwrap();

    // Make the slot due now; both servers' schedulers race for it.
    let pool = api.fixture.db.pool();
    sqlx::query(
        "UPDATE orbit_plan SET next_fire_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE id = ?",
    )
    .bind(id)
    .execute(pool)
    .await
    .unwrap();
    let fired = wait_for_tasks(&api, 1).await;
    assert_eq!(
        fired[0]["concurrency_key"], "report/daily",
        "inherited verbatim"
    );
    assert_eq!(fired[0]["plan_id"], id);
    assert_eq!(fired[0]["plan_version"], 1);

    // A new version changes the key for later slots; the old version row is unchanged.
    let v2 = api
        .post(
            "/v1/plans/{id}/versions",
            &format!("/v1/plans/{id}/versions"),
            &json!({"schedule": {"interval_seconds": 3600}, "definition": {"task": {"handler": "report.build", "handler_version": "v2", "payload_version": "v1", "payload": {}, "concurrency_key": "report/{date}"}}}),
        )
        .await;
    assert_eq!(v2.status, 201, "{}", v2.body);
    assert_eq!(v2.body["data"]["current_version"], 2);
    sqlx::query(
        "UPDATE orbit_plan SET next_fire_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE id = ?",
    )
    .bind(id)
    .execute(pool)
    .await
    .unwrap();
    let fired = wait_for_tasks(&api, 2).await;
    assert_eq!(
        fired[0]["concurrency_key"], "report/{date}",
        "no interpolation"
    );
    assert_eq!(fired[0]["plan_version"], 2);
    let slots: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orbit_plan_fire WHERE plan_id = ?")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(
        slots, 2,
        "each slot fired once although two servers run the scheduler"
    );

    // Paused plans do not fire.
    let paused = api
        .post(
            "/v1/plans/{id}/pause",
            &format!("/v1/plans/{id}/pause"),
            &json!({}),
        )
        .await;
    assert_eq!(paused.body["data"]["paused"], true);
    let bad = api
        .post("/v1/plans", "/v1/plans", &json!({"name": "bad", "queue_id": api.fixture.queue_id, "schedule": {"interval_seconds": 60}, "definition": {"task": {"handler": "h", "handler_version": "v1", "payload_version": "v1", "payload": {}, "concurrency_key": null}}}))
        .await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(
        bad.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("concurrency_key"),
        "{}",
        bad.body
    );
    drop(second);
}

/// Waits (on the API, bounded) until the plan's tasks number `n`; returns them newest first.
#[tokio::test]
async fn plans_are_listed_a_page_at_a_time_by_queue_and_only_to_their_tenant() {
    let api = Api::start().await;
    let f = &api.fixture;
    let q2 = f.queue("q2").await;
    let mut ids = Vec::new();
    for (i, queue) in [&f.queue_id, &q2, &f.queue_id].into_iter().enumerate() {
        let r = api
            .post("/v1/plans", "/v1/plans", &json!({"name": format!("p{i}"), "queue_id": queue,
                "schedule": {"interval_seconds": 60 + i},
                "definition": {"task": {"handler": "h", "handler_version": "v1", "payload_version": "v1", "payload": {"i": i}}}}))
            .await;
        assert_eq!(r.status, 201, "{}", r.body);
        ids.push(r.body["data"]["id"].as_u64().unwrap());
    }
    // Every plan, in id order, as GET /v1/plans/{id} shows it.
    let all = api.get("/v1/plans", "/v1/plans").await;
    assert_eq!(all.status, 200, "{}", all.body);
    let listed: Vec<u64> = all.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_u64().unwrap())
        .collect();
    assert_eq!(listed, ids);
    assert!(all.body["next_cursor"].is_null());
    let one = api
        .get("/v1/plans/{id}", &format!("/v1/plans/{}", ids[1]))
        .await;
    assert_eq!(all.body["data"][1], one.body["data"]);
    // Pages of one, with a cursor.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/plans?limit=1&cursor={c}"),
            None => "/v1/plans?limit=1".to_string(),
        };
        let page = api.get("/v1/plans", &path).await;
        assert_eq!(page.status, 200, "{}", page.body);
        seen.extend(
            page.body["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["id"].as_u64().unwrap()),
        );
        match page.body["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert_eq!(seen, ids);
    // One queue's plans.
    let mine = api
        .get("/v1/plans", &format!("/v1/plans?queue_id={q2}"))
        .await;
    let listed: Vec<u64> = mine.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_u64().unwrap())
        .collect();
    assert_eq!(listed, vec![ids[1]]);
    // Bad input.
    for bad in [
        "/v1/plans?limit=0",
        "/v1/plans?limit=501",
        "/v1/plans?cursor=x",
        "/v1/plans?other=1",
    ] {
        assert_eq!(api.get("/v1/plans", bad).await.status, 400, "{bad}");
    }
    // Another tenant lists none of them, and cannot name their queue.
    let (bootstrap, other) = orbit::db::queues::Bootstrap::with_new_token(
        "other-app",
        "prod",
        "default",
        "theirs",
        &orbit::testing::ALL_SCOPES,
        "other",
    );
    f.db.admin_bootstrap(&bootstrap).await.unwrap();
    let theirs = api
        .call(
            reqwest::Method::GET,
            "/v1/plans",
            "/v1/plans",
            Some(&other),
            &[],
            None,
        )
        .await;
    assert_eq!(theirs.status, 200, "{}", theirs.body);
    assert_eq!(theirs.body["data"], json!([]));
    let theirs = api
        .call(
            reqwest::Method::GET,
            "/v1/plans",
            &format!("/v1/plans?queue_id={q2}"),
            Some(&other),
            &[],
            None,
        )
        .await;
    assert_eq!(theirs.status, 404, "{}", theirs.body);
}

async fn wait_for_tasks(api: &Api, n: usize) -> Vec<serde_json::Value> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let list = api.get("/v1/tasks", "/v1/tasks").await;
        let tasks = list.body["data"].as_array().unwrap().clone();
        if tasks.len() >= n {
            assert_eq!(tasks.len(), n, "a slot fired twice: {tasks:?}");
            return tasks;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the plan did not fire"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
