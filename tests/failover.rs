//! DSN lists and failover on a plain server: `Db` keeps a pool per server of the list and moves
//! to the next one when the current one is gone. A server that "dies" is a TCP proxy in front of
//! the test server that this test closes (its connections drop, new ones are refused).

use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use orbit::db::{Db, DbError};
use orbit::migrate::{self, MigrateError};
use orbit::testing::{server_dsn, Fixture, Server};
use sqlx::mysql::MySqlConnectOptions;
use sqlx::{Connection, MySqlConnection};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

#[test]
fn a_dsn_list_splits_on_commas_that_start_a_dsn() {
    assert_eq!(
        migrate::split_dsn_list("mysql://root@127.0.0.1:3306/orbit"),
        ["mysql://root@127.0.0.1:3306/orbit"]
    );
    assert_eq!(
        migrate::split_dsn_list(
            " mysql://a@h1:3306/orbit , mysql://a@h2:3307/orbit,,mariadb://a@h3/orbit "
        ),
        [
            "mysql://a@h1:3306/orbit",
            "mysql://a@h2:3307/orbit",
            "mariadb://a@h3/orbit"
        ]
    );
    // A comma inside a password does not start a new DSN.
    assert_eq!(
        migrate::split_dsn_list("mysql://u:p,w@h1/orbit,mysql://u:p,w@h2/orbit"),
        ["mysql://u:p,w@h1/orbit", "mysql://u:p,w@h2/orbit"]
    );
    assert!(migrate::split_dsn_list(" , ").is_empty());
}

#[test]
fn every_dsn_of_a_list_names_the_same_database() {
    let ok =
        migrate::parse_dsn_list("mysql://root@h1:3306/orbit,mysql://root@h2:3307/orbit").unwrap();
    assert_eq!(
        ok.iter()
            .map(|o| (o.get_host().to_string(), o.get_port()))
            .collect::<Vec<_>>(),
        [("h1".to_string(), 3306), ("h2".to_string(), 3307)]
    );
    match migrate::parse_dsn_list("mysql://root@h1/orbit,mysql://root@h2/other") {
        Err(e @ MigrateError::MixedDatabases { .. }) => {
            assert!(e.to_string().contains("\"orbit\" and \"other\""), "{e}")
        }
        other => panic!("expected MixedDatabases, got {other:?}"),
    }
    assert!(matches!(
        migrate::parse_dsn_list("mysql://root@h1/orbit,mysql://root@h2"),
        Err(MigrateError::NoDatabase)
    ));
    assert!(matches!(
        migrate::parse_dsn_list(""),
        Err(MigrateError::NoDsn)
    ));
    assert!(matches!(
        migrate::parse_dsn_list("mysql://root@h1/orbit,mysql://root@h2:notaport/orbit"),
        Err(MigrateError::BadDsn { .. })
    ));
}

/// A list naming two databases is the operator's mistake: `serve` says so and exits 2 (usage),
/// not 3 (database), before connecting anywhere.
#[test]
fn serve_refuses_a_list_of_two_databases_with_a_usage_exit() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_orbit"))
        .args(["serve", "--addr", "127.0.0.1:0"])
        .env(
            "ORBIT_MYSQL_DSN",
            "mysql://root@127.0.0.1:1/orbit,mysql://root@127.0.0.1:2/other",
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("names two databases"), "{stderr}");
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn upstream() -> SocketAddr {
    let o = MySqlConnectOptions::from_str(&server_dsn()).unwrap();
    let host = if o.get_host() == "localhost" {
        "127.0.0.1"
    } else {
        o.get_host()
    };
    format!("{host}:{}", o.get_port()).parse().unwrap()
}

/// A TCP proxy to the test server: a "server" this test can make disappear.
struct Proxy {
    port: u16,
    accept: JoinHandle<()>,
    pipes: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Proxy {
    async fn start() -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let pipes: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let to = upstream();
        let accept = tokio::spawn({
            let pipes = pipes.clone();
            async move {
                while let Ok((mut inbound, _)) = listener.accept().await {
                    let pipe = tokio::spawn(async move {
                        if let Ok(mut outbound) = TcpStream::connect(to).await {
                            let _ =
                                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        }
                    });
                    pipes.lock().unwrap().push(pipe);
                }
            }
        });
        Proxy {
            port,
            accept,
            pipes,
        }
    }

    /// The DSN of `database` through this proxy.
    fn dsn(&self, database: &str) -> String {
        format!("mysql://root@127.0.0.1:{}/{database}", self.port)
    }

