//! Exit codes follow the README: 0 success; 1 the command ran and found a problem; 2 bad usage or
//! configuration (DSN, names, files, an address in use, a stale or missing template); 3 a
//! database error.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use orbit::testing::TestDb;

fn orbit(args: &[&str], cwd: &Path) -> (i32, String, String) {
    orbit::testing::run_cli(env!("CARGO_BIN_EXE_orbit"), args, &[], Some(cwd))
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn a_dsn_of_another_database_kind_is_refused_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let dev_dir = dir.path().join("dev");
    let dsn = "postgres://user:secret@127.0.0.1:5432/orbit";
    let out = dir.path().join("c.json");
    let out = out.to_str().unwrap();
    for args in [
        vec!["serve", "--dsn", dsn, "--addr", "127.0.0.1:0"],
        vec!["migrate", "up", "--dsn", dsn],
        vec!["migrate", "status", "--dsn", dsn],
        vec![
            "dev",
            "--dsn",
            dsn,
            "--addr",
            "127.0.0.1:0",
            "--dir",
            dev_dir.to_str().unwrap(),
        ],
        vec!["bench", "baseline", "--dsn", dsn],
        vec![
            "bench",
            "baseline",
            "--dsn",
            "postgres://user@127.0.0.1:5432",
        ],
        vec!["admin", "credential", "revoke", "--id", "1", "--dsn", dsn],
        vec![
            "admin",
            "bootstrap",
            "--dsn",
            dsn,
            "--application",
            "a",
            "--environment",
            "e",
            "--namespace",
            "n",
            "--queue",
            "q",
            "--output",
            out,
        ],
    ] {
        let (code, _, err) = orbit(&args, dir.path());
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains("postgres:// URL") && err.contains("MySQL or MariaDB"),
            "{args:?}: {err}"
        );
        assert!(
            !err.contains("secret"),
            "{args:?} shows the password: {err}"
        );
    }
    assert!(!dev_dir.exists(), "dev built nothing");
}

#[test]
fn gen_refuses_a_root_without_templates_and_a_stale_template_with_exit_2() {
    let empty = tempfile::tempdir().unwrap();
    let root = empty.path().to_str().unwrap();
    for args in [
        vec!["gen", "--root", root],
        vec!["gen", "--check", "--root", root],
    ] {
        let (code, _, err) = orbit(&args, &repo());
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("templates/") && err.contains(root), "{err}");
    }
    assert_eq!(
        std::fs::read_dir(empty.path()).unwrap().count(),
        0,
        "gen wrote nothing into a folder that is not the repository"
    );

    // A template changed since the binary was built: `gen` cannot render it (configuration).
    let t = tempfile::tempdir().unwrap();
    for dir in ["templates", "generated-sql", "migrations"] {
        copy_dir(&repo().join(dir), &t.path().join(dir));
    }
    let template = t
        .path()
        .join("templates/procedures/orbit_extension_version.sql");
    let text = std::fs::read_to_string(&template).unwrap();
    std::fs::write(&template, format!("{text}\n-- changed\n")).unwrap();
    let (code, _, err) = orbit(&["gen", "--root", t.path().to_str().unwrap()], &repo());
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("templates/procedures/orbit_extension_version.sql"),
        "{err}"
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

#[tokio::test]
async fn an_address_in_use_is_a_usage_error_for_serve_and_dev() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let db = TestDb::installed().await;
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = orbit(&["serve", "--dsn", &db.dsn, "--addr", &addr], dir.path());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&addr), "{err}");

    // `dev` says so before it builds or starts a database.
    let dev_dir = dir.path().join("dev");
    let started = Instant::now();
    let (code, _, err) = orbit(
        &["dev", "--addr", &addr, "--dir", dev_dir.to_str().unwrap()],
        dir.path(),
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(&addr) && err.contains("in use"), "{err}");
    assert!(!dev_dir.exists(), "no private database was built");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    // With --dsn too: nothing is installed in the database.
    let fresh = TestDb::empty().await;
    let (code, _, err) = orbit(
        &[
            "dev",
            "--dsn",
            &fresh.dsn,
            "--addr",
            &addr,
            "--dir",
            dev_dir.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_eq!(code, 2, "{err}");
    let tables: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()",
    )
    .fetch_one(&fresh.pool)
    .await
    .unwrap();
    assert_eq!(tables, 0, "dev installed nothing");
    drop(taken);
}
