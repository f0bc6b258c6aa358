//! `orbit bench` scenarios that run in seconds, end to end against the test server (each
//! creates its own database and drops it).

use orbit::testing::server_dsn;

/// `handoff-sql` hands the key on with every call: it completes only if each
/// `orbit_attempt_finish` granted the next task, and reports every call.
#[test]
fn handoff_sql_reports_every_call() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_orbit"))
        .args([
            "bench",
            "handoff-sql",
            "--tasks",
            "40",
            "--baseline-seconds",
            "1",
            "--json",
        ])
        .args(["--dsn", &server_dsn()])
        .output()
        .expect("run orbit bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("JSON report line");
    assert_eq!(report["scenario"], "handoff-sql");
    assert_eq!(report["tasks"], 40);
    assert!(report["p50_ms"].as_f64().unwrap() > 0.0, "{report}");
    assert!(report["tasks_per_s"].as_f64().unwrap() > 0.0, "{report}");
}

/// `purge` loads finished tasks, times claims without and during the scheduler's purge, and
/// completes only if the purge deleted every one of them.
#[test]
fn purge_deletes_every_loaded_task_and_reports_claims_without_and_during() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_orbit"))
        .args([
            "bench",
            "purge",
            "--tasks",
            "2000",
            "--samples",
            "20",
            "--baseline-seconds",
            "1",
            "--json",
        ])
        .args(["--dsn", &server_dsn()])
        .output()
        .expect("run orbit bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("JSON report line");
    assert_eq!(report["scenario"], "purge");
    assert_eq!(report["tasks"], 2000);
    assert_eq!(report["details"]["claims_without_purge"]["claims"], 20);
    assert!(report["tasks_per_s"].as_f64().unwrap() > 0.0, "{report}");
}
