//! Worker-session procedures: open/close a session, claim, start, renew, finish.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::tasks::Task;
use super::{Arg, Cols, Db, DbError};

/// A session registration (the `hello` message).
#[derive(Clone, Debug, Default)]
pub struct SessionOpen {
    pub worker_id: String,
    pub node: String,
    pub capacity: u32,
    pub concurrency_keys: bool,
    /// Grants start in the granting transaction: no `task.start` round trip (orbit_session_open).
    pub start_on_assign: bool,
    pub handlers: Vec<String>,
    pub queue_ids: Vec<String>,
    pub resume: Vec<u64>,
}

/// What `orbit_session_open` returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    pub session_id: u64,
    pub worker_row_id: u64,
    pub concurrency_keys: bool,
    /// Attempts this session now owns (the resumed ones).
    pub resumed: Vec<u64>,
}

/// One grant from `orbit_task_claim`.
#[derive(Clone, Debug)]
pub struct Grant {
    pub attempt_id: u64,
    pub attempt_no: u32,
    pub lease_expires_at: DateTime<Utc>,
    /// 0 when the task has no key; otherwise strictly larger than any earlier grant of the key.
    pub concurrency_token: u64,
    /// The key permit's slot (0 to the key's holder limit - 1; no live holder shares it); 0
    /// when the task has no key.
    pub key_slot: u32,
    pub task: Task,
}

/// The answer of `orbit_attempt_start` and `orbit_attempt_renew`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseAnswer {
    pub attempt_id: u64,
    pub accepted: bool,
    /// Empty when accepted; otherwise LEASE_EXPIRED, NOT_FOUND, PERMISSION_DENIED or STATE_CONFLICT.
    pub code: String,
    pub lease_expires_at: Option<DateTime<Utc>>,
}

/// A worker's reported outcome: the wire protocol's one definition (`orbit_sdk::protocol`).
pub use orbit_sdk::protocol::Outcome;

/// The columns that open every row of `orbit_attempt_finish`: acks, wake_queues, claim_again.
const FINISH_ACK_COLUMNS: usize = 3;

/// One worker result: an element of `orbit_attempt_finish`'s `p_results` array.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AttemptResult {
    pub attempt_id: u64,
    pub outcome: Outcome,
    /// Whether a failure may be retried (failed outcomes only).
    pub retryable: bool,
    pub output: Option<Value>,
    pub error: Option<Value>,
}

/// The acknowledgement of one result by `orbit_attempt_finish`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct FinishAck {
    pub attempt_id: u64,
    /// 0 when `code` is set.
    #[serde(default, deserialize_with = "zero_if_null")]
    pub task_id: u64,
    #[serde(default, deserialize_with = "empty_if_null")]
    pub task_state: String,
    #[serde(default, deserialize_with = "empty_if_null")]
    pub attempt_state: String,
    /// `true` when the attempt had already ended: nothing was released this time.
    #[serde(deserialize_with = "bool_from_int")]
    pub duplicate: bool,
    /// "" when the result was taken; NOT_FOUND when it named an attempt that does not exist or
    /// belongs to another session (one answer for both; nothing was changed for it).
    pub code: String,
    /// `true` when the call's releases may have made work claimable for other sessions (a ready
    /// task of a released key that the call did not grant, a queue permit limit, a full quota):
    /// [`Finished::wake_queues`] is not empty. The same for every result of one call.
    #[serde(skip)]
    pub wake: bool,
}

fn zero_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    Ok(Option::<u64>::deserialize(d)?.unwrap_or(0))
}

fn empty_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

fn bool_from_int<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(u8::deserialize(d)? != 0)
}

impl FinishAck {
    /// The acknowledgement, or the error its code stands for.
    pub fn into_result(self) -> Result<FinishAck, DbError> {
        match self.code.as_str() {
            "" => Ok(self),
            // Another session's attempt gets the same answer: ids reveal nothing.
            "NOT_FOUND" => Err(DbError::NotFound("attempt not found".into())),
            other => Err(DbError::Internal(format!(
                "orbit_attempt_finish answered code {other}"
            ))),
        }
    }
}

