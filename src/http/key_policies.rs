//! `/v1/key-policies`: how many may hold a concurrency key, how often it may be granted, and what
//! a submit does when it is busy, per key or key prefix of a namespace (`orbit_key_policy`;
//! docs/operations.md, "Key policies").

use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::envelope::{check_len, namespace_param, path_id, ApiJson, ApiQuery, Bearer, Data, Page};
use super::error::{ApiError, ErrorEnvelope};
use super::App;
use crate::db::keys::{KeyPolicy, KeyPolicySpec, Rate};

pub fn router() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(list_key_policies, set_key_policy))
        .routes(routes!(delete_key_policy))
}

/// How a policy matches keys.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, ToSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum KeyMatch {
    /// The key itself.
    Exact,
    /// Every key that starts with `key` (e.g. `customer/`).
    Prefix,
}

/// What a submit does when its key is busy: as many hold it as its limit allows, or tasks of
/// it wait.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, ToSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum KeyOnBusy {
    /// The task waits for the key (the behaviour without a policy).
    #[default]
    Queue,
    /// `409 KEY_BUSY`, nothing written; a replay is decided again.
    Reject,
    /// The key's waiting tasks in the submit's queue end `CANCELLED` (error code `REPLACED`,
    /// naming the new task), and the new task waits: only the newest is kept.
    ReplaceWaiting,
    /// As `replace_waiting`, and the key's holder (leased or running; with a limit above 1, the
    /// oldest holder when the key is full) ends `CANCELLED` at once: its worker gets
    /// `task.cancel`, its late result is refused, and the new task is granted with a larger
    /// token, so a fenced resource refuses the old holder's writes.
    CancelRunning,
}

impl KeyMatch {
    fn as_str(self) -> &'static str {
        match self {
            KeyMatch::Exact => "exact",
            KeyMatch::Prefix => "prefix",
        }
    }
}

impl KeyOnBusy {
    fn as_str(self) -> &'static str {
        match self {
            KeyOnBusy::Queue => "queue",
            KeyOnBusy::Reject => "reject",
            KeyOnBusy::ReplaceWaiting => "replace_waiting",
            KeyOnBusy::CancelRunning => "cancel_running",
        }
    }
}

/// A key's rate: at most `grants` grants of the key in any `per_seconds` seconds. A task whose
/// grant would exceed it waits, and is granted when the rate allows.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, ToSchema, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct KeyRate {
    #[schema(minimum = 1, maximum = 1000)]
    pub grants: u32,
    #[schema(minimum = 1, maximum = 86400)]
    pub per_seconds: u32,
}

impl From<Rate> for KeyRate {
    fn from(r: Rate) -> Self {
        KeyRate {
            grants: r.grants,
            per_seconds: r.per_seconds,
        }
    }
}

/// A key policy.
#[derive(Debug, Serialize, ToSchema)]
pub struct KeyPolicyView {
    pub id: u64,
    pub namespace_id: u64,
    #[serde(rename = "match")]
    pub match_kind: String,
    /// The key, or the prefix.
    pub key: String,
    pub on_busy: String,
    /// Attempts that may hold a matching key at once.
    pub limit: u32,
    /// `null`: no rate.
    pub rate: Option<KeyRate>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<KeyPolicy> for KeyPolicyView {
    fn from(p: KeyPolicy) -> Self {
        KeyPolicyView {
            id: p.id,
            namespace_id: p.namespace_id,
            match_kind: p.match_kind,
            key: p.key,
            on_busy: p.on_busy,
            limit: p.limit,
            rate: p.rate.map(Into::into),
            created_at: p.created_at,
            updated_at: p.updated_at,
        }
    }
}

/// `POST /v1/key-policies` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetKeyPolicy {
    /// The namespace id (the credential needs queues:manage on the whole namespace).
    #[schema(minimum = 1)]
    pub namespace: u64,
    #[serde(rename = "match")]
    pub match_kind: KeyMatch,
    /// The key, or the prefix: the rules of a concurrency_key (1-191 characters, no control
    /// characters, no leading or trailing whitespace), matched by exact bytes.
    #[schema(min_length = 1, max_length = 191)]
    pub key: String,
    /// Read by each submit. Default `queue`.
    #[serde(default)]
    pub on_busy: KeyOnBusy,
    /// Attempts that may hold a matching key at once, 1-1000; read by each grant. Default 1.
    #[schema(minimum = 1, maximum = 1000)]
    #[serde(default = "one")]
    pub limit: u32,
    /// At most this many grants per window; read by each grant. Default: none.
    #[serde(default)]
    pub rate: Option<KeyRate>,
}

fn one() -> u32 {
    1
}

