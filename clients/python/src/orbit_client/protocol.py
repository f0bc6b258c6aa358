"""The worker protocol's frames and the checks a worker applies to them (docs/protocol.md).

This module mirrors `sdk/src/protocol.rs`: the same limits, the same assignment checks and the
same replacement of a result the server could not read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

#: The largest frame the server reads (its HTTP body limit, 1 MiB). The worker never sends a
#: larger one: a result that would be larger is sent as a permanent failure saying why.
MAX_FRAME_BYTES = 1024 * 1024

#: How deeply a result's ``output`` and ``error`` may nest arrays and objects.
MAX_RESULT_DEPTH = 24

#: The largest frame the worker accepts from the server. A ``task.assign`` carries the task with
#: its payload (at most the 1 MiB request body) and the output and error of an earlier attempt
#: (each at most a 1 MiB result frame), so the server's frames stay under 4 MiB; 16 MiB leaves
#: room. WebSocket libraries often default to 1 MiB, which a large payload already exceeds.
MAX_RECEIVE_BYTES = 16 * 1024 * 1024

U64_MAX = 2**64 - 1
U32_MAX = 2**32 - 1


class ProtocolError(Exception):
    """The server broke the protocol; the worker stops before any handler sees the frame."""

    def __init__(self, message: str, attempt_id: Optional[int] = None) -> None:
        super().__init__(message)
        self.attempt_id = attempt_id


class MissingToken(ProtocolError):
    """A keyed task arrived without a ``concurrency_token``."""


class TokenWithoutKey(ProtocolError):
    """A ``concurrency_token`` arrived for a task without a key."""


class KeyNotDeclared(ProtocolError):
    """A keyed task arrived although the worker did not declare ``concurrency_keys``."""


class BadToken(ProtocolError):
    """The token is not a non-zero decimal u64 in a JSON string."""


class SlotWithoutKey(ProtocolError):
    """A ``key_slot`` arrived for a task without a key."""


class BadSlot(ProtocolError):
    """The ``key_slot`` is not an unsigned 32-bit JSON integer."""


class ChangedAssignment(ProtocolError):
    """A repeated ``task.assign`` for the same attempt changed its key, token or slot."""


class UnreadableFrame(ProtocolError):
    """A frame that is not what the protocol says."""


def json_depth(value: Any) -> int:
    """How deeply ``value`` nests lists and dicts (a scalar is 0); iterative, like the Rust SDK."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if depth > deepest:
            deepest = depth
        if isinstance(v, list):
            stack.extend((item, depth + 1) for item in v)
        elif isinstance(v, dict):
            stack.extend((item, depth + 1) for item in v.values())
    return deepest


def encode(frame: dict[str, Any]) -> str:
    """A frame as compact JSON text."""
    return json.dumps(frame, separators=(",", ":"), ensure_ascii=False)


def refused_result(attempt_id: int, code: str, message: str) -> dict[str, Any]:
    """The permanent failure sent in place of a result the server cannot take."""
    return {
        "type": "task.result",
        "attempt_id": attempt_id,
        "outcome": "failed",
        "retryable": False,
        "output": None,
        "error": {"code": code, "message": message[:1000]},
    }


def result_frame(
    attempt_id: int, outcome: str, retryable: bool, output: Any, error: Any
) -> dict[str, Any]:
    """A ``task.result`` the server can read: one nested deeper than ``MAX_RESULT_DEPTH`` or larger
    than ``MAX_FRAME_BYTES`` becomes a permanent failure whose error says why (a result the server
    refuses would hold its attempt and key until the lease runs out)."""
    for field, v in (("output", output), ("error", error)):
        depth = json_depth(v) if v is not None else 0
        if depth > MAX_RESULT_DEPTH:
            return refused_result(
                attempt_id,
                "INVALID_ARGUMENT",
                f"{field} nests {depth} levels deep; at most {MAX_RESULT_DEPTH} are accepted",
            )
    frame = {
        "type": "task.result",
        "attempt_id": attempt_id,
        "outcome": outcome,
        "retryable": retryable,
        "output": output,
        "error": error,
    }
    try:
        size = len(encode(frame).encode("utf-8"))
    except (TypeError, ValueError) as e:
        return refused_result(attempt_id, "INVALID_ARGUMENT", f"the result is not JSON: {e}")
    if size > MAX_FRAME_BYTES:
        return refused_result(
            attempt_id,
            "INVALID_ARGUMENT",
            f"the result is {size} bytes; a frame is limited to {MAX_FRAME_BYTES}",
        )
    return frame


