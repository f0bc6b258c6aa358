//! `/v1/keys`: the key inspector (read-only). One key's token, holder and waiters, or a
//! namespace's held keys, busiest first (docs/operations.md, "Why is my task waiting?").

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::envelope::{check_len, namespace_param, ApiQuery, Bearer, Data, Page};
use super::error::{ApiError, ErrorEnvelope};
use super::App;
use crate::db::keys::{HeldKey, Holder, KeyOrder, KeyState, QueueWaiting, RecentGrant};

pub fn router() -> OpenApiRouter<App> {
    OpenApiRouter::new().routes(routes!(get_keys))
}

/// The attempt holding a key.
#[derive(Debug, Serialize, ToSchema)]
pub struct HolderView {
    pub attempt_id: u64,
    pub task_id: u64,
    /// 32 hex digits.
    pub queue_id: String,
    pub worker_id: String,
    pub session_id: u64,
    /// LEASED or RUNNING.
    pub state: String,
    pub granted_at: DateTime<Utc>,
    /// When the lease (and the key with it) lapses unless renewed.
    pub lease_expires_at: DateTime<Utc>,
    /// The fencing token granted with the key.
    pub concurrency_token: u64,
}

impl From<Holder> for HolderView {
    fn from(h: Holder) -> Self {
        HolderView {
            attempt_id: h.attempt_id,
            task_id: h.task_id,
            queue_id: h.queue_id,
            worker_id: h.worker_id,
            session_id: h.session_id,
            state: h.state,
            granted_at: h.granted_at,
            lease_expires_at: h.lease_expires_at,
            concurrency_token: h.concurrency_token,
        }
    }
}

/// One queue's tasks waiting for the key.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueueWaitingView {
    pub queue_id: String,
    /// Waiting tasks (lanes blocked and ready), counted up to 10,000.
    pub waiting: u64,
    /// True when the queue has more than `waiting` counted.
    pub waiting_more: bool,
    /// Of those, claimable now.
    pub ready: u64,
    /// The waiting task accepted first.
    pub oldest_task_id: u64,
    /// When it became due (its run_at).
    pub oldest_waiting_since: Option<DateTime<Utc>>,
    /// The queue's next task for the key.
    pub next_task_id: Option<u64>,
}

impl From<QueueWaiting> for QueueWaitingView {
    fn from(q: QueueWaiting) -> Self {
        QueueWaitingView {
            queue_id: q.queue_id,
            waiting: q.waiting,
            waiting_more: q.waiting_more != 0,
            ready: q.ready,
            oldest_task_id: q.oldest_task_id,
            oldest_waiting_since: q.oldest_waiting_since,
            next_task_id: q.next_task_id,
        }
    }
}

/// One key: its token, its holder, and who waits for it.
#[derive(Debug, Serialize, ToSchema)]
pub struct KeyView {
    pub namespace_id: u64,
    pub concurrency_key: String,
    /// The largest token ever granted for the key (0 = never granted). The next holder gets a
    /// larger one.
    pub highest_token: u64,
    /// The key's oldest holder (with a limit above 1, others may hold it too: `holders`); null
    /// when nobody holds the key.
    pub holder: Option<HolderView>,
    /// Attempts holding the key now.
    pub holders: u32,
    /// Waiting tasks over all queues (each queue counted up to 10,000).
    pub waiting: u64,
    pub waiting_more: bool,
    pub oldest_task_id: Option<u64>,
    pub oldest_waiting_since: Option<DateTime<Utc>>,
    /// The task the key goes to next: the best ready task, else the best blocked one.
    pub next_task_id: Option<u64>,
    pub next_queue_id: Option<String>,
    /// `ready` or `blocked`.
    pub next_lane: Option<String>,
    /// Queues with waiting tasks, in queue id order.
    pub queues: Vec<QueueWaitingView>,
    /// The key's last 10 grants, newest first (the holder's included), each with its token.
    pub recent_grants: Vec<RecentGrantView>,
    /// The key policy a submit for this key meets now (`/v1/key-policies`); null when none.
    pub policy_id: Option<u64>,
    /// What that submit does while the key is busy: `queue` (also without a policy), `reject`,
    /// `replace_waiting` or `cancel_running`.
    pub on_busy: String,
    /// Attempts that may hold the key at once, as its next grant applies (1 without a policy).
    pub limit: u32,
    /// The key's rate, as its next grant applies; null when none.
    pub rate: Option<super::key_policies::KeyRate>,
    /// While a grant waits for the key's rate: when the rate lets it through; null otherwise.
    pub rate_wake_at: Option<DateTime<Utc>>,
}

