//! A database stall while clients give up: a PRIVATE MariaDB (started from the system binary,
//! never the shared server) is paused with SIGSTOP under a few hundred concurrent requests whose
//! clients abandon them after 0.2-1 s, then resumed. Abandoned requests drop their calls' futures
//! mid-ping or mid-result; a connection reused after that read the abandoned call's late answer
//! as its own, so one tenant was shown another's task until a restart. Afterwards every answer
//! must match its request (task id and tenant), /readyz must recover, the scheduler must log no
//! result of the wrong shape, and while the database is stalled calls answer 503 within a few
//! seconds.

use std::process::Command;
use std::time::{Duration, Instant};

use orbit::testing::Server;
use orbit_sdk::credentials::Credentials;
use orbit_sdk::Client;
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_orbit");

fn orbit(args: &[&str], dsn: &str) {
    orbit::testing::run_cli_ok(BIN, args, dsn);
}

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{sig} {pid}");
}

struct Tenant {
    name: &'static str,
    creds: Credentials,
    /// Task ids in submit order.
    tasks: Vec<u64>,
}

async fn tenant(dir: &std::path::Path, dsn: &str, name: &'static str, url: &str) -> Tenant {
    let file = dir.join(format!("{name}.json"));
    orbit(
        &[
            "admin",
            "bootstrap",
            "--application",
            name,
            "--environment",
            "e",
            "--namespace",
            "n",
            "--queue",
            "q",
            "--output",
            file.to_str().unwrap(),
        ],
        dsn,
    );
    let creds = Credentials::load(&file).unwrap();
    let client = Client::new(url, &creds.token);
    let mut tasks = Vec::new();
    for n in 0..40 {
        let t = orbit_sdk::client::SubmitTask {
            queue_id: creds.queue_id.clone(),
            handler: "stall.read".into(),
            handler_version: "v1".into(),
            payload_version: "v1".into(),
            payload: json!({ "tenant": name, "n": n }),
            ..Default::default()
        };
        tasks.push(
            client
                .submit(&format!("{name}-{n}"), &t)
                .await
                .unwrap()
                .task
                .id,
        );
    }
    Tenant { name, creds, tasks }
}

