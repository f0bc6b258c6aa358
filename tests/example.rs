//! `cargo run --example keyed-concurrency` against a spawned server prints exactly SPEC §7's lines.

use std::process::Command;

use orbit::testing::{Server, TestDb};

fn example_binary() -> std::path::PathBuf {
    // target/<profile>/deps/example-… -> target/<profile>/examples/keyed-concurrency
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join("keyed-concurrency")
}

#[tokio::test]
async fn the_keyed_concurrency_example_prints_the_two_lines() {
    let db = TestDb::installed().await;
    let server = Server::start(env!("CARGO_BIN_EXE_orbit"), &db.dsn).await;
    let dir = tempfile::tempdir().unwrap();
    let creds = dir.path().join("orbit-keyed.credentials.json");
    let out = Command::new(env!("CARGO_BIN_EXE_orbit"))
        .args([
            "admin",
            "bootstrap",
            "--application",
            "keyed-example",
            "--namespace",
            "default",
            "--environment",
            "test",
            "--queue",
            "initial",
            "--worker-access",
            "--output",
        ])
        .arg(&creds)
        .env("ORBIT_MYSQL_DSN", &db.dsn)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let binary = example_binary();
    assert!(
        binary.exists(),
        "build the example first (cargo build --all-targets): {}",
        binary.display()
    );
    let run = tokio::process::Command::new(&binary)
        .env("ORBIT_URL", &server.url)
        .env("ORBIT_CREDENTIALS_FILE", &creds)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(
        stdout,
        "queues=2 completed=2 tokens_increasing=true\nresource_writes=2 stale_write_rejected=true worker_drained=true\n"
    );
}
