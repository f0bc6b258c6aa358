//! `orbit admin bootstrap` and `orbit admin credential create|revoke`.

use std::process::Command;

use orbit::testing::TestDb;
use serde_json::Value;

fn orbit(args: &[&str], dsn: &str) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_orbit"))
        .args(args)
        .env("ORBIT_MYSQL_DSN", dsn)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[tokio::test]
async fn bootstrap_is_idempotent_and_writes_a_private_credentials_file() {
    let db = TestDb::installed().await;
    let dir = tempfile::tempdir().unwrap();
    let out1 = dir.path().join("a.json");
    let out2 = dir.path().join("b.json");
    let args = [
        "admin",
        "bootstrap",
        "--application",
        "shop",
        "--environment",
        "prod",
        "--namespace",
        "default",
        "--queue",
        "emails",
        "--worker-access",
        "--output",
    ];
    let (code, _, err) = orbit(&[&args[..], &[out1.to_str().unwrap()]].concat(), &db.dsn);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = orbit(&[&args[..], &[out2.to_str().unwrap()]].concat(), &db.dsn);
    assert_eq!(code, 0, "{err}");
    let a: Value = serde_json::from_str(&std::fs::read_to_string(&out1).unwrap()).unwrap();
    let b: Value = serde_json::from_str(&std::fs::read_to_string(&out2).unwrap()).unwrap();
    assert_eq!(
        a["queue_id"], b["queue_id"],
        "the second run found the same queue"
    );
    assert_ne!(a["token"], b["token"], "each run adds a credential");
    assert!(a["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s == "workers:consume"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&out1).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    // The token works, and the database holds only its hash.
    let token = a["token"].as_str().unwrap();
    let api = orbit::db::Db::new(db.pool.clone());
    let hash = orbit::auth::token_hash(token);
    let q = api
        .queue_get(&hash, a["queue_id"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(q.name, "emails");
    let stored: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orbit_credential WHERE token_hash = ? OR INSTR(CAST(token_hash AS CHAR), ?) > 0")
        .bind(&hash[..])
        .bind(token)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(stored, 1);

    // A narrower credential, then revoked.
    let reader = dir.path().join("reader.json");
    let (code, _, err) = orbit(
        &[
            "admin",
            "credential",
            "create",
            "--application",
            "shop",
            "--environment",
            "prod",
            "--namespace",
            "default",
            "--scope",
            "tasks:read",
            "--output",
            reader.to_str().unwrap(),
        ],
        &db.dsn,
    );
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&reader).unwrap()).unwrap();
    let rhash = orbit::auth::token_hash(r["token"].as_str().unwrap());
    assert!(api
        .queue_get(&rhash, a["queue_id"].as_str().unwrap())
        .await
        .is_ok());
    let (code, _, err) = orbit(
        &[
            "admin",
            "credential",
            "revoke",
            "--id",
            &r["credential_id"].to_string(),
        ],
        &db.dsn,
    );
    assert_eq!(code, 0, "{err}");
    let err = api
        .queue_get(&rhash, a["queue_id"].as_str().unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "UNAUTHENTICATED");
    // Unknown names are a readable refusal.
    let (code, _, err) = orbit(
        &[
            "admin",
            "credential",
            "create",
            "--application",
            "nope",
            "--environment",
            "prod",
            "--namespace",
            "default",
            "--scope",
            "tasks:read",
            "--output",
            reader.to_str().unwrap(),
        ],
        &db.dsn,
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("NOT_FOUND"), "{err}");
}

/// Rows of `table`, to show that a refused command created nothing.
async fn count(db: &TestDb, table: &str) -> i64 {
    sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
        .fetch_one(&db.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn an_output_file_that_cannot_be_written_creates_nothing() {
    let db = TestDb::installed().await;
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("first.json");
    let bootstrap = |output: &str| {
        vec![
            "admin".to_string(),
            "bootstrap".into(),
            "--application".into(),
            "shop".into(),
            "--environment".into(),
            "prod".into(),
            "--namespace".into(),
            "default".into(),
            "--queue".into(),
            "emails".into(),
            "--output".into(),
            output.into(),
        ]
    };
    let args = bootstrap(good.to_str().unwrap());
    let (code, _, err) = orbit(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        &db.dsn,
    );
    assert_eq!(code, 0, "{err}");
    let credentials = count(&db, "orbit_credential").await;
    let queues = count(&db, "orbit_queue").await;

    // The directory does not exist: refused before anything is created, exit 2, the path named.
    let missing = dir.path().join("no-such-dir/x.json");
    let missing = missing.to_str().unwrap();
    let args = bootstrap(missing);
    let mut other = args.clone();
    other[9] = "other-queue".into(); // a queue that does not exist yet
    let (code, out, err) = orbit(
        &other.iter().map(String::as_str).collect::<Vec<_>>(),
        &db.dsn,
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains(missing) && err.contains("nothing was created"),
        "{err}"
    );
    let (code, out, err) = orbit(
        &[
            "admin",
            "credential",
            "create",
            "--application",
            "shop",
            "--environment",
            "prod",
            "--namespace",
            "default",
            "--scope",
            "tasks:read",
            "--output",
            missing,
        ],
        &db.dsn,
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains(missing) && err.contains("nothing was created"),
        "{err}"
    );
    // A directory as the output is refused the same way.
    let (code, _, err) = orbit(
        &bootstrap(dir.path().to_str().unwrap())
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        &db.dsn,
    );
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        count(&db, "orbit_credential").await,
        credentials,
        "no credential was created"
    );
    assert_eq!(
        count(&db, "orbit_queue").await,
        queues,
        "no queue was created"
    );
    // Nothing is left behind next to the output either.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("first.json")]);
    // The file written records its database (never a password).
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&good).unwrap()).unwrap();
    let name = db.dsn.rsplit('/').next().unwrap();
    assert!(
        file["database"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/{name}")),
        "{file}"
    );
}
