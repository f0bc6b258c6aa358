//! `GET /v1/workers/connect`: the worker WebSocket (SPEC §5, docs/protocol.md).
//!
//! The session loop only marshals: each frame becomes one `CALL` (`orbit_session_open`,
//! `orbit_attempt_start`, `orbit_attempt_renew`, `orbit_attempt_finish`, `orbit_session_close`);
//! starts or results the worker sent together share one call (one commit, each still answered on
//! its own), and a renewal is one call for all the attempts it names. Grants come with each result (`orbit_attempt_finish` grants
//! the freed capacity in the releasing transaction, so a key's next task is assigned with the
//! acknowledgement), and from
//! `orbit_task_claim` whenever the session has free capacity and there may be work: on hello, when
//! this process accepts or releases work (the dispatch signal), and when the scheduler's probe
//! sees ready work from other processes.

use std::collections::HashSet;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::response::Response;
use futures_util::{FutureExt, SinkExt};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::envelope::Bearer;
use super::error::{ApiError, ErrorEnvelope};
use super::tasks::TaskView;
use super::App;
use crate::db::workers::{AttemptResult, ClaimAfter, Grant, Outcome, SessionOpen};
use crate::db::DbError;

/// The default lease granted with each assignment (`serve --lease-seconds`); workers renew every
/// third of it.
pub const LEASE_SECONDS: u32 = 30;

/// At most this many start or result frames go into one call…
const MAX_FRAMES_PER_CALL: usize = 100;
/// …and about this many bytes of them (a result's output and error travel in the call).
const MAX_BYTES_PER_CALL: usize = 1024 * 1024;

/// How often a worker is asked to renew a lease of `lease_seconds`: three chances per lease.
pub fn renew_interval(lease_seconds: u32) -> u32 {
    (lease_seconds / 3).max(1)
}

/// Frames a worker sends.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
pub enum ClientFrame {
    #[serde(rename = "hello")]
    Hello {
        worker_id: String,
        capacity: u32,
        queue_ids: Vec<String>,
        #[serde(default)]
        handlers: Vec<String>,
        concurrency_keys: bool,
        #[serde(default)]
        start_on_assign: bool,
        #[serde(default)]
        resume: Vec<u64>,
    },
    #[serde(rename = "task.start")]
    Start { attempt_id: u64 },
    #[serde(rename = "lease.renew")]
    Renew { attempt_ids: Vec<u64> },
    #[serde(rename = "task.result")]
    Result {
        attempt_id: u64,
        outcome: Outcome,
        #[serde(default)]
        retryable: bool,
        #[serde(default)]
        output: Option<Value>,
        #[serde(default)]
        error: Option<Value>,
    },
    #[serde(rename = "drain")]
    Drain,
}

/// The `task.assign` frame.
#[derive(Debug, Serialize)]
pub struct Assign {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub attempt_id: u64,
    pub attempt_no: u32,
    pub lease_expires_at: chrono::DateTime<chrono::Utc>,
    pub task: TaskView,
    /// Decimal string, present exactly when the task has a key (never a JSON number).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency_token: Option<String>,
    /// The attempt is already RUNNING (a `start_on_assign` session): run it without `task.start`.
    pub started: bool,
}

impl From<Grant> for Assign {
    fn from(g: Grant) -> Self {
        let keyed = g.task.concurrency_key.is_some();
        let started = g.task.state == crate::db::tasks::TaskState::Running;
        Assign {
            started,
            kind: "task.assign",
            attempt_id: g.attempt_id,
            attempt_no: g.attempt_no,
            lease_expires_at: g.lease_expires_at,
            concurrency_token: keyed.then(|| g.concurrency_token.to_string()),
            task: g.task.into(),
        }
    }
}

/// Open a worker session (WebSocket upgrade; scope workers:connect, and workers:consume on the queues).
#[utoipa::path(
    get, path = "/v1/workers/connect", tag = "workers", security(("bearer" = [])),
    responses(
        (status = 101, description = "Switching to the worker protocol (docs/protocol.md)"),
        (status = 400, body = ErrorEnvelope), (status = 401, body = ErrorEnvelope), (status = 403, body = ErrorEnvelope),
        (status = 503, body = ErrorEnvelope),
    )
)]
pub async fn connect(
    State(app): State<App>,
    bearer: Result<Bearer, ApiError>,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let Bearer(hash) = bearer?;
    // Refuse before upgrading: an unknown token never holds a socket open.
    app.db.credential_check(&hash, "workers:connect").await?;
    let ws = ws.map_err(|e| {
        ApiError::bad_request(None, format!("a WebSocket upgrade is required: {e}"))
    })?;
    // Small buffers: frames are small and idle sessions should cost little memory (the default
    // 128 KiB read buffer per socket dominated an idle session's footprint).
    let ws = ws
        .read_buffer_size(4 * 1024)
        .write_buffer_size(4 * 1024)
        .max_message_size(super::envelope::BODY_LIMIT);
    Ok(ws.on_upgrade(move |socket| async move {
        let mut session = Session {
            app,
            hash,
            socket,
            id: None,
            in_flight: HashSet::new(),
            queues: Vec::new(),
            capacity: 0,
            draining: false,
            drained_sent: false,
            ahead: None,
        };
        session.run().await;
    }))
}