/// One of a key's recent grants: an attempt and the token it was granted with.
#[derive(Debug, Serialize, ToSchema)]
pub struct RecentGrantView {
    pub attempt_id: u64,
    pub task_id: u64,
    pub queue_id: String,
    pub worker_id: String,
    /// The attempt's state: LEASED or RUNNING while it holds the key, else how it ended.
    pub state: String,
    pub concurrency_token: u64,
    /// The key permit's slot the grant took (0 to the key's limit - 1).
    pub key_slot: u32,
    pub granted_at: DateTime<Utc>,
    /// Null while the attempt holds the key.
    pub released_at: Option<DateTime<Utc>>,
    /// How it ended: succeeded, failed, unknown, expired, cancelled; "" while active.
    pub outcome: String,
}

impl From<RecentGrant> for RecentGrantView {
    fn from(g: RecentGrant) -> Self {
        RecentGrantView {
            attempt_id: g.attempt_id,
            task_id: g.task_id,
            queue_id: g.queue_id,
            worker_id: g.worker_id,
            state: g.state,
            concurrency_token: g.concurrency_token,
            key_slot: g.key_slot,
            granted_at: g.granted_at,
            released_at: g.released_at,
            outcome: g.outcome,
        }
    }
}

impl From<KeyState> for KeyView {
    fn from(k: KeyState) -> Self {
        KeyView {
            namespace_id: k.namespace_id,
            concurrency_key: k.concurrency_key,
            highest_token: k.highest_token,
            holder: k.holder.map(HolderView::from),
            holders: k.holders,
            waiting: k.waiting,
            waiting_more: k.waiting_more,
            oldest_task_id: k.oldest_task_id,
            oldest_waiting_since: k.oldest_waiting_since,
            next_task_id: k.next_task_id,
            next_queue_id: k.next_queue_id,
            next_lane: k.next_lane,
            queues: k.queues.into_iter().map(QueueWaitingView::from).collect(),
            recent_grants: k
                .recent_grants
                .into_iter()
                .map(RecentGrantView::from)
                .collect(),
            policy_id: k.policy_id,
            on_busy: k.on_busy,
            limit: k.limit,
            rate: k.rate.map(Into::into),
            rate_wake_at: k.rate_wake_at,
        }
    }
}

/// A held key in the busiest-keys list.
#[derive(Debug, Serialize, ToSchema)]
pub struct HeldKeyView {
    pub namespace_id: u64,
    pub concurrency_key: String,
    pub highest_token: u64,
    /// The key's oldest holder.
    pub holder: HolderView,
    /// Attempts holding the key now.
    pub holders: u32,
    /// Waiting tasks, counted up to 1,000.
    pub waiting: u64,
    pub waiting_more: bool,
    pub oldest_task_id: Option<u64>,
    pub oldest_waiting_since: Option<DateTime<Utc>>,
}

impl From<HeldKey> for HeldKeyView {
    fn from(k: HeldKey) -> Self {
        HeldKeyView {
            namespace_id: k.namespace_id,
            concurrency_key: k.concurrency_key,
            highest_token: k.highest_token,
            holder: k.holder.into(),
            holders: k.holders,
            waiting: k.waiting,
            waiting_more: k.waiting_more,
            oldest_task_id: k.oldest_task_id,
            oldest_waiting_since: k.oldest_waiting_since,
        }
    }
}

/// `{"data": Key, "request_id"}`.
#[derive(Serialize, ToSchema)]
pub struct KeyEnvelope {
    pub data: KeyView,
    pub request_id: String,
}

/// `{"data": [HeldKey], "next_cursor", "request_id"}`.
#[derive(Serialize, ToSchema)]
pub struct HeldKeyList {
    pub data: Vec<HeldKeyView>,
    pub next_cursor: Option<String>,
    pub request_id: String,
}

/// `GET /v1/keys` answers one key (with `concurrency_key`) or a page of held keys (without).
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum KeysAnswer {
    Key(KeyEnvelope),
    List(HeldKeyList),
}

/// The busiest-keys order.
#[derive(Clone, Copy, Debug, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum KeyOrderParam {
    /// Most waiting tasks first.
    Waiting,
    /// The key whose oldest waiting task was accepted first comes first.
    OldestWait,
}

/// `GET /v1/keys` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct KeysQuery {
    /// Required: the namespace id (a positive integer; the credential must reach the whole
    /// namespace).
    #[param(value_type = i64, required = true, minimum = 1)]
    pub namespace: Option<String>,
    /// One key (exact bytes, at most 191 characters): answer its holder and waiters.
    #[param(max_length = 191)]
    pub concurrency_key: Option<String>,
    /// Without `concurrency_key`: the list order (default `waiting`).
    #[param(inline)]
    pub order: Option<KeyOrderParam>,
    /// Without `concurrency_key`: 1-1000; default 100.
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// Without `concurrency_key`: `next_cursor` of the previous page (same order).
    pub cursor: Option<String>,
}

