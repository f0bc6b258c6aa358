//! `orbit migrate verify` and serve's start-up check: a dropped or changed procedure, table or
//! index is named with exit 1, and `serve` refuses to start on it.

use std::process::Command;

use orbit::testing::{Server, TestDb};

fn orbit(args: &[&str]) -> (i32, String, String) {
    orbit::testing::run_cli(env!("CARGO_BIN_EXE_orbit"), args, &[], None)
}

async fn exec(db: &TestDb, sql: &str) {
    sqlx::raw_sql(sql).execute(&db.pool).await.unwrap();
}

#[tokio::test]
async fn a_fresh_install_verifies_and_an_extra_index_is_only_a_note() {
    let db = TestDb::installed().await;
    let (code, out, err) = orbit(&["migrate", "verify", "--dsn", &db.dsn]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("match their definitions"), "{out}");

    exec(
        &db,
        "CREATE INDEX ix_operator_extra ON orbit_task (created_at)",
    )
    .await;
    let (code, out, err) = orbit(&["migrate", "verify", "--dsn", &db.dsn]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("note: index orbit_task.ix_operator_extra"),
        "{out}"
    );
}

/// Loads `files` (paths under the repository), in order, into a new database with the plain
/// `mariadb` client, then runs `orbit migrate verify` on it, which must pass.
async fn plain_client_install_verifies(files: &[std::path::PathBuf]) {
    // The `mariadb` client strips comments from procedure bodies; the comparison ignores them.
    let db = TestDb::empty().await;
    let options = orbit::migrate::parse_dsn(&db.dsn).unwrap();
    let script: String = files
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), script).unwrap();
    let file = std::fs::File::open(file.path()).unwrap();
    let mut cmd = Command::new("mariadb");
    // The test server's DSN has no password (ORBIT_TEST_MYSQL_DSN can give a user).
    cmd.arg(format!("--host={}", options.get_host()))
        .arg(format!("--port={}", options.get_port()))
        .arg(format!("--user={}", options.get_username()));
    let status = cmd
        .arg(&db.name)
        .stdin(file)
        .status()
        .expect("the mariadb client is installed");
    assert!(status.success(), "{files:?}");
    let (code, out, err) = orbit(&["migrate", "verify", "--dsn", &db.dsn]);
    assert_eq!(code, 0, "{files:?}: {out}{err}");
}

#[tokio::test]
async fn an_install_through_the_plain_client_verifies() {
    // The full install, as install-by-hand.md gives a new database.
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    plain_client_install_verifies(&[repo.join("generated-sql/install.sql")]).await;
}

#[tokio::test]
async fn every_migration_in_order_through_the_plain_client_verifies() {
    // Every migration in order, as a DBA's pipeline applies them on MariaDB (the frozen 000001
    // does not run on MySQL).
    let db = TestDb::empty().await;
    if db
        .skip_unless_mariadb("the frozen 000001 runs on MariaDB only")
        .await
    {
        return;
    }
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations");
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .collect();
    names.sort();
    plain_client_install_verifies(&names).await;
}

#[tokio::test]
async fn every_kind_of_damage_is_named_with_exit_1() {
    let db = TestDb::installed().await;
    exec(&db, "DROP PROCEDURE orbit_task_cancel").await;
    exec(&db, "DROP TABLE orbit_plan_fire").await;
    exec(
        &db,
        "ALTER TABLE orbit_queue DROP INDEX ix_queue_application",
    )
    .await;
    exec(
        &db,
        "ALTER TABLE orbit_worker MODIFY worker_id VARCHAR(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL",
    )
    .await;
    exec(
        &db,
        "DROP PROCEDURE orbit_queue_get;\
         CREATE PROCEDURE orbit_queue_get(IN p_token_hash BINARY(32), IN p_queue_id TEXT) BEGIN SELECT 1; END",
    )
    .await;

    // Before: status and up see nothing wrong (they read only the catalog).
    let (code, _, err) = orbit(&["migrate", "status", "--dsn", &db.dsn]);
    assert_eq!(code, 0, "{err}");

    let (code, out, err) = orbit(&["migrate", "verify", "--dsn", &db.dsn]);
    assert_eq!(code, 1, "{out}{err}");
    for expected in [
        "procedure orbit_task_cancel: missing",
        "table orbit_plan_fire: missing",
        "index orbit_queue.ix_queue_application: missing",
        "column orbit_worker.worker_id: type is varchar(100)",
        "procedure orbit_queue_get: its body differs",
    ] {
        assert!(out.contains(expected), "no {expected:?} in:\n{out}");
    }
    assert!(out.contains("5 problem(s)"), "{out}");

    // serve refuses, naming what is wrong, with exit 1.
    let err = match Server::try_start(env!("CARGO_BIN_EXE_orbit"), &db.dsn).await {
        Ok(_) => panic!("serve started on a damaged install"),
        Err(log) => log,
    };
    assert!(err.contains("damaged"), "{err}");
    assert!(
        err.contains("procedure orbit_task_cancel: missing"),
        "{err}"
    );
    assert!(err.contains("table orbit_plan_fire: missing"), "{err}");
    let code = Command::new(env!("CARGO_BIN_EXE_orbit"))
        .args(["serve", "--addr", "127.0.0.1:0", "--dsn", &db.dsn])
        .env("RUST_LOG", "off")
        .output()
        .unwrap()
        .status
        .code();
    assert_eq!(code, Some(1));
}