struct Session {
    app: App,
    hash: [u8; 32],
    socket: WebSocket,
    id: Option<u64>,
    in_flight: HashSet<u64>,
    queues: Vec<String>,
    capacity: u32,
    draining: bool,
    drained_sent: bool,
    /// A frame read while gathering results, handled next (`None` inside: the socket ended).
    ahead: Option<Option<Result<Message, axum::Error>>>,
}

fn error_frame(code: &str, message: &str) -> Value {
    json!({"type": "error", "code": code, "message": message})
}

/// The error frame for a failed call: like the HTTP envelope, an internal error's text (database
/// error numbers, column names, input) goes to the log, not to the worker.
fn db_error_frame(session: Option<u64>, e: &DbError) -> Value {
    match e {
        DbError::Internal(detail) => {
            tracing::error!(session_id = ?session, error = %detail, "worker session call failed");
            error_frame(e.code(), "internal error; see the server log")
        }
        _ => error_frame(e.code(), e.message()),
    }
}

impl Session {
    async fn send(&mut self, frame: &impl Serialize) -> bool {
        self.feed(frame).await && self.socket.flush().await.is_ok()
    }

    /// Queues a frame without flushing: the frames of one answer (a call's acks and the
    /// assignments it granted) leave in one write, and the worker reads them with one wake-up.
    async fn feed(&mut self, frame: &impl Serialize) -> bool {
        let text = serde_json::to_string(frame).expect("frames serialise");
        self.socket.feed(Message::Text(text.into())).await.is_ok()
    }

    async fn run(&mut self) {
        let mut work = self.app.dispatch.subscribe();
        let mut seen = work.borrow().generation;
        loop {
            let frame = match self.ahead.take() {
                Some(frame) => frame,
                None => tokio::select! {
                    frame = self.socket.recv() => frame,
                    changed = work.changed() => {
                        if changed.is_err() { break }
                        let wake = work.borrow_and_update().clone();
                        let concerns = wake.concerns(seen, &self.queues);
                        seen = wake.generation;
                        if concerns && !self.fill().await { break }
                        continue;
                    }
                },
            };
            let Some(Ok(frame)) = frame else { break };
            let text = match frame {
                Message::Text(t) => t.to_string(),
                Message::Binary(_) => {
                    if !self
                        .send(&error_frame("INVALID_ARGUMENT", "frames must be JSON text"))
                        .await
                    {
                        break;
                    }
                    continue;
                }
                Message::Close(_) => break,
                _ => continue,
            };
            if !self.handle(&text).await {
                break;
            }
        }
        if let Some(id) = self.id {
            if let Err(e) = self.app.db.session_close(id, false).await {
                tracing::warn!(session_id = id, error = %e, "could not mark the session closed");
            }
        }
    }