/// GET /v1/tasks/{id} as `tenant`: (status, body).
async fn get(http: &reqwest::Client, url: &str, tenant: &Tenant, id: u64) -> (u16, Value) {
    let r = http
        .get(format!("{url}/v1/tasks/{id}"))
        .bearer_auth(&tenant.creds.token)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Reads every task of both tenants as its owner and as the other tenant, all at once (so every
/// connection of the pool serves some) and then one request at a time: each answer is for the
/// task asked for and its owner, and the other tenant gets 404.
async fn every_answer_matches(http: &reqwest::Client, url: &str, tenants: &[Tenant; 2]) {
    let mut reads = Vec::new();
    for (i, owner) in tenants.iter().enumerate() {
        let other = &tenants[1 - i];
        for (n, id) in owner.tasks.iter().enumerate() {
            reads.push((owner, other, n, *id));
        }
    }
    futures_util::future::join_all(reads.iter().map(|r| check(http, url, *r))).await;
    for read in reads {
        check(http, url, read).await;
    }
}

async fn check(
    http: &reqwest::Client,
    url: &str,
    (owner, other, n, id): (&Tenant, &Tenant, usize, u64),
) {
    let (status, body) = get(http, url, owner, id).await;
    assert_eq!(status, 200, "task {id} as its owner: {body}");
    assert_eq!(
        body["data"]["id"],
        json!(id),
        "answer for another task: {body}"
    );
    assert_eq!(
        body["data"]["payload"],
        json!({ "tenant": owner.name, "n": n }),
        "answer with another request's payload: {body}"
    );
    let (status, body) = get(http, url, other, id).await;
    assert_eq!(status, 404, "task {id} as the other tenant: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_stall_with_abandoning_clients_every_answer_matches_its_request() {
    let dir = tempfile::tempdir().unwrap();
    let database = orbit::dev::start_private_server_on(dir.path(), None)
        .await
        .unwrap();
    let dsn = database.dsn.clone();
    orbit(&["migrate", "up"], &dsn);
    let server = Server::start(BIN, &dsn).await;
    let tenants = [
        tenant(dir.path(), &dsn, "alpha", &server.url).await,
        tenant(dir.path(), &dsn, "beta", &server.url).await,
    ];
    let http = reqwest::Client::new();
    every_answer_matches(&http, &server.url, &tenants).await;

    for round in 0..3 {
        // A burst opens every connection of the pool and leaves several kept between calls…
        let burst = (0..64).map(|i| {
            let tenant = &tenants[i % 2];
            get(
                &http,
                &server.url,
                tenant,
                tenant.tasks[i % tenant.tasks.len()],
            )
        });
        for (status, body) in futures_util::future::join_all(burst).await {
            assert_eq!(status, 200, "{body}");
        }
        // …then they sit idle past the ping threshold (the scheduler's calls keep one busy): the
        // next calls ping first, and the stall cuts those pings off.
        tokio::time::sleep(orbit::migrate::PING_AFTER_IDLE + Duration::from_millis(300)).await;
        signal(database.pid(), "STOP");
        let stalled_at = Instant::now();
        let abandoned = (0..300).map(|i| {
            let (http, url) = (http.clone(), server.url.clone());
            let tenant = &tenants[i % 2];
            let id = tenant.tasks[i % tenant.tasks.len()];
            let give_up = Duration::from_millis(200 + (i as u64 * 37) % 800);
            async move {
                let _ = tokio::time::timeout(
                    give_up,
                    http.get(format!("{url}/v1/tasks/{id}"))
                        .bearer_auth(&tenant.creds.token)
                        .send(),
                )
                .await;
            }
        });
        // One client waits: the stall costs it 503 within a few seconds, not an endless wait.
        let patient = async {
            let started = Instant::now();
            let (status, body) = get(&http, &server.url, &tenants[0], tenants[0].tasks[0]).await;
            (status, body, started.elapsed())
        };
        let ready = async {
            let started = Instant::now();
            let r = http
                .get(format!("{}/readyz", server.url))
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), started.elapsed())
        };
        let (_, (status, body, waited), (ready_status, ready_waited)) =
            tokio::join!(futures_util::future::join_all(abandoned), patient, ready);
        assert_eq!(
            status, 503,
            "round {round}: a call during the stall: {body}"
        );
        assert_eq!(body["error"]["code"], "UNAVAILABLE", "{body}");
        assert!(
            waited < Duration::from_secs(6),
            "round {round}: the stalled call took {waited:?}"
        );
        assert_eq!(ready_status, 503, "round {round}: /readyz during the stall");
        assert!(
            ready_waited < Duration::from_secs(6),
            "round {round}: /readyz took {ready_waited:?}"
        );
        let pause = Duration::from_secs(4).saturating_sub(stalled_at.elapsed());
        tokio::time::sleep(pause).await;
        signal(database.pid(), "CONT");

        // Recovery by itself: /readyz answers ready again.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = http
                .get(format!("{}/readyz", server.url))
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let body: Value = r.json().await.unwrap_or(Value::Null);
            if status == 200 {
                assert_eq!(
                    body["data"]["extension_version"],
                    json!(orbit::codegen::EXTENSION_VERSION),
                    "{body}"
                );
                break;
            }
            assert!(Instant::now() < deadline, "not ready again: {body}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        every_answer_matches(&http, &server.url, &tenants).await;
    }

    let log = std::fs::read_to_string(&server.log).unwrap_or_default();
    for shape_error in ["header promises", "mismatched types", "result column"] {
        assert!(
            !log.contains(shape_error),
            "the server read a result of the wrong shape ({shape_error}):\n{log}"
        );
    }
}
