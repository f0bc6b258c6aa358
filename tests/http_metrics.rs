//! `/metrics` done with the exporter: every family of `orbit::telemetry::FAMILIES` has HELP and
//! TYPE in a real scrape, latencies are histograms, the counters count a known workload over HTTP
//! and the worker WebSocket, and docs/operations.md's metrics reference is the code's.

mod support;

use orbit::telemetry::{Type, FAMILIES};
use serde_json::json;
use support::ws::RawWorker;
use support::Api;

async fn scrape(api: &Api) -> String {
    let r = api
        .http
        .get(format!("{}/metrics", api.server.url))
        .bearer_auth(api.token())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    r.text().await.unwrap()
}

/// The value of the sample `name{…}` that has every label of `labels` (in any order).
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().find_map(|l| {
        let (series, value) = l.rsplit_once(' ')?;
        let (n, rest) = match series.split_once('{') {
            Some((n, rest)) => (n, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        if n != name {
            return None;
        }
        let has_all = labels
            .iter()
            .all(|(k, v)| rest.split(',').any(|p| p == format!("{k}=\"{v}\"")));
        if has_all {
            value.parse().ok()
        } else {
            None
        }
    })
}

fn task(queue: &str, key: Option<&str>) -> serde_json::Value {
    let mut t = json!({"queue_id": queue, "handler": "h", "handler_version": "v1",
                       "payload_version": "v1", "payload": {}, "retry_base_ms": 3_600_000});
    if let Some(k) = key {
        t["concurrency_key"] = json!(k);
    }
    t
}

#[tokio::test]
async fn a_scrape_has_every_documented_family_with_help_and_type_and_counts_a_workload() {
    let api = Api::start().await;
    let q = api.fixture.queue_id.clone();
    for (idem, key) in [("m-a", Some("k")), ("m-b", Some("k")), ("m-c", None)] {
        let r = api.submit(idem, &task(&q, key)).await;
        assert_eq!(r.status, 201, "{:?}", r.body);
    }
    // A replay is not a new submit.
    let r = api.submit("m-a", &task(&q, Some("k"))).await;
    assert_eq!(r.status, 200, "{:?}", r.body);

    let mut w = RawWorker::connect(&api.server.url, &api.token()).await;
    let welcome = w.hello("w1", &[&q], true, 4, &[]).await;
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    let first = w.recv_type("task.assign").await;
    let second = w.recv_type("task.assign").await;
    let (keyed, plain) = if first["task"]["concurrency_key"].is_string() {
        (first, second)
    } else {
        (second, first)
    };
    // The keyed result hands the key to the second keyed task (assigned with the ack).
    w.send(json!({"type": "task.result", "attempt_id": keyed["attempt_id"], "outcome": "succeeded", "output": {}}))
        .await;
    assert_eq!(
        w.recv_type("task.result.ack").await["task_state"],
        "SUCCEEDED"
    );
    w.recv_type("task.assign").await;
    // A retryable failure schedules a retry (an hour away: it stays in RETRY_WAIT).
    w.send(json!({"type": "task.result", "attempt_id": plain["attempt_id"], "outcome": "failed", "retryable": true, "error": {"e": 1}}))
        .await;
    assert_eq!(
        w.recv_type("task.result.ack").await["task_state"],
        "RETRY_WAIT"
    );

    let text = scrape(&api).await;

    // HELP and TYPE on every family, of the declared type; no summaries anywhere.
    for f in FAMILIES {
        assert!(
            text.contains(&format!("# HELP {} ", f.name)),
            "no HELP for {}:\n{text}",
            f.name
        );
        assert!(
            text.contains(&format!("# TYPE {} {}\n", f.name, f.kind.as_str())),
            "no TYPE {} {}:\n{text}",
            f.name,
            f.kind.as_str()
        );
        if f.kind == Type::Histogram {
            assert!(
                text.contains(&format!("{}_bucket{{", f.name)),
                "{} has no buckets",
                f.name
            );
        }
    }
    assert!(!text.contains(" summary\n"), "a summary:\n{text}");
    assert!(!text.contains("quantile="), "a summary:\n{text}");

    let get = |name: &str, labels: &[(&str, &str)]| {
        sample(&text, name, labels).unwrap_or_else(|| panic!("no {name} {labels:?} in\n{text}"))
    };
    assert_eq!(get("orbit_tasks_submitted_total", &[("queue", &q)]), 3.0);
    assert_eq!(get("orbit_grants_total", &[("queue", &q)]), 3.0);
    assert_eq!(
        get(
            "orbit_task_results_total",
            &[("outcome", "succeeded"), ("state", "SUCCEEDED")]
        ),
        1.0
    );
    assert_eq!(
        get(
            "orbit_task_results_total",
            &[("outcome", "failed"), ("state", "RETRY_WAIT")]
        ),
        1.0
    );
    assert_eq!(get("orbit_retries_total", &[]), 1.0);
    assert_eq!(
        get(
            "orbit_task_end_to_end_seconds_count",
            &[("state", "SUCCEEDED")]
        ),
        1.0
    );
    assert!(get("orbit_claim_duration_seconds_count", &[]) >= 1.0);
    assert_eq!(get("orbit_handoff_duration_seconds_count", &[]), 1.0);
    assert!(get("orbit_worker_claims_total", &[]) >= 1.0);
    // Gauges, per queue and state.
    assert_eq!(
        get("orbit_tasks", &[("queue", &q), ("state", "LEASED")]),
        1.0
    );
    assert_eq!(
        get("orbit_tasks", &[("queue", &q), ("state", "RETRY_WAIT")]),
        1.0
    );
    assert_eq!(
        get("orbit_tasks", &[("queue", &q), ("state", "WAITING")]),
        0.0
    );
    assert_eq!(get("orbit_queue_permits", &[("queue", &q)]), 1.0);
    assert_eq!(
        get("orbit_queue_info", &[("queue", &q), ("name", "q1")]),
        1.0
    );
    assert_eq!(get("orbit_queue_paused", &[("queue", &q)]), 0.0);
    assert_eq!(get("orbit_key_permits", &[]), 1.0);
    assert_eq!(get("orbit_sessions", &[("state", "active")]), 1.0);
    assert_eq!(
        get(
            "orbit_application_active_attempts",
            &[("application", "app")]
        ),
        1.0
    );
    assert_eq!(
        get(
            "orbit_application_incomplete_tasks",
            &[("application", "app")]
        ),
        2.0
    );
    assert_eq!(get("orbit_database_up", &[]), 1.0);
    assert!(
        get(
            "orbit_http_request_duration_seconds_count",
            &[("route", "/v1/tasks"), ("method", "POST")]
        ) >= 4.0
    );
    // Only the declared families are exported (the list in the docs is the whole list).
    for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
        let name = line.split_whitespace().nth(2).unwrap();
        assert!(
            FAMILIES.iter().any(|f| f.name == name),
            "{name} is exported but not declared in FAMILIES"
        );
    }
    w.close().await;
}