def parse_token(attempt_id: int, raw: Any) -> int:
    """A token: a non-zero decimal u64 in a JSON string (never a JSON number)."""
    if (
        not isinstance(raw, str)
        or not raw
        or not raw.isascii()
        or not raw.isdigit()
        or int(raw) == 0
        or int(raw) > U64_MAX
    ):
        raise BadToken(
            f"attempt {attempt_id}: concurrency_token {json.dumps(raw)} is not a non-zero "
            "decimal u64 string",
            attempt_id,
        )
    return int(raw)


def parse_slot(attempt_id: int, raw: Any) -> int:
    """A key slot: a JSON integer from 0 to 2^32-1 (not a string, not a fraction)."""
    if not isinstance(raw, int) or isinstance(raw, bool) or not 0 <= raw <= U32_MAX:
        raise BadSlot(
            f"attempt {attempt_id}: key_slot {json.dumps(raw)} is not an unsigned 32-bit JSON "
            "integer",
            attempt_id,
        )
    return raw


@dataclass(frozen=True)
class Assignment:
    """A validated ``task.assign``."""

    attempt_id: int
    attempt_no: int
    lease_expires_at: str
    task: dict[str, Any]
    concurrency_key: Optional[str]
    concurrency_token: Optional[int]
    #: The server started the attempt with the grant: run the handler without ``task.start``.
    started: bool
    #: The grant's slot of its key: present exactly when the task has a key (0 from a server that
    #: predates slots).
    key_slot: Optional[int] = None


def _int_field(frame: dict[str, Any], name: str) -> int:
    v = frame.get(name)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise UnreadableFrame(f"{frame.get('type')}: {name} must be an unsigned integer")
    return v


class AssignmentCheck:
    """Checks assignments against docs/protocol.md ("The concurrency token", "The key slot"),
    remembering what each attempt was assigned."""

    def __init__(self, declared_keys: bool) -> None:
        self.declared_keys = declared_keys
        self._seen: dict[int, tuple[Optional[str], Optional[int], Optional[int]]] = {}

    def remember(self, a: Assignment) -> None:
        """Records an assignment known from before (a worker restarted from its journal)."""
        self._seen[a.attempt_id] = (a.concurrency_key, a.concurrency_token, a.key_slot)

    def check(self, frame: dict[str, Any]) -> Optional[Assignment]:
        """Validates one ``task.assign``; ``None`` for an identical repeat (already handled)."""
        attempt_id = _int_field(frame, "attempt_id")
        attempt_no = _int_field(frame, "attempt_no")
        task = frame.get("task")
        if not isinstance(task, dict):
            raise UnreadableFrame(f"attempt {attempt_id}: task.assign without a task", attempt_id)
        for field in ("id", "handler", "handler_version"):
            if field not in task:
                raise UnreadableFrame(f"attempt {attempt_id}: the task has no {field}", attempt_id)
        key = task.get("concurrency_key")
        if key is not None and not isinstance(key, str):
            raise UnreadableFrame(f"attempt {attempt_id}: concurrency_key is not a string", attempt_id)
        raw_token = frame.get("concurrency_token")
        if key is not None and raw_token is None:
            raise MissingToken(
                f"attempt {attempt_id}: a keyed task arrived without a concurrency_token", attempt_id
            )
        if key is None and raw_token is not None:
            raise TokenWithoutKey(
                f"attempt {attempt_id}: a concurrency_token arrived for a task without a key",
                attempt_id,
            )
        token = parse_token(attempt_id, raw_token) if key is not None else None
        raw_slot = frame.get("key_slot")
        if key is None and raw_slot is not None:
            raise SlotWithoutKey(
                f"attempt {attempt_id}: a key_slot arrived for a task without a key", attempt_id
            )
        slot: Optional[int] = None
        if key is not None:
            # A server that predates key slots omits it: every key has one holder, in slot 0.
            slot = 0 if raw_slot is None else parse_slot(attempt_id, raw_slot)
        if key == "":
            raise UnreadableFrame(f"attempt {attempt_id}: an empty concurrency_key", attempt_id)
        if key is not None and not self.declared_keys:
            raise KeyNotDeclared(
                f"attempt {attempt_id}: a keyed task arrived although this worker did not "
                "declare concurrency_keys",
                attempt_id,
            )
        previous = self._seen.get(attempt_id)
        if previous is not None:
            if previous == (key, token, slot):
                return None
            raise ChangedAssignment(
                f"attempt {attempt_id}: a repeated assignment changed the key, token or slot",
                attempt_id,
            )
        self._seen[attempt_id] = (key, token, slot)
        return Assignment(
            attempt_id=attempt_id,
            attempt_no=attempt_no,
            lease_expires_at=str(frame.get("lease_expires_at", "")),
            task=task,
            concurrency_key=key,
            concurrency_token=token,
            started=frame.get("started") is True,
            key_slot=slot,
        )
