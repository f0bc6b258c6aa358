//! The operator CLI against a real server: `orbit task list|get|cancel|resolve`, `orbit queue
//! list|get|pause|resume|set-retention` over HTTP (ORBIT_URL, ORBIT_TOKEN / ORBIT_CREDENTIALS_FILE), and
//! `orbit admin credential list` over the DSN; tables for people, `--json` for scripts, and the
//! README's exit codes.

use std::process::Command;

use orbit::db::workers::Outcome;
use orbit::testing::{Fixture, Server};
use serde_json::Value;

struct Setup {
    f: Fixture,
    server: Server,
    dir: tempfile::TempDir,
}

impl Setup {
    async fn new() -> Setup {
        let f = Fixture::new().await;
        let server = Server::start(env!("CARGO_BIN_EXE_orbit"), &f.test_db.dsn).await;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("ops.json"),
            serde_json::json!({ "token": f.token }).to_string(),
        )
        .unwrap();
        Setup { f, server, dir }
    }

    /// `orbit ARGS` with ORBIT_URL and the credentials file: (exit code, stdout, stderr).
    fn orbit(&self, args: &[&str]) -> (i32, String, String) {
        self.orbit_with(
            args,
            &[
                ("ORBIT_URL", self.server.url.as_str()),
                (
                    "ORBIT_CREDENTIALS_FILE",
                    self.dir.path().join("ops.json").to_str().unwrap(),
                ),
            ],
        )
    }

    fn orbit_with(&self, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_orbit"));
        cmd.args(args)
            .env_remove("ORBIT_URL")
            .env_remove("ORBIT_TOKEN")
            .env_remove("ORBIT_CREDENTIALS_FILE")
            .env_remove("ORBIT_MYSQL_DSN")
            .env("RUST_LOG", "warn");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into(),
            String::from_utf8_lossy(&out.stderr).into(),
        )
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.push("--json");
        let (code, out, err) = self.orbit(&all);
        assert_eq!(code, 0, "{args:?}: {err}");
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
    }
}

#[tokio::test]
async fn queues_are_listed_shown_paused_and_resumed() {
    let s = Setup::new().await;
    let q = s.f.queue_id.clone();
    let (code, out, err) = s.orbit(&["queue", "list"]);
    assert_eq!(code, 0, "{err}");
    let mut lines = out.lines();
    assert!(lines.next().unwrap().starts_with("ID"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with(&q) && l.contains("q1") && l.contains("no")),
        "{out}"
    );
    let list = s.json(&["queue", "list"]);
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["id"], q.as_str());

    let (code, out, err) = s.orbit(&["queue", "pause", &q]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("paused"), "{out}");
    assert_eq!(s.json(&["queue", "get", &q])["paused"], true);
    let resumed = s.json(&["queue", "resume", &q]);
    assert_eq!(resumed["paused"], false);

    // Unknown queue: 404, exit 1, one readable line.
    let (code, _, err) = s.orbit(&["queue", "get", "00000000000000000000000000000000"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.starts_with("error: 404 NOT_FOUND"), "{err}");
}

