//! The HTTP façade against hostile clients: bounded metric labels and `/metrics` behind the
//! `metrics:read` scope. Black-box: a spawned `orbit serve` over a real MariaDB.

mod support;

use reqwest::Method;
use serde_json::json;
use support::Api;

async fn scrape(api: &Api) -> String {
    let r = api
        .http
        .get(format!("{}/metrics", api.server.url))
        .bearer_auth(api.token())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    r.text().await.unwrap()
}

/// The distinct values of `label` on the lines of metric `name`.
fn label_values(text: &str, name: &str, label: &str) -> std::collections::BTreeSet<String> {
    let needle = format!("{label}=\"");
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter_map(|l| {
            let rest = &l[l.find(&needle)? + needle.len()..];
            Some(rest[..rest.find('"')?].to_string())
        })
        .collect()
}

#[tokio::test]
async fn random_methods_and_paths_leave_the_metric_labels_bounded() {
    let api = Api::start().await;
    // Warm up the label sets every scrape has anyway.
    scrape(&api).await;
    let before = scrape(&api).await;
    for i in 0..300 {
        let method = Method::from_bytes(format!("X{:08x}{i}", rand::random::<u32>()).as_bytes())
            .expect("a token is a method");
        let path = format!("/{:016x}/{i}", rand::random::<u64>());
        for (method, path) in [
            (method.clone(), path.as_str()),
            (method, "/healthz"),
            (Method::GET, path.as_str()),
        ] {
            let r = api
                .http
                .request(method, format!("{}{path}", api.server.url))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_client_error(), "{}", r.status());
        }
    }
    let after = scrape(&api).await;
    let methods = label_values(&after, "orbit_http_requests_total", "method");
    let allowed = [
        "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "CONNECT", "PATCH", "TRACE", "OTHER",
    ];
    assert!(
        methods.iter().all(|m| allowed.contains(&m.as_str())),
        "unbounded method labels: {methods:?}"
    );
    assert!(methods.contains("OTHER"), "{methods:?}");
    let routes = label_values(&after, "orbit_http_requests_total", "route");
    let templates = ["unmatched", "/healthz", "/metrics", "/v1/openapi.json"];
    assert!(
        routes.iter().all(|r| templates.contains(&r.as_str())),
        "a raw path became a label: {routes:?}"
    );
    // 900 requests added a handful of series, not hundreds.
    let series = |t: &str| t.lines().filter(|l| !l.starts_with('#')).count();
    assert!(
        series(&after) <= series(&before) + 40,
        "{} series before, {} after",
        series(&before),
        series(&after)
    );
    assert!(
        after.len() <= before.len() + 16 * 1024,
        "{} bytes before, {} after",
        before.len(),
        after.len()
    );
}

#[tokio::test]
async fn metrics_need_a_token_with_the_metrics_read_scope() {
    let api = Api::start().await;
    // Another tenant, whose application name must not reach an unauthenticated scraper.
    let other = api
        .fixture
        .db
        .admin_bootstrap(&orbit::db::queues::Bootstrap {
            application: "acme-confidential-tenant".into(),
            environment: "prod".into(),
            namespace: "default".into(),
            queue: "q".into(),
            token_hash: orbit::auth::token_hash("orbit_other_tenant_token").to_vec(),
            token_hint: "orbit_ot".into(),
            scopes: vec!["tasks:submit".into()],
            label: "other".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    api.fixture
        .db
        .task_submit(
            &orbit::auth::token_hash("orbit_other_tenant_token"),
            "k1",
            &api.fixture.task(&other.queue_id, ""),
        )
        .await
        .unwrap();

    let anonymous = api
        .call(Method::GET, "/metrics", "/metrics", None, &[], None)
        .await;
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    assert_eq!(anonymous.body["error"]["code"], "UNAUTHENTICATED");
    assert!(!anonymous.body.to_string().contains("acme-confidential"));

    let reader = api.fixture.credential(&["tasks:read"]).await;
    let denied = api
        .call(
            Method::GET,
            "/metrics",
            "/metrics",
            Some(&reader),
            &[],
            None,
        )
        .await;
    assert_eq!(denied.status, 403, "{}", denied.body);
    assert_eq!(denied.body["error"]["code"], "PERMISSION_DENIED");
    assert!(denied.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("metrics:read"));
    assert!(!denied.body.to_string().contains("acme-confidential"));

    let operator = api.fixture.credential(&["metrics:read"]).await;
    let r = api
        .http
        .get(format!("{}/metrics", api.server.url))
        .bearer_auth(&operator)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let text = r.text().await.unwrap();
    assert!(text.contains("orbit_database_up 1"), "{text}");
    assert!(text.contains("acme-confidential-tenant"), "{text}");
}