#[tokio::test]
async fn a_restored_install_verifies_and_serves_again() {
    let db = TestDb::installed().await;
    exec(&db, "DROP PROCEDURE orbit_task_claim").await;
    assert!(Server::try_start(env!("CARGO_BIN_EXE_orbit"), &db.dsn)
        .await
        .is_err());
    // The documented repair: load the release's install script again.
    let install = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/generated-sql/install.sql"
    ))
    .unwrap();
    let mut conn = db.conn().await;
    for s in orbit::sqlscript::split(&install) {
        sqlx::raw_sql(&s.sql).execute(&mut conn).await.unwrap();
    }
    let (code, out, err) = orbit(&["migrate", "verify", "--dsn", &db.dsn]);
    assert_eq!(code, 0, "{out}{err}");
    let server = Server::start(env!("CARGO_BIN_EXE_orbit"), &db.dsn).await;
    let ready = reqwest::get(format!("{}/readyz", server.url))
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
}

#[tokio::test]
async fn an_empty_database_is_not_installed() {
    let db = TestDb::empty().await;
    let (code, out, err) = orbit(&["migrate", "verify", "--dsn", &db.dsn]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("not installed"), "{out}");
}

/// A serving account with EXECUTE only (docs/install-by-hand.md) sees no tables and no procedure
/// bodies: serve still starts, and still refuses a dropped procedure; `migrate verify` as that
/// account says what it could not check, with exit 1.
#[tokio::test]
async fn a_serving_account_with_execute_only_still_catches_a_dropped_procedure() {
    let db = TestDb::installed().await;
    let user = format!("ov_{}", &db.name[db.name.len() - 8..]);
    exec(
        &db,
        &format!(
            "CREATE USER '{user}'@'%' IDENTIFIED BY 'pw-{user}'; GRANT EXECUTE ON `{}`.* TO '{user}'@'%'",
            db.name
        ),
    )
    .await;
    let options = orbit::migrate::parse_dsn(&db.dsn).unwrap();
    let dsn = format!(
        "mysql://{user}:pw-{user}@{}:{}/{}",
        options.get_host(),
        options.get_port(),
        db.name
    );
    let outcome = async move {
        let server = Server::start(env!("CARGO_BIN_EXE_orbit"), &dsn).await;
        drop(server);
        let (code, out, _) = orbit(&["migrate", "verify", "--dsn", &dsn]);
        assert_eq!(code, 1, "{out}");
        assert!(out.contains("not checked:"), "{out}");
        assert!(!out.contains(": missing"), "{out}");

        exec(&db, "DROP PROCEDURE orbit_task_resolve").await;
        let err = match Server::try_start(env!("CARGO_BIN_EXE_orbit"), &dsn).await {
            Ok(_) => panic!("serve started without orbit_task_resolve"),
            Err(log) => log,
        };
        assert!(
            err.contains("procedure orbit_task_resolve: missing"),
            "{err}"
        );
    };
    let result = tokio::spawn(outcome).await;
    let mut admin =
        <sqlx::MySqlConnection as sqlx::Connection>::connect(&orbit::testing::server_dsn())
            .await
            .unwrap();
    sqlx::raw_sql(&format!("DROP USER '{user}'@'%'"))
        .execute(&mut admin)
        .await
        .unwrap();
    if let Err(e) = result {
        std::panic::resume_unwind(e.into_panic());
    }
}