fn order_tag(order: KeyOrder) -> char {
    match order {
        KeyOrder::Waiting => 'w',
        KeyOrder::OldestWait => 'o',
    }
}

fn encode_cursor(order: KeyOrder, k: &HeldKey) -> String {
    hex::encode(format!(
        "{}:{}:{}",
        order_tag(order),
        k.sort_value,
        k.resource_id
    ))
}

fn decode_cursor(order: KeyOrder, cursor: &str) -> Result<(u64, u64), ApiError> {
    let bad = || {
        ApiError::bad_request(
            Some("cursor"),
            "cursor is not a next_cursor of this list in this order",
        )
    };
    let text = hex::decode(cursor)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(bad)?;
    let mut parts = text.split(':');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(tag), Some(value), Some(id), None)
            if tag.len() == 1 && tag.starts_with(order_tag(order)) =>
        {
            Ok((
                value.parse().map_err(|_| bad())?,
                id.parse().map_err(|_| bad())?,
            ))
        }
        _ => Err(bad()),
    }
}

/// Inspect concurrency keys (scope tasks:read on the whole namespace). With `concurrency_key`:
/// the key, its highest token, its holder (attempt, task, queue, worker, session, state, lease
/// expiry, token) and its waiting tasks per queue with the oldest and the next candidate; 404
/// for a key never used (the same answer as another tenant's key). Without: the namespace's held
/// keys, busiest first, a page at a time (a namespace the credential does not reach lists
/// nothing). Each answer is one `CALL orbit_key_get` / `orbit_key_list`.
#[utoipa::path(
    get, path = "/v1/keys", tag = "keys", security(("bearer" = [])), params(KeysQuery),
    responses(
        (status = 200, description = "KeyEnvelope with concurrency_key, HeldKeyList without", body = KeysAnswer),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 404, description = "NOT_FOUND: no such key in a namespace the credential reaches", body = ErrorEnvelope),
        (status = 503, body = ErrorEnvelope),
    )
)]
async fn get_keys(
    State(app): State<App>,
    Bearer(hash): Bearer,
    ApiQuery(q): ApiQuery<KeysQuery>,
) -> Result<Response, ApiError> {
    let namespace = namespace_param(q.namespace.as_deref())?;
    if let Some(key) = &q.concurrency_key {
        let max = crate::codegen::CONSTS.key_max_chars as usize;
        check_len(
            "concurrency_key",
            key,
            max,
            &format!("at most {max} characters"),
        )?;
        for (field, given) in [
            ("order", q.order.is_some()),
            ("limit", q.limit.is_some()),
            ("cursor", q.cursor.is_some()),
        ] {
            if given {
                return Err(ApiError::bad_request(
                    Some(field),
                    format!("{field} applies to the list of keys, not to one concurrency_key"),
                ));
            }
        }
        let key = app.db.key_get(&hash, namespace, key).await?;
        return Ok(Data(StatusCode::OK, KeyView::from(key)).into_response());
    }
    let order = match q.order.unwrap_or(KeyOrderParam::Waiting) {
        KeyOrderParam::Waiting => KeyOrder::Waiting,
        KeyOrderParam::OldestWait => KeyOrder::OldestWait,
    };
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::bad_request(
            Some("limit"),
            "limit must be between 1 and 1000",
        ));
    }
    let after = q
        .cursor
        .as_deref()
        .map(|c| decode_cursor(order, c))
        .transpose()?;
    // One row more than asked tells whether a next page exists; the procedure returns at most
    // 1,000, so a full page of 1,000 always gets a cursor (its next page may be empty).
    let mut keys = app
        .db
        .key_list(&hash, namespace, order, (limit + 1).min(1000), after)
        .await?;
    let next = (keys.len() > limit as usize || keys.len() == 1000).then(|| {
        keys.truncate(limit as usize);
        keys.last()
            .map(|k| encode_cursor(order, k))
            .unwrap_or_default()
    });
    Ok(Page(keys.into_iter().map(HeldKeyView::from).collect(), next).into_response())
}

/// Buckets (seconds) of the `orbit_key_handoff_wait_seconds` histogram: from a hand-off in the
/// same transaction as the release (milliseconds) to tasks queued behind a busy key for an hour.
pub const HANDOFF_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
];