    /// Handles one frame; returns false when the connection should end.
    async fn handle(&mut self, text: &str) -> bool {
        let frame: ClientFrame = match serde_json::from_str(text) {
            Ok(f) => f,
            Err(e) => {
                return self
                    .send(&error_frame(
                        "INVALID_ARGUMENT",
                        &format!("unreadable frame: {e}"),
                    ))
                    .await
            }
        };
        match (self.id, frame) {
            (
                None,
                ClientFrame::Hello {
                    worker_id,
                    capacity,
                    queue_ids,
                    handlers,
                    concurrency_keys,
                    start_on_assign,
                    resume,
                },
            ) => {
                // Queue ids are ASCII; any other string names no queue (and must not reach the
                // procedure's ASCII parameter).
                for q in &queue_ids {
                    if let Err(e) = super::envelope::check_queue_id(
                        &self.app.db,
                        &self.hash,
                        "workers:consume",
                        q,
                    )
                    .await
                    {
                        let frame = match e {
                            ApiError::Db(e) => db_error_frame(None, &e),
                            _ => error_frame("NOT_FOUND", "queue not found"),
                        };
                        self.send(&frame).await;
                        return false;
                    }
                }
                self.queues = queue_ids.clone();
                let open = SessionOpen {
                    worker_id,
                    node: self.app.node.clone(),
                    capacity,
                    concurrency_keys,
                    start_on_assign,
                    handlers,
                    queue_ids,
                    resume,
                };
                match self.app.db.session_open(&self.hash, &open).await {
                    Ok(s) => {
                        self.id = Some(s.session_id);
                        self.capacity = capacity;
                        self.in_flight = s.resumed.iter().copied().collect();
                        let welcome = json!({
                            "type": "welcome", "session_id": s.session_id, "lease_seconds": self.app.lease_seconds,
                            "renew_interval_seconds": renew_interval(self.app.lease_seconds), "resumed": s.resumed,
                        });
                        self.send(&welcome).await && self.fill().await
                    }
                    Err(e) => {
                        self.send(&db_error_frame(None, &e)).await;
                        false
                    }
                }
            }
            (None, _) => {
                self.send(&error_frame(
                    "INVALID_ARGUMENT",
                    "the first frame must be hello",
                ))
                .await
            }
            (Some(_), ClientFrame::Hello { .. }) => {
                self.send(&error_frame("STATE_CONFLICT", "hello was already received"))
                    .await
            }
            (Some(session), ClientFrame::Start { attempt_id }) => {
                let ids = self.gather(attempt_id, text.len(), |f| match f {
                    ClientFrame::Start { attempt_id } => Some(attempt_id),
                    _ => None,
                });
                match self.app.db.attempt_start_many(session, &ids).await {
                    Ok(answers) => {
                        for a in answers {
                            let frame = if a.accepted {
                                json!({"type": "task.start.ok", "attempt_id": a.attempt_id, "lease_expires_at": a.lease_expires_at})
                            } else {
                                json!({"type": "task.start.rejected", "attempt_id": a.attempt_id, "code": a.code})
                            };
                            if !self.send(&frame).await {
                                return false;
                            }
                        }
                        true
                    }
                    Err(e) => self.db_error(e).await,
                }
            }
            (Some(session), ClientFrame::Renew { attempt_ids }) => {
                let mut attempts = Vec::with_capacity(attempt_ids.len());
                // One call per 1,000 ids (the procedure's limit); an idle worker's heartbeat names none.
                for ids in attempt_ids.chunks(1000) {
                    match self.app.db.attempt_renew_many(session, ids, self.app.lease_seconds * 1000).await {
                        Ok(answers) => attempts.extend(answers.into_iter().map(|a| {
                            if a.accepted {
                                json!({"attempt_id": a.attempt_id, "lease_expires_at": a.lease_expires_at})
                            } else {
                                json!({"attempt_id": a.attempt_id, "rejected": a.code})
                            }
                        })),
                        Err(e) => return self.db_error(e).await,
                    }
                }
                self.send(&json!({"type": "lease.renewed", "attempts": attempts}))
                    .await
                    && self.deliver_lost_grants(session).await
            }
            (
                Some(session),
                ClientFrame::Result {
                    attempt_id,
                    outcome,
                    retryable,
                    output,
                    error,
                },
            ) => {
                let first = AttemptResult {
                    attempt_id,
                    outcome,
                    retryable,
                    output,
                    error,
                };
                let results = self.gather(first, text.len(), |f| match f {
                    ClientFrame::Result {
                        attempt_id,
                        outcome,
                        retryable,
                        output,
                        error,
                    } => Some(AttemptResult {
                        attempt_id,
                        outcome,
                        retryable,
                        output,
                        error,
                    }),
                    _ => None,
                });
                self.finish(session, results).await
            }
            (Some(session), ClientFrame::Drain) => {
                self.draining = true;
                if let Err(e) = self.app.db.session_close(session, true).await {
                    return self.db_error(e).await;
                }
                self.fill().await
            }
        }
    }

    /// The frames of `first`'s kind the worker has already sent after it, up to one call's worth:
    /// starts or results that arrive together are confirmed in one call (one commit). Reading
    /// stops at the first frame of another kind (kept in `ahead`, handled next) or when nothing
    /// more has arrived: grouping never waits.
    fn gather<T>(
        &mut self,
        first: T,
        mut bytes: usize,
        same_kind: impl Fn(ClientFrame) -> Option<T>,
    ) -> Vec<T> {
        let mut items = vec![first];
        while items.len() < MAX_FRAMES_PER_CALL && bytes < MAX_BYTES_PER_CALL {
            let Some(next) = self.socket.recv().now_or_never() else {
                break;
            };
            if let Some(Ok(Message::Text(text))) = &next {
                if let Some(item) = serde_json::from_str(text).ok().and_then(&same_kind) {
                    bytes += text.len();
                    items.push(item);
                    continue;
                }
            }
            self.ahead = Some(next);
            break;
        }
        items
    }

