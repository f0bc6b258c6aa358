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

use std::collections::{HashMap, HashSet};

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::response::Response;
use chrono::{DateTime, Utc};
use futures_util::{FutureExt, SinkExt};
use orbit_sdk::protocol::{json_depth, RawAssign, RenewAnswer, ServerFrame};
use serde::Serialize;
use serde_json::Value;

use super::envelope::Bearer;
use super::error::{ApiError, ErrorEnvelope};
use super::tasks::TaskView;
use super::App;
use crate::db::workers::{AttemptResult, ClaimAfter, FinishAck, Grant, SessionOpen};
use crate::db::DbError;

/// The default lease granted with each assignment (`serve --lease-seconds`); workers renew every
/// third of it.
pub const LEASE_SECONDS: u32 = 30;

/// At most this many start or result frames go into one call…
pub const MAX_FRAMES_PER_CALL: usize = 100;
/// …and about this many bytes of them (a result's output and error travel in the call).
pub const MAX_BYTES_PER_CALL: usize = 1024 * 1024;

/// The largest frame a worker may send (the HTTP body limit); a larger one closes the socket
/// with 1009 (message too big).
pub const MAX_FRAME_BYTES: usize = super::envelope::BODY_LIMIT;
/// `hello.capacity`: 1 to this many attempts at once (`orbit_session_open`'s bound).
pub const MAX_CAPACITY: u32 = 10_000;
/// `hello.queue_ids`: 1 to this many queues (`orbit_session_open`'s bound).
pub const MAX_QUEUES: usize = 100;
/// `hello.handlers`: at most this many names…
pub const MAX_HANDLERS: usize = 100;
/// …whose list, as JSON, fits the session's `handlers` column (TEXT).
const MAX_HANDLERS_JSON_BYTES: usize = 65_535;
/// `worker_id` and each handler name: 1 to this many characters (their columns).
pub const MAX_NAME_CHARS: usize = 191;
/// A queue id is 32 characters; a longer one names no queue.
const QUEUE_ID_CHARS: usize = 32;
/// How deeply a result's `output` and `error` may nest arrays and objects. MariaDB refuses JSON
/// documents nested 32 deep, and a result travels to the database inside two more levels (the
/// results array and the result object); the rest is headroom.
pub const MAX_RESULT_DEPTH: usize = orbit_sdk::protocol::MAX_RESULT_DEPTH;

// The SDK never sends a frame the server would refuse for its size.
const _: () = assert!(MAX_FRAME_BYTES == orbit_sdk::protocol::MAX_FRAME_BYTES);

/// The frames a worker sends, as the SDK defines them (one definition for both sides).
pub use orbit_sdk::protocol::ClientFrame;

/// The frames this server sends: the SDK's, with the task as [`TaskView`].
pub type Frame = ServerFrame<TaskView>;

/// A timestamp as the frames carry it: RFC 3339 in UTC with a `Z` and only the fractional
/// digits it needs (as the HTTP API writes them).
pub fn wire_time(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// WebSocket close codes of a refused `hello` (docs/protocol.md).
pub mod close_code {
    /// Bad input in the hello (INVALID_ARGUMENT).
    pub const INVALID_HELLO: u16 = 1007;
    /// The credential, its scope or a queue refuses the session, or the registration conflicts.
    pub const POLICY: u16 = 1008;
    /// A frame larger than [`super::MAX_FRAME_BYTES`].
    pub const TOO_BIG: u16 = 1009;
    /// An internal error.
    pub const INTERNAL: u16 = 1011;
    /// The database is unavailable: try again later.
    pub const TRY_AGAIN: u16 = 1013;

    /// The close code for a hello refused with the error `code`.
    pub fn for_error(code: &str) -> u16 {
        match code {
            "INVALID_ARGUMENT" => INVALID_HELLO,
            "UNAVAILABLE" => TRY_AGAIN,
            "INTERNAL" => INTERNAL,
            _ => POLICY,
        }
    }
}

/// How often a worker is asked to renew a lease of `lease_seconds`: three chances per lease.
pub fn renew_interval(lease_seconds: u32) -> u32 {
    (lease_seconds / 3).max(1)
}

/// The `task.assign` frame of a grant.
pub fn assign_frame(g: Grant) -> Frame {
    let keyed = g.task.concurrency_key.is_some();
    let started = g.task.state == crate::db::tasks::TaskState::Running;
    ServerFrame::Assign(RawAssign {
        attempt_id: g.attempt_id,
        attempt_no: g.attempt_no,
        lease_expires_at: wire_time(&g.lease_expires_at),
        // Decimal string, present exactly when the task has a key (never a JSON number).
        concurrency_token: keyed.then(|| Value::String(g.concurrency_token.to_string())),
        // A JSON integer, present exactly when the task has a key (0 to the key's limit - 1).
        key_slot: keyed.then(|| Value::from(g.key_slot)),
        started,
        task: g.task.into(),
    })
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
            in_flight: HashMap::new(),
            queues_idle: false,
            dropped: HashSet::new(),
            queues: Vec::new(),
            capacity: 0,
            draining: false,
            drained_sent: false,
            ahead: None,
        };
        session.run().await;
    }))
}