/// What `orbit_attempt_finish` answers: one acknowledgement per result, in order, and the grants
/// made in the same transaction.
#[derive(Clone, Debug)]
pub struct Finished {
    pub acks: Vec<FinishAck>,
    pub grants: Vec<Grant>,
    /// The queues where the results left claimable work the grants did not take: wake the
    /// sessions that serve them (only those; never another application's).
    pub wake_queues: Vec<String>,
    /// The grant was left to a claim of the session's own: the session's quota slot refused the
    /// charge after waiting for its row, which then stays locked, so the results' transaction
    /// could not go on to lock every slot (orbit_task_grant's `p_deferred`). The caller claims
    /// next, as after results without a grant.
    pub claim_again: bool,
}

/// One element of `orbit_attempt_start`'s answers.
#[derive(Deserialize)]
struct StartAnswer {
    attempt_id: u64,
    #[serde(deserialize_with = "bool_from_int")]
    accepted: bool,
    code: String,
    lease_expires_at: Option<DateTime<Utc>>,
}

impl From<StartAnswer> for LeaseAnswer {
    fn from(a: StartAnswer) -> Self {
        LeaseAnswer {
            attempt_id: a.attempt_id,
            accepted: a.accepted,
            code: a.code,
            lease_expires_at: a.lease_expires_at,
        }
    }
}

/// One element of `orbit_attempt_renew`'s answers.
#[derive(Deserialize)]
struct RenewAnswer {
    attempt_id: u64,
    #[serde(deserialize_with = "bool_from_int")]
    renewed: bool,
    code: String,
    lease_expires_at: Option<DateTime<Utc>>,
}

impl From<RenewAnswer> for LeaseAnswer {
    fn from(a: RenewAnswer) -> Self {
        LeaseAnswer {
            attempt_id: a.attempt_id,
            accepted: a.renewed,
            code: a.code,
            lease_expires_at: a.lease_expires_at,
        }
    }
}

/// Reads the `answers` JSON column of a procedure that answers each of many ids.
fn answers<T: serde::de::DeserializeOwned>(
    c: &mut Cols<'_>,
    procedure: &str,
) -> Result<Vec<T>, DbError> {
    serde_json::from_str(&c.text()?)
        .map_err(|e| DbError::Internal(format!("{procedure} answers: {e}")))
}

fn one_answer(mut answers: Vec<LeaseAnswer>) -> Result<LeaseAnswer, DbError> {
    answers
        .pop()
        .ok_or_else(|| DbError::Internal("no answer for the attempt".into()))
}

impl Grant {
    /// Reads the grant columns of `orbit_task_claim` (and of `orbit_attempt_finish` after its
    /// acknowledgement).
    fn read(c: &mut Cols<'_>) -> Result<Grant, DbError> {
        Ok(Grant {
            attempt_id: c.u64()?,
            attempt_no: c.u32()?,
            lease_expires_at: c.time()?,
            concurrency_token: c.u64()?,
            key_slot: c.u32()?,
            task: Task::read(c)?,
        })
    }
}

/// How many tasks a result may grant its session in the same transaction (`orbit_attempt_finish`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimAfter {
    /// At most the session's free capacity once these results are in (the WebSocket session asks
    /// for less while its queues have nothing ready); 0 grants nothing.
    pub max: u32,
    pub lease_ms: u32,
}

impl ClaimAfter {
    pub const NONE: ClaimAfter = ClaimAfter {
        max: 0,
        lease_ms: 0,
    };
}

fn json_strings(items: &[String]) -> String {
    serde_json::to_string(items).expect("strings serialise")
}

impl Db {
    /// `orbit_session_open`.
    pub async fn session_open(
        &self,
        token_hash: &[u8],
        s: &SessionOpen,
    ) -> Result<Session, DbError> {
        let handlers = json_strings(&s.handlers);
        let queues = json_strings(&s.queue_ids);
        let resume = serde_json::to_string(&s.resume).expect("ids serialise");
        self.call_one(
            "orbit_session_open",
            &[
                Arg::Bytes(token_hash),
                s.worker_id.as_str().into(),
                s.node.as_str().into(),
                u64::from(s.capacity).into(),
                s.concurrency_keys.into(),
                s.start_on_assign.into(),
                handlers.as_str().into(),
                queues.as_str().into(),
                resume.as_str().into(),
            ],
            |c| {
                let (session_id, worker_row_id, concurrency_keys) = (c.u64()?, c.u64()?, c.bool()?);
                let resumed: Vec<u64> = serde_json::from_str(&c.text()?)
                    .map_err(|e| DbError::Internal(format!("orbit_session_open resumed: {e}")))?;
                Ok(Session {
                    session_id,
                    worker_row_id,
                    concurrency_keys,
                    resumed,
                })
            },
        )
        .await
    }

