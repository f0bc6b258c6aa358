//! `orbit dev` with a private MariaDB from the machine's server binary: submit, work, stop, start
//! again, and the task is still there.

use std::time::Duration;

use orbit_sdk::client::SubmitTask;
use orbit_sdk::credentials::Credentials;
use orbit_sdk::{Client, Worker};
use tokio::io::AsyncBufReadExt;

/// Starts `orbit dev` in `dir`; returns the child and its URL once it listens.
async fn start_dev(dir: &std::path::Path) -> (tokio::process::Child, String) {
    start_dev_with(dir, &[]).await
}

/// `orbit dev --addr 127.0.0.1:0 EXTRA…` in `dir`, once it listens; its stderr goes on to the
/// test's.
async fn start_dev_with(dir: &std::path::Path, extra: &[&str]) -> (tokio::process::Child, String) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_orbit"))
        .args(["dev", "--addr", "127.0.0.1:0"])
        .args(extra)
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

/// Runs `orbit dev EXTRA…` in `dir` to its end: (exit code, stderr, seconds taken).
async fn run_dev(dir: &std::path::Path, extra: &[&str], path: Option<&str>) -> (i32, String, f64) {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_orbit"));
    cmd.args(["dev", "--addr", "127.0.0.1:0"])
        .args(extra)
        .current_dir(dir)
        .env_remove("ORBIT_MYSQL_DSN")
        .env("RUST_LOG", "warn")
        .kill_on_drop(true);
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    let started = std::time::Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(90), cmd.output())
        .await
        .expect("orbit dev ends")
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        started.elapsed().as_secs_f64(),
    )
}

/// The pid the private database wrote into DIR/.orbit/dev/mysqld.pid.
fn database_pid(dir: &std::path::Path) -> String {
    std::fs::read_to_string(dir.join(".orbit/dev/mysqld.pid"))
        .unwrap()
        .trim()
        .to_string()
}

fn alive(pid: &str) -> bool {
    std::process::Command::new("kill")
        .args(["-0", pid])
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap()
        .success()
}

fn signal(sig: &str, pid: &str) {
    std::process::Command::new("kill")
        .args([sig, pid])
        .status()
        .unwrap();
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

/// Whether `token` reads `queue_id` through the server at `url`.
async fn token_works(url: &str, token: &str, queue_id: &str) -> u16 {
    reqwest::Client::new()
        .get(format!("{url}/v1/queues/{queue_id}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn dev_makes_a_new_credential_for_another_database_or_a_revoked_one() {
    let (a, b) = (
        orbit::testing::TestDb::empty().await,
        orbit::testing::TestDb::empty().await,
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(".orbit/dev/credentials.json");
    let (child, url) = start_dev_with(dir.path(), &["--dsn", &a.dsn]).await;
    let first = Credentials::load(&file).unwrap();
    assert_eq!(token_works(&url, &first.token, &first.queue_id).await, 200);
    stop(child).await;

    // Another database: the file from the first is not reused, and the new token works.
    let (child, url) = start_dev_with(dir.path(), &["--dsn", &b.dsn]).await;
    let second = Credentials::load(&file).unwrap();
    assert_ne!(second.token, first.token);
    assert_eq!(
        token_works(&url, &second.token, &second.queue_id).await,
        200
    );
    let recorded: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert!(
        recorded["database"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/{}", b.name)),
        "{recorded}"
    );
    stop(child).await;

    // The same database, but its credential was revoked: a new one.
    orbit::db::Db::new(b.pool.clone())
        .credential_revoke(second.credential_id)
        .await
        .unwrap();
    let (child, url) = start_dev_with(dir.path(), &["--dsn", &b.dsn]).await;
    let third = Credentials::load(&file).unwrap();
    assert_ne!(third.token, second.token);
    assert_eq!(token_works(&url, &third.token, &third.queue_id).await, 200);
    stop(child).await;

    // Nothing changed: the same credential again.
    let (child, _) = start_dev_with(dir.path(), &["--dsn", &b.dsn]).await;
    assert_eq!(Credentials::load(&file).unwrap().token, third.token);
    stop(child).await;
}

#[tokio::test]
async fn a_busy_directory_and_a_dead_database_are_named_plainly_and_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (first, _) = start_dev(dir.path()).await;

    // A second `orbit dev` on the same directory is refused at once.
    let (code, err, secs) = run_dev(dir.path(), &[], None).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("another `orbit dev` is running"), "{err}");
    assert!(secs < 10.0, "took {secs} s");

    // The first is killed outright: its database keeps running, holding the data directory.
    let orphan = database_pid(dir.path());
    let mut first = first;
    first.kill().await.unwrap();
    assert!(alive(&orphan));
    let (code, err, secs) = run_dev(dir.path(), &[], None).await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("is in use by another database server") && err.contains("mysqld.log"),
        "{err}"
    );
    assert!(
        secs < 20.0,
        "took {secs} s (the server retries its lock for 30 s)"
    );
    signal("-TERM", &orphan);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while alive(&orphan) {
        assert!(
            std::time::Instant::now() < deadline,
            "the old database stops"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The database dies under a running `orbit dev`: it stops, naming the cause and the log.
    let (mut child, _) = start_dev(dir.path()).await;
    signal("-KILL", &database_pid(dir.path()));
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("orbit dev stops when its database dies")
        .unwrap();
    assert_eq!(status.code(), Some(3));
}

#[tokio::test]
async fn a_database_server_that_exits_at_once_is_reported_with_its_log() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".orbit/dev/data/mysql")).unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = bin.join("mariadbd");
    std::fs::write(
        &fake,
        "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in --log-error=*) log=\"${a#--log-error=}\";; esac; done\n\
         echo '[ERROR] fake server: cannot start here' >> \"$log\"\nexit 1\n",
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let (code, err, secs) = run_dev(dir.path(), &[], Some(&path)).await;
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("exited at once"), "{err}");
    assert!(err.contains("fake server: cannot start here"), "{err}");
    assert!(err.contains("mysqld.log"), "{err}");
    assert!(secs < 10.0, "took {secs} s");
}

#[tokio::test]
async fn dev_logs_json_lines_with_the_access_log() {
    let db = orbit::testing::TestDb::empty().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("dev.log");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_orbit"))
        .args([
            "dev",
            "--addr",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "--dsn",
        ])
        .arg(&db.dsn)
        .current_dir(dir.path())
        .env_remove("ORBIT_MYSQL_DSN")
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(120), async {
        loop {
            let line = lines.next_line().await.unwrap().expect("orbit dev listens");
            if let Some(url) = line.strip_prefix("listening on ") {
                return url.to_string();
            }
        }
    })
    .await
    .unwrap();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let resp = reqwest::Client::new()
        .get(format!("{url}/healthz"))
        .header("x-request-id", "dev-json-1")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap();
        if text.contains("dev-json-1") || std::time::Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    stop(child).await;
    let mut access = 0;
    for line in text.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        if v["target"] == "orbit::access" && v["span"]["request_id"] == "dev-json-1" {
            access += 1;
            assert_eq!(v["fields"]["status"], 200);
        }
    }
    assert_eq!(access, 1, "{text}");
}
