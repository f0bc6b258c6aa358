//! [`Worker`]: runs handlers for tasks pushed over the worker WebSocket.
//!
//! It says hello with `concurrency_keys: true` (a [`Worker::registration`] sets the flag
//! explicitly), confirms each assignment with `task.start` before the handler runs (unless it
//! asked the server to start attempts with the grant: [`Worker::start_on_assign`]), renews the
//! leases of everything in flight, reports each result until it is acknowledged (results are
//! idempotent, so they are sent again after a reconnect), reconnects with `resume` so the same
//! attempts and tokens continue, and drains on request. An assignment that breaks the protocol
//! stops the worker with a [`ProtocolError`] before any handler sees it.
//!
//! An attempt whose lease renewal the server rejects (its lease ran out) is cancelled at once:
//! [`TaskContext::cancelled`] completes, the worker stops renewing it, frees its slot, does not
//! send its result, and logs why. The fencing token keeps guarding the resource until the handler
//! stops. A result the server cannot read (too deep, too large) is reported as a permanent
//! failure carrying the reason, so it never holds its task and key.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

use crate::client::Task;
use crate::protocol::{
    Assignment, AssignmentCheck, ClientFrame, Outcome, ProtocolError, RenewAnswer, ServerFrame,
};

/// What a handler sees.
#[derive(Clone, Debug)]
pub struct TaskContext {
    pub attempt_id: u64,
    pub attempt_no: u32,
    pub task: Task,
    /// The task's resource key, if it has one.
    pub concurrency_key: Option<String>,
    /// The fencing token of this grant (present exactly when the task has a key). Pass it to the
    /// resource with every write; the resource rejects tokens older than the highest it saw.
    pub concurrency_token: Option<u64>,
    /// The grant's slot of its key (present exactly when the task has a key): 0..N-1 for a key
    /// up to N attempts may hold at once, never shared by two live holders, always 0 for N = 1
    /// (and from a server that predates slots). With N > 1 several tokens of the key are live at
    /// once, so the resource keeps a register per slot: pass it with the token
    /// ([`FenceWrite::in_slot`](crate::FenceWrite::in_slot), [`crate::fence`]).
    pub key_slot: Option<u32>,
    /// Fires when this attempt is no longer this worker's (see [`TaskContext::cancelled`]).
    pub cancellation: Cancellation,
}

impl TaskContext {
    /// Completes when the handler should stop: the server refused to renew the attempt's lease
    /// (it ran out, for example after a pause longer than the lease, and the key may already be
    /// granted to another worker), or the attempt was gone after a reconnect. The worker has
    /// then stopped renewing the attempt and freed its slot, and whatever the handler returns
    /// afterwards is not sent. Until the handler stops, the fencing token still guards the
    /// resource: a newer holder's writes carry a larger token, and the resource refuses this
    /// handler's older one. Stop promptly, e.g. `tokio::select!` on this and the work.
    pub async fn cancelled(&self) {
        self.cancellation.cancelled().await
    }

    /// Whether [`TaskContext::cancelled`] has fired.
    pub fn is_cancelled(&self) -> bool {
        self.cancellation.is_cancelled()
    }
}

/// A one-way stop signal for one attempt; clones share it. See [`TaskContext::cancelled`].
#[derive(Clone, Debug, Default)]
pub struct Cancellation {
    inner: Arc<CancelState>,
}

#[derive(Debug, Default)]
struct CancelState {
    cancelled: AtomicBool,
    reason: Mutex<Option<String>>,
    notify: tokio::sync::Notify,
}

impl Cancellation {
    pub fn new() -> Cancellation {
        Cancellation::default()
    }

    /// Fires the signal (the first reason is kept); later calls change nothing.
    pub fn cancel(&self, reason: &str) {
        {
            let mut r = self.inner.reason.lock().expect("reason lock");
            if r.is_none() {
                *r = Some(reason.to_string());
            }
        }
        self.inner.cancelled.store(true, Ordering::SeqCst);
        self.inner.notify.notify_waiters();
    }

    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// Why it fired (e.g. `lease renewal rejected: LEASE_EXPIRED`); `None` until then.
    pub fn reason(&self) -> Option<String> {
        self.inner.reason.lock().expect("reason lock").clone()
    }

