//! Shared black-box test support: a spawned server plus an HTTP client that checks every
//! response it receives against the server's own `/v1/openapi.json`.

#![allow(dead_code)]

pub mod ws;

use orbit::testing::{Fixture, Server};
use reqwest::Method;
use serde_json::{json, Value};

pub struct Api {
    pub fixture: Fixture,
    pub server: Server,
    pub http: reqwest::Client,
    openapi: Value,
}

/// One response: status, body, and whether it matched the documented schema.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Value,
}

impl Api {
    pub async fn start() -> Api {
        Api::over(Fixture::new().await).await
    }

    pub async fn over(fixture: Fixture) -> Api {
        let server = Server::start(env!("CARGO_BIN_EXE_orbit"), &fixture.test_db.dsn).await;
        let http = reqwest::Client::new();
        let openapi = http
            .get(format!("{}/v1/openapi.json", server.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        Api {
            fixture,
            server,
            http,
            openapi,
        }
    }

    pub fn token(&self) -> String {
        self.fixture.token.clone()
    }

    /// Sends a request to `path` (documented as `template`) and validates the reply.
    pub async fn call(
        &self,
        method: Method,
        template: &str,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Reply {
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", self.server.url));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        let body: Value = serde_json::from_str(&text).unwrap_or_else(|_| json!({ "_raw": text }));
        self.validate(&method, template, status, &body);
        Reply { status, body }
    }

    pub async fn get(&self, template: &str, path: &str) -> Reply {
        self.call(Method::GET, template, path, Some(&self.token()), &[], None)
            .await
    }

    pub async fn post(&self, template: &str, path: &str, body: &Value) -> Reply {
        self.call(
            Method::POST,
            template,
            path,
            Some(&self.token()),
            &[],
            Some(body),
        )
        .await
    }

    pub async fn submit(&self, idempotency_key: &str, body: &Value) -> Reply {
        self.call(
            Method::POST,
            "/v1/tasks",
            "/v1/tasks",
            Some(&self.token()),
            &[("Idempotency-Key", idempotency_key)],
            Some(body),
        )
        .await
    }

    /// Asserts the reply matches the schema the document gives for (method, template, status),
    /// and that errors use the envelope.
    pub fn validate(&self, method: &Method, template: &str, status: u16, body: &Value) {
        let op = &self.openapi["paths"][template][method.as_str().to_lowercase()];
        assert!(
            op.is_object(),
            "{method} {template} is not in /v1/openapi.json"
        );
        let response = &op["responses"][status.to_string()];
        assert!(
            response.is_object(),
            "{method} {template} answered {status}, which the document does not list: {body}"
        );
        if status >= 400 {
            assert!(
                body["error"]["code"].is_string() && body["request_id"].is_string(),
                "not an error envelope: {body}"
            );
        }
        if let Some(schema) = response["content"]["application/json"]["schema"].as_object() {
            let mut root = Value::Object(schema.clone());
            root["components"] = self.openapi["components"].clone();
            let validator =
                jsonschema::draft202012::new(&root).expect("the document's schema compiles");
            let errors: Vec<String> = validator
                .iter_errors(body)
                .map(|e| format!("{} at {}", e, e.instance_path()))
                .collect();
            assert!(
                errors.is_empty(),
                "{method} {template} {status} does not match its schema: {errors:?}\nbody: {body}"
            );
        }
    }
}

/// The design note's example body (§2), verbatim.
pub fn note_example_body() -> Value {
    serde_json::from_str(
        r#"{"queue_id":"11111111111111111111111111111111","handler":"object.update","handler_version":"v1","payload_version":"v1","payload":{"operation_ref":"update-001","object_ref":"objects/42"},"concurrency_key":"object/42"}"#,
    )
    .unwrap()
}
