"""The worker: runs handlers for tasks pushed over ``GET /v1/workers/connect``.

It mirrors ``orbit_sdk::Worker`` (``sdk/src/worker.rs``): it says hello with ``concurrency_keys``,
confirms each assignment with ``task.start`` before the handler runs (unless ``start_on_assign``),
renews the leases of everything in flight, reports each result until it is acknowledged and sends
unanswered starts and results again with every renewal, reconnects with ``resume`` so the same
attempts and tokens continue, and drains on request (or on SIGTERM). An assignment that breaks the
protocol stops the worker with a :class:`~orbit_client.protocol.ProtocolError` before any handler
sees it. An attempt whose lease renewal the server rejects is cancelled at once: its
:class:`TaskContext` fires, its handler's asyncio task is cancelled, its slot is freed and its
result is not sent.

With a ``journal`` file the worker also survives its own crash: it records each attempt it holds,
and a new process with the same ``worker_id`` and journal resumes them with the same attempt and
token, running the handler again (handlers are idempotent by their fenced operation id).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable, Optional, Union

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from .errors import WorkerConnectError, WorkerError, WorkerRefused
from .protocol import (
    MAX_RECEIVE_BYTES,
    Assignment,
    AssignmentCheck,
    UnreadableFrame,
    encode,
    refused_result,
    result_frame,
)

log = logging.getLogger("orbit_client.worker")

#: Codes that make the same hello fail again: the worker stops instead of retrying.
FATAL_CODES = frozenset(
    {"UNAUTHENTICATED", "PERMISSION_DENIED", "NOT_FOUND", "STATE_CONFLICT", "INVALID_ARGUMENT"}
)


class RetryableError(Exception):
    """Raise from a handler: try again after the task's backoff (the key is released meanwhile)."""

    def __init__(self, error: Any = None) -> None:
        super().__init__(error)
        self.error = error


class PermanentError(Exception):
    """Raise from a handler: do not try again (the task ends ``FAILED``)."""

    def __init__(self, error: Any = None) -> None:
        super().__init__(error)
        self.error = error


class UnknownOutcome(Exception):
    """Raise from a handler: the effect is unknown (``NEEDS_REVIEW`` unless the task may retry
    unknown outcomes)."""

    def __init__(self, error: Any = None) -> None:
        super().__init__(error)
        self.error = error


class TaskContext:
    """What a handler sees. ``concurrency_token`` is present exactly when the task has a key: pass
    it to the resource with every write (see :mod:`orbit_client.fence`). So is ``key_slot``, the
    grant's slot of its key (0..N-1 for a key up to N attempts may hold at once, never shared by two
    live holders; always 0 for N = 1): with N > 1 several tokens of the key are live at once, so the
    resource keeps a register per slot (``FenceWrite(..., slot=ctx.key_slot)``)."""

    def __init__(self, a: Assignment) -> None:
        self.attempt_id = a.attempt_id
        self.attempt_no = a.attempt_no
        self.task: dict[str, Any] = a.task
        self.concurrency_key: Optional[str] = a.concurrency_key
        self.concurrency_token: Optional[int] = a.concurrency_token
        self.key_slot: Optional[int] = a.key_slot
        self._event = asyncio.Event()
        self.cancel_reason: Optional[str] = None

    @property
    def payload(self) -> Any:
        return self.task.get("payload")

    def is_cancelled(self) -> bool:
        """Whether the attempt is no longer this worker's (see :meth:`cancelled`)."""
        return self._event.is_set()

    async def cancelled(self) -> None:
        """Completes when the handler should stop: the server refused to renew the attempt's lease
        (it ran out, and the key may already be another worker's), or the attempt was gone after a
        reconnect. The worker also cancels the handler's asyncio task at that moment; this is for
        handlers that shield work or run it in threads. Until the handler stops, the fencing token
        still guards the resource: a newer holder's token is larger."""
        await self._event.wait()

    def _cancel(self, reason: str) -> None:
        if self.cancel_reason is None:
            self.cancel_reason = reason
        self._event.set()


Handler = Callable[[TaskContext], Union[Awaitable[Any], Any]]


