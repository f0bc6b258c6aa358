//! The HTTP API client.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An API error: the envelope's code and message with the HTTP status.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{status} {code}: {message}")]
pub struct ApiError {
    pub status: u16,
    pub code: String,
    pub message: String,
}

/// A task as the API returns it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub id: u64,
    pub queue_id: String,
    pub state: String,
    pub handler: String,
    pub handler_version: String,
    pub payload_version: String,
    pub payload: Value,
    #[serde(default)]
    pub business_key: Option<String>,
    /// The resource key frozen at acceptance; `None` when the task has none.
    #[serde(default)]
    pub concurrency_key: Option<String>,
    pub priority: u8,
    pub max_attempts: u32,
    pub attempt_count: u32,
    #[serde(default)]
    pub output: Option<Value>,
    #[serde(default)]
    pub error: Option<Value>,
    #[serde(flatten)]
    pub rest: serde_json::Map<String, Value>,
}

/// An attempt as the API returns it (history only: it grants nothing).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Attempt {
    pub id: u64,
    pub task_id: u64,
    pub attempt_no: u32,
    pub state: String,
    /// Decimal string; present when the task has a key.
    #[serde(default)]
    pub concurrency_token: Option<String>,
    #[serde(flatten)]
    pub rest: serde_json::Map<String, Value>,
}

impl Attempt {
    /// The token as a number (`None` for a task without a key).
    pub fn token(&self) -> Option<u64> {
        self.concurrency_token
            .as_deref()
            .and_then(|t| t.parse().ok())
    }
}

/// A queue.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Queue {
    pub id: String,
    pub name: String,
    pub paused: bool,
    #[serde(flatten)]
    pub rest: serde_json::Map<String, Value>,
}

/// A submit request (the fields of `POST /v1/tasks`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct SubmitTask {
    pub queue_id: String,
    pub handler: String,
    pub handler_version: String,
    pub payload_version: String,
    pub payload: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub business_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_base_ms: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_max_ms: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_unknown: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_seconds: Option<u64>,
    /// Not claimed before this RFC 3339 time (any offset); at most 365 days ahead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_at: Option<String>,
    /// Not claimed before acceptance + this many seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_seconds: Option<u64>,
    /// Keyed tasks: run this long after acceptance unless a later debounced submit for the same
    /// key and queue replaces this task first (it ends CANCELLED, error code REPLACED).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub debounce_seconds: Option<u64>,
    /// With `debounce_seconds`: the latest a burst of replacements may push the run time, from
    /// the burst's first submit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub debounce_max_seconds: Option<u64>,
}

/// What a submit returned.
#[derive(Clone, Debug)]
pub struct Submitted {
    /// `false` when the Idempotency-Key had been accepted before (HTTP 200).
    pub created: bool,
    pub task: Task,
}

/// One task of `POST /v1/tasks/batch`: its key beside the submit fields.
#[derive(Serialize)]
struct BatchTask<'a> {
    idempotency_key: &'a str,
    #[serde(flatten)]
    task: &'a SubmitTask,
}

#[derive(Serialize)]
struct BatchBody<'a> {
    tasks: Vec<BatchTask<'a>>,
}

/// One task of a batch answer.
#[derive(Deserialize)]
struct BatchSubmitted {
    replayed: bool,
    task: Task,
}

#[derive(Deserialize)]
struct DataEnvelope<T> {
    data: T,
}

#[derive(Deserialize)]
struct ListEnvelope<T> {
    data: Vec<T>,
    next_cursor: Option<String>,
}

