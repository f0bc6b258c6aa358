"""Orbit for Python: the HTTP client, the worker and the resource-side fence.

See clients/python/README.md and docs/protocol.md (the worker protocol this package implements).
"""

from .client import Attempt, Client, Queue, Submitted, Task, attempt_token
from .errors import (
    ApiError,
    IdempotencyConflict,
    Internal,
    InvalidArgument,
    KeyBusy,
    NotFound,
    OrbitError,
    PayloadTooLarge,
    PermissionDenied,
    QuotaExceeded,
    StateConflict,
    Unauthenticated,
    Unavailable,
    WorkerConnectError,
    WorkerError,
    WorkerRefused,
)
from .fence import (
    Accepted,
    Duplicate,
    Fence,
    FenceDecision,
    FenceError,
    FenceInvalid,
    FenceWrite,
    InMemoryFence,
    MySqlFence,
    Stale,
)
from .protocol import (
    BadSlot,
    BadToken,
    ChangedAssignment,
    KeyNotDeclared,
    MissingToken,
    ProtocolError,
    SlotWithoutKey,
    TokenWithoutKey,
    UnreadableFrame,
)
from .worker import (
    PermanentError,
    RetryableError,
    TaskContext,
    UnknownOutcome,
    Worker,
    WorkerReport,
)

__version__ = "0.1.0"

__all__ = [
    "Accepted", "ApiError", "Attempt", "BadSlot", "BadToken", "ChangedAssignment", "Client",
    "Duplicate", "Fence", "FenceDecision", "FenceError", "FenceInvalid", "FenceWrite",
    "IdempotencyConflict", "InMemoryFence", "Internal", "InvalidArgument", "KeyBusy",
    "KeyNotDeclared", "MissingToken", "MySqlFence", "NotFound", "OrbitError", "PayloadTooLarge",
    "PermanentError", "PermissionDenied", "ProtocolError", "QuotaExceeded", "Queue",
    "RetryableError", "SlotWithoutKey", "Stale", "StateConflict", "Submitted", "Task",
    "TaskContext", "TokenWithoutKey", "Unauthenticated", "Unavailable", "UnknownOutcome",
    "UnreadableFrame", "Worker", "WorkerConnectError", "WorkerError", "WorkerRefused",
    "WorkerReport", "attempt_token",
]