#[tokio::test]
async fn a_queues_retention_is_shown_and_set() {
    let s = Setup::new().await;
    let q = s.f.queue_id.clone();
    let (code, out, err) = s.orbit(&["queue", "get", &q]);
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().next().unwrap().contains("RETENTION_S"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with(&q) && l.contains("604800")),
        "the default, 7 days: {out}"
    );
    let (code, out, err) = s.orbit(&["queue", "set-retention", &q, "2592000"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("keeps finished tasks 2592000 seconds"),
        "{out}"
    );
    assert_eq!(
        s.json(&["queue", "get", &q])["retention_seconds"],
        2_592_000
    );
    let set = s.json(&["queue", "set-retention", &q, "3600"]);
    assert_eq!(set["retention_seconds"], 3600);
    assert_eq!(set["id"], q.as_str());

    // Out of bounds: the server's 400, exit 2, one readable line.
    let (code, _, err) = s.orbit(&["queue", "set-retention", &q, "59"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.starts_with("error: 400 INVALID_ARGUMENT"), "{err}");
    assert!(err.contains("between 60 and 315360000"), "{err}");
    // Not a number: clap's usage error, exit 2.
    let (code, _, _) = s.orbit(&["queue", "set-retention", &q, "soon"]);
    assert_eq!(code, 2);
    // A reader cannot set it: 403, exit 2.
    let reader = s.f.credential(&["tasks:read"]).await;
    let (code, _, err) = s.orbit_with(
        &["queue", "set-retention", &q, "3600"],
        &[
            ("ORBIT_URL", s.server.url.as_str()),
            ("ORBIT_TOKEN", &reader),
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("403"), "{err}");
    // Unknown queue: 404, exit 1.
    let (code, _, err) = s.orbit(&[
        "queue",
        "set-retention",
        "00000000000000000000000000000000",
        "3600",
    ]);
    assert_eq!(code, 1, "{err}");
}

#[tokio::test]
async fn tasks_are_listed_shown_cancelled_and_resolved() {
    let s = Setup::new().await;
    let f = &s.f;
    let a = f.submit(&f.queue_id, "").await;
    let b = f.submit(&f.queue_id, "").await;
    let c = f.submit(&f.queue_id, "").await;

    let all = s.json(&["task", "list"]);
    assert_eq!(all.as_array().unwrap().len(), 3);
    assert_eq!(all[0]["id"], c.id, "newest first");
    let two = s.json(&["task", "list", "--limit", "2", "--queue", &f.queue_id]);
    assert_eq!(two.as_array().unwrap().len(), 2);
    let (code, out, err) = s.orbit(&["task", "list", "--state", "waiting"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().next().unwrap().starts_with("ID"), "{out}");
    assert_eq!(out.lines().count(), 4, "{out}");

    // Cancel, then cancel again: idempotent, the same answer.
    let (code, out, err) = s.orbit(&["task", "cancel", &a.id.to_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("CANCELLED"), "{out}");
    let (code, out, err) = s.orbit(&["task", "cancel", &a.id.to_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("CANCELLED"), "{out}");
    let cancelled = s.json(&["task", "list", "--state", "CANCELLED"]);
    assert_eq!(cancelled.as_array().unwrap().len(), 1);

    // An unknown outcome puts b in NEEDS_REVIEW; resolve it with a note.
    let session = f.session("w", false, &[&f.queue_id]).await;
    let grants = f.db.task_claim(session, 10, 30_000).await.unwrap();
    let held = grants.iter().find(|g| g.task.id == b.id).unwrap();
    let ack =
        f.db.attempt_finish(
            session,
            held.attempt_id,
            Outcome::Unknown,
            false,
            None,
            None,
        )
        .await
        .unwrap();
    assert_eq!(ack.task_state, "NEEDS_REVIEW");
    let (code, out, err) = s.orbit(&[
        "task",
        "resolve",
        &b.id.to_string(),
        "--resolution",
        "succeeded",
        "--note",
        r#"{"checked_by": "ops"}"#,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("SUCCEEDED"), "{out}");
    let shown = s.json(&["task", "get", &b.id.to_string()]);
    assert_eq!(shown["state"], "SUCCEEDED");
    assert_eq!(shown["output"]["checked_by"], "ops");
    assert_eq!(shown["attempts"].as_array().unwrap().len(), 1);
    let (code, out, err) = s.orbit(&["task", "get", &b.id.to_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("state") && out.contains("SUCCEEDED"), "{out}");
    assert!(out.contains("ATTEMPT"), "{out}");
    // Resolving what is not in review: 409, exit 1; a bad note: exit 2 before any request.
    let (code, _, err) = s.orbit(&[
        "task",
        "resolve",
        &b.id.to_string(),
        "--resolution",
        "failed",
    ]);
    assert_eq!(code, 1, "{err}");
    let (code, _, err) = s.orbit(&[
        "task",
        "resolve",
        "1",
        "--resolution",
        "failed",
        "--note",
        "{not json",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--note is not JSON"), "{err}");
    // Cancelling a finished task: 409, exit 1.
    let (code, _, err) = s.orbit(&["task", "cancel", &b.id.to_string()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("409"), "{err}");
    let (code, _, err) = s.orbit(&["task", "get", "999999999"]);
    assert_eq!(code, 1, "{err}");
    let _ = c;
}

#[tokio::test]
async fn configuration_and_access_errors_are_readable_with_their_exit_codes() {
    let s = Setup::new().await;
    let url = s.server.url.clone();
    // No URL, no token: 2.
    let (code, _, err) = s.orbit_with(&["queue", "list"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("ORBIT_URL"), "{err}");
    let (code, _, err) = s.orbit_with(&["queue", "list"], &[("ORBIT_URL", &url)]);
    assert_eq!(code, 2);
    assert!(err.contains("ORBIT_TOKEN"), "{err}");
    let (code, _, err) = s.orbit_with(
        &[
            "queue",
            "list",
            "--credentials-file",
            "/nonexistent/ops.json",
        ],
        &[("ORBIT_URL", &url)],
    );
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent/ops.json"), "{err}");
    // A token the server does not know: 401, exit 2, with a hint.
    let (code, _, err) = s.orbit_with(
        &["queue", "list"],
        &[("ORBIT_URL", &url), ("ORBIT_TOKEN", "orbit_not_a_token")],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("401") && err.contains("ORBIT_TOKEN"), "{err}");
    assert!(
        !err.contains("orbit_not_a_token"),
        "the token is echoed: {err}"
    );
    // ORBIT_TOKEN wins over the file; a reader cannot pause: 403, exit 2.
    let reader = s.f.credential(&["tasks:read"]).await;
    let (code, _, err) = s.orbit_with(
        &["queue", "pause", &s.f.queue_id],
        &[
            ("ORBIT_URL", &url),
            ("ORBIT_TOKEN", &reader),
            (
                "ORBIT_CREDENTIALS_FILE",
                s.dir.path().join("ops.json").to_str().unwrap(),
            ),
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("403"), "{err}");
    // Nobody listening: 3.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let (code, _, err) = s.orbit_with(
        &["task", "list"],
        &[("ORBIT_URL", &closed), ("ORBIT_TOKEN", &s.f.token)],
    );
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("cannot reach the server"), "{err}");
}

#[tokio::test]
async fn credentials_are_listed_without_their_tokens() {
    let s = Setup::new().await;
    let reader = s.f.credential(&["tasks:read"]).await;
    let (code, out, err) = s.orbit(&["admin", "credential", "list", "--dsn", &s.f.test_db.dsn]);
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().next().unwrap().starts_with("ID"), "{out}");
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(
        out.contains(&format!("{}…", orbit::auth::token_hint(&reader))),
        "{out}"
    );
    assert!(
        !out.contains(&reader) && !out.contains(&s.f.token),
        "a token is printed"
    );

    let list = s.json(&["admin", "credential", "list", "--dsn", &s.f.test_db.dsn]);
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 2);
    let r = list
        .iter()
        .find(|c| c["scopes"] == serde_json::json!(["tasks:read"]))
        .unwrap();
    assert_eq!(r["application"], "app");
    assert_eq!(r["namespaces"], serde_json::json!(["default"]));
    assert!(r["revoked_at"].is_null());
    let id = r["credential_id"].as_u64().unwrap();

    let (code, _, err) = s.orbit(&[
        "admin",
        "credential",
        "revoke",
        "--id",
        &id.to_string(),
        "--dsn",
        &s.f.test_db.dsn,
    ]);
    assert_eq!(code, 0, "{err}");
    let active = s.json(&["admin", "credential", "list", "--dsn", &s.f.test_db.dsn]);
    assert_eq!(active.as_array().unwrap().len(), 1);
    let every = s.json(&[
        "admin",
        "credential",
        "list",
        "--include-revoked",
        "--dsn",
        &s.f.test_db.dsn,
    ]);
    assert_eq!(every.as_array().unwrap().len(), 2);
    let other = s.json(&[
        "admin",
        "credential",
        "list",
        "--application",
        "no-such-app",
        "--dsn",
        &s.f.test_db.dsn,
    ]);
    assert_eq!(other.as_array().unwrap().len(), 0);
    let (code, _, err) = s.orbit(&["admin", "credential", "list"]);
    assert_eq!(code, 2, "{err}");
}