    /// Confirms results in one call: an ack (or an error frame) for each, in order, then the
    /// assignments the freed capacity was granted in the same transaction.
    async fn finish(&mut self, session: u64, results: Vec<AttemptResult>) -> bool {
        let claim = self.claim_after(&results);
        let finished = match self
            .app
            .db
            .attempt_finish_many(session, &results, claim)
            .await
        {
            Ok(f) => f,
            Err(e) => return self.db_error(e).await,
        };
        for ack in finished.acks {
            let attempt_id = ack.attempt_id;
            let frame = match ack.into_result() {
                Ok(ack) => {
                    self.in_flight.remove(&attempt_id);
                    json!({"type": "task.result.ack", "attempt_id": attempt_id, "task_state": ack.task_state})
                }
                Err(e) => {
                    let mut frame = db_error_frame(self.id, &e);
                    frame["attempt_id"] = json!(attempt_id);
                    frame
                }
            };
            if !self.feed(&frame).await {
                return false;
            }
        }
        // The release made work claimable that this session did not take (a queue it does not
        // serve, more than it could take, a limit): wake the sessions of those queues only.
        self.app
            .dispatch
            .notify_queues(finished.wake_queues.into_iter().collect());
        self.assign(finished.grants).await && (claim.max > 0 || self.fill().await)
    }

    /// Reports a procedure error; an unavailable database keeps the socket (the worker retries).
    /// A closed session (its credential revoked, or swept after silence) ends the socket.
    async fn db_error(&mut self, e: DbError) -> bool {
        self.send(&db_error_frame(self.id, &e)).await && !matches!(e, DbError::Unauthenticated(_))
    }

    /// Claims work up to the free capacity and sends the assignments; sends `drained` when a
    /// draining session has nothing left in flight.
    async fn fill(&mut self) -> bool {
        let Some(session) = self.id else { return true };
        if self.draining {
            if self.in_flight.is_empty() && !self.drained_sent {
                self.drained_sent = true;
                return self.send(&json!({"type": "drained"})).await;
            }
            return true;
        }
        let free = self.capacity.saturating_sub(self.in_flight.len() as u32);
        if free == 0 {
            return true;
        }
        match self
            .app
            .db
            .task_claim(session, free.min(1000), self.app.lease_seconds * 1000)
            .await
        {
            Ok(grants) => self.assign(grants).await,
            Err(e) => self.db_error(e).await,
        }
    }

    /// What results may grant in their own transaction: the capacity they free (none while
    /// draining).
    fn claim_after(&self, results: &[AttemptResult]) -> ClaimAfter {
        let finishing: HashSet<u64> = results
            .iter()
            .map(|r| r.attempt_id)
            .filter(|id| self.in_flight.contains(id))
            .collect();
        let in_flight = self.in_flight.len() - finishing.len();
        let free = self.capacity.saturating_sub(in_flight as u32).min(1000);
        if self.draining || free == 0 {
            return ClaimAfter::NONE;
        }
        ClaimAfter {
            max: free,
            lease_ms: self.app.lease_seconds * 1000,
        }
    }

    /// Sends grants this session holds but never sent: a claim or result whose answer was lost
    /// after its commit (a killed connection, a failover). Runs with each renewal, well inside
    /// the lease, so such an attempt runs instead of waiting for its lease to run out.
    async fn deliver_lost_grants(&mut self, session: u64) -> bool {
        // Also the heartbeat the sweep of silent sessions reads: recorded at most once per lease.
        let touch = Some(self.app.lease_seconds * 1000);
        match self.app.db.session_heartbeat(session, touch).await {
            Ok(held) => {
                let lost: Vec<Grant> = held
                    .into_iter()
                    .filter(|g| !self.in_flight.contains(&g.attempt_id))
                    .collect();
                if !lost.is_empty() {
                    tracing::warn!(
                        session_id = session,
                        attempts = lost.len(),
                        "delivering grants whose answer was lost"
                    );
                }
                self.assign(lost).await
            }
            // The renewal itself went through; the next one tries again.
            Err(e) => self.db_error(e).await,
        }
    }

    /// Sends the assignments of new grants, with any frames fed before them, in one flush.
    async fn assign(&mut self, grants: Vec<Grant>) -> bool {
        for g in grants {
            self.in_flight.insert(g.attempt_id);
            if !self.feed(&Assign::from(g)).await {
                return false;
            }
        }
        self.socket.flush().await.is_ok()
    }
}