    /// `orbit_session_close` with state `draining` or `closed`; returns attempts still in flight.
    pub async fn session_close(&self, session_id: u64, draining: bool) -> Result<u64, DbError> {
        let state = if draining { "draining" } else { "closed" };
        self.call_with(
            "orbit_session_close",
            &[session_id.into(), state.into()],
            |rows| match rows {
                [row] => Cols::at(row, 2).u64(),
                _ => Err(DbError::Internal(format!(
                    "orbit_session_close returned {} rows where its header promises one",
                    rows.len()
                ))),
            },
        )
        .await
    }

    /// `orbit_task_claim`: up to `max` grants with a lease of `lease_ms`.
    pub async fn task_claim(
        &self,
        session_id: u64,
        max: u32,
        lease_ms: u32,
    ) -> Result<Vec<Grant>, DbError> {
        // What a wake-up costs: one claim per woken session with free capacity.
        ::metrics::counter!("orbit_worker_claims_total").increment(1);
        let started = std::time::Instant::now();
        let grants = self
            .call(
                "orbit_task_claim",
                &[
                    session_id.into(),
                    u64::from(max).into(),
                    u64::from(lease_ms).into(),
                ],
                Grant::read,
            )
            .await?;
        crate::telemetry::claimed(started.elapsed(), &grants);
        super::keys::observe_handoffs(&grants);
        Ok(grants)
    }

    /// `orbit_session_attempts`: the session's live attempts, as grants.
    pub async fn session_attempts(&self, session_id: u64) -> Result<Vec<Grant>, DbError> {
        self.session_heartbeat(session_id, None).await
    }

    /// `orbit_session_attempts` as a worker's heartbeat: also records that the worker was heard
    /// from, when it was last recorded `touch_after_ms` or longer ago (`None`: never), which keeps
    /// the sweep of silent sessions (`orbit_session_sweep`) off it. UNAUTHENTICATED when the
    /// session is closed (the sweep, or its credential's revocation, closed it).
    pub async fn session_heartbeat(
        &self,
        session_id: u64,
        touch_after_ms: Option<u32>,
    ) -> Result<Vec<Grant>, DbError> {
        self.call(
            "orbit_session_attempts",
            &[
                session_id.into(),
                touch_after_ms.map_or(super::Arg::Null, |ms| u64::from(ms).into()),
            ],
            Grant::read,
        )
        .await
    }

    /// `orbit_attempt_start` for one attempt.
    pub async fn attempt_start(
        &self,
        session_id: u64,
        attempt_id: u64,
    ) -> Result<LeaseAnswer, DbError> {
        one_answer(self.attempt_start_many(session_id, &[attempt_id]).await?)
    }

    /// `orbit_attempt_start`: starts attempts in one transaction; one answer per id, in order.
    pub async fn attempt_start_many(
        &self,
        session_id: u64,
        attempt_ids: &[u64],
    ) -> Result<Vec<LeaseAnswer>, DbError> {
        let ids = serde_json::to_string(attempt_ids).expect("ids serialise");
        self.call_one(
            "orbit_attempt_start",
            &[session_id.into(), ids.as_str().into()],
            |c| answers::<StartAnswer>(c, "orbit_attempt_start"),
        )
        .await
        .map(|a| a.into_iter().map(LeaseAnswer::from).collect())
    }

    /// `orbit_attempt_renew` for one attempt.
    pub async fn attempt_renew(
        &self,
        session_id: u64,
        attempt_id: u64,
        lease_ms: u32,
    ) -> Result<LeaseAnswer, DbError> {
        one_answer(
            self.attempt_renew_many(session_id, &[attempt_id], lease_ms)
                .await?,
        )
    }

    /// `orbit_attempt_renew`: renews attempts in one transaction; one answer per id, in order.
    pub async fn attempt_renew_many(
        &self,
        session_id: u64,
        attempt_ids: &[u64],
        lease_ms: u32,
    ) -> Result<Vec<LeaseAnswer>, DbError> {
        let ids = serde_json::to_string(attempt_ids).expect("ids serialise");
        self.call_one(
            "orbit_attempt_renew",
            &[
                session_id.into(),
                ids.as_str().into(),
                u64::from(lease_ms).into(),
            ],
            |c| answers::<RenewAnswer>(c, "orbit_attempt_renew"),
        )
        .await
        .map(|a| a.into_iter().map(LeaseAnswer::from).collect())
    }

