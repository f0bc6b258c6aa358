//! Access log and trace context: one line per request with method, route, status, latency,
//! request id, credential id and W3C trace id, never the token; the request id and a
//! `traceparent` are echoed; no ANSI colours in a log file; `--log-format json`.

use std::time::{Duration, Instant};

use orbit::testing::{Fixture, Server};
use serde_json::Value;

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

async fn credential_id(f: &Fixture) -> u64 {
    sqlx::query_scalar("SELECT id FROM orbit_credential WHERE token_hash = ?")
        .bind(f.hash.as_slice())
        .fetch_one(&f.test_db.pool)
        .await
        .unwrap()
}

/// The log's lines that contain `needle`, once at least `n` of them are there (the server writes
/// the line after the response is sent).
async fn lines_with(server: &Server, needle: &str, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = std::fs::read_to_string(&server.log).unwrap_or_default();
        let found: Vec<String> = log
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect();
        if found.len() >= n || Instant::now() > deadline {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn one_access_line_per_request_with_route_status_request_and_credential_ids() {
    let f = Fixture::new().await;
    let server =
        Server::start_logging(env!("CARGO_BIN_EXE_orbit"), &f.test_db.dsn, &[], "info").await;
    let http = reqwest::Client::new();
    let resp = http
        .get(format!("{}/v1/queues/{}", server.url, f.queue_id))
        .bearer_auth(&f.token)
        .header("x-request-id", "req-logs-1")
        .header("traceparent", TRACEPARENT)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-request-id"], "req-logs-1");
    assert_eq!(resp.headers()["traceparent"], TRACEPARENT);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["request_id"], "req-logs-1");

    let lines = lines_with(&server, "req-logs-1", 1).await;
    let access: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("orbit::access"))
        .collect();
    assert_eq!(access.len(), 1, "{lines:#?}");
    let line = access[0];
    let id = credential_id(&f).await;
    for part in [
        "method=GET".to_string(),
        "route=/v1/queues/{id}".to_string(),
        "status=200".to_string(),
        "latency_ms=".to_string(),
        format!("credential_id={id}"),
        format!("trace_id={TRACE_ID}"),
    ] {
        assert!(line.contains(&part), "no {part} in {line}");
    }
    // The raw path (the queue id) is not the route label, and the token is never logged.
    assert!(!line.contains(&f.queue_id), "{line}");

    // A second request of the same token: its own single line, the credential id from the cache.
    let resp = http
        .get(format!("{}/v1/queues", server.url))
        .bearer_auth(&f.token)
        .header("x-request-id", "req-logs-2")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().get("traceparent").is_none());
    let lines = lines_with(&server, "req-logs-2", 1).await;
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].contains(&format!("credential_id={id}")),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("trace_id=-"), "{}", lines[0]);

    // A rejected token: 401, logged without a credential id.
    let resp = http
        .get(format!("{}/v1/queues", server.url))
        .bearer_auth("not-a-token")
        .header("x-request-id", "req-logs-3")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    let lines = lines_with(&server, "req-logs-3", 1).await;
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].contains("status=401") && lines[0].contains("credential_id=-"));

    let log = std::fs::read_to_string(&server.log).unwrap();
    assert!(!log.contains(&f.token), "the token is in the log");
    assert!(!log.contains("not-a-token"), "a token is in the log");
    assert!(
        !log.contains('\u{1b}'),
        "ANSI escapes in a log file:\n{log}"
    );
}

#[tokio::test]
async fn request_ids_come_from_the_client_the_traceparent_or_are_made() {
    let f = Fixture::new().await;
    let server =
        Server::start_logging(env!("CARGO_BIN_EXE_orbit"), &f.test_db.dsn, &[], "info").await;
    let http = reqwest::Client::new();
    let get = |headers: Vec<(&'static str, String)>| {
        let mut req = http.get(format!("{}/healthz", server.url));
        for (k, v) in headers {
            req = req.header(k, v);
        }
        req.send()
    };
    // No x-request-id but a traceparent: the trace id is the request id.
    let resp = get(vec![("traceparent", TRACEPARENT.to_string())])
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-request-id"], TRACE_ID);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["request_id"], TRACE_ID);

    // A malformed traceparent is ignored (not echoed, not used).
    for bad in [
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        "garbage",
    ] {
        let resp = get(vec![("traceparent", bad.to_string())]).await.unwrap();
        assert!(resp.headers().get("traceparent").is_none(), "{bad}");
        let id = resp.headers()["x-request-id"].to_str().unwrap().to_string();
        assert!(
            id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()),
            "{bad}: {id}"
        );
    }

    // An x-request-id too long (or not printable) is replaced by a made one.
    let resp = get(vec![("x-request-id", "x".repeat(65))]).await.unwrap();
    let id = resp.headers()["x-request-id"].to_str().unwrap().to_string();
    assert_eq!(id.len(), 16, "{id}");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["request_id"], id.as_str());
    let made = lines_with(&server, &id, 1).await;
    assert_eq!(made.len(), 1, "{made:#?}");
    assert!(made[0].contains("route=/healthz") && made[0].contains("status=200"));

    // An unknown path: one line, route `unmatched`; its token was never checked, so it is not
    // looked up (no database call for a made-up token) and the line has no credential id.
    let resp = http
        .get(format!("{}/no/such/{}", server.url, "path"))
        .bearer_auth(&f.token)
        .header("x-request-id", "req-unmatched")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    let lines = lines_with(&server, "req-unmatched", 1).await;
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].contains("route=unmatched"), "{}", lines[0]);
    assert!(lines[0].contains("credential_id=-"), "{}", lines[0]);
}

#[tokio::test]
async fn json_logs_carry_the_same_fields() {
    let f = Fixture::new().await;
    let server = Server::start_logging(
        env!("CARGO_BIN_EXE_orbit"),
        &f.test_db.dsn,
        &["--log-format", "json"],
        "info",
    )
    .await;
    let resp = reqwest::Client::new()
        .get(format!("{}/v1/queues/{}", server.url, f.queue_id))
        .bearer_auth(&f.token)
        .header("x-request-id", "req-json-1")
        .header("traceparent", TRACEPARENT)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let lines = lines_with(&server, "req-json-1", 1).await;
    assert_eq!(lines.len(), 1, "{lines:#?}");
    let v: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(v["target"], "orbit::access");
    assert_eq!(v["fields"]["status"], 200);
    assert_eq!(v["fields"]["credential_id"], credential_id(&f).await);
    assert_eq!(v["span"]["request_id"], "req-json-1");
    assert_eq!(v["span"]["route"], "/v1/queues/{id}");
    assert_eq!(v["span"]["method"], "GET");
    assert_eq!(v["span"]["trace_id"], TRACE_ID);
    for line in std::fs::read_to_string(&server.log).unwrap().lines() {
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    }
}
