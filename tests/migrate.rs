//! `orbit migrate`: install, idempotence, catalog checksums, and refusals that lose nothing.

use std::path::PathBuf;
use std::process::Command;

use orbit::migrate::{self, MigrateError, Migration};
use orbit::testing::{server_dsn, TestDb};
use sha2::{Digest, Sha256};
use sqlx::Row;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn text(row: &sqlx::mysql::MySqlRow, col: &str) -> String {
    String::from_utf8(row.try_get::<Vec<u8>, _>(col).unwrap()).unwrap()
}

#[tokio::test]
async fn up_installs_everything_then_is_a_noop() {
    let db = TestDb::empty().await;
    let mut conn = db.conn().await;
    let applied = migrate::up_embedded(&mut conn).await.unwrap();
    assert_eq!(
        applied,
        [migrate::INSTALL_NAME],
        "an empty database gets the full install"
    );
    let again = migrate::up_embedded(&mut conn).await.unwrap();
    assert!(again.is_empty(), "second run applied {again:?}");

    let status = migrate::status(&mut conn, &migrate::embedded())
        .await
        .unwrap();
    assert_eq!(status.version, orbit::codegen::EXTENSION_VERSION);
    assert!(status.pending.is_empty() && status.changed.is_empty());

    // Every rendered object exists in the database.
    let rendered = orbit::codegen::render().unwrap();
    for o in rendered
        .objects
        .iter()
        .filter(|o| o.set == orbit::codegen::Set::Extension)
    {
        let (table, col) = match o.kind {
            orbit::codegen::Kind::Table => ("information_schema.tables", "table_name"),
            orbit::codegen::Kind::Procedure => ("information_schema.routines", "routine_name"),
        };
        let schema_col = if table.ends_with("tables") {
            "table_schema"
        } else {
            "routine_schema"
        };
        let n: i64 = sqlx::query_scalar(&format!(
            "SELECT COUNT(*) FROM {table} WHERE {schema_col} = DATABASE() AND {col} = ?"
        ))
        .bind(&o.name)
        .fetch_one(&db.pool)
        .await
        .unwrap();
        assert_eq!(n, 1, "{} is not installed", o.name);
    }
}

#[tokio::test]
async fn catalog_checksums_match_the_files() {
    let db = TestDb::installed().await;
    let rows = sqlx::query("SELECT kind, name, version, checksum FROM orbit_extension")
        .fetch_all(&db.pool)
        .await
        .unwrap();
    let rendered = orbit::codegen::render().unwrap();
    let extension = rendered
        .objects
        .iter()
        .filter(|o| o.set == orbit::codegen::Set::Extension)
        .count();
    let migrations = migrate::embedded();
    assert_eq!(
        rows.len(),
        extension + migrations.len() + 1,
        "one row per object, per migration and the extension"
    );
    for row in &rows {
        let (kind, name, checksum) = (text(row, "kind"), text(row, "name"), text(row, "checksum"));
        let file = match kind.as_str() {
            "table" => repo().join(format!("generated-sql/tables/{name}.sql")),
            "procedure" => repo().join(format!("generated-sql/procedures/{name}.sql")),
            "migration" | "extension" => {
                // A migration's row, or the extension's: the newest migration's body.
                let file = match kind.as_str() {
                    "migration" => format!("migrations/{name}.sql"),
                    _ => format!("migrations/{}.sql", migrations.last().unwrap().name),
                };
                let m = std::fs::read_to_string(repo().join(&file)).unwrap();
                assert_eq!(
                    checksum,
                    orbit::codegen::migration_checksum(&m),
                    "{kind} {name}"
                );
                continue;
            }
            other => panic!("unexpected catalog kind {other}"),
        };
        let bytes = std::fs::read(&file).unwrap();
        assert_eq!(
            checksum,
            hex::encode(Sha256::digest(&bytes)),
            "{}",
            file.display()
        );
    }
}

#[tokio::test]
async fn a_changed_applied_migration_is_refused_by_name() {
    let db = TestDb::installed().await;
    let mut changed = migrate::embedded();
    changed[0].text =
        changed[0]
            .text
            .replacen("SET NAMES utf8mb4;", "SET NAMES utf8mb4; -- edited", 1);
    let mut conn = db.conn().await;
    let err = migrate::up(&mut conn, &changed, None, |_, _, _| {})
        .await
        .unwrap_err();
    assert!(
        matches!(&err, MigrateError::Changed { name, .. } if name == "000001_install"),
        "{err}"
    );
    assert!(err.to_string().contains("000001_install"));
}

