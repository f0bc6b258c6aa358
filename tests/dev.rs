//! `orbit dev` with a private MariaDB from the machine's server binary: submit, work, stop, start
//! again, and the task is still there.

use std::time::Duration;

use orbit_sdk::client::SubmitTask;
use orbit_sdk::credentials::Credentials;
use orbit_sdk::{Client, Worker};
use tokio::io::AsyncBufReadExt;

/// Starts `orbit dev` in `dir`; returns the child and its URL once it listens.
async fn start_dev(dir: &std::path::Path) -> (tokio::process::Child, String) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_orbit"))
        .args(["dev", "--addr", "127.0.0.1:0"])
        .current_dir(dir)
        .env_remove("ORBIT_MYSQL_DSN")
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(120), async {
        loop {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("orbit dev exited before listening");
            if let Some(url) = line.strip_prefix("listening on ") {
                return url.to_string();
            }
        }
    })
    .await
    .expect("orbit dev listens within 120 s");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url)
}

async fn stop(mut child: tokio::process::Child) {
    let pid = child.id().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("stops in time")
        .unwrap();
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn dev_runs_a_private_database_that_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (child, url) = start_dev(dir.path()).await;
    let creds = Credentials::load(dir.path().join(".orbit/dev/credentials.json")).unwrap();
    let client = Client::new(&url, &creds.token);
    let task = SubmitTask {
        queue_id: creds.queue_id.clone(),
        handler: "object.update".into(),
        handler_version: "v1".into(),
        payload_version: "v1".into(),
        payload: serde_json::json!({"hello": "dev"}),
        concurrency_key: Some("object/42".into()),
        ..Default::default()
    };
    let submitted = client.submit("dev-1", &task).await.unwrap();
    let worker = Worker::new(&url, &creds.token, "dev-worker")
        .queue(&creds.queue_id)
        .handler("object.update", "v1", |_| async {
            Ok(serde_json::json!({"done": true}))
        })
        .start();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while client.task(submitted.task.id).await.unwrap().state != "SUCCEEDED" {
        assert!(
            std::time::Instant::now() < deadline,
            "the worker did not finish the task"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(worker.drain().await.unwrap().drained);
    stop(child).await;

    // Second run: the same data, the same credentials, the task still there.
    let (child, url) = start_dev(dir.path()).await;
    let client = Client::new(&url, &creds.token);
    let again = client.task(submitted.task.id).await.unwrap();
    assert_eq!(again.state, "SUCCEEDED");
    assert_eq!(again.concurrency_key.as_deref(), Some("object/42"));
    stop(child).await;
}