/// The gauge reads (`orbit_metrics_snapshot`'s statement, which names its columns `metric`) of the
/// test database waiting for `orbit_task`'s table lock; the scheduler's statements may wait too.
async fn waiting_for_the_lock(conn: &mut sqlx::MySqlConnection, db: &str) -> usize {
    orbit::processlist::read(conn)
        .await
        .expect("SHOW FULL PROCESSLIST")
        .iter()
        .filter(|p| {
            p.db.as_deref() == Some(db)
                && p.state.starts_with("Waiting for table metadata lock")
                && p.info.contains("AS metric,")
        })
        .count()
}

/// Twenty scrapes at once while the gauges' read is held up (another connection holds
/// `orbit_task` locked): one read waits in the database, the other scrapes wait for it in the
/// server, and all twenty answer with its gauges. Without the shared read, each scrape would run
/// its own (up to the pool's size at once).
#[tokio::test]
async fn concurrent_scrapes_share_one_database_read() {
    let api = Api::start().await;
    let reads = |text: &str| sample(text, "orbit_metrics_database_reads_total", &[]).unwrap();
    let before = reads(&scrape(&api).await);
    assert_eq!(before, 1.0, "the first scrape read the gauges");

    let db = api.fixture.test_db.name.clone();
    let mut locker = api.fixture.test_db.conn().await;
    let mut watcher = api.fixture.test_db.conn().await;
    // (The text protocol: MySQL cannot prepare LOCK TABLES.)
    sqlx::raw_sql("LOCK TABLES orbit_task WRITE")
        .execute(&mut locker)
        .await
        .unwrap();
    let scrapes: Vec<_> = (0..20)
        .map(|_| {
            let (http, url, token) = (api.http.clone(), api.server.url.clone(), api.token());
            tokio::spawn(async move {
                let r = http
                    .get(format!("{url}/metrics"))
                    .bearer_auth(token)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status().as_u16(), 200);
                r.text().await.unwrap()
            })
        })
        .collect();
    // The first read reaches the lock; the call's own time limit (3 s) is far off.
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(2000);
    while waiting_for_the_lock(&mut watcher, &db).await == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no gauge read reached the lock"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    // Give the other scrapes time to arrive behind it: none may reach the database meanwhile.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        waiting_for_the_lock(&mut watcher, &db).await,
        1,
        "one gauge read at a time"
    );
    sqlx::raw_sql("UNLOCK TABLES")
        .execute(&mut locker)
        .await
        .unwrap();
    let mut after = before;
    for s in scrapes {
        let text = s.await.unwrap();
        assert_eq!(sample(&text, "orbit_database_up", &[]), Some(1.0));
        after = after.max(reads(&text));
    }
    // One read for the twenty (two if a straggler arrived after it).
    assert!(
        after - before <= 2.0,
        "{} reads for 20 scrapes",
        after - before
    );
}