/// What confirming a group of results answered.
#[derive(Default)]
struct Finished {
    /// One per result that passed the checks, in order.
    answers: Vec<Result<FinishAck, DbError>>,
    /// Assignments granted in the same transaction.
    grants: Vec<Grant>,
    /// No claim after it: the call already granted the freed capacity, or a claim would fail.
    no_fill: bool,
    /// Queues whose other sessions should be woken.
    wake_queues: Vec<String>,
    /// The session is closed: end the socket after the answers.
    closed: bool,
}

struct Session {
    app: App,
    hash: [u8; 32],
    socket: WebSocket,
    id: Option<u64>,
    /// The attempts this session holds, each with whether it holds a key permit (a resumed
    /// attempt counts as keyed: its key is not known here).
    in_flight: HashMap<u64, bool>,
    /// The session's last scan of its queues' ready lanes came up short, and no wake-up has named
    /// one of its queues since: its queues have nothing ready for it. Results then ask only for
    /// their keys' next tasks (the hand-off, from the blocked lane), and no claim is made, until a
    /// wake-up names one of its queues. Every way work becomes ready wakes the sessions of its
    /// queue: a submit, release, cancel or resolve on this server at once, anything else through
    /// the scheduler's dispatch probe (at most [`crate::scheduler::MAX_SLEEP`] later), as for a
    /// session with nothing to finish.
    queues_idle: bool,
    /// Attempts a renewal rejected (lease run out, ended): no longer in flight, and never
    /// delivered again as a lost grant while the database still lists them as live.
    dropped: HashSet<u64>,
    queues: Vec<String>,
    capacity: u32,
    draining: bool,
    drained_sent: bool,
    /// A frame read while gathering results, handled next (`None` inside: the socket ended).
    ahead: Option<Option<Result<Message, axum::Error>>>,
}

/// How many tasks results may grant their session: its free capacity once they are in, and
/// while its queues have nothing ready ([`Session::queues_idle`]) no more than one per key they
/// release (each key's next task, the hand-off), so that the grant scans no ready lane.
fn results_claim_max(free: u32, keyed_results: u32, queues_idle: bool) -> u32 {
    if queues_idle {
        free.min(keyed_results)
    } else {
        free
    }
}

/// Whether a session's queues are idle after a grant of up to `asked` tasks (0: none was
/// asked for) that granted `granted`: a scan that came up short leaves them idle; a grant
/// limited to the hand-off (they were idle) leaves them so, since it takes keys' next tasks
/// from the blocked lane and any ready task it met has a wake-up on its way; a grant the
/// quota deferred (`claim_again`) is followed by a claim.
fn queues_idle_after(idle: bool, asked: u32, granted: usize, claim_again: bool) -> bool {
    if asked == 0 {
        idle
    } else if claim_again {
        false
    } else {
        idle || granted < asked as usize
    }
}

fn error_frame(code: &str, message: &str) -> Frame {
    Frame::error(code, message)
}