@dataclass
class WorkerReport:
    """What a worker did."""

    #: Results the server acknowledged.
    completed: int = 0
    #: ``True`` when the server confirmed the drain.
    drained: bool = False
    #: Connections made (1 + reconnects).
    connections: int = 0
    #: Attempts whose lease was lost: their handlers were cancelled and their results not sent.
    lost: int = 0
    #: Results the server refused to read, sent again as failures.
    refused: int = 0
    #: Attempts taken over from the journal of an earlier process.
    restored: int = 0


def ws_url(base: str) -> str:
    base = base.rstrip("/")
    if base.startswith("https://"):
        base = "wss://" + base[len("https://") :]
    elif base.startswith("http://"):
        base = "ws://" + base[len("http://") :]
    return f"{base}/v1/workers/connect"


class _Journal:
    """The attempts a worker holds, in a JSON file rewritten atomically on each change (it
    survives a crash of the process; it is not fsynced, so not one of the machine)."""

    def __init__(self, path: str, worker_id: str) -> None:
        self.path = path
        self.worker_id = worker_id
        self.attempts: dict[int, dict[str, Any]] = {}

    def load(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return
        if data.get("worker_id") != self.worker_id:
            raise WorkerError(
                f"the journal {self.path} belongs to worker {data.get('worker_id')!r}, "
                f"not {self.worker_id!r}"
            )
        self.attempts = {int(k): v for k, v in data.get("attempts", {}).items()}

    def save(self) -> None:
        tmp = f"{self.path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"worker_id": self.worker_id, "attempts": self.attempts}, f)
        os.replace(tmp, self.path)

    def add(self, a: Assignment) -> None:
        self.attempts[a.attempt_id] = {
            "attempt_no": a.attempt_no,
            "lease_expires_at": a.lease_expires_at,
            "task": a.task,
            "concurrency_key": a.concurrency_key,
            "concurrency_token": None if a.concurrency_token is None else str(a.concurrency_token),
            "key_slot": a.key_slot,
            "started": a.started,
            "result": None,
        }
        self.save()

    def update(self, attempt_id: int, **fields: Any) -> None:
        entry = self.attempts.get(attempt_id)
        if entry is not None:
            entry.update(fields)
            self.save()

    def remove(self, attempt_id: int) -> None:
        if self.attempts.pop(attempt_id, None) is not None:
            self.save()

    @staticmethod
    def assignment(attempt_id: int, e: dict[str, Any]) -> Assignment:
        token = e.get("concurrency_token")
        key = e.get("concurrency_key")
        slot = e.get("key_slot")
        if key is not None and slot is None:
            slot = 0  # a journal written before key slots: every key had one holder
        return Assignment(
            attempt_id=attempt_id,
            attempt_no=int(e["attempt_no"]),
            lease_expires_at=str(e.get("lease_expires_at", "")),
            task=e["task"],
            concurrency_key=key,
            concurrency_token=None if token is None else int(token),
            started=bool(e.get("started")),
            key_slot=None if slot is None else int(slot),
        )


class Worker:
    """A worker definition; ``await worker.run()`` runs it until it drains or fails.

    ``concurrency_keys`` (default ``True``) is fixed for a ``worker_id``: a process that changes it
    must use a new identity. ``start_on_assign`` asks the server to start each attempt with its
    grant (one round trip and commit less; a lease that runs out then ends the attempt
    ``UNKNOWN``). ``journal`` names a file where the worker records the attempts it holds, so a
    restarted process with the same ``worker_id`` resumes them (same attempt, same token).
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        worker_id: str,
        *,
        queues: Iterable[str] = (),
        capacity: int = 1,
        concurrency_keys: bool = True,
        start_on_assign: bool = False,
        journal: Optional[Union[str, "os.PathLike[str]"]] = None,
        connect_timeout: float = 30.0,
        max_receive_bytes: int = MAX_RECEIVE_BYTES,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.worker_id = worker_id
        self.queue_ids: list[str] = list(queues)
        self.capacity = max(1, int(capacity))
        self.concurrency_keys = concurrency_keys
        self.start_on_assign = start_on_assign
        self.journal_path = None if journal is None else os.fspath(journal)
        self.connect_timeout = connect_timeout
        self.max_receive_bytes = max_receive_bytes
        self._handlers: dict[tuple[str, str], Handler] = {}
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._ws: Optional[ClientConnection] = None
        self._draining = False
        self._welcomed = False

    # ---- definition -------------------------------------------------------------------------

    def queue(self, queue_id: str) -> "Worker":
        self.queue_ids.append(queue_id)
        return self

    def add_handler(self, name: str, version: str, fn: Handler) -> "Worker":
        """Registers ``fn`` for tasks with this handler name and version. An ``async def`` is
        awaited; a plain function runs in a thread. Its return value is the task's output; raise
        :class:`RetryableError`, :class:`PermanentError` or :class:`UnknownOutcome` to fail it
        (any other exception is a retryable failure naming the exception)."""
        self._handlers[(name, version)] = fn
        return self

    def handler(self, name: str, version: str = "v1") -> Callable[[Handler], Handler]:
        """Decorator form of :meth:`add_handler`."""

        def register(fn: Handler) -> Handler:
            self.add_handler(name, version, fn)
            return fn

        return register

    # ---- control ----------------------------------------------------------------------------

    def drain(self) -> None:
        """Asks for no new assignments; :meth:`run` returns once in-flight work has finished and
        the server said ``drained``. Safe from any thread and from a signal handler."""
        loop = self._loop
        if loop is None:
            self._draining = True
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._request_drain()
        else:
            loop.call_soon_threadsafe(self._request_drain)

    def _request_drain(self) -> None:
        if self._draining:
            return
        self._draining = True
        log.info("draining: no new assignments")
        if self._ws is not None and self._welcomed:
            self._spawn(self._send({"type": "drain"}))

    async def run(self, *, drain_on_signals: Iterable[int] = ()) -> WorkerReport:
        """Runs until drained (returns the report), or raises :class:`ProtocolError`,
        :class:`WorkerRefused` or :class:`WorkerConnectError`. ``drain_on_signals`` (e.g.
        ``(signal.SIGTERM,)``) installs handlers that drain on those signals (main thread only)."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._running: dict[int, tuple[asyncio.Task[None], TaskContext]] = {}
        signals = list(drain_on_signals)
        for sig in signals:
            loop.add_signal_handler(sig, self.drain)
        try:
            return await self._run()
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)
            for task, ctx in list(self._running.values()):
                ctx._cancel("the worker stopped")
                task.cancel()
            self._loop = None

    # ---- the connection loop ----------------------------------------------------------------

    def _spawn(self, coro: Awaitable[Any]) -> None:
        t = asyncio.ensure_future(coro)
        self._background.add(t)
        t.add_done_callback(self._background.discard)

    async def _send(self, frame: dict[str, Any]) -> bool:
        ws = self._ws
        if ws is None:
            return False
        try:
            await ws.send(encode(frame))
            return True
        except ConnectionClosed:
            return False

    async def _run(self) -> WorkerReport:
        self.report = WorkerReport()
        self._check = AssignmentCheck(self.concurrency_keys)
        self._in_flight: dict[int, None] = {}  # insertion-ordered set
        self._unacked: dict[int, dict[str, Any]] = {}
        self._start_waiters: dict[int, asyncio.Future[bool]] = {}
        self._replaced: set[int] = set()
        self._background: set[asyncio.Future[Any]] = set()
        self._restore: dict[int, Assignment] = {}
        self._journal: Optional[_Journal] = None
        if self.journal_path is not None:
            j = _Journal(self.journal_path, self.worker_id)
            j.load()
            self._journal = j
            for attempt_id, entry in j.attempts.items():
                a = _Journal.assignment(attempt_id, entry)
                self._check.remember(a)
                self._in_flight[attempt_id] = None
                if entry.get("result") is not None:
                    self._unacked[attempt_id] = entry["result"]
                else:
                    self._restore[attempt_id] = a
        started_at = time.monotonic()
        backoff = 0.05
        headers = {"Authorization": f"Bearer {self.token}"}
        while True:
            try:
                ws = await connect(
                    ws_url(self.base_url),
                    additional_headers=headers,
                    max_size=self.max_receive_bytes,
                    compression=None,
                    open_timeout=10,
                    proxy=None,
                )
            except InvalidStatus as e:
                status = e.response.status_code
                if status in (401, 403):
                    code, message = _envelope(e.response.body, status)
                    raise WorkerRefused(code, message) from e
                self._connect_failed(e, started_at)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            except (OSError, InvalidHandshake, asyncio.TimeoutError) as e:
                self._connect_failed(e, started_at)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            self.report.connections += 1
            self._ws = ws
            self._welcomed = False
            renewals: Optional[asyncio.Task[None]] = None
            try:
                outcome, renewals = await self._session(ws)
                if outcome:
                    return self.report
                backoff = 0.05 if self._welcomed else backoff
            finally:
                self._ws = None
                self._welcomed = False
                if renewals is not None:
                    renewals.cancel()
                try:
                    await asyncio.wait_for(ws.close(), 2)
                except Exception:  # noqa: BLE001 - closing a dead socket
                    pass
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 2.0)

    def _connect_failed(self, e: BaseException, started_at: float) -> None:
        log.debug("worker connect failed; retrying: %s", e)
        if self.report.connections == 0 and time.monotonic() - started_at > self.connect_timeout:
            raise WorkerConnectError(f"cannot connect to {ws_url(self.base_url)}: {e}")

    def _hello(self) -> dict[str, Any]:
        return {
            "type": "hello",
            "worker_id": self.worker_id,
            "capacity": self.capacity,
            "queue_ids": self.queue_ids,
            "handlers": sorted({name for name, _ in self._handlers}),
            "concurrency_keys": self.concurrency_keys,
            "start_on_assign": self.start_on_assign,
            # Never more than the capacity (the server refuses a longer list).
            "resume": list(self._in_flight)[: self.capacity],
        }

    async def _session(
        self, ws: ClientConnection
    ) -> tuple[bool, Optional[asyncio.Task[None]]]:
        """One connection: ``(True, _)`` once drained, ``(False, _)`` when the socket ended."""
        renewals: Optional[asyncio.Task[None]] = None
        if not await self._send(self._hello()):
            return False, renewals
        while True:
            try:
                message = await ws.recv()
            except ConnectionClosed as e:
                log.info("connection closed (%s); reconnecting", e)
                return False, renewals
            if not isinstance(message, str):
                continue
            try:
                frame = json.loads(message)
            except ValueError as e:
                raise UnreadableFrame(f"unreadable frame: {e}: {message[:200]}") from e
            if not isinstance(frame, dict):
                raise UnreadableFrame(f"unreadable frame: {message[:200]}")
            kind = frame.get("type")
            if kind == "welcome":
                renewals = self._on_welcome(frame, renewals)
                if not await self._resend(include_drain=True):
                    return False, renewals
            elif kind == "task.assign":
                self._on_assign(frame)
            elif kind == "task.start.ok":
                fut = self._start_waiters.pop(_attempt_id(frame), None)
                if fut is not None and not fut.done():
                    fut.set_result(True)
            elif kind == "task.start.rejected":
                attempt_id = _attempt_id(frame)
                log.info("attempt %s: start rejected (%s); the handler will not run",
                         attempt_id, frame.get("code"))
                fut = self._start_waiters.pop(attempt_id, None)
                if fut is not None and not fut.done():
                    fut.set_result(False)
            elif kind == "lease.renewed":
                self._on_renewed(frame)
            elif kind == "task.cancel":
                # The server ended the attempt (a key policy's cancel_running).
                attempt_id = _attempt_id(frame)
                if attempt_id in self._in_flight and attempt_id not in self._unacked:
                    self._in_flight.pop(attempt_id, None)
                    self._lose(attempt_id, f"cancelled by the server: {frame.get('reason', '')}")
            elif kind == "task.result.ack":
                attempt_id = _attempt_id(frame)
                self._replaced.discard(attempt_id)
                if self._unacked.pop(attempt_id, None) is not None:
                    self.report.completed += 1
                self._in_flight.pop(attempt_id, None)
                if self._journal is not None:
                    self._journal.remove(attempt_id)
            elif kind == "drained":
                self.report.drained = True
                return True, renewals
            elif kind == "error":
                if not await self._on_error(frame):
                    return False, renewals
            else:
                raise UnreadableFrame(f"unknown frame type {kind!r}")

    def _on_welcome(
        self, frame: dict[str, Any], renewals: Optional[asyncio.Task[None]]
    ) -> asyncio.Task[None]:
        self._welcomed = True
        interval = max(1, int(frame.get("renew_interval_seconds") or 10))
        resumed = {int(a) for a in frame.get("resumed") or []}
        # Attempts the server no longer has for us ended meanwhile (lease expiry).
        for attempt_id in list(self._in_flight):
            if attempt_id in resumed or attempt_id in self._unacked:
                continue
            self._in_flight.pop(attempt_id, None)
            if self._restore.pop(attempt_id, None) is not None:
                log.warning("attempt %s from the journal is gone (its lease ran out)", attempt_id)
                self.report.lost += 1
            self._lose(attempt_id, "the attempt was gone after a reconnect")
        # Attempts of an earlier process (the journal) that the server handed to this session.
        for attempt_id, a in list(self._restore.items()):
            del self._restore[attempt_id]
            log.info("attempt %s resumed from the journal (token %s)", attempt_id,
                     a.concurrency_token)
            self.report.restored += 1
            self._start_attempt(a)
        if renewals is not None:
            renewals.cancel()
        return asyncio.ensure_future(self._renew_every(interval))

    async def _resend(self, include_drain: bool) -> bool:
        ok = True
        for frame in list(self._unacked.values()):
            ok = ok and await self._send(frame)
        for attempt_id in list(self._start_waiters):
            ok = ok and await self._send({"type": "task.start", "attempt_id": attempt_id})
        if include_drain and self._draining:
            ok = ok and await self._send({"type": "drain"})
        return ok

    async def _renew_every(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            # Sent even with nothing in flight: the server answers with any grant of this session
            # it could not deliver, and it is the session's heartbeat.
            ids = list(self._in_flight)[: self.capacity]
            ok = await self._send({"type": "lease.renew", "attempt_ids": ids})
            # A start or result the server could not record goes again until it is answered.
            if not ok or not await self._resend(include_drain=False):
                return

    def _on_assign(self, frame: dict[str, Any]) -> None:
        a = self._check.check(frame)  # a ProtocolError stops the worker here
        if a is None:
            return
        self._in_flight[a.attempt_id] = None
        if self._journal is not None:
            self._journal.add(a)
        self._start_attempt(a)

    def _start_attempt(self, a: Assignment) -> None:
        ctx = TaskContext(a)
        task = asyncio.ensure_future(self._attempt(a, ctx))
        self._running[a.attempt_id] = (task, ctx)

    async def _attempt(self, a: Assignment, ctx: TaskContext) -> None:
        attempt_id = a.attempt_id
        try:
            if not a.started:
                fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
                self._start_waiters[attempt_id] = fut
                await self._send({"type": "task.start", "attempt_id": attempt_id})
                if not await fut:
                    self._in_flight.pop(attempt_id, None)
                    if self._journal is not None:
                        self._journal.remove(attempt_id)
                    return
                if self._journal is not None:
                    self._journal.update(attempt_id, started=True)
            outcome, retryable, output, error = await self._call_handler(a, ctx)
        except asyncio.CancelledError:
            if ctx.is_cancelled():
                log.info("attempt %s: handler stopped (%s)", attempt_id, ctx.cancel_reason)
                return
            raise
        finally:
            self._running.pop(attempt_id, None)
        if ctx.is_cancelled():
            log.info("the handler of cancelled attempt %s returned (%s); its result is not sent",
                     attempt_id, ctx.cancel_reason)
            return
        frame = result_frame(attempt_id, outcome, retryable, output, error)
        self._unacked[attempt_id] = frame
        if self._journal is not None:
            self._journal.update(attempt_id, result=frame)
        await self._send(frame)

    async def _call_handler(self, a: Assignment, ctx: TaskContext) -> tuple[str, bool, Any, Any]:
        fn = self._handlers.get((str(a.task.get("handler")), str(a.task.get("handler_version"))))
        if fn is None:
            # The session only receives its handler names; a version it does not run is a
            # permanent failure, visible on the task.
            return "failed", False, None, {"code": "NO_HANDLER_VERSION"}
        try:
            if inspect.iscoroutinefunction(fn):
                value = await fn(ctx)
            else:
                value = await asyncio.to_thread(fn, ctx)
                if inspect.isawaitable(value):
                    value = await value
            return "succeeded", False, value, None
        except RetryableError as e:
            return "failed", True, None, e.error
        except PermanentError as e:
            return "failed", False, None, e.error
        except UnknownOutcome as e:
            return "unknown", False, None, e.error
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - a handler's bug is the task's failure
            log.exception("attempt %s: the handler raised", a.attempt_id)
            return "failed", True, None, {
                "code": "EXCEPTION",
                "type": type(e).__name__,
                "message": str(e)[:1000],
            }

    def _lose(self, attempt_id: int, reason: str) -> None:
        """The attempt is no longer this session's: cancel its handler, free its slot."""
        fut = self._start_waiters.pop(attempt_id, None)
        if fut is not None and not fut.done():
            fut.set_result(False)
        running = self._running.get(attempt_id)
        if running is not None:
            task, ctx = running
            if not ctx.is_cancelled():
                self.report.lost += 1
                log.warning("attempt %s: %s; cancelling its handler and freeing its slot",
                            attempt_id, reason)
            ctx._cancel(reason)
            task.cancel()
        if self._journal is not None:
            self._journal.remove(attempt_id)

    def _on_renewed(self, frame: dict[str, Any]) -> None:
        for entry in frame.get("attempts") or []:
            code = entry.get("rejected")
            if code is None:
                continue
            attempt_id = int(entry.get("attempt_id"))
            # A result already sent keeps going until acknowledged (the attempt may have ended
            # with it); a running handler lost its lease.
            if attempt_id not in self._in_flight or attempt_id in self._unacked:
                continue
            self._in_flight.pop(attempt_id, None)
            self._lose(attempt_id, f"lease renewal rejected: {code}")

    async def _on_error(self, frame: dict[str, Any]) -> bool:
        code = str(frame.get("code"))
        message = str(frame.get("message"))
        attempt_id = frame.get("attempt_id")
        if attempt_id is None:
            if (
                not self._welcomed
                and code in FATAL_CODES
                and not self._in_flight
                and not self._unacked
            ):
                raise WorkerRefused(code, message)
            log.warning("server error frame: %s: %s", code, message)
            return True
        attempt_id = int(attempt_id)
        if attempt_id not in self._unacked:
            log.warning("attempt %s: server error frame: %s: %s", attempt_id, code, message)
        elif code == "INVALID_ARGUMENT" and attempt_id not in self._replaced:
            # A result the server cannot read must not hold its attempt: end it as a permanent
            # failure carrying the server's reason.
            log.warning("attempt %s: the server refused the result (%s); reporting it failed",
                        attempt_id, message)
            self.report.refused += 1
            replacement = refused_result(attempt_id, code, message)
            self._replaced.add(attempt_id)
            self._unacked[attempt_id] = replacement
            if self._journal is not None:
                self._journal.update(attempt_id, result=replacement)
            return await self._send(replacement)
        elif code in ("INVALID_ARGUMENT", "NOT_FOUND", "PERMISSION_DENIED"):
            log.error("attempt %s: the server refused the result (%s: %s); giving it up",
                      attempt_id, code, message)
            self._unacked.pop(attempt_id, None)
            self._replaced.discard(attempt_id)
            self._in_flight.pop(attempt_id, None)
            if self._journal is not None:
                self._journal.remove(attempt_id)
        else:
            log.warning("attempt %s: %s: %s; the result goes again with the next renewal",
                        attempt_id, code, message)
        return True


def _attempt_id(frame: dict[str, Any]) -> int:
    v = frame.get("attempt_id")
    if not isinstance(v, int) or isinstance(v, bool):
        raise UnreadableFrame(f"{frame.get('type')}: attempt_id must be an integer")
    return v


def _envelope(body: Optional[bytes], status: int) -> tuple[str, str]:
    try:
        err = json.loads(body or b"")["error"]
        return str(err["code"]), str(err["message"])
    except (ValueError, KeyError, TypeError):
        return ("UNAUTHENTICATED" if status == 401 else "PERMISSION_DENIED"), f"HTTP {status}"


__all__ = [
    "Worker",
    "WorkerReport",
    "TaskContext",
    "RetryableError",
    "PermanentError",
    "UnknownOutcome",
]