#[test]
fn the_operations_guide_has_the_codes_metrics_reference() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operations.md"))
        .unwrap();
    let start = doc
        .find("<!-- metrics reference -->\n")
        .expect("docs/operations.md has the metrics reference marker")
        + "<!-- metrics reference -->\n".len();
    let end = doc
        .find("<!-- end metrics reference -->")
        .expect("end marker");
    let expected = orbit::telemetry::reference_markdown();
    assert_eq!(
        &doc[start..end],
        expected,
        "update docs/operations.md's metrics reference to:\n{expected}"
    );
    // Every counter or histogram the guide names anywhere exists (gauges are the table's).
    for word in doc.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        let base = word
            .strip_suffix("_bucket")
            .or_else(|| word.strip_suffix("_count"))
            .or_else(|| word.strip_suffix("_sum"))
            .unwrap_or(word);
        if word.starts_with("orbit_") && (base.ends_with("_total") || base.ends_with("_seconds")) {
            assert!(
                FAMILIES.iter().any(|f| f.name == base),
                "docs/operations.md names {word}, which is not exported"
            );
        }
    }
}

#[test]
fn the_grafana_dashboard_uses_only_exported_metrics() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/grafana-dashboard.json"
    ))
    .unwrap();
    let dash: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut used = std::collections::BTreeSet::new();
    for panel in dash["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if word.starts_with("orbit_") {
                    let base = word
                        .strip_suffix("_bucket")
                        .or_else(|| word.strip_suffix("_count"))
                        .or_else(|| word.strip_suffix("_sum"))
                        .unwrap_or(word);
                    assert!(
                        FAMILIES.iter().any(|f| f.name == base),
                        "the dashboard uses {word}, which is not exported"
                    );
                    used.insert(base.to_string());
                }
            }
        }
    }
    // Every family is on the dashboard.
    for f in FAMILIES {
        assert!(used.contains(f.name), "{} is not on the dashboard", f.name);
    }
}
