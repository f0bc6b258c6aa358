"""The error envelope ``{"error": {"code", "message", "details"}, "request_id"}`` as exceptions."""

from __future__ import annotations

from typing import Any, Optional


class OrbitError(Exception):
    """Base of every error this package raises."""


class ApiError(OrbitError):
    """An answer with the error envelope; the subclass names its ``code``."""

    code = "INTERNAL"

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: Optional[dict[str, Any]] = None,
        request_id: Optional[str] = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details: dict[str, Any] = details or {}
        self.request_id = request_id

    @property
    def field(self) -> Optional[str]:
        """The field a ``400`` names (``details.field``), e.g. ``tasks[3].handler``."""
        f = self.details.get("field")
        return f if isinstance(f, str) else None


class InvalidArgument(ApiError):
    """400: the request breaks a bound or rule (``field`` names what)."""


class PayloadTooLarge(InvalidArgument):
    """413: the request body is over the server's 1 MiB limit."""


class Unauthenticated(ApiError):
    """401: no token, an unknown one, or a revoked one."""


class PermissionDenied(ApiError):
    """403: the credential lacks the scope."""


class NotFound(ApiError):
    """404: missing, or not visible to this credential (the same answer)."""


class IdempotencyConflict(ApiError):
    """409: the Idempotency-Key was used before with another request."""


class StateConflict(ApiError):
    """409: the object is not in a state that allows this."""


class KeyBusy(ApiError):
    """409: the concurrency key is held or has waiting tasks, and its key policy rejects new
    tasks (``on_busy: reject``); nothing was written."""


class QuotaExceeded(ApiError):
    """429: a quota is full."""


class Unavailable(ApiError):
    """503 (or no answer at all, status 0): the server or its database could not be reached."""


class Internal(ApiError):
    """500, or an answer that is not the documented shape."""


_BY_CODE: dict[str, type[ApiError]] = {
    "INVALID_ARGUMENT": InvalidArgument,
    "UNAUTHENTICATED": Unauthenticated,
    "PERMISSION_DENIED": PermissionDenied,
    "NOT_FOUND": NotFound,
    "IDEMPOTENCY_CONFLICT": IdempotencyConflict,
    "STATE_CONFLICT": StateConflict,
    "KEY_BUSY": KeyBusy,
    "QUOTA_EXCEEDED": QuotaExceeded,
    "UNAVAILABLE": Unavailable,
    "INTERNAL": Internal,
}


def api_error(
    status: int,
    code: str,
    message: str,
    details: Optional[dict[str, Any]] = None,
    request_id: Optional[str] = None,
) -> ApiError:
    """The exception for an envelope (``413`` is :class:`PayloadTooLarge`)."""
    cls = PayloadTooLarge if status == 413 else _BY_CODE.get(code, Internal)
    return cls(status, code, message, details, request_id)


class WorkerError(OrbitError):
    """Why a worker stopped (besides a :class:`~orbit_client.protocol.ProtocolError`)."""


class WorkerRefused(WorkerError):
    """The server refused the session (a bad hello, a credential without the scope, a revoked
    token); trying the same hello again cannot succeed."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"the server refused the session: {code}: {message}")
        self.code = code
        self.message = message


class WorkerConnectError(WorkerError):
    """The worker could not reach the server at all within its ``connect_timeout``."""