    /// The server "dies": open connections drop and new ones are refused.
    async fn kill(self) {
        self.accept.abort();
        let _ = self.accept.await;
        for pipe in self.pipes.lock().unwrap().drain(..) {
            pipe.abort();
        }
        // Let the aborted tasks drop their sockets.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn serving_starts_on_the_first_server_that_answers() {
    let f = Fixture::new().await;
    let dead = format!(
        "mysql://root@127.0.0.1:{}/{}",
        closed_port(),
        f.test_db.name
    );
    let list = format!("{dead},{}", f.test_db.dsn);
    let db = Db::connect(&list, 2).await.expect("connect to the list");
    assert_eq!((db.servers(), db.current()), (2, 1));
    assert_eq!(
        db.extension_version().await.unwrap(),
        migrate::expected_version()
    );
    // No server answers: one error naming both.
    let other_dead = format!(
        "mysql://root@127.0.0.1:{}/{}",
        closed_port(),
        f.test_db.name
    );
    match Db::connect(&format!("{dead},{other_dead}"), 2).await {
        Err(e @ MigrateError::Connect { .. }) => {
            let text = e.to_string();
            assert!(text.matches("127.0.0.1:").count() >= 2, "{text}");
        }
        other => panic!("expected a connect error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_dead_current_server_costs_one_unavailable_call() {
    let f = Fixture::new().await;
    let dead = format!(
        "mysql://root@127.0.0.1:{}/{}",
        closed_port(),
        f.test_db.name
    );
    let (pools, first) = migrate::failover_pools(&format!("{dead},{}", f.test_db.dsn), 2)
        .await
        .unwrap();
    assert_eq!(first, 1);
    // Start on the dead one, as if it had died after startup.
    let db = Db::with_failover(pools, 0);
    let started = Instant::now();
    let e = db.task_get(&f.hash, 1).await.unwrap_err();
    assert!(matches!(e, DbError::Unavailable(_)), "{e:?}");
    assert!(
        started.elapsed() < migrate::ACQUIRE_TIMEOUT + Duration::from_secs(3),
        "detected within the acquire timeout and a probe: {:?}",
        started.elapsed()
    );
    assert_eq!(db.current(), 1, "calls moved to the next server");
    let t = f.submit(&f.queue_id, "k").await;
    assert_eq!(db.task_get(&f.hash, t.id).await.unwrap().id, t.id);
}

#[tokio::test]
async fn a_server_that_dies_mid_run_is_left_after_one_unavailable_call() {
    let f = Fixture::new().await;
    let proxy = Proxy::start().await;
    let db = Db::connect(
        &format!("{},{}", proxy.dsn(&f.test_db.name), f.test_db.dsn),
        4,
    )
    .await
    .unwrap();
    assert_eq!(db.current(), 0);
    let t = f.submit(&f.queue_id, "k").await;
    assert_eq!(db.task_get(&f.hash, t.id).await.unwrap().id, t.id);
    proxy.kill().await;
    let mut unavailable = 0;
    let started = Instant::now();
    loop {
        match db.task_get(&f.hash, t.id).await {
            Ok(task) => {
                assert_eq!(task.id, t.id);
                break;
            }
            Err(DbError::Unavailable(m)) => {
                eprintln!("503 after {:?}: {m}", started.elapsed());
                unavailable += 1;
            }
            Err(e) => panic!("unexpected {e:?}"),
        }
        assert!(unavailable <= 1, "more than one call failed");
    }
    assert_eq!(unavailable, 1);
    assert_eq!(db.current(), 1);
}

#[tokio::test]
async fn a_killed_connection_does_not_move_calls() {
    let f = Fixture::new().await;
    let dead = format!(
        "mysql://root@127.0.0.1:{}/{}",
        closed_port(),
        f.test_db.name
    );
    let (pools, first) = migrate::failover_pools(&format!("{},{dead}", f.test_db.dsn), 1)
        .await
        .unwrap();
    assert_eq!(first, 0);
    let db = Db::with_failover(pools, 0);
    let t = f.submit(&f.queue_id, "k").await;
    db.task_get(&f.hash, t.id).await.unwrap();
    let id: u64 = sqlx::query_scalar("SELECT CONNECTION_ID()")
        .fetch_one(db.pool())
        .await
        .unwrap();
    let mut admin = MySqlConnection::connect(&f.test_db.dsn).await.unwrap();
    sqlx::query(&format!("KILL CONNECTION {id}"))
        .execute(&mut admin)
        .await
        .unwrap();
    let _ = admin.close().await;
    // The call on the killed connection may fail (503); the server answers the probe, so calls
    // stay on it.
    let _ = db.task_get(&f.hash, t.id).await;
    assert_eq!(db.current(), 0, "a lost connection is not a lost server");
    assert_eq!(db.task_get(&f.hash, t.id).await.unwrap().id, t.id);
}

#[tokio::test]
async fn serve_with_a_dsn_list_survives_its_server_with_at_most_one_503() {
    let f = Fixture::new().await;
    let proxy = Proxy::start().await;
    let list = format!("{},{}", proxy.dsn(&f.test_db.name), f.test_db.dsn);
    let server = Server::start(env!("CARGO_BIN_EXE_orbit"), &list).await;
    let http = reqwest::Client::new();
    let submit = |n: u32| {
        http.post(format!("{}/v1/tasks", server.url))
            .bearer_auth(&f.token)
            .header("Idempotency-Key", format!("failover-{n}"))
            .json(&serde_json::json!({
                "queue_id": f.queue_id, "handler": "h", "handler_version": "v1",
                "payload_version": "v1", "payload": {}, "concurrency_key": "k"
            }))
            .send()
    };
    assert_eq!(submit(0).await.unwrap().status(), 201);
    proxy.kill().await;
    let killed = Instant::now();
    let mut statuses = Vec::new();
    for n in 1.. {
        let status = submit(n).await.unwrap().status().as_u16();
        statuses.push(status);
        if status == 201 {
            break;
        }
        assert!(
            n < 5,
            "no submit succeeded after the server died: {statuses:?}"
        );
    }
    eprintln!(
        "statuses after the kill: {statuses:?}; first 201 after {:?}",
        killed.elapsed()
    );
    assert!(
        statuses.iter().filter(|s| **s == 503).count() <= 1 && statuses.len() <= 2,
        "{statuses:?}"
    );
    let log = std::fs::read_to_string(&server.log).unwrap_or_default();
    assert!(
        log.contains("moving calls to the next server"),
        "serve logs the failover:\n{log}"
    );
    server.stop().await;
}