    /// Completes once the signal has fired (at once if it already has).
    pub async fn cancelled(&self) {
        loop {
            let notified = self.inner.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

/// How a handler failed.
#[derive(Clone, Debug)]
pub enum HandlerError {
    /// Try again after the task's backoff (the permit is released meanwhile).
    Retryable(Value),
    /// Do not try again.
    Permanent(Value),
    /// The effect is unknown (the task goes to NEEDS_REVIEW unless it is safe to retry).
    Unknown(Value),
}

type HandlerFuture = Pin<Box<dyn Future<Output = Result<Value, HandlerError>> + Send>>;
type Handler = Arc<dyn Fn(TaskContext) -> HandlerFuture + Send + Sync>;

/// Why a worker stopped.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("protocol error from the server: {0}")]
    Protocol(#[from] ProtocolError),
    #[error("the server refused the session: {code}: {message}")]
    Refused { code: String, message: String },
    #[error("cannot connect: {0}")]
    Connect(String),
}

/// What a worker did.
#[derive(Clone, Debug, Default)]
pub struct WorkerReport {
    /// Results the server acknowledged.
    pub completed: u64,
    /// `true` when the server confirmed the drain.
    pub drained: bool,
    /// Connections made (1 + reconnects).
    pub connections: u64,
    /// Attempts whose lease was lost (a renewal was refused, or the attempt was gone after a
    /// reconnect): their handlers were cancelled and their results not sent.
    pub lost: u64,
    /// Results the server refused to read (too deep, for example), sent again as failures.
    pub refused: u64,
}

/// A worker definition; [`Worker::start`] runs it.
#[derive(Clone)]
pub struct Worker {
    base_url: String,
    token: String,
    worker_id: String,
    capacity: u32,
    queue_ids: Vec<String>,
    concurrency_keys: bool,
    start_on_assign: bool,
    /// Handlers by (name, version).
    handlers: HashMap<(String, String), Handler>,
}

impl Worker {
    /// A worker that receives keyed tasks (`concurrency_keys: true`).
    pub fn new(base_url: &str, token: &str, worker_id: &str) -> Worker {
        Worker::registration(base_url, token, worker_id, true)
    }

    /// Low-level registration: the `concurrency_keys` flag is stated explicitly. It is fixed for
    /// a `worker_id`; a process that changes it must use a new identity.
    pub fn registration(
        base_url: &str,
        token: &str,
        worker_id: &str,
        concurrency_keys: bool,
    ) -> Worker {
        Worker {
            base_url: base_url.trim_end_matches('/').to_string(),
            token: token.to_string(),
            worker_id: worker_id.to_string(),
            capacity: 1,
            queue_ids: Vec::new(),
            concurrency_keys,
            start_on_assign: false,
            handlers: HashMap::new(),
        }
    }

    /// Asks the server to start each attempt in the transaction that grants it, so the handler
    /// runs on the assignment without a `task.start` round trip (one durable commit less per
    /// task; a key hands over faster). The price: an attempt whose lease runs out counts as
    /// started even if this worker never received it, so its task ends in `NEEDS_REVIEW`
    /// (unless it may retry unknown outcomes) instead of simply waiting again. Off by default.
    pub fn start_on_assign(mut self, on: bool) -> Self {
        self.start_on_assign = on;
        self
    }

    pub fn capacity(mut self, capacity: u32) -> Self {
        self.capacity = capacity.max(1);
        self
    }

    pub fn queue(mut self, queue_id: &str) -> Self {
        self.queue_ids.push(queue_id.to_string());
        self
    }

    /// Registers the handler for tasks with this handler name and version.
    pub fn handler<F, Fut>(mut self, name: &str, version: &str, f: F) -> Self
    where
        F: Fn(TaskContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, HandlerError>> + Send + 'static,
    {
        let h: Handler = Arc::new(move |ctx| Box::pin(f(ctx)));
        self.handlers
            .insert((name.to_string(), version.to_string()), h);
        self
    }

    /// Starts the worker on the current runtime.
    pub fn start(self) -> WorkerHandle {
        let (drain_tx, drain_rx) = oneshot::channel();
        let join = tokio::spawn(run(self, drain_rx));
        WorkerHandle {
            drain: Some(drain_tx),
            join,
        }
    }
}

/// A running worker.
pub struct WorkerHandle {
    drain: Option<oneshot::Sender<()>>,
    join: tokio::task::JoinHandle<Result<WorkerReport, WorkerError>>,
}

impl WorkerHandle {
    /// Asks for no new assignments, waits for in-flight work to finish and the server's `drained`.
    pub async fn drain(mut self) -> Result<WorkerReport, WorkerError> {
        if let Some(tx) = self.drain.take() {
            let _ = tx.send(());
        }
        self.join
            .await
            .unwrap_or_else(|e| Err(WorkerError::Connect(e.to_string())))
    }

    /// Waits until the worker stops by itself (an error, or after a drain).
    pub async fn join(self) -> Result<WorkerReport, WorkerError> {
        self.join
            .await
            .unwrap_or_else(|e| Err(WorkerError::Connect(e.to_string())))
    }

    /// Stops at once, without draining (like a crash: leases expire, results are lost).
    pub fn abort(&self) {
        self.join.abort();
    }
}

/// Messages from handler tasks to the connection loop.
enum Event {
    Start(u64, oneshot::Sender<bool>),
    Abandon(u64),
    Result(u64, ClientFrame),
}

fn ws_url(base: &str) -> String {
    let rest = base
        .strip_prefix("https://")
        .map(|r| format!("wss://{r}"))
        .or_else(|| base.strip_prefix("http://").map(|r| format!("ws://{r}")));
    format!(
        "{}/v1/workers/connect",
        rest.unwrap_or_else(|| base.to_string())
    )
}

/// Fatal codes: retrying the same hello cannot succeed.
fn fatal(code: &str) -> bool {
    matches!(
        code,
        "UNAUTHENTICATED"
            | "PERMISSION_DENIED"
            | "NOT_FOUND"
            | "STATE_CONFLICT"
            | "INVALID_ARGUMENT"
    )
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;
type Sink = futures_util::stream::SplitSink<Socket, Message>;
type Stream = futures_util::stream::SplitStream<Socket>;

/// Writes one frame; false when the connection is gone.
async fn send(sink: &mut Sink, frame: &ClientFrame) -> bool {
    let text = serde_json::to_string(frame).expect("frames serialise");
    sink.send(Message::Text(text.into())).await.is_ok()
}

/// How a connection ended.
enum Ended {
    /// The socket closed or a write failed: reconnect after the backoff.
    Lost,
    /// The server confirmed the drain: the worker is done.
    Drained,
}

/// The worker's state, kept across connections.
struct Runner {
    w: Worker,
    events: mpsc::UnboundedSender<Event>,
    report: WorkerReport,
    check: AssignmentCheck,
    in_flight: HashSet<u64>,
    unacked: HashMap<u64, ClientFrame>,
    start_waiters: HashMap<u64, oneshot::Sender<bool>>,
    /// The cancellation of each attempt whose handler has not returned yet.
    cancels: HashMap<u64, Cancellation>,
    /// Attempts whose unacknowledged result is already the failure sent in place of a refused one.
    replaced: HashSet<u64>,
    draining: bool,
    backoff: Duration,
}

async fn run(w: Worker, mut drain_rx: oneshot::Receiver<()>) -> Result<WorkerReport, WorkerError> {
    let (events_tx, mut events) = mpsc::unbounded_channel::<Event>();
    let mut r = Runner {
        check: AssignmentCheck::new(w.concurrency_keys),
        w,
        events: events_tx,
        report: WorkerReport::default(),
        in_flight: HashSet::new(),
        unacked: HashMap::new(),
        start_waiters: HashMap::new(),
        cancels: HashMap::new(),
        replaced: HashSet::new(),
        draining: false,
        backoff: Duration::from_millis(50),
    };
    loop {
        let Some(socket) = r.connect().await? else {
            continue;
        };
        r.report.connections += 1;
        let (mut sink, mut stream) = socket.split();
        if !send(&mut sink, &r.hello()).await {
            continue;
        }
        match r
            .session(&mut sink, &mut stream, &mut events, &mut drain_rx)
            .await?
        {
            Ended::Drained => return Ok(r.report),
            Ended::Lost => r.wait_backoff().await,
        }
    }
}

impl Runner {
    /// Opens the WebSocket; `None` after a failed attempt (waited out, try again). Fails when
    /// the very first connection cannot be made after several tries.
    async fn connect(&mut self) -> Result<Option<Socket>, WorkerError> {
        let mut request = ws_url(&self.w.base_url)
            .into_client_request()
            .map_err(|e| WorkerError::Connect(e.to_string()))?;
        request.headers_mut().insert(
            "authorization",
            format!("Bearer {}", self.w.token)
                .parse()
                .map_err(|_| WorkerError::Connect("bad token".into()))?,
        );
        // Nagle off: results and starts are small frames whose latency is the key's hand-off time.
        match tokio_tungstenite::connect_async_with_config(request, None, true).await {
            Ok((socket, _)) => Ok(Some(socket)),
            Err(e) => {
                tracing::debug!(error = %e, "worker connect failed; retrying");
                if self.report.connections == 0 && self.backoff > Duration::from_secs(5) {
                    return Err(WorkerError::Connect(e.to_string()));
                }
                self.wait_backoff().await;
                Ok(None)
            }
        }
    }

    async fn wait_backoff(&mut self) {
        tokio::time::sleep(self.backoff).await;
        self.backoff = (self.backoff * 2).min(Duration::from_secs(2));
    }

    /// The hello of a new connection: it resumes what is still in flight.
    fn hello(&self) -> ClientFrame {
        let mut handlers: Vec<String> = self.w.handlers.keys().map(|(n, _)| n.clone()).collect();
        handlers.sort();
        handlers.dedup();
        ClientFrame::Hello {
            worker_id: self.w.worker_id.clone(),
            capacity: self.w.capacity,
            queue_ids: self.w.queue_ids.clone(),
            handlers,
            concurrency_keys: self.w.concurrency_keys,
            start_on_assign: self.w.start_on_assign,
            // Never more than the capacity (the server refuses a longer list); the server never
            // holds more for this session.
            resume: self
                .in_flight
                .iter()
                .copied()
                .take(self.w.capacity as usize)
                .collect(),
        }
    }

    /// One connection's loop: server frames, handler events, renewals and the drain request.
    async fn session(
        &mut self,
        sink: &mut Sink,
        stream: &mut Stream,
        events: &mut mpsc::UnboundedReceiver<Event>,
        drain_rx: &mut oneshot::Receiver<()>,
    ) -> Result<Ended, WorkerError> {
        let mut renew = tokio::time::interval(Duration::from_secs(10));
        renew.tick().await;
        loop {
            let ok = tokio::select! {
                frame = stream.next() => {
                    let text = match frame {
                        Some(Ok(Message::Text(t))) => t.to_string(),
                        Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return Ok(Ended::Lost),
                        Some(Ok(_)) => continue,
                    };
                    let frame: ServerFrame = serde_json::from_str(&text)
                        .map_err(|e| ProtocolError::Unreadable(format!("{e}: {text}")))?;
                    match self.on_frame(frame, sink, &mut renew).await? {
                        Some(ended) => return Ok(ended),
                        None => true,
                    }
                }
                Some(event) = events.recv() => self.on_event(event, sink).await,
                _ = renew.tick() => self.renew(sink).await,
                _ = &mut *drain_rx, if !self.draining => {
                    self.draining = true;
                    send(sink, &ClientFrame::Drain).await
                }
            };
            if !ok {
                return Ok(Ended::Lost);
            }
        }
    }

    /// Handles one server frame; `Some` when the connection ended with it.
    async fn on_frame(
        &mut self,
        frame: ServerFrame,
        sink: &mut Sink,
        renew: &mut tokio::time::Interval,
    ) -> Result<Option<Ended>, WorkerError> {
        let ok = match frame {
            ServerFrame::Welcome {
                renew_interval_seconds,
                resumed,
                ..
            } => {
                self.backoff = Duration::from_millis(50);
                *renew = tokio::time::interval(Duration::from_secs(renew_interval_seconds.max(1)));
                renew.tick().await;
                self.on_welcome(resumed.into_iter().collect(), sink).await
            }
            ServerFrame::Assign(raw) => {
                if let Some(a) = self.check.check(raw)? {
                    self.spawn_handler(a);
                }
                true
            }
            ServerFrame::StartOk { attempt_id, .. } => {
                self.answer_start(attempt_id, true);
                true
            }
            ServerFrame::StartRejected { attempt_id, code } => {
                tracing::info!(attempt_id, %code, "start rejected; the handler will not run");
                self.answer_start(attempt_id, false);
                true
            }
            ServerFrame::Renewed { attempts } => {
                self.on_renewed(attempts);
                true
            }
            ServerFrame::Cancel { attempt_id, reason } => {
                self.on_cancelled(attempt_id, &reason);
                true
            }
            ServerFrame::ResultAck { attempt_id, .. } => {
                self.replaced.remove(&attempt_id);
                if self.unacked.remove(&attempt_id).is_some() {
                    self.report.completed += 1;
                }
                self.in_flight.remove(&attempt_id);
                true
            }
            ServerFrame::Drained => {
                self.report.drained = true;
                let _ = sink.send(Message::Close(None)).await;
                return Ok(Some(Ended::Drained));
            }
            ServerFrame::Error {
                code,
                message,
                attempt_id: Some(attempt_id),
            } => self.on_result_error(attempt_id, code, message, sink).await,
            ServerFrame::Error {
                code,
                message,
                attempt_id: None,
            } => {
                let idle = self.in_flight.is_empty() && self.unacked.is_empty();
                if self.report.connections == 1 && fatal(&code) && idle {
                    return Err(WorkerError::Refused { code, message });
                }
                tracing::warn!(%code, %message, "server error frame");
                true
            }
        };
        Ok((!ok).then_some(Ended::Lost))
    }

    /// After a (re)connect: attempts the server no longer has for this worker ended meanwhile
    /// (lease expiry) and their handlers are cancelled; what is pending goes again.
    async fn on_welcome(&mut self, resumed: HashSet<u64>, sink: &mut Sink) -> bool {
        let (unacked, cancels, report) = (&self.unacked, &self.cancels, &mut self.report);
        self.in_flight.retain(|a| {
            let keep = resumed.contains(a) || unacked.contains_key(a);
            if !keep {
                if let Some(c) = cancels.get(a) {
                    tracing::warn!(attempt_id = *a, "the attempt was gone after the reconnect (its lease ran out); cancelling its handler");
                    c.cancel("the attempt was gone after a reconnect");
                    report.lost += 1;
                }
            }
            keep
        });
        let mut ok = self.resend_pending(sink).await;
        if self.draining {
            ok &= send(sink, &ClientFrame::Drain).await;
        }
        ok
    }

    /// Results not yet acknowledged and starts not yet answered, sent again: both are
    /// idempotent, so a repeat that crosses an answer is harmless.
    async fn resend_pending(&self, sink: &mut Sink) -> bool {
        let mut ok = true;
        for frame in self.unacked.values() {
            ok &= send(sink, frame).await;
        }
        for attempt_id in self.start_waiters.keys() {
            ok &= send(
                sink,
                &ClientFrame::Start {
                    attempt_id: *attempt_id,
                },
            )
            .await;
        }
        ok
    }

    fn answer_start(&mut self, attempt_id: u64, started: bool) {
        if let Some(tx) = self.start_waiters.remove(&attempt_id) {
            let _ = tx.send(started);
        }
    }

    /// Runs an assignment's handler in its own task: `task.start` first unless the server
    /// already started it, then the handler, then its result as an event.
    fn spawn_handler(&mut self, a: Assignment) {
        self.in_flight.insert(a.attempt_id);
        let handler = self
            .w
            .handlers
            .get(&(a.task.handler.clone(), a.task.handler_version.clone()))
            .cloned();
        let events = self.events.clone();
        let cancellation = Cancellation::new();
        self.cancels.insert(a.attempt_id, cancellation.clone());
        tokio::spawn(async move {
            let attempt_id = a.attempt_id;
            if !a.started {
                let (tx, rx) = oneshot::channel();
                if events.send(Event::Start(attempt_id, tx)).is_err() {
                    return;
                }
                if !rx.await.unwrap_or(false) {
                    let _ = events.send(Event::Abandon(attempt_id));
                    return;
                }
            }
            let result = match handler {
                Some(h) => {
                    h(TaskContext {
                        attempt_id,
                        attempt_no: a.attempt_no,
                        concurrency_key: a.concurrency_key.clone(),
                        concurrency_token: a.concurrency_token,
                        key_slot: a.key_slot,
                        task: a.task,
                        cancellation,
                    })
                    .await
                }
                // The session only receives its handler names; a version it does not run is a
                // permanent failure, visible on the task.
                None => Err(HandlerError::Permanent(
                    serde_json::json!({"code": "NO_HANDLER_VERSION"}),
                )),
            };
            let _ = events.send(Event::Result(attempt_id, result_frame(attempt_id, result)));
        });
    }

    /// Renewals the server refused: the attempt is no longer this worker's.
    fn on_renewed(&mut self, attempts: Vec<RenewAnswer>) {
        for a in attempts {
            let Some(code) = a.rejected else { continue };
            tracing::warn!(attempt_id = a.attempt_id, %code, "lease renewal rejected; cancelling the handler and freeing its slot");
            self.lose(a.attempt_id, &format!("lease renewal rejected: {code}"));
        }
    }

    /// A `task.cancel`: the server ended the attempt (a key policy's `cancel_running`).
    fn on_cancelled(&mut self, attempt_id: u64, reason: &str) {
        tracing::warn!(attempt_id, %reason, "attempt cancelled by the server; cancelling the handler and freeing its slot");
        self.lose(attempt_id, &format!("cancelled by the server: {reason}"));
    }

    /// The attempt is no longer this worker's: not renewed again (the server no longer counts
    /// it either), its handler is cancelled and its slot freed. A result already sent keeps
    /// going until acknowledged (the attempt may have ended with it).
    fn lose(&mut self, attempt_id: u64, why: &str) {
        if !self.in_flight.remove(&attempt_id) || self.unacked.contains_key(&attempt_id) {
            return;
        }
        self.report.lost += 1;
        if let Some(c) = self.cancels.get(&attempt_id) {
            c.cancel(why);
        }
        self.answer_start(attempt_id, false);
    }

    /// An error frame about a result. UNAVAILABLE or INTERNAL: sent again with the next renewal.
    /// A result the server cannot read must not hold its attempt: it is ended as a permanent
    /// failure carrying the server's reason.
    async fn on_result_error(
        &mut self,
        attempt_id: u64,
        code: String,
        message: String,
        sink: &mut Sink,
    ) -> bool {
        if !self.unacked.contains_key(&attempt_id) {
            tracing::warn!(attempt_id, %code, %message, "server error frame");
        } else if code == "INVALID_ARGUMENT" && !self.replaced.contains(&attempt_id) {
            tracing::warn!(attempt_id, %code, %message, "the server refused the result; reporting the attempt failed");
            self.report.refused += 1;
            let frame = ClientFrame::refused_result(attempt_id, &code, &message);
            self.replaced.insert(attempt_id);
            let sent = send(sink, &frame).await;
            self.unacked.insert(attempt_id, frame);
            return sent;
        } else if matches!(
            code.as_str(),
            "INVALID_ARGUMENT" | "NOT_FOUND" | "PERMISSION_DENIED"
        ) {
            // Not this session's attempt, or even the failure was refused: stop sending it (the
            // lease runs out and ends the attempt).
            tracing::error!(attempt_id, %code, %message, "the server refused the result; giving it up");
            self.unacked.remove(&attempt_id);
            self.replaced.remove(&attempt_id);
            self.in_flight.remove(&attempt_id);
        } else {
            tracing::warn!(attempt_id, %code, %message, "server error frame; the result goes again with the next renewal");
        }
        true
    }

    /// A handler task's event: a start to send, an attempt abandoned, or a result to send.
    async fn on_event(&mut self, event: Event, sink: &mut Sink) -> bool {
        match event {
            Event::Start(attempt_id, tx) => {
                self.start_waiters.insert(attempt_id, tx);
                send(sink, &ClientFrame::Start { attempt_id }).await
            }
            Event::Abandon(attempt_id) => {
                self.cancels.remove(&attempt_id);
                self.in_flight.remove(&attempt_id);
                true
            }
            Event::Result(attempt_id, frame) => match self.cancels.remove(&attempt_id) {
                Some(c) if c.is_cancelled() => {
                    // The attempt is no longer ours: nothing to report.
                    tracing::info!(attempt_id, reason = ?c.reason(), "the handler of a cancelled attempt returned; its result is not sent");
                    true
                }
                _ => {
                    let sent = send(sink, &frame).await;
                    self.unacked.insert(attempt_id, frame);
                    sent
                }
            },
        }
    }

    /// The periodic renewal. Sent even with nothing in flight: the server answers each renewal
    /// with any grant it made for this session but could not deliver (its answer was lost). At
    /// most the capacity: the server refuses a longer list as a whole. A start or result the
    /// server could not record (it answered with an error frame: its database was unavailable)
    /// goes again with every renewal until it is answered.
    async fn renew(&mut self, sink: &mut Sink) -> bool {
        let attempt_ids = self
            .in_flight
            .iter()
            .copied()
            .take(self.w.capacity as usize)
            .collect();
        let ok = send(sink, &ClientFrame::Renew { attempt_ids }).await;
        self.resend_pending(sink).await && ok
    }
}

/// The `task.result` frame of a handler's return.
fn result_frame(attempt_id: u64, result: Result<Value, HandlerError>) -> ClientFrame {
    let (outcome, retryable, output, error) = match result {
        Ok(v) => (Outcome::Succeeded, false, Some(v), None),
        Err(HandlerError::Retryable(e)) => (Outcome::Failed, true, None, Some(e)),
        Err(HandlerError::Permanent(e)) => (Outcome::Failed, false, None, Some(e)),
        Err(HandlerError::Unknown(e)) => (Outcome::Unknown, false, None, Some(e)),
    };
    ClientFrame::result(attempt_id, outcome, retryable, output, error)
}

#[cfg(test)]
mod tests {
    use super::Cancellation;

    #[tokio::test]
    async fn a_cancellation_wakes_every_waiter_and_keeps_its_first_reason() {
        let c = Cancellation::new();
        assert!(!c.is_cancelled() && c.reason().is_none());
        let waiter = {
            let c = c.clone();
            tokio::spawn(async move { c.cancelled().await })
        };
        tokio::task::yield_now().await;
        c.cancel("lease renewal rejected: LEASE_EXPIRED");
        c.cancel("another reason");
        waiter.await.unwrap();
        c.cancelled().await; // at once once fired
        assert!(c.is_cancelled());
        assert_eq!(
            c.reason().as_deref(),
            Some("lease renewal rejected: LEASE_EXPIRED")
        );
    }
}