#[tokio::test]
async fn a_failing_migration_names_file_and_line_and_claims_no_version() {
    let db = TestDb::installed().await;
    let mut migrations = migrate::embedded();
    migrations.push(Migration {
        version: 3,
        name: "000003_broken".into(),
        text: "CREATE TABLE IF NOT EXISTS orbit_probe (id INT PRIMARY KEY COMMENT 'x') COMMENT='x';\n\
               SELEC broken syntax here;\n\
               INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES ('extension','orbit',3,'x',NOW(6)) ON DUPLICATE KEY UPDATE version = 3;\n"
            .into(),
    });
    let mut conn = db.conn().await;
    let err = migrate::up(&mut conn, &migrations, None, |_, _, _| {})
        .await
        .unwrap_err();
    match &err {
        MigrateError::Statement { name, line, .. } => {
            assert_eq!(name, "000003_broken");
            assert_eq!(*line, 2);
        }
        other => panic!("expected a statement error, got {other}"),
    }
    let status = migrate::status(&mut conn, &migrations).await.unwrap();
    assert_eq!(
        status.version, 2,
        "the catalog must not claim the failed version"
    );
    assert_eq!(status.pending, ["000003_broken"]);
}

#[tokio::test]
async fn the_install_script_loads_with_the_mariadb_client() {
    let db = TestDb::empty().await;
    let opts: sqlx::mysql::MySqlConnectOptions = server_dsn().parse().unwrap();
    let script = std::fs::File::open(repo().join("generated-sql/install.sql")).unwrap();
    let client = ["mariadb", "mysql"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok())
        .expect("a mariadb or mysql client on PATH");
    let out = Command::new(client)
        .args([
            "-h",
            opts.get_host(),
            "-P",
            &opts.get_port().to_string(),
            "-u",
            opts.get_username(),
            &db.name,
        ])
        .stdin(script)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Prepared CALLs carry no column names in sqlx (the prepare step cannot know them): read by position.
    let version: u64 = sqlx::query("CALL orbit_extension_version()")
        .fetch_one(&db.pool)
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, u64::from(orbit::codegen::EXTENSION_VERSION));
    // And migrate sees the hand-installed extension as current.
    let mut conn = db.conn().await;
    assert!(migrate::up_embedded(&mut conn).await.unwrap().is_empty());
}

fn orbit(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_orbit"))
        .args(args)
        .env_remove("ORBIT_MYSQL_DSN")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_dsns_get_a_readable_message_and_no_panic() {
    for (dsn, code, needle) in [
        ("not a url", 2, "not a valid MySQL URL"),
        ("mysql://root@127.0.0.1:3306", 2, "names no database"),
        ("mysql://root@127.0.0.1:1/orbit", 3, "cannot connect"),
    ] {
        let (got, err) = orbit(&["migrate", "up", "--dsn", dsn]);
        assert_eq!(got, code, "{dsn}: {err}");
        assert!(err.contains(needle), "{dsn}: {err}");
        assert!(!err.contains("panicked"), "{dsn}: {err}");
    }
    let (got, err) = orbit(&["migrate", "status"]);
    assert_eq!(got, 2);
    assert!(err.contains("ORBIT_MYSQL_DSN"), "{err}");
}

#[tokio::test]
async fn a_user_without_privileges_gets_a_readable_message() {
    let db = TestDb::empty().await;
    let user = format!("orbit_np_{}", &db.name[8..]);
    sqlx::raw_sql(&format!("CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'"))
        .execute(&db.pool)
        .await
        .unwrap();
    let opts: sqlx::mysql::MySqlConnectOptions = server_dsn().parse().unwrap();
    let dsn = format!(
        "mysql://{user}:pw@{}:{}/{}",
        opts.get_host(),
        opts.get_port(),
        db.name
    );
    let (code, err) = orbit(&["migrate", "up", "--dsn", &dsn]);
    sqlx::raw_sql(&format!("DROP USER '{user}'@'%'"))
        .execute(&db.pool)
        .await
        .unwrap();
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("denied"), "{err}");
    assert!(
        !err.contains("pw@"),
        "the password must not be printed: {err}"
    );
}