/// Checks a hello's strings and lists before any call (the procedures' rules, and the bounds on
/// how much one frame may ask for); the message names the field.
fn check_hello(
    worker_id: &str,
    capacity: u32,
    queue_ids: &[String],
    handlers: &[String],
    resume: &[u64],
) -> Result<(), String> {
    if !(1..=MAX_NAME_CHARS).contains(&worker_id.chars().count()) {
        return Err(format!("worker_id must be 1-{MAX_NAME_CHARS} characters"));
    }
    if !(1..=MAX_CAPACITY).contains(&capacity) {
        return Err(format!("capacity must be between 1 and {MAX_CAPACITY}"));
    }
    if queue_ids.is_empty() || queue_ids.len() > MAX_QUEUES {
        return Err(format!(
            "queue_ids must list 1-{MAX_QUEUES} queue ids (it lists {})",
            queue_ids.len()
        ));
    }
    if let Some(i) = queue_ids
        .iter()
        .position(|q| q.chars().count() > QUEUE_ID_CHARS)
    {
        return Err(format!(
            "queue_ids[{i}] is not a queue id (at most {QUEUE_ID_CHARS} characters)"
        ));
    }
    if handlers.len() > MAX_HANDLERS {
        return Err(format!(
            "handlers must list at most {MAX_HANDLERS} names (it lists {})",
            handlers.len()
        ));
    }
    if let Some(i) = handlers
        .iter()
        .position(|h| !(1..=MAX_NAME_CHARS).contains(&h.chars().count()))
    {
        return Err(format!(
            "handlers[{i}] must be 1-{MAX_NAME_CHARS} characters"
        ));
    }
    let handlers_json = serde_json::to_string(handlers).expect("strings serialise");
    if handlers_json.len() > MAX_HANDLERS_JSON_BYTES {
        return Err(format!(
            "handlers is too long: {} bytes as JSON, at most {MAX_HANDLERS_JSON_BYTES}",
            handlers_json.len()
        ));
    }
    if resume.len() > capacity as usize {
        return Err(format!(
            "resume lists {} attempt ids, more than the capacity ({capacity})",
            resume.len()
        ));
    }
    Ok(())
}

/// The result a `task.result` frame carries (`None` for any other frame).
fn result_of(frame: ClientFrame) -> Option<AttemptResult> {
    match frame {
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
    }
}

/// Checks one result before it goes into a call: what the procedure would refuse for the whole
/// call is refused here for this result alone.
fn check_result(r: &AttemptResult) -> Result<(), String> {
    if r.attempt_id == 0 {
        return Err("attempt_id must be a positive integer".into());
    }
    for (field, value) in [("output", &r.output), ("error", &r.error)] {
        if let Some(v) = value {
            let depth = json_depth(v);
            if depth > MAX_RESULT_DEPTH {
                return Err(format!(
                    "{field} nests {depth} levels deep; at most {MAX_RESULT_DEPTH} are accepted"
                ));
            }
        }
    }
    Ok(())
}

/// The error frame about one result: it always names the attempt.
fn result_error_frame(session: Option<u64>, attempt_id: u64, e: &DbError) -> Frame {
    match db_error_frame(session, e) {
        ServerFrame::Error { code, message, .. } => ServerFrame::Error {
            code,
            message,
            attempt_id: Some(attempt_id),
        },
        other => other,
    }
}

