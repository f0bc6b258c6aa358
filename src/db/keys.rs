//! The key inspector: `orbit_key_get` (one key) and `orbit_key_list` (a namespace's held keys);
//! key policies: `orbit_key_policy_set`, `orbit_key_policy_list`, `orbit_key_policy_delete`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{Arg, Cols, Db, DbError};

/// The attempt that holds a key's permit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Holder {
    pub attempt_id: u64,
    pub task_id: u64,
    pub queue_id: String,
    pub worker_id: String,
    pub session_id: u64,
    /// LEASED or RUNNING.
    pub state: String,
    pub granted_at: DateTime<Utc>,
    pub lease_expires_at: DateTime<Utc>,
    pub concurrency_token: u64,
}

/// One queue's tasks waiting for a key (an element of `orbit_key_get`'s `queues`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueWaiting {
    pub queue_id: String,
    /// Counted up to 10,000.
    pub waiting: u64,
    /// 1 when the queue has more waiting tasks than `waiting` counted.
    pub waiting_more: u8,
    /// Of `waiting`, how many are claimable now (lane ready).
    pub ready: u64,
    pub oldest_task_id: u64,
    pub oldest_waiting_since: Option<DateTime<Utc>>,
    pub next_task_id: Option<u64>,
}

/// `orbit_key_get`'s row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KeyState {
    pub namespace_id: u64,
    pub concurrency_key: String,
    pub highest_token: u64,
    pub holder: Option<Holder>,
    pub waiting: u64,
    pub waiting_more: bool,
    pub oldest_task_id: Option<u64>,
    pub oldest_waiting_since: Option<DateTime<Utc>>,
    pub next_task_id: Option<u64>,
    pub next_queue_id: Option<String>,
    pub next_lane: Option<String>,
    pub queues: Vec<QueueWaiting>,
    /// The key's last 10 grants, newest first.
    pub recent_grants: Vec<RecentGrant>,
    /// The key policy a submit for this key meets now (`None`: no policy, `on_busy` is `queue`).
    pub policy_id: Option<u64>,
    pub on_busy: String,
    /// Attempts holding the key now (`holder` is the oldest of them).
    pub holders: u32,
    /// The policy's limit and rate, which the key's next grant applies.
    pub limit: u32,
    pub rate: Option<Rate>,
    /// While a grant waits for the key's rate: when the rate lets it through.
    pub rate_wake_at: Option<DateTime<Utc>>,
}

/// One of a key's last grants (an element of `orbit_key_get`'s `recent_grants`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecentGrant {
    pub attempt_id: u64,
    pub task_id: u64,
    pub queue_id: String,
    pub worker_id: String,
    pub state: String,
    pub concurrency_token: u64,
    /// The key permit's slot the grant took.
    pub key_slot: u32,
    pub granted_at: DateTime<Utc>,
    pub released_at: Option<DateTime<Utc>>,
    pub outcome: String,
}

/// One row of `orbit_key_list`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HeldKey {
    pub namespace_id: u64,
    pub concurrency_key: String,
    pub highest_token: u64,
    pub holder: Holder,
    /// Counted up to 1,000.
    pub waiting: u64,
    pub waiting_more: bool,
    pub oldest_task_id: Option<u64>,
    pub oldest_waiting_since: Option<DateTime<Utc>>,
    /// The cursor of this row: (sort value, resource id).
    pub resource_id: u64,
    pub sort_value: u64,
    /// Attempts holding the key now (`holder` is the oldest of them).
    pub holders: u32,
}

/// How `orbit_key_list` orders the held keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyOrder {
    Waiting,
    OldestWait,
}

impl KeyOrder {
    pub fn as_str(self) -> &'static str {
        match self {
            KeyOrder::Waiting => "waiting",
            KeyOrder::OldestWait => "oldest_wait",
        }
    }
}

fn holder(c: &mut Cols<'_>) -> Result<Option<Holder>, DbError> {
    let attempt_id = c.opt_u64()?;
    let task_id = c.u64()?;
    let queue_id = c.text()?;
    let worker_id = c.text()?;
    let session_id = c.u64()?;
    let state = c.text()?;
    let granted_at = c.opt_time()?;
    let lease_expires_at = c.opt_time()?;
    let concurrency_token = c.u64()?;
    Ok(match (attempt_id, granted_at, lease_expires_at) {
        (Some(attempt_id), Some(granted_at), Some(lease_expires_at)) => Some(Holder {
            attempt_id,
            task_id,
            queue_id,
            worker_id,
            session_id,
            state,
            granted_at,
            lease_expires_at,
            concurrency_token,
        }),
        _ => None,
    })
}