    /// `orbit_attempt_finish` for one result, without grants.
    pub async fn attempt_finish(
        &self,
        session_id: u64,
        attempt_id: u64,
        outcome: Outcome,
        retryable: bool,
        output: Option<&str>,
        error: Option<&str>,
    ) -> Result<FinishAck, DbError> {
        let (ack, _) = self
            .attempt_finish_and_claim(
                session_id,
                attempt_id,
                outcome,
                retryable,
                output,
                error,
                ClaimAfter::NONE,
            )
            .await?;
        Ok(ack)
    }

    /// `orbit_attempt_finish` for one result (`output` and `error` as JSON text): its
    /// acknowledgement, or its code as an error, and the grants made in the same transaction.
    #[allow(clippy::too_many_arguments)]
    pub async fn attempt_finish_and_claim(
        &self,
        session_id: u64,
        attempt_id: u64,
        outcome: Outcome,
        retryable: bool,
        output: Option<&str>,
        error: Option<&str>,
        claim: ClaimAfter,
    ) -> Result<(FinishAck, Vec<Grant>), DbError> {
        let json = |text: Option<&str>| -> Result<Option<Value>, DbError> {
            text.map(serde_json::from_str)
                .transpose()
                .map_err(|_| DbError::InvalidArgument("output and error must be valid JSON".into()))
        };
        let result = AttemptResult {
            attempt_id,
            outcome,
            retryable,
            output: json(output)?,
            error: json(error)?,
        };
        let mut finished = self
            .attempt_finish_many(session_id, std::slice::from_ref(&result), claim)
            .await?;
        let ack = finished
            .acks
            .pop()
            .ok_or_else(|| DbError::Internal("orbit_attempt_finish returned no ack".into()))?;
        Ok((ack.into_result()?, finished.grants))
    }

    /// `orbit_attempt_finish`: a session's results in one transaction, each acknowledged on its
    /// own, and the grants made for the capacity they free.
    pub async fn attempt_finish_many(
        &self,
        session_id: u64,
        results: &[AttemptResult],
        claim: ClaimAfter,
    ) -> Result<Finished, DbError> {
        let started = std::time::Instant::now();
        let input = results;
        let results = serde_json::to_string(results).expect("results serialise");
        let finished = self
            .call_with(
                "orbit_attempt_finish",
                &[
                    session_id.into(),
                    results.as_str().into(),
                    u64::from(claim.max).into(),
                    u64::from(claim.lease_ms).into(),
                ],
                read_finished,
            )
            .await?;
        crate::telemetry::finished(started.elapsed(), input, &finished.acks, &finished.grants);
        super::keys::observe_handoffs(&finished.grants);
        Ok(finished)
    }
}

/// Reads `orbit_attempt_finish`'s rows: the acknowledgements and woken queues in the first, a
/// grant (or none) in each.
fn read_finished(rows: &[sqlx::mysql::MySqlRow]) -> Result<Finished, DbError> {
    {
        let first = rows
            .first()
            .ok_or_else(|| DbError::Internal("orbit_attempt_finish returned no row".into()))?;
        let mut c = Cols::new(first);
        let acks = c.text()?;
        let wake_queues = super::tasks::wake_queues(&mut c, "orbit_attempt_finish")?;
        let claim_again = c.u64()? != 0;
        let mut acks: Vec<FinishAck> = serde_json::from_str(&acks)
            .map_err(|e| DbError::Internal(format!("orbit_attempt_finish acks: {e}")))?;
        for ack in &mut acks {
            ack.wake = !wake_queues.is_empty();
        }
        let mut grants = Vec::new();
        for row in rows {
            // The row of no grant has a NULL attempt_id (read as 0).
            if Cols::at(row, FINISH_ACK_COLUMNS).u64()? != 0 {
                grants.push(Grant::read(&mut Cols::at(row, FINISH_ACK_COLUMNS))?);
            }
        }
        Ok(Finished {
            acks,
            grants,
            wake_queues,
            claim_again,
        })
    }
}
