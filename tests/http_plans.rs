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

fn def(key: &str) -> serde_json::Value {
    json!({"task": {"handler": "h", "handler_version": "v1", "payload_version": "v1", "payload": {}, "concurrency_key": key}})
}

fn times(v: &serde_json::Value) -> Vec<chrono::DateTime<chrono::Utc>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().parse().unwrap())
        .collect()
}

#[tokio::test]
async fn a_cron_plan_shows_its_next_five_fire_times_in_its_time_zone() {
    let api = Api::start().await;
    let created = api
        .post(
            "/v1/plans",
            "/v1/plans",
            &json!({"name": "weekday", "queue_id": api.fixture.queue_id,
                    "schedule": {"cron": "30 2 * * 1-5", "timezone": "Europe/Berlin", "catch_up": "all"},
                    "on_busy": "replace_waiting", "definition": def("report/daily")}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let data = &created.body["data"];
    assert_eq!(
        data["schedule"],
        json!({"cron": "30 2 * * 1-5", "timezone": "Europe/Berlin", "catch_up": "all"})
    );
    assert_eq!(data["on_busy"], "replace_waiting");
    let created_at: chrono::DateTime<chrono::Utc> =
        data["created_at"].as_str().unwrap().parse().unwrap();
    let cron = orbit::schedule::CronSchedule::parse("30 2 * * 1-5", "Europe/Berlin").unwrap();
    let first = cron.after(created_at).unwrap();
    let expected = cron.upcoming(first, 5);
    assert_eq!(times(&data["next_fire_times"]), expected);
    assert_eq!(data["next_fire_at"], data["next_fire_times"][0]);
    // Weekdays at 02:30 Berlin time: 00:30 or 01:30 UTC.
    use chrono::{Datelike, Timelike};
    for t in &expected {
        assert!(
            t.weekday().num_days_from_monday() < 5 || t.hour() == 0,
            "{t}"
        );
        assert_eq!(t.minute(), 30);
    }
    // The same answer once the server's scheduler has stored it.
    let id = data["id"].as_u64().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while sqlx::query_scalar::<_, Option<chrono::NaiveDateTime>>(
        "SELECT next_fire_at FROM orbit_plan WHERE id = ?",
    )
    .bind(id)
    .fetch_one(api.fixture.db.pool())
    .await
    .unwrap()
    .is_none()
    {
        assert!(std::time::Instant::now() < deadline, "never scheduled");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let got = api.get("/v1/plans/{id}", &format!("/v1/plans/{id}")).await;
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(times(&got.body["data"]["next_fire_times"]), expected);

    // An interval plan lists whole intervals.
    let every = api
        .post("/v1/plans", "/v1/plans", &json!({"name": "every", "queue_id": api.fixture.queue_id, "schedule": {"interval_seconds": 90}, "definition": def("")}))
        .await;
    assert_eq!(every.status, 201, "{}", every.body);
    assert_eq!(
        every.body["data"]["schedule"],
        json!({"interval_seconds": 90, "catch_up": "one"})
    );
    assert_eq!(every.body["data"]["on_busy"], "queue");
    let t = times(&every.body["data"]["next_fire_times"]);
    assert_eq!(t.len(), 5);
    assert!(t
        .windows(2)
        .all(|w| w[1] - w[0] == chrono::Duration::seconds(90)));
}

#[tokio::test]
async fn a_cron_plan_fires_through_the_server_and_skips_ticks_while_its_key_is_busy() {
    let api = Api::start().await;
    // Every second, on_busy skip; no worker runs, so the first task keeps the key busy.
    let created = api
        .post(
            "/v1/plans",
            "/v1/plans",
            &json!({"name": "tick", "queue_id": api.fixture.queue_id,
                    "schedule": {"cron": "* * * * * *"}, "on_busy": "skip", "definition": def("tick/1")}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.body["data"]["schedule"]["timezone"], "UTC");
    let id = created.body["data"]["id"].as_u64().unwrap();
    let pool = api.fixture.db.pool();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let fires = loop {
        let rows: Vec<(Vec<u8>, u64)> = sqlx::query_as(
            "SELECT CAST(outcome AS BINARY), task_id FROM orbit_plan_fire WHERE plan_id = ? ORDER BY scheduled_for",
        )
        .bind(id)
        .fetch_all(pool)
        .await
        .unwrap();
        if rows.len() >= 3 {
            break rows;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the plan did not fire: {rows:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let paused = api
        .post(
            "/v1/plans/{id}/pause",
            &format!("/v1/plans/{id}/pause"),
            &json!({}),
        )
        .await;
    assert_eq!(paused.status, 200);
    assert_eq!(fires[0].0, b"created");
    assert!(
        fires[1..].iter().all(|(o, t)| o == b"skipped" && *t == 0),
        "{fires:?}"
    );
    let tasks = api.get("/v1/tasks", "/v1/tasks").await;
    let tasks = tasks.body["data"].as_array().unwrap();
    assert!(tasks.iter().filter(|t| t["plan_id"] == id).count() <= 2);
    assert_eq!(tasks.last().unwrap()["id"], fires[0].1);
}

#[tokio::test]
async fn invalid_schedules_are_400_naming_the_field() {
    let api = Api::start().await;
    let q = api.fixture.queue_id.clone();
    let cases = [
        (json!({"cron": "61 * * * *"}), "", "schedule.cron"),
        (json!({"cron": "* * * *"}), "", "schedule.cron"),
        (json!({"cron": "0 0 30 2 *"}), "", "schedule.cron"),
        (
            json!({"cron": "* * * * *", "timezone": "Mars/Olympus"}),
            "",
            "schedule.timezone",
        ),
        (
            json!({"cron": "* * * * *", "interval_seconds": 60}),
            "",
            "schedule",
        ),
        (json!({}), "", "schedule"),
        (
            json!({"interval_seconds": 60, "timezone": "UTC"}),
            "",
            "schedule.timezone",
        ),
        (
            json!({"interval_seconds": 60, "catch_up": "some"}),
            "",
            "schedule.catch_up",
        ),
        (json!({"interval_seconds": 0}), "", "interval_seconds"),
    ];
    for (schedule, key, field) in &cases {
        let r = api
            .post(
                "/v1/plans",
                "/v1/plans",
                &json!({"name": "p", "queue_id": q, "schedule": schedule, "definition": def(key)}),
            )
            .await;
        assert_eq!(r.status, 400, "{schedule}: {}", r.body);
        assert_eq!(r.body["error"]["code"], "INVALID_ARGUMENT");
        assert_eq!(
            r.body["error"]["details"]["field"], *field,
            "{schedule}: {}",
            r.body
        );
    }
    // on_busy other than queue needs a key; an unknown one is refused.
    let r = api
        .post("/v1/plans", "/v1/plans", &json!({"name": "p", "queue_id": q, "schedule": {"interval_seconds": 60}, "on_busy": "skip", "definition": def("")}))
        .await;
    assert_eq!(
        (r.status, &r.body["error"]["details"]["field"]),
        (400, &json!("on_busy")),
        "{}",
        r.body
    );
    let r = api
        .post("/v1/plans", "/v1/plans", &json!({"name": "p", "queue_id": q, "schedule": {"interval_seconds": 60}, "on_busy": "drop", "definition": def("k")}))
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    // The same rules for a new version.
    let ok = api
        .post("/v1/plans", "/v1/plans", &json!({"name": "p", "queue_id": q, "schedule": {"interval_seconds": 60}, "definition": def("")}))
        .await;
    assert_eq!(ok.status, 201, "{}", ok.body);
    let id = ok.body["data"]["id"].as_u64().unwrap();
    let r = api
        .post("/v1/plans/{id}/versions", &format!("/v1/plans/{id}/versions"), &json!({"schedule": {"cron": "* * * * *", "timezone": "Nowhere"}, "definition": def("")}))
        .await;
    assert_eq!(
        (r.status, &r.body["error"]["details"]["field"]),
        (400, &json!("schedule.timezone")),
        "{}",
        r.body
    );
    let r = api
        .post("/v1/plans/{id}/versions", &format!("/v1/plans/{id}/versions"), &json!({"schedule": {"cron": "0 9 * * MON", "timezone": "America/New_York"}, "on_busy": "skip", "definition": def("k")}))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["data"]["schedule"]["cron"], "0 9 * * MON");
    assert_eq!(r.body["data"]["on_busy"], "skip");
}
