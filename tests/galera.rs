//! Orbit on a three-node MariaDB Galera cluster on loopback (issue #9). Ignored by default: it
//! starts three `mariadbd` processes with the Galera provider. Run with
//!
//! ```sh
//! cargo test --release --test galera -- --include-ignored --nocapture
//! ```
//!
//! - `installs_and_serves_through_one_node`: the extension installs through node 1 with the real
//!   `migrate up` and replicates (every table has a primary key, every object arrives on node 3);
//!   `orbit serve` with the DSN list of all three nodes serves a submit.
//! - `writer_node_killed_under_keyed_workload`: SDK workers run keyed, fenced tasks submitted over
//!   HTTP; the node the façade writes to is SIGKILLed; the façade moves to a survivor; the run
//!   drains and the invariant checker finds no violation. Prints the stall and the summary line.
//! - `bench_on_cluster`: `orbit bench e2e` and `keys` against node 1 of the cluster and against a private
//!   single server started with the same flags (minus Galera), in one sitting (BENCHMARKS.md).

mod cluster;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluster::Cluster;
use orbit::chaos::{checker, workload};
use orbit::db::Db;
use orbit::migrate;
use orbit::testing::{Server, TestDb, ALL_SCOPES};
use orbit_sdk::fence::mysql::MySqlFence;
use orbit_sdk::{Client, Worker};
use sqlx::{Connection, MySqlConnection, MySqlPool};

const DATABASE: &str = "orbit";

/// One cluster at a time: the tests of this file run in parallel otherwise, and three clusters on
/// two cores would distort the stall and the benchmark.
static ONE_CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A tenant on the cluster: a credential with every scope and two queues of one namespace.
struct Tenant {
    token: String,
    queues: Vec<String>,
}

/// Creates the database and installs the extension through node 1 with `migrate up`, then checks
/// on node 3 that everything replicated and that the schema suits Galera.
async fn install(cluster: &Cluster) {
    let mut admin = MySqlConnection::connect(&cluster.nodes[0].server_dsn())
        .await
        .expect("connect to node 1");
    sqlx::raw_sql(&format!("CREATE DATABASE {DATABASE} CHARACTER SET utf8mb4"))
        .execute(&mut admin)
        .await
        .expect("create the database");
    let _ = admin.close().await;
    let started = Instant::now();
    let mut conn = migrate::connect(&cluster.nodes[0].dsn(DATABASE))
        .await
        .expect("connect for migrate");
    let applied = migrate::up_embedded(&mut conn)
        .await
        .expect("migrate up through node 1");
    let _ = conn.close().await;
    eprintln!(
        "galera: migrate up applied {applied:?} through node 1 in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // Node 3 has the same extension, objects and catalog (DDL replicates in total order).
    let last = cluster.nodes.len() - 1;
    let mut other = migrate::connect(&cluster.nodes[last].dsn(DATABASE))
        .await
        .expect("connect to the last node");
    let status = migrate::status(&mut other, &migrate::embedded())
        .await
        .expect("status on the last node");
    assert_eq!(status.version, migrate::expected_version());
    assert!(status.pending.is_empty() && status.changed.is_empty());
    let without_pk: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(t.table_name AS CHAR) FROM information_schema.tables t \
          WHERE t.table_schema = DATABASE() AND NOT EXISTS (SELECT 1 FROM information_schema.table_constraints c \
                WHERE c.table_schema = t.table_schema AND c.table_name = t.table_name AND c.constraint_type = 'PRIMARY KEY')",
    )
    .fetch_all(&mut other)
    .await
    .unwrap();
    assert!(
        without_pk.is_empty(),
        "Galera replicates rows by primary key; tables without one: {without_pk:?}"
    );
    let not_innodb: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(table_name AS CHAR) FROM information_schema.tables WHERE table_schema = DATABASE() AND engine <> 'InnoDB'",
    )
    .fetch_all(&mut other)
    .await
    .unwrap();
    assert!(
        not_innodb.is_empty(),
        "Galera replicates InnoDB only: {not_innodb:?}"
    );
    let routines: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.routines WHERE routine_schema = DATABASE()",
    )
    .fetch_one(&mut other)
    .await
    .unwrap();
    assert!(routines > 0, "procedures replicated");
    let _ = other.close().await;
}