/// The HTTP client.
#[derive(Clone, Debug)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Client {
    pub fn new(base_url: &str, token: &str) -> Client {
        Client {
            http: reqwest::Client::new(),
            base: base_url.trim_end_matches('/').to_string(),
            token: token.to_string(),
        }
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    async fn send<T: DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<(u16, T), ApiError> {
        let resp = req
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| ApiError {
                status: 0,
                code: "UNAVAILABLE".into(),
                message: e.to_string(),
            })?;
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.map_err(|e| ApiError {
            status,
            code: "INTERNAL".into(),
            message: e.to_string(),
        })?;
        if status >= 400 {
            return Err(ApiError {
                status,
                code: body["error"]["code"]
                    .as_str()
                    .unwrap_or("INTERNAL")
                    .to_string(),
                message: body["error"]["message"].as_str().unwrap_or("").to_string(),
            });
        }
        let parsed = serde_json::from_value(body).map_err(|e| ApiError {
            status,
            code: "INTERNAL".into(),
            message: e.to_string(),
        })?;
        Ok((status, parsed))
    }

    /// `POST /v1/tasks` with an Idempotency-Key.
    pub async fn submit(
        &self,
        idempotency_key: &str,
        task: &SubmitTask,
    ) -> Result<Submitted, ApiError> {
        let req = self
            .http
            .post(format!("{}/v1/tasks", self.base))
            .header("Idempotency-Key", idempotency_key)
            .json(task);
        let (status, env): (u16, DataEnvelope<Task>) = self.send(req).await?;
        Ok(Submitted {
            created: status == 201,
            task: env.data,
        })
    }

    /// `POST /v1/tasks/batch`: up to 1000 `(Idempotency-Key, task)` pairs in one request and
    /// one transaction, all accepted or all refused. The answer lists the tasks in the same
    /// order; `created` is `false` for a key accepted before with the same request (by a batch or
    /// by [`Client::submit`]).
    pub async fn submit_many(
        &self,
        items: &[(String, SubmitTask)],
    ) -> Result<Vec<Submitted>, ApiError> {
        let body = BatchBody {
            tasks: items
                .iter()
                .map(|(key, task)| BatchTask {
                    idempotency_key: key,
                    task,
                })
                .collect(),
        };
        let req = self
            .http
            .post(format!("{}/v1/tasks/batch", self.base))
            .json(&body);
        let (_, env): (u16, DataEnvelope<Vec<BatchSubmitted>>) = self.send(req).await?;
        Ok(env
            .data
            .into_iter()
            .map(|s| Submitted {
                created: !s.replayed,
                task: s.task,
            })
            .collect())
    }

    pub async fn task(&self, id: u64) -> Result<Task, ApiError> {
        let (_, env): (u16, DataEnvelope<Task>) = self
            .send(self.http.get(format!("{}/v1/tasks/{id}", self.base)))
            .await?;
        Ok(env.data)
    }

    /// One page of `GET /v1/tasks` with raw query pairs; returns the tasks and the next cursor.
    pub async fn list_tasks(
        &self,
        query: &[(&str, &str)],
    ) -> Result<(Vec<Task>, Option<String>), ApiError> {
        let req = self
            .http
            .get(format!("{}/v1/tasks", self.base))
            .query(query);
        let (_, env): (u16, ListEnvelope<Task>) = self.send(req).await?;
        Ok((env.data, env.next_cursor))
    }

    pub async fn cancel(&self, id: u64) -> Result<Task, ApiError> {
        let req = self
            .http
            .post(format!("{}/v1/tasks/{id}/cancel", self.base))
            .json(&serde_json::json!({}));
        let (_, env): (u16, DataEnvelope<Task>) = self.send(req).await?;
        Ok(env.data)
    }

    pub async fn attempts(&self, task_id: u64) -> Result<Vec<Attempt>, ApiError> {
        let (_, env): (u16, ListEnvelope<Attempt>) = self
            .send(
                self.http
                    .get(format!("{}/v1/tasks/{task_id}/attempts", self.base)),
            )
            .await?;
        Ok(env.data)
    }

    pub async fn attempt(&self, id: u64) -> Result<Attempt, ApiError> {
        let (_, env): (u16, DataEnvelope<Attempt>) = self
            .send(self.http.get(format!("{}/v1/attempts/{id}", self.base)))
            .await?;
        Ok(env.data)
    }

    pub async fn create_queue(&self, name: &str) -> Result<Queue, ApiError> {
        let req = self
            .http
            .post(format!("{}/v1/queues", self.base))
            .json(&serde_json::json!({ "name": name }));
        let (_, env): (u16, DataEnvelope<Queue>) = self.send(req).await?;
        Ok(env.data)
    }

    pub async fn queues(&self) -> Result<Vec<Queue>, ApiError> {
        let (_, env): (u16, ListEnvelope<Queue>) = self
            .send(self.http.get(format!("{}/v1/queues", self.base)))
            .await?;
        Ok(env.data)
    }

    pub async fn queue(&self, id: &str) -> Result<Queue, ApiError> {
        let (_, env): (u16, DataEnvelope<Queue>) = self
            .send(self.http.get(format!("{}/v1/queues/{id}", self.base)))
            .await?;
        Ok(env.data)
    }

    /// One page of `GET /v1/queues` with raw query pairs (`limit`, `cursor`); returns the queues
    /// and the next cursor.
    pub async fn list_queues(
        &self,
        query: &[(&str, &str)],
    ) -> Result<(Vec<Queue>, Option<String>), ApiError> {
        let req = self
            .http
            .get(format!("{}/v1/queues", self.base))
            .query(query);
        let (_, env): (u16, ListEnvelope<Queue>) = self.send(req).await?;
        Ok((env.data, env.next_cursor))
    }

    /// `POST /v1/queues/{id}/pause` (`paused = true`) or `/resume`.
    pub async fn set_queue_paused(&self, id: &str, paused: bool) -> Result<Queue, ApiError> {
        let action = if paused { "pause" } else { "resume" };
        let req = self
            .http
            .post(format!("{}/v1/queues/{id}/{action}", self.base))
            .json(&serde_json::json!({}));
        let (_, env): (u16, DataEnvelope<Queue>) = self.send(req).await?;
        Ok(env.data)
    }

    /// `POST /v1/queues/{id}/retention`: how long the queue's finished tasks are kept, in seconds.
    pub async fn set_queue_retention(
        &self,
        id: &str,
        retention_seconds: u64,
    ) -> Result<Queue, ApiError> {
        let req = self
            .http
            .post(format!("{}/v1/queues/{id}/retention", self.base))
            .json(&serde_json::json!({ "retention_seconds": retention_seconds }));
        let (_, env): (u16, DataEnvelope<Queue>) = self.send(req).await?;
        Ok(env.data)
    }

    /// `POST /v1/tasks/{id}/resolve`: settle a NEEDS_REVIEW task. `resolution` is `succeeded`,
    /// `failed` or `requeue`; `note` is kept as the task's output (succeeded) or error (failed).
    pub async fn resolve(
        &self,
        id: u64,
        resolution: &str,
        note: Option<&Value>,
    ) -> Result<Task, ApiError> {
        let mut body = serde_json::json!({ "resolution": resolution });
        if let Some(note) = note {
            body["note"] = note.clone();
        }
        let req = self
            .http
            .post(format!("{}/v1/tasks/{id}/resolve", self.base))
            .json(&body);
        let (_, env): (u16, DataEnvelope<Task>) = self.send(req).await?;
        Ok(env.data)
    }
}