/// `GET /v1/key-policies` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct KeyPolicyQuery {
    /// Required: the namespace id (the credential needs tasks:read on the whole namespace).
    #[param(value_type = i64, required = true, minimum = 1)]
    pub namespace: Option<String>,
}

/// The key policies of a namespace (scope tasks:read on the whole namespace): exact keys first,
/// then prefixes, each by key. At most 1,000, so one page.
#[utoipa::path(
    get, path = "/v1/key-policies", tag = "keys", security(("bearer" = [])), params(KeyPolicyQuery),
    responses(
        (status = 200, body = KeyPolicyList),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, description = "NOT_FOUND: a namespace the credential does not reach as a whole", body = ErrorEnvelope),
        (status = 503, body = ErrorEnvelope),
    )
)]
async fn list_key_policies(
    State(app): State<App>,
    Bearer(hash): Bearer,
    ApiQuery(q): ApiQuery<KeyPolicyQuery>,
) -> Result<Page<KeyPolicyView>, ApiError> {
    let namespace = namespace_param(q.namespace.as_deref())?;
    let policies = app.db.key_policy_list(&hash, namespace).await?;
    Ok(Page(policies.into_iter().map(Into::into).collect(), None))
}

/// Create or change the policy for a key or key prefix (scope queues:manage on the whole
/// namespace; 201 created, 200 changed). The longest matching key wins. `limit` and `rate` apply
/// from each key's next grant, `on_busy` from the next submit; a change never ends a held permit
/// or touches an accepted task. At most 1,000 policies per namespace (429).
#[utoipa::path(
    post, path = "/v1/key-policies", tag = "keys", security(("bearer" = [])),
    request_body = SetKeyPolicy,
    responses(
        (status = 201, description = "Created", body = KeyPolicyEnvelope),
        (status = 200, description = "Changed", body = KeyPolicyEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, description = "NOT_FOUND: a namespace the credential does not reach as a whole", body = ErrorEnvelope),
        (status = 413, body = ErrorEnvelope),
        (status = 429, description = "QUOTA_EXCEEDED: the namespace has 1,000 policies", body = ErrorEnvelope),
        (status = 503, body = ErrorEnvelope),
    )
)]
async fn set_key_policy(
    State(app): State<App>,
    Bearer(hash): Bearer,
    ApiJson(body): ApiJson<SetKeyPolicy>,
) -> Result<Data<KeyPolicyView>, ApiError> {
    let max = crate::codegen::CONSTS.key_max_chars as usize;
    check_len("key", &body.key, max, &format!("1-{max} characters"))?;
    if body.namespace == 0 || body.namespace > i64::MAX as u64 {
        return Err(ApiError::bad_request(
            Some("namespace"),
            "namespace must be a positive integer",
        ));
    }
    let (created, policy) = app
        .db
        .key_policy_set(
            &hash,
            body.namespace,
            &KeyPolicySpec {
                match_kind: body.match_kind.as_str(),
                key: &body.key,
                on_busy: body.on_busy.as_str(),
                limit: body.limit,
                rate: body.rate.map(|r| Rate {
                    grants: r.grants,
                    per_seconds: r.per_seconds,
                }),
            },
        )
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(Data(status, policy.into()))
}

/// Delete a key policy (scope queues:manage on its whole namespace): its keys fall back to the
/// next longest policy that matches them, or to `queue`, from the next submit on.
#[utoipa::path(
    delete, path = "/v1/key-policies/{id}", tag = "keys", security(("bearer" = [])),
    params(("id" = u64, Path, minimum = 1)),
    responses(
        (status = 200, description = "The deleted policy", body = KeyPolicyEnvelope),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, body = ErrorEnvelope), (status = 503, body = ErrorEnvelope),
    )
)]
async fn delete_key_policy(
    State(app): State<App>,
    Bearer(hash): Bearer,
    Path(id): Path<String>,
) -> Result<Data<KeyPolicyView>, ApiError> {
    let id = path_id(&id, "id")?;
    let policy = app.db.key_policy_delete(&hash, id).await?;
    Ok(Data(StatusCode::OK, policy.into()))
}

// Envelopes for the OpenAPI document.

/// `{"data": KeyPolicy, "request_id"}`.
#[derive(Serialize, ToSchema)]
pub struct KeyPolicyEnvelope {
    pub data: KeyPolicyView,
    pub request_id: String,
}

/// `{"data": [KeyPolicy], "next_cursor" (always null), "request_id"}`.
#[derive(Serialize, ToSchema)]
pub struct KeyPolicyList {
    pub data: Vec<KeyPolicyView>,
    pub next_cursor: Option<String>,
    pub request_id: String,
}