/// The error frame for a failed call: like the HTTP envelope, an internal error's text (database
/// error numbers, column names, input) goes to the log, not to the worker.
fn db_error_frame(session: Option<u64>, e: &DbError) -> Frame {
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
        let mut cancels = self.app.dispatch.subscribe_cancels();
        let mut seen = work.borrow().generation;
        loop {
            let frame = match self.ahead.take() {
                Some(frame) => frame,
                None => tokio::select! {
                    frame = self.socket.recv() => frame,
                    cancel = cancels.recv() => {
                        match cancel {
                            // Ended in the database: it no longer counts against the
                            // capacity, and the freed slot may take work at once.
                            Ok(c) if Some(c.session_id) == self.id && self.drop_attempt(c.attempt_id) => {
                                let frame: Frame = ServerFrame::Cancel {
                                    attempt_id: c.attempt_id,
                                    reason: "the key's policy (cancel_running) ended this attempt for a newer task".into(),
                                };
                                if !self.send(&frame).await || !self.fill().await { break }
                            }
                            // Another session's, or missed ones (the renewal's refusal tells).
                            Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                            Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                        }
                        continue;
                    }
                    changed = work.changed() => {
                        if changed.is_err() { break }
                        let wake = work.borrow_and_update().clone();
                        let concerns = wake.concerns(seen, &self.queues);
                        seen = wake.generation;
                        if concerns {
                            self.queues_idle = false;
                            if !self.fill().await { break }
                        }
                        continue;
                    }
                },
            };
            let frame = match frame {
                Some(Ok(frame)) => frame,
                Some(Err(e)) if e.to_string().contains("too long") => {
                    // A frame over MAX_FRAME_BYTES: nothing of it was read; say so and close.
                    let message = format!("a frame is limited to {MAX_FRAME_BYTES} bytes");
                    if self.feed(&error_frame("INVALID_ARGUMENT", &message)).await {
                        let close = axum::extract::ws::CloseFrame {
                            code: close_code::TOO_BIG,
                            reason: "INVALID_ARGUMENT".into(),
                        };
                        let _ = self.socket.send(Message::Close(Some(close))).await;
                    }
                    break;
                }
                _ => break,
            };
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
            (None, hello @ ClientFrame::Hello { .. }) => self.on_hello(hello).await,
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
                self.on_start(session, attempt_id, text.len()).await
            }
            (Some(session), ClientFrame::Renew { attempt_ids }) => {
                self.on_renew(session, attempt_ids).await
            }
            (Some(session), frame @ ClientFrame::Result { .. }) => {
                let first = result_of(frame).expect("a result frame");
                self.on_results(session, first, text.len()).await
            }
            (Some(session), ClientFrame::Drain) => self.on_drain(session).await,
        }
    }

    /// `hello`: checks it, checks each queue against the credential, opens the session, sends
    /// `welcome` and claims work. A refused hello closes the socket with its close code.
    async fn on_hello(&mut self, hello: ClientFrame) -> bool {
        let ClientFrame::Hello {
            worker_id,
            capacity,
            queue_ids,
            handlers,
            concurrency_keys,
            start_on_assign,
            resume,
        } = hello
        else {
            unreachable!("on_hello is called with a hello")
        };
        if let Err(message) = check_hello(&worker_id, capacity, &queue_ids, &handlers, &resume) {
            self.refuse(error_frame("INVALID_ARGUMENT", &message)).await;
            return false;
        }
        // Queue ids are ASCII; any other string names no queue (and must not reach the
        // procedure's ASCII parameter).
        for q in &queue_ids {
            if let Err(e) =
                super::envelope::check_queue_id(&self.app.db, &self.hash, "workers:consume", q)
                    .await
            {
                let frame = match e {
                    ApiError::Db(e) => db_error_frame(None, &e),
                    _ => error_frame("NOT_FOUND", "queue not found"),
                };
                self.refuse(frame).await;
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
                self.in_flight = s.resumed.iter().map(|id| (*id, true)).collect();
                let welcome: Frame = ServerFrame::Welcome {
                    session_id: s.session_id,
                    lease_seconds: self.app.lease_seconds.into(),
                    renew_interval_seconds: renew_interval(self.app.lease_seconds).into(),
                    resumed: s.resumed,
                };
                self.send(&welcome).await && self.fill().await
            }
            Err(e) => {
                self.refuse(db_error_frame(None, &e)).await;
                false
            }
        }
    }

    /// `task.start`, with the starts sent right after it: one call, one answer per start.
    async fn on_start(&mut self, session: u64, attempt_id: u64, bytes: usize) -> bool {
        let ids = self.gather(attempt_id, bytes, |f| match f {
            ClientFrame::Start { attempt_id } => Some(attempt_id),
            _ => None,
        });
        let answers = match self.app.db.attempt_start_many(session, &ids).await {
            Ok(answers) => answers,
            Err(e) => return self.db_error(e).await,
        };
        let mut lost = false;
        for a in answers {
            let frame: Frame = if a.accepted {
                ServerFrame::StartOk {
                    attempt_id: a.attempt_id,
                    lease_expires_at: a.lease_expires_at.as_ref().map(wire_time),
                }
            } else {
                // The worker will not run it, and it is not live: its slot is free.
                lost |= self.drop_attempt(a.attempt_id);
                ServerFrame::StartRejected {
                    attempt_id: a.attempt_id,
                    code: a.code,
                }
            };
            if !self.send(&frame).await {
                return false;
            }
        }
        !lost || self.fill().await
    }

    /// `lease.renew`: renews the named attempts, answers `lease.renewed`, delivers grants whose
    /// answer was lost, and claims for the capacity rejected attempts freed.
    async fn on_renew(&mut self, session: u64, attempt_ids: Vec<u64>) -> bool {
        // A session holds at most `capacity` attempts: a longer list (duplicates count)
        // is refused before any call, so one frame cannot buy unbounded database work.
        if attempt_ids.len() > self.capacity as usize {
            let message = format!(
                "attempt_ids lists {} ids, more than the session's capacity ({})",
                attempt_ids.len(),
                self.capacity
            );
            return self.send(&error_frame("INVALID_ARGUMENT", &message)).await;
        }
        let mut attempts = Vec::with_capacity(attempt_ids.len());
        let mut lost = false;
        // One call per 1,000 ids (the procedure's limit); an idle worker's heartbeat names none.
        for ids in attempt_ids.chunks(1000) {
            let answers = match self
                .app
                .db
                .attempt_renew_many(session, ids, self.app.lease_seconds * 1000)
                .await
            {
                Ok(answers) => answers,
                Err(e) => return self.db_error(e).await,
            };
            for a in answers {
                attempts.push(if a.accepted {
                    RenewAnswer {
                        attempt_id: a.attempt_id,
                        lease_expires_at: a.lease_expires_at.as_ref().map(wire_time),
                        rejected: None,
                    }
                } else {
                    // No longer this session's live attempt (its lease ran out, it ended, or it
                    // is not ours): its slot is free again.
                    lost |= self.drop_attempt(a.attempt_id);
                    RenewAnswer {
                        attempt_id: a.attempt_id,
                        lease_expires_at: None,
                        rejected: Some(a.code),
                    }
                });
            }
        }
        self.send(&Frame::Renewed { attempts }).await
            && self.deliver_lost_grants(session).await
            && (!lost || self.fill().await)
    }

    /// `task.result`, with the results sent right after it: confirmed together ([`Self::finish`]).
    async fn on_results(&mut self, session: u64, first: AttemptResult, bytes: usize) -> bool {
        let results = self.gather(first, bytes, result_of);
        self.finish(session, results).await
    }

    /// `drain`: no new grants; `drained` once nothing is in flight.
    async fn on_drain(&mut self, session: u64) -> bool {
        self.draining = true;
        if let Err(e) = self.app.db.session_close(session, true).await {
            return self.db_error(e).await;
        }
        self.fill().await
    }

    /// An attempt that is no longer this session's live attempt: it stops counting against the
    /// capacity and is never delivered again as a lost grant. True when it was in flight.
    fn drop_attempt(&mut self, attempt_id: u64) -> bool {
        let was = self.in_flight.remove(&attempt_id).is_some();
        if was {
            self.dropped.insert(attempt_id);
        }
        was
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

    /// Confirms results in one call: an ack (or an error frame naming its attempt) for each, in
    /// order, then the assignments the freed capacity was granted in the same transaction. A
    /// result the checks refuse never reaches the call, and one the procedure still refuses is
    /// retried alone, so one bad result never fails another.
    async fn finish(&mut self, session: u64, results: Vec<AttemptResult>) -> bool {
        let checks: Vec<Result<(), String>> = results.iter().map(check_result).collect();
        let mut refused = Vec::new();
        let good: Vec<AttemptResult> = results
            .into_iter()
            .zip(&checks)
            .filter_map(|(r, check)| match check {
                Ok(()) => Some(r),
                Err(message) => {
                    refused.push(result_error_frame(
                        self.id,
                        r.attempt_id,
                        &DbError::InvalidArgument(message.clone()),
                    ));
                    None
                }
            })
            .collect();
        let mut refused = refused.into_iter();
        let Finished {
            answers,
            grants,
            no_fill,
            wake_queues,
            closed,
        } = if good.is_empty() {
            Finished::default()
        } else {
            self.finish_call(session, &good).await
        };
        let mut answers = good.iter().map(|r| r.attempt_id).zip(answers);
        for check in &checks {
            let frame = match check {
                Err(_) => refused.next().expect("one frame per refused result"),
                Ok(()) => match answers.next().expect("one answer per result") {
                    (attempt_id, Ok(ack)) => {
                        self.in_flight.remove(&attempt_id);
                        ServerFrame::ResultAck {
                            attempt_id,
                            task_state: ack.task_state,
                        }
                    }
                    (attempt_id, Err(e)) => result_error_frame(self.id, attempt_id, &e),
                },
            };
            if !self.feed(&frame).await {
                return false;
            }
        }
        if closed {
            let _ = self.socket.flush().await;
            return false;
        }
        // The release made work claimable that this session did not take (a queue it does not
        // serve, more than it could take, a limit): wake the sessions of those queues only.
        if !wake_queues.is_empty() {
            self.app
                .dispatch
                .notify_queues(wake_queues.into_iter().collect());
        }
        self.assign(grants).await && (no_fill || self.fill().await)
    }

    /// One `orbit_attempt_finish` call for results that passed the checks, granting the
    /// capacity they free in the same transaction.
    async fn finish_call(&mut self, session: u64, good: &[AttemptResult]) -> Finished {
        let claim = self.claim_after(good);
        let finished = self.app.db.attempt_finish_many(session, good, claim).await;
        if let Ok(f) = &finished {
            self.queues_idle =
                queues_idle_after(self.queues_idle, claim.max, f.grants.len(), f.claim_again);
        }
        match finished {
            Ok(f) if f.acks.len() == good.len() => Finished {
                answers: f.acks.into_iter().map(FinishAck::into_result).collect(),
                grants: f.grants,
                no_fill: claim.max > 0 && !f.claim_again,
                wake_queues: f.wake_queues,
                closed: false,
            },
            Ok(f) => {
                let e = DbError::Internal(format!(
                    "orbit_attempt_finish answered {} acks for {} results",
                    f.acks.len(),
                    good.len()
                ));
                Finished {
                    answers: good.iter().map(|_| Err(e.clone())).collect(),
                    grants: f.grants,
                    no_fill: claim.max > 0 && !f.claim_again,
                    wake_queues: f.wake_queues,
                    closed: false,
                }
            }
            // One result the checks let through: each alone, so it fails alone.
            Err(DbError::InvalidArgument(_)) if good.len() > 1 => {
                self.finish_each(session, good).await
            }
            // The call failed as a whole (an unavailable database): a claim would fail too.
            // A closed session (credential revoked, swept) ends the socket after the answers.
            Err(e) => Finished {
                closed: matches!(e, DbError::Unauthenticated(_)),
                answers: good.iter().map(|_| Err(e.clone())).collect(),
                grants: Vec::new(),
                no_fill: true,
                wake_queues: Vec::new(),
            },
        }
    }

    /// Each result in a call of its own, granting nothing (a claim follows).
    async fn finish_each(&mut self, session: u64, good: &[AttemptResult]) -> Finished {
        let mut done = Finished::default();
        for r in good {
            let finished = self
                .app
                .db
                .attempt_finish_many(session, std::slice::from_ref(r), ClaimAfter::NONE)
                .await;
            done.answers.push(match finished {
                Ok(mut f) => {
                    done.wake_queues.append(&mut f.wake_queues);
                    f.acks
                        .pop()
                        .ok_or_else(|| {
                            DbError::Internal("orbit_attempt_finish returned no ack".into())
                        })
                        .and_then(FinishAck::into_result)
                }
                Err(e) => Err(e),
            });
        }
        done
    }

    /// Refuses a hello: its error frame, then a Close frame whose code says why
    /// ([`close_code::for_error`]), then a short wait for the worker's Close.
    async fn refuse(&mut self, frame: Frame) {
        let code = match &frame {
            ServerFrame::Error { code, .. } => code.clone(),
            _ => "INTERNAL".to_string(),
        };
        let close = axum::extract::ws::CloseFrame {
            code: close_code::for_error(&code),
            reason: code.into(),
        };
        if !self.feed(&frame).await || self.socket.send(Message::Close(Some(close))).await.is_err()
        {
            return;
        }
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), async {
            while let Some(Ok(m)) = self.socket.recv().await {
                if matches!(m, Message::Close(_)) {
                    break;
                }
            }
        })
        .await;
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
                return self.send(&Frame::Drained).await;
            }
            return true;
        }
        let free = self.capacity.saturating_sub(self.in_flight.len() as u32);
        if free == 0 || self.queues_idle {
            return true;
        }
        let max = free.min(1000);
        match self
            .app
            .db
            .task_claim(session, max, self.app.lease_seconds * 1000)
            .await
        {
            Ok(grants) => {
                self.queues_idle = queues_idle_after(false, max, grants.len(), false);
                self.assign(grants).await
            }
            Err(e) => self.db_error(e).await,
        }
    }

    /// What results may grant in their own transaction: the capacity they free, or while the
    /// session's queues are idle no more than one task per key they release (none while
    /// draining).
    fn claim_after(&self, results: &[AttemptResult]) -> ClaimAfter {
        let finishing: HashSet<u64> = results
            .iter()
            .map(|r| r.attempt_id)
            .filter(|id| self.in_flight.contains_key(id))
            .collect();
        let in_flight = self.in_flight.len() - finishing.len();
        let free = self.capacity.saturating_sub(in_flight as u32).min(1000);
        let keyed = finishing.iter().filter(|id| self.in_flight[*id]).count();
        let max = results_claim_max(free, keyed as u32, self.queues_idle);
        if self.draining || max == 0 {
            return ClaimAfter::NONE;
        }
        ClaimAfter {
            max,
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
                self.dropped
                    .retain(|id| held.iter().any(|g| g.attempt_id == *id));
                let lost: Vec<Grant> = held
                    .into_iter()
                    .filter(|g| {
                        !self.in_flight.contains_key(&g.attempt_id)
                            && !self.dropped.contains(&g.attempt_id)
                    })
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
            self.in_flight.insert(g.attempt_id, g.concurrency_token > 0);
            if !self.feed(&assign_frame(g)).await {
                return false;
            }
        }
        self.socket.flush().await.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::{queues_idle_after, results_claim_max, wire_time};
    use chrono::{TimeZone, Utc};

    #[test]
    fn results_of_an_idle_session_ask_only_for_their_keys_next_tasks() {
        // Queues with work: the whole free capacity, keyed or not.
        assert_eq!(results_claim_max(4, 0, false), 4);
        assert_eq!(results_claim_max(4, 1, false), 4);
        // Nothing ready: one task per key released, within the free capacity; unkeyed results
        // ask for nothing.
        assert_eq!(results_claim_max(4, 1, true), 1);
        assert_eq!(results_claim_max(4, 0, true), 0);
        assert_eq!(results_claim_max(2, 7, true), 2);
    }

    #[test]
    fn a_short_scan_makes_the_queues_idle_and_a_full_or_deferred_one_does_not() {
        // A claim or a result's grant that scanned: short means nothing more is ready.
        assert!(queues_idle_after(false, 4, 1, false));
        assert!(!queues_idle_after(false, 4, 4, false));
        // A grant limited to the hand-off keeps the queues idle, even when it took its fill.
        assert!(queues_idle_after(true, 1, 1, false));
        assert!(queues_idle_after(true, 2, 0, false));
        // The quota deferred the grant: a claim follows, so the queues are not idle.
        assert!(!queues_idle_after(true, 1, 0, true));
        assert!(!queues_idle_after(false, 4, 0, true));
        // Nothing asked for: nothing learned.
        assert!(queues_idle_after(true, 0, 0, false));
        assert!(!queues_idle_after(false, 0, 0, false));
    }

    #[test]
    fn frames_write_timestamps_as_the_http_api_does() {
        for t in [
            Utc.with_ymd_and_hms(2026, 12, 2, 12, 0, 30).unwrap(),
            Utc.timestamp_opt(1_796_212_830, 250_000_000).unwrap(),
            Utc.timestamp_opt(1_796_212_830, 123_456).unwrap(),
            Utc.timestamp_opt(1_796_212_830, 7).unwrap(),
        ] {
            assert_eq!(
                serde_json::to_value(t).unwrap(),
                serde_json::Value::String(wire_time(&t)),
            );
        }
        assert_eq!(
            wire_time(&Utc.with_ymd_and_hms(2026, 12, 2, 12, 0, 30).unwrap()),
            "2026-12-02T12:00:30Z"
        );
    }
}