/// One row of `orbit_key_metrics`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KeyGauge {
    /// `key_held`, `key_blocked_tasks` or `key_oldest_wait_seconds`.
    pub metric: String,
    pub namespace_id: u64,
    pub queue_id: String,
    pub value: f64,
}

/// Records the hand-offs among `grants` (fresh grants, not resumed ones): one observation of
/// `orbit_key_handoff_wait_seconds` per grant of a key granted before (token > 1), the seconds
/// from its task becoming due (run_at) to now, labelled by namespace and queue id.
pub fn observe_handoffs(grants: &[super::workers::Grant]) {
    let now = Utc::now();
    for g in grants.iter().filter(|g| g.concurrency_token > 1) {
        let waited = (now - g.task.run_at).num_microseconds().unwrap_or(0).max(0) as f64 / 1e6;
        ::metrics::histogram!(
            "orbit_key_handoff_wait_seconds",
            "namespace" => g.task.namespace_id.to_string(),
            "queue" => g.task.queue_id.clone()
        )
        .record(waited);
    }
}

impl Db {
    /// `orbit_key_metrics`: the key gauges of every queue, ordered by metric.
    pub async fn key_metrics(&self) -> Result<Vec<KeyGauge>, DbError> {
        self.call("orbit_key_metrics", &[], |c| {
            Ok(KeyGauge {
                metric: c.text()?,
                namespace_id: c.u64()?,
                queue_id: c.text()?,
                value: c.f64()?,
            })
        })
        .await
    }

    /// `orbit_key_get`: NOT_FOUND for a key never used, or outside the credential's reach.
    pub async fn key_get(
        &self,
        token_hash: &[u8],
        namespace_id: u64,
        key: &str,
    ) -> Result<KeyState, DbError> {
        self.call_one(
            "orbit_key_get",
            &[Arg::Bytes(token_hash), namespace_id.into(), key.into()],
            |c| {
                let namespace_id = c.u64()?;
                let concurrency_key = c.text()?;
                let highest_token = c.u64()?;
                let holder = holder(c)?;
                let waiting = c.u64()?;
                let waiting_more = c.bool()?;
                let oldest_task_id = c.opt_u64()?;
                let oldest_waiting_since = c.opt_time()?;
                let next_task_id = c.opt_u64()?;
                let next_queue_id = c.opt_text()?;
                let next_lane = c.opt_text()?;
                let queues = serde_json::from_str(&c.text()?).map_err(|e| {
                    DbError::Internal(format!(
                        "orbit_key_get: queues is not the documented JSON: {e}"
                    ))
                })?;
                let recent_grants = serde_json::from_str(&c.text()?).map_err(|e| {
                    DbError::Internal(format!(
                        "orbit_key_get: recent_grants is not the documented JSON: {e}"
                    ))
                })?;
                let policy_id = c.opt_u64()?;
                let on_busy = c.text()?;
                let holders = c.u32()?;
                let limit = c.u32()?;
                let rate = Rate::read(c)?;
                let rate_wake_at = c.opt_time()?;
                Ok(KeyState {
                    policy_id,
                    on_busy,
                    holders,
                    limit,
                    rate,
                    rate_wake_at,
                    namespace_id,
                    concurrency_key,
                    highest_token,
                    holder,
                    waiting,
                    waiting_more,
                    oldest_task_id,
                    oldest_waiting_since,
                    next_task_id,
                    next_queue_id,
                    next_lane,
                    queues,
                    recent_grants,
                })
            },
        )
        .await
    }

    /// `orbit_key_list`: up to `limit` (1-1000) held keys of the namespace in `order`, after the
    /// cursor `(sort_value, resource_id)` of the previous page's last row.
    pub async fn key_list(
        &self,
        token_hash: &[u8],
        namespace_id: u64,
        order: KeyOrder,
        limit: u32,
        after: Option<(u64, u64)>,
    ) -> Result<Vec<HeldKey>, DbError> {
        self.call(
            "orbit_key_list",
            &[
                Arg::Bytes(token_hash),
                namespace_id.into(),
                order.as_str().into(),
                u64::from(limit).into(),
                after.map_or(Arg::Null, |a| Arg::U64(a.0)),
                after.map_or(Arg::Null, |a| Arg::U64(a.1)),
            ],
            |c| {
                let namespace_id = c.u64()?;
                let concurrency_key = c.text()?;
                let highest_token = c.u64()?;
                let holder = holder(c)?.ok_or_else(|| {
                    DbError::Internal("orbit_key_list returned a key without a holder".into())
                })?;
                Ok(HeldKey {
                    namespace_id,
                    concurrency_key,
                    highest_token,
                    holder,
                    waiting: c.u64()?,
                    waiting_more: c.bool()?,
                    oldest_task_id: c.opt_u64()?,
                    oldest_waiting_since: c.opt_time()?,
                    resource_id: c.u64()?,
                    sort_value: c.u64()?,
                    holders: c.u32()?,
                })
            },
        )
        .await
    }
}