async fn bootstrap(cluster: &Cluster) -> Tenant {
    let pool = migrate::connect_pool(&cluster.nodes[0].dsn(DATABASE), 2)
        .await
        .expect("pool on node 1");
    let db = Db::new(pool.clone());
    let token = orbit::auth::generate_token();
    let hash = orbit::auth::token_hash(&token);
    let b = db
        .admin_bootstrap(&orbit::db::queues::Bootstrap {
            application: "galera".into(),
            environment: "test".into(),
            namespace: "default".into(),
            queue: "q1".into(),
            token_hash: hash.to_vec(),
            token_hint: orbit::auth::token_hint(&token),
            scopes: ALL_SCOPES.iter().map(|s| s.to_string()).collect(),
            label: "galera".into(),
            ..Default::default()
        })
        .await
        .expect("bootstrap");
    let q2 = db
        .queue_create(&hash, None, "q2", None, None)
        .await
        .expect("second queue")
        .id;
    pool.close().await;
    Tenant {
        token,
        queues: vec![b.queue_id, q2],
    }
}

/// The node holding the façade's connections to `orbit` (the one it writes to), 0-based.
async fn writer_node(cluster: &Cluster) -> Option<usize> {
    let mut best = None;
    for (i, node) in cluster.nodes.iter().enumerate() {
        if !node.running() {
            continue;
        }
        let Ok(mut c) = MySqlConnection::connect(&node.server_dsn()).await else {
            continue;
        };
        let n = match (
            orbit::processlist::own_id(&mut c).await,
            orbit::processlist::read(&mut c).await,
        ) {
            (Ok((me, _)), Ok(list)) => list
                .iter()
                .filter(|p| p.id != me && p.db.as_deref() == Some(DATABASE))
                .count(),
            _ => 0,
        };
        let _ = c.close().await;
        if n > 0 && best.is_none_or(|(_, m)| n > m) {
            best = Some((i, n));
        }
    }
    best.map(|(i, _)| i)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts a three-node Galera cluster; run with --include-ignored"]
async fn installs_and_serves_through_one_node() {
    let _one = ONE_CLUSTER.lock().await;
    let cluster = Cluster::start(3).await;
    install(&cluster).await;
    let tenant = bootstrap(&cluster).await;
    let server = Server::start(env!("CARGO_BIN_EXE_orbit"), &cluster.dsn_list(DATABASE)).await;
    let client = Client::new(&server.url, &tenant.token);
    let task = workload::task(&tenant.queues[0], "galera/smoke", 0);
    let submitted = client.submit("smoke-1", &task).await.expect("submit");
    assert!(submitted.created);
    // The row is on every node (replication is synchronous at commit).
    for node in &cluster.nodes {
        let pool = migrate::connect_pool(&node.dsn(DATABASE), 1).await.unwrap();
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orbit_task WHERE id = ?")
            .bind(submitted.task.id)
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(n, 1, "task on node {}", node.index);
        pool.close().await;
    }
    assert_eq!(
        writer_node(&cluster).await,
        Some(0),
        "the façade writes through node 1"
    );
    server.stop().await;
}

/// What the submitters saw.
#[derive(Default)]
struct Submits {
    accepted: Vec<u64>,
    /// When each newly created task (201) got its answer: a new write committed by the cluster.
    created: Vec<Instant>,
    /// Answers 200 to a retried Idempotency-Key (the first try committed, its answer was lost).
    repeated: u64,
    /// 5xx answers and lost connections (each retried with the same Idempotency-Key).
    unavailable: u64,
}

const KEYS: u64 = 4;
const WORKERS: usize = 4;
const SUBMITTERS: usize = 4;
/// Pause between two submits of one submitter (about 40 submits/s in all).
const SUBMIT_EVERY: Duration = Duration::from_millis(100);
/// Tasks the survivors finish after the first one past the kill before submitting stops (at
/// about 40 submits/s, some ten seconds of workload).
const AFTER_KILL_TASKS: i64 = 400;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts a three-node Galera cluster; run with --include-ignored"]
async fn writer_node_killed_under_keyed_workload() {
    let _one = ONE_CLUSTER.lock().await;
    let mut cluster = Cluster::start(3).await;
    install(&cluster).await;
    let tenant = bootstrap(&cluster).await;
    // The resource the tasks write to lives outside the cluster, in its own database.
    let resource = TestDb::fenced().await;
    let server = Server::start(env!("CARGO_BIN_EXE_orbit"), &cluster.dsn_list(DATABASE)).await;
    eprintln!(
        "galera: orbit serve at {} (log {})",
        server.url,
        server.log.display()
    );

    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let fence = MySqlFence::new(resource.pool.clone(), &format!("worker-{w}"));
        let mut worker =
            Worker::new(&server.url, &tenant.token, &format!("galera-worker-{w}")).capacity(4);
        for q in &tenant.queues {
            worker = worker.queue(q);
        }
        let worker = worker.handler(workload::HANDLER, "v1", move |ctx| {
            let fence = fence.clone();
            async move {
                workload::fenced_append(&fence, &ctx).await.map_err(|e| {
                    eprintln!("{}", workload::describe(&e, &ctx));
                    e.into_handler_error()
                })
            }
        });
        workers.push(worker.start());
    }

    let submits = Arc::new(Mutex::new(Submits::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let counter = Arc::new(AtomicU64::new(0));
    let mut submitters = Vec::new();
    for s in 0..SUBMITTERS {
        let (client, submits, stop, counter) = (
            Client::new(&server.url, &tenant.token),
            submits.clone(),
            stop.clone(),
            counter.clone(),
        );
        let queues = tenant.queues.clone();
        submitters.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let n = counter.fetch_add(1, Ordering::Relaxed);
                let task = workload::task(
                    &queues[(n % 2) as usize],
                    &format!("galera/{}", n % KEYS),
                    n,
                );
                let idem = format!("galera-{s}-{n}");
                loop {
                    match client.submit(&idem, &task).await {
                        Ok(t) => {
                            let mut seen = submits.lock().unwrap();
                            seen.accepted.push(t.task.id);
                            if t.created {
                                seen.created.push(Instant::now());
                            } else {
                                seen.repeated += 1;
                            }
                            break;
                        }
                        Err(e) if e.status == 0 || e.status >= 500 => {
                            submits.lock().unwrap().unavailable += 1;
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        Err(e) => panic!("submit refused: {e}"),
                    }
                }
                tokio::time::sleep(SUBMIT_EVERY).await;
            }
        }));
    }

    // Warm up until the workload runs (tasks accepted, and finished as seen on a survivor),
    // then find the writer and kill it.
    let warm_up = Instant::now();
    let writer = loop {
        if !submits.lock().unwrap().accepted.is_empty() {
            if let Some(writer) = writer_node(&cluster).await {
                break writer;
            }
        }
        assert!(
            warm_up.elapsed() < Duration::from_secs(60),
            "no task accepted within 60 s; serve log:\n{}",
            std::fs::read_to_string(&server.log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let survivor = (writer + 1) % cluster.nodes.len();
    let survivor_pool: MySqlPool = migrate::connect_pool(&cluster.nodes[survivor].dsn(DATABASE), 2)
        .await
        .unwrap();
    let succeeded = || async {
        sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM orbit_task WHERE state = 'SUCCEEDED'")
            .fetch_one(&survivor_pool)
            .await
    };
    let before_kill = loop {
        let n = succeeded().await.unwrap();
        if n > 0 || warm_up.elapsed() > Duration::from_secs(60) {
            break n;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let accepted_before = submits.lock().unwrap().accepted.len();
    assert!(
        accepted_before > 0 && before_kill > 0,
        "the workload runs before the kill (accepted {accepted_before}, succeeded {before_kill})"
    );
    eprintln!(
        "galera: SIGKILL node {} (the writer) after {accepted_before} accepted, {before_kill} succeeded",
        writer + 1
    );
    let killed_at = Instant::now();
    cluster.kill(writer);

    // The first finish committed after the kill, seen on a survivor.
    let first_ack = loop {
        if let Ok(n) = succeeded().await {
            if n > before_kill {
                break killed_at.elapsed();
            }
        }
        assert!(
            killed_at.elapsed() < Duration::from_secs(90),
            "no task finished within 90 s of the kill; serve log:\n{}",
            std::fs::read_to_string(&server.log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // Keep the workload going on the survivors until they have finished a good number more
    // (AFTER_KILL_TASKS), then stop submitting.
    let resumed_at = succeeded().await.unwrap_or(before_kill);
    loop {
        if let Ok(n) = succeeded().await {
            if n >= resumed_at + AFTER_KILL_TASKS {
                break;
            }
        }
        assert!(
            killed_at.elapsed() < Duration::from_secs(180),
            "the survivors finished fewer than {AFTER_KILL_TASKS} tasks within 180 s of the kill"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for s in submitters {
        s.await.unwrap();
    }
    let (accepted, first_submit, unavailable, repeated) = {
        let seen = submits.lock().unwrap();
        let first = seen
            .created
            .iter()
            .filter(|t| **t > killed_at)
            .min()
            .map(|t| t.duration_since(killed_at));
        (
            seen.accepted.clone(),
            first,
            seen.unavailable,
            seen.repeated,
        )
    };
    let first_submit = first_submit.expect("a task was created after the kill");
    let new_writer = writer_node(&cluster).await;
    eprintln!(
        "galera: the façade now writes through node {:?}",
        new_writer.map(|i| i + 1)
    );
    assert!(new_writer.is_some_and(|w| w != writer));

    // Drain: every accepted task ends.
    let drain_started = Instant::now();
    let open = loop {
        let open: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM orbit_task WHERE state NOT IN ('SUCCEEDED','FAILED','CANCELLED','EXPIRED','NEEDS_REVIEW')",
        )
        .fetch_one(&survivor_pool)
        .await
        .unwrap();
        if open == 0 || drain_started.elapsed() > Duration::from_secs(120) {
            break open;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    for w in workers {
        if open == 0 {
            let _ = tokio::time::timeout(Duration::from_secs(30), w.drain()).await;
        } else {
            w.abort();
        }
    }

    let report = checker::check(&survivor_pool, Some(&resource.pool), &accepted)
        .await
        .expect("checker");
    let states: BTreeMap<_, _> = report.states.clone();
    let serve_log = std::fs::read_to_string(&server.log).unwrap_or_default();
    let failovers = serve_log
        .lines()
        .filter(|l| l.contains("moving calls to the next server"))
        .count();
    println!(
        "galera: stall after SIGKILL of the writer: first task created (201) after {:.2} s, first task finished after {:.2} s; \
         {unavailable} submit answers were 503/lost connections, retried with the same Idempotency-Key \
         ({repeated} of the retries answered 200: the first try had committed); {failovers} failover(s) logged by serve",
        first_submit.as_secs_f64(),
        first_ack.as_secs_f64()
    );
    for line in serve_log
        .lines()
        .filter(|l| l.contains("UNAVAILABLE") || l.contains("moving calls"))
    {
        println!("galera: serve: {line}");
    }
    println!(
        "galera: {} grants, {} fenced writes, states {states:?}",
        report.grants, report.fenced_writes
    );
    println!("{}", report.summary(1));
    assert!(
        report.ok(),
        "violations: {:#?}\nserve log:\n{serve_log}",
        report.details
    );
    assert_eq!(open, 0, "every accepted task ended");
    assert!(failovers >= 1, "serve logged its failover:\n{serve_log}");
    server.stop().await;
    survivor_pool.close().await;
}

/// Runs `orbit bench SCENARIO ARGS --dsn DSN --json` and returns its JSON report line.
fn bench(scenario: &str, args: &[String], dsn: &str) -> serde_json::Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_orbit"))
        .args(["bench", scenario, "--dsn", dsn, "--json"])
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("run orbit bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "orbit bench {scenario} failed: {stdout}"
    );
    print!("{stdout}");
    serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("JSON report line")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmarks a three-node Galera cluster; run with --include-ignored"]
async fn bench_on_cluster() {
    let _one = ONE_CLUSTER.lock().await;
    let tasks = std::env::var("ORBIT_GALERA_BENCH_TASKS").unwrap_or_else(|_| "2000".into());
    let scenarios: [(&str, Vec<String>); 2] = [
        ("e2e", vec!["--tasks".into(), tasks.clone()]),
        (
            "keys",
            vec![
                "--tasks".into(),
                tasks.clone(),
                "--keys".into(),
                "100".into(),
            ],
        ),
    ];
    // A single private server with the same flags, minus Galera, in the same sitting.
    let single_dir = tempfile::tempdir().unwrap();
    let single = orbit::dev::start_private_server(single_dir.path())
        .await
        .expect("a private single server");
    let server_dsn = single.dsn.trim_end_matches("/orbit").to_string();
    let alone: Vec<_> = scenarios
        .iter()
        .map(|(name, args)| bench(name, args, &server_dsn))
        .collect();
    drop(single);

    let cluster = Cluster::start(3).await;
    let galera: Vec<_> = scenarios
        .iter()
        .map(|(name, args)| bench(name, args, &cluster.nodes[0].server_dsn()))
        .collect();
    for (((name, args), a), g) in scenarios.iter().zip(&alone).zip(&galera) {
        println!(
            "bench {name} {}: single server {} tasks/s (p99 {} ms, baseline {} commits/s); \
             Galera 3 nodes through node 1 {} tasks/s (p99 {} ms, baseline {} commits/s)",
            args.join(" "),
            a["tasks_per_s"],
            a["p99_ms"],
            a["baseline_commits_per_s"],
            g["tasks_per_s"],
            g["p99_ms"],
            g["baseline_commits_per_s"]
        );
    }
}
