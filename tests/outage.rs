//! A database outage, end to end: a PRIVATE MariaDB (started from the system binary, never the
//! shared server) is crashed under a serving façade with a connected SDK worker. While it is down
//! the API answers 503 UNAVAILABLE in the envelope and /readyz fails; after it comes back on the
//! same port everything recovers without restarting the façade or the worker, and every task that
//! got 201 (before or after) is there and runs.

use std::collections::HashSet;
use std::time::Duration;

use orbit::testing::Server;
use orbit_sdk::credentials::Credentials;
use orbit_sdk::{Client, Worker};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_orbit");

fn orbit(args: &[&str], dsn: &str) {
    orbit::testing::run_cli_ok(BIN, args, dsn);
}

fn task(queue_id: &str, n: usize) -> orbit_sdk::client::SubmitTask {
    orbit_sdk::client::SubmitTask {
        queue_id: queue_id.into(),
        handler: "outage.noop".into(),
        handler_version: "v1".into(),
        payload_version: "v1".into(),
        payload: json!({ "n": n }),
        ..Default::default()
    }
}

/// Submits until answered (the pool reconnects in the background); only a 201/200 counts.
async fn submit_eventually(client: &Client, queue: &str, n: usize) -> u64 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match client.submit(&format!("outage-{n}"), &task(queue, n)).await {
            Ok(s) => return s.task.id,
            Err(e)
                if (e.status == 503 || e.status == 0) && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(e) => panic!("submit {n}: {e}"),
        }
    }
}

#[tokio::test]
async fn a_database_outage_is_503_and_everything_recovers_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut database = orbit::dev::start_private_server_on(dir.path(), None)
        .await
        .unwrap();
    let port = database.port;
    let dsn = database.dsn.clone();
    orbit(&["migrate", "up"], &dsn);
    let creds_file = dir.path().join("creds.json");
    orbit(
        &[
            "admin",
            "bootstrap",
            "--application",
            "a",
            "--environment",
            "e",
            "--namespace",
            "n",
            "--queue",
            "q",
            "--worker-access",
            "--output",
            creds_file.to_str().unwrap(),
        ],
        &dsn,
    );
    let creds = Credentials::load(&creds_file).unwrap();
    let server = Server::start(BIN, &dsn).await;
    let client = Client::new(&server.url, &creds.token);

    let (done_tx, mut done) = tokio::sync::mpsc::unbounded_channel::<u64>();
    let worker = Worker::new(&server.url, &creds.token, "outage-worker")
        .capacity(4)
        .queue(&creds.queue_id)
        .handler("outage.noop", "v1", move |ctx| {
            let _ = done_tx.send(ctx.task.id);
            async { Ok(Value::Null) }
        })
        .start();
    let mut accepted = Vec::new();
    for n in 0..10 {
        accepted.push(submit_eventually(&client, &creds.queue_id, n).await);
    }
    let mut handled = HashSet::new();
    while handled.len() < 10 {
        let id = tokio::time::timeout(Duration::from_secs(20), done.recv())
            .await
            .expect("the worker runs the first tasks")
            .unwrap();
        handled.insert(id);
    }

    // The database dies (SIGKILL: no clean shutdown).
    database.crash();
    let http = reqwest::Client::new();
    let r = tokio::time::timeout(
        Duration::from_secs(45),
        http.post(format!("{}/v1/tasks", server.url))
            .bearer_auth(&creds.token)
            .header("Idempotency-Key", "during-outage")
            .json(&task(&creds.queue_id, 999))
            .send(),
    )
    .await
    .expect("the façade answers while the database is down")
    .unwrap();
    assert_eq!(r.status().as_u16(), 503);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "UNAVAILABLE", "{body}");
    assert!(body["request_id"].is_string(), "{body}");
    let ready = http
        .get(format!("{}/readyz", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status().as_u16(), 503, "not ready without a database");
    let alive = http
        .get(format!("{}/healthz", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(alive.status().as_u16(), 200, "the process itself is alive");

    // It comes back on the same port; nothing else is restarted.
    let _database = orbit::dev::start_private_server_on(dir.path(), Some(port))
        .await
        .unwrap();
    for n in 10..20 {
        accepted.push(submit_eventually(&client, &creds.queue_id, n).await);
    }
    let accepted_set: HashSet<u64> = accepted.iter().copied().collect();
    while !accepted_set.is_subset(&handled) {
        let id = tokio::time::timeout(Duration::from_secs(30), done.recv())
            .await
            .expect("the same worker runs the tasks submitted after the outage")
            .unwrap();
        handled.insert(id);
    }
    // Every 201 survived the crash and ended.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    for id in &accepted {
        loop {
            let t = client.task(*id).await.unwrap();
            if t.state == "SUCCEEDED" {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "task {id} is {}",
                t.state
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    worker.abort();
}