/// A key policy (`orbit_key_policy`): how many may hold a key, how often it may be granted, and
/// what a submit does when it is busy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KeyPolicy {
    pub id: u64,
    pub namespace_id: u64,
    /// `exact` or `prefix`.
    pub match_kind: String,
    /// The key, or the prefix.
    pub key: String,
    /// `queue`, `reject`, `replace_waiting` or `cancel_running`.
    pub on_busy: String,
    /// Attempts that may hold the key at once.
    pub limit: u32,
    pub rate: Option<Rate>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A key's rate: at most `grants` grants in any `per_seconds`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rate {
    pub grants: u32,
    pub per_seconds: u32,
}

impl Rate {
    /// Two columns, `rate_grants` and `rate_per_seconds`: 0 in either is no rate.
    fn read(c: &mut Cols<'_>) -> Result<Option<Rate>, DbError> {
        Ok(match (c.u32()?, c.u32()?) {
            (0, _) | (_, 0) => None,
            (grants, per_seconds) => Some(Rate {
                grants,
                per_seconds,
            }),
        })
    }
}

/// What `orbit_key_policy_set` sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyPolicySpec<'a> {
    /// `exact` or `prefix`.
    pub match_kind: &'a str,
    pub key: &'a str,
    pub on_busy: &'a str,
    /// 1-1000.
    pub limit: u32,
    pub rate: Option<Rate>,
}

impl<'a> KeyPolicySpec<'a> {
    /// A policy of one holder and no rate: `on_busy` alone.
    pub fn new(match_kind: &'a str, key: &'a str, on_busy: &'a str) -> Self {
        KeyPolicySpec {
            match_kind,
            key,
            on_busy,
            limit: 1,
            rate: None,
        }
    }

    pub fn limit(self, limit: u32) -> Self {
        KeyPolicySpec { limit, ..self }
    }

    pub fn rate(self, grants: u32, per_seconds: u32) -> Self {
        KeyPolicySpec {
            rate: Some(Rate {
                grants,
                per_seconds,
            }),
            ..self
        }
    }
}

impl KeyPolicy {
    /// The policy columns of the procedure headers, in order.
    fn read(c: &mut Cols<'_>) -> Result<KeyPolicy, DbError> {
        Ok(KeyPolicy {
            id: c.u64()?,
            namespace_id: c.u64()?,
            match_kind: c.text()?,
            key: c.text()?,
            on_busy: c.text()?,
            limit: c.u32()?,
            rate: Rate::read(c)?,
            created_at: c.time()?,
            updated_at: c.time()?,
        })
    }
}

impl Db {
    /// `orbit_key_policy_set`: creates or changes the policy; `true` when it is new.
    pub async fn key_policy_set(
        &self,
        token_hash: &[u8],
        namespace_id: u64,
        spec: &KeyPolicySpec<'_>,
    ) -> Result<(bool, KeyPolicy), DbError> {
        let rate = spec.rate.unwrap_or(Rate {
            grants: 0,
            per_seconds: 0,
        });
        self.call_one(
            "orbit_key_policy_set",
            &[
                Arg::Bytes(token_hash),
                namespace_id.into(),
                spec.match_kind.into(),
                Arg::Bytes(spec.key.as_bytes()),
                spec.on_busy.into(),
                u64::from(spec.limit).into(),
                u64::from(rate.grants).into(),
                u64::from(rate.per_seconds).into(),
            ],
            |c| Ok((c.bool()?, KeyPolicy::read(c)?)),
        )
        .await
    }

    /// `orbit_key_policy_list`: a namespace's policies, exact ones first.
    pub async fn key_policy_list(
        &self,
        token_hash: &[u8],
        namespace_id: u64,
    ) -> Result<Vec<KeyPolicy>, DbError> {
        self.call(
            "orbit_key_policy_list",
            &[Arg::Bytes(token_hash), namespace_id.into()],
            KeyPolicy::read,
        )
        .await
    }

    /// `orbit_key_policy_delete`: returns the deleted policy.
    pub async fn key_policy_delete(
        &self,
        token_hash: &[u8],
        policy_id: u64,
    ) -> Result<KeyPolicy, DbError> {
        self.call_one(
            "orbit_key_policy_delete",
            &[Arg::Bytes(token_hash), policy_id.into()],
            KeyPolicy::read,
        )
        .await
    }
}