/// docs/install-by-hand.md's privileges are enough, and the one a procedure needs beyond its
/// tables is checked: without CREATE TEMPORARY TABLES `migrate up` refuses before any change; an
/// installing account holding exactly the documented privileges installs every migration, and a serving account with EXECUTE only then runs the procedures
/// that need the definer's rights beyond its tables: a batch with a replay and a keyed task
/// (orbit_task_submit_many creates a temporary table) and a single submit.
#[tokio::test]
async fn the_documented_privileges_install_and_serve() {
    let db = TestDb::empty().await;
    let suffix = &db.name[db.name.len() - 8..];
    let (installer, server) = (format!("oi_{suffix}"), format!("os_{suffix}"));
    sqlx::raw_sql(&format!(
        "CREATE USER '{installer}'@'%' IDENTIFIED BY 'pw';
         GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX, DROP, CREATE ROUTINE, ALTER ROUTINE,
               CREATE TEMPORARY TABLES ON `{name}`.* TO '{installer}'@'%';
         CREATE USER '{server}'@'%' IDENTIFIED BY 'pw';
         GRANT EXECUTE ON `{name}`.* TO '{server}'@'%'",
        name = db.name
    ))
    .execute(&db.pool)
    .await
    .unwrap();
    let opts: sqlx::mysql::MySqlConnectOptions = server_dsn().parse().unwrap();
    let dsn = |user: &str| {
        format!(
            "mysql://{user}:pw@{}:{}/{}",
            opts.get_host(),
            opts.get_port(),
            db.name
        )
    };
    let (installer_dsn, server_dsn) = (dsn(&installer), dsn(&server));
    let (name, pool, revoke) = (db.name.clone(), db.pool.clone(), installer.clone());
    let outcome = tokio::spawn(async move {
        // Without CREATE TEMPORARY TABLES, migrate refuses before it changes anything.
        sqlx::raw_sql(&format!(
            "REVOKE CREATE TEMPORARY TABLES ON `{name}`.* FROM '{revoke}'@'%'"
        ))
        .execute(&pool)
        .await
        .unwrap();
        let (code, err) = orbit(&["migrate", "up", "--dsn", &installer_dsn]);
        assert_eq!(code, 3, "{err}");
        assert!(err.contains("CREATE TEMPORARY TABLES"), "{err}");
        let tables: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(tables, 0, "nothing was installed");
        sqlx::raw_sql(&format!(
            "GRANT CREATE TEMPORARY TABLES ON `{name}`.* TO '{revoke}'@'%'"
        ))
        .execute(&pool)
        .await
        .unwrap();
        let (code, err) = orbit(&["migrate", "up", "--dsn", &installer_dsn]);
        assert_eq!(code, 0, "{err}");
        let pool = sqlx::mysql::MySqlPoolOptions::new()
            .max_connections(2)
            .connect(&server_dsn)
            .await
            .unwrap();
        let db = orbit::db::Db::new(pool);
        let (bootstrap, token) = orbit::db::queues::Bootstrap::with_new_token(
            "app",
            "test",
            "default",
            "q1",
            &orbit::testing::ALL_SCOPES,
            "privileges",
        );
        let queue_id = db.admin_bootstrap(&bootstrap).await.unwrap().queue_id;
        let hash = orbit::auth::token_hash(&token);
        let task = |key: &str| orbit::db::tasks::NewTask {
            queue_id: queue_id.clone(),
            handler: "h".into(),
            handler_version: "v1".into(),
            payload_version: "v1".into(),
            payload: "{}".into(),
            concurrency_key: Some(key.into()),
            ..Default::default()
        };
        let single = db.task_submit(&hash, "one", &task("")).await.unwrap();
        let items = vec![
            ("one".to_string(), task("")),
            ("two".to_string(), task("k")),
        ];
        let out = db.task_submit_many(&hash, &items).await.unwrap();
        assert!(out[0].replayed && out[0].task.id == single.task.id);
        assert!(!out[1].replayed);
    })
    .await;
    sqlx::raw_sql(&format!(
        "DROP USER '{installer}'@'%'; DROP USER '{server}'@'%'"
    ))
    .execute(&db.pool)
    .await
    .unwrap();
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
}

#[tokio::test]
async fn a_full_install_stopped_part_way_completes_when_run_again() {
    let db = TestDb::empty().await;
    let install = migrate::embedded_install();
    let statements = orbit::sqlscript::split(&install.text);
    // Stop half-way, as a killed `migrate up` would (each DDL statement commits on its own).
    let mut conn = db.conn().await;
    for s in &statements[..statements.len() / 2] {
        sqlx::raw_sql(&s.sql).execute(&mut conn).await.unwrap();
    }
    let status = migrate::status(&mut conn, &migrate::embedded())
        .await
        .unwrap();
    assert_eq!(
        status.version, 0,
        "a half-applied install claims no version"
    );
    // Run again: the full install again, which completes it.
    let applied = migrate::up_embedded(&mut conn).await.unwrap();
    assert_eq!(applied, [migrate::INSTALL_NAME]);
    let status = migrate::status(&mut conn, &migrate::embedded())
        .await
        .unwrap();
    assert_eq!(status.version, orbit::codegen::EXTENSION_VERSION);
    assert!(status.pending.is_empty() && status.changed.is_empty());
    let report = orbit::verify::verify(&mut conn).await.unwrap();
    assert!(report.ok(), "{:?}", orbit::verify::describe(&report));
}

#[tokio::test]
async fn numbered_migrations_alone_reach_the_same_version() {
    // Without the full install (`orbit migrate up --dir`), an empty database gets every
    // migration in turn, and ends at the same version (on MariaDB: 000001 does not run on MySQL).
    let db = TestDb::empty().await;
    let mut conn = db.conn().await;
    if db
        .skip_unless_mariadb("the frozen 000001 runs on MariaDB only")
        .await
    {
        return;
    }
    let applied = migrate::up(&mut conn, &migrate::embedded(), None, |_, _, _| {})
        .await
        .unwrap();
    assert_eq!(applied, ["000001_install", "000002_upgrade"]);
    let status = migrate::status(&mut conn, &migrate::embedded())
        .await
        .unwrap();
    assert_eq!(status.version, orbit::codegen::EXTENSION_VERSION);
    assert!(orbit::verify::verify(&mut conn).await.unwrap().ok());
}
