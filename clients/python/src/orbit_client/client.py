"""The HTTP API client (``/v1/tasks``, ``/v1/queues``, attempts), asyncio, on httpx."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence, TypedDict, cast

import httpx

from .errors import ApiError, Internal, Unavailable, api_error


class Task(TypedDict, total=False):
    """A task as ``GET /v1/tasks/{id}`` returns it (fields beyond these are kept as they come)."""

    id: int
    queue_id: str
    state: str
    handler: str
    handler_version: str
    payload_version: str
    payload: Any
    business_key: Optional[str]
    concurrency_key: Optional[str]
    priority: int
    max_attempts: int
    attempt_count: int
    output: Any
    error: Any
    run_at: str
    created_at: str
    updated_at: str


class Attempt(TypedDict, total=False):
    """An attempt (history only: it grants nothing). ``concurrency_token`` is a decimal string."""

    id: int
    task_id: int
    attempt_no: int
    state: str
    concurrency_token: Optional[str]
    granted_at: str


class Queue(TypedDict, total=False):
    id: str
    name: str
    paused: bool


@dataclass(frozen=True)
class Submitted:
    """What a submit returned; ``created`` is ``False`` for a replay of an Idempotency-Key."""

    created: bool
    task: Task


def attempt_token(a: Attempt) -> Optional[int]:
    """An attempt's token as a number (``None`` for a task without a key)."""
    t = a.get("concurrency_token")
    return int(t) if t else None


class Client:
    """The HTTP API. Every error answer raises the :mod:`orbit_client.errors` exception of its
    envelope's code; a server that cannot be reached raises :class:`~orbit_client.errors.Unavailable`
    with status 0. Use ``async with Client(...)`` or call :meth:`aclose`."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 30.0,
        http: Optional[httpx.AsyncClient] = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self._http = http or httpx.AsyncClient(timeout=timeout)

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Optional[Mapping[str, Any]] = None,
        headers: Optional[Mapping[str, str]] = None,
    ) -> tuple[int, Any]:
        h = {"Authorization": f"Bearer {self.token}"}
        if headers:
            h.update(headers)
        try:
            resp = await self._http.request(
                method, f"{self.base_url}{path}", json=json, params=params, headers=h
            )
        except httpx.HTTPError as e:
            raise Unavailable(0, "UNAVAILABLE", f"{type(e).__name__}: {e}") from e
        try:
            body = resp.json()
        except ValueError:
            body = None
        if resp.status_code >= 400:
            err = body.get("error") if isinstance(body, dict) else None
            if not isinstance(err, dict):
                raise api_error(resp.status_code, "INTERNAL", resp.text[:500])
            details = err.get("details")
            raise api_error(
                resp.status_code,
                str(err.get("code", "INTERNAL")),
                str(err.get("message", "")),
                details if isinstance(details, dict) else None,
                body.get("request_id") if isinstance(body, dict) else None,
            )
        if not isinstance(body, dict) or "data" not in body:
            raise Internal(resp.status_code, "INTERNAL", f"unexpected answer: {resp.text[:500]}")
        return resp.status_code, body

    async def submit(self, idempotency_key: str, task: Mapping[str, Any]) -> Submitted:
        """``POST /v1/tasks`` (``task`` holds the submit fields: queue_id, handler, ...)."""
        status, body = await self._call(
            "POST", "/v1/tasks", json=dict(task), headers={"Idempotency-Key": idempotency_key}
        )
        return Submitted(created=status == 201, task=cast(Task, body["data"]))

    async def submit_many(
        self, items: Sequence[tuple[str, Mapping[str, Any]]]
    ) -> list[Submitted]:
        """``POST /v1/tasks/batch``: up to 1000 ``(idempotency_key, task)`` pairs, all or nothing."""
        tasks = [{"idempotency_key": key, **task} for key, task in items]
        _, body = await self._call("POST", "/v1/tasks/batch", json={"tasks": tasks})
        return [
            Submitted(created=not s["replayed"], task=cast(Task, s["task"])) for s in body["data"]
        ]

    async def get(self, task_id: int) -> Task:
        """``GET /v1/tasks/{id}``."""
        _, body = await self._call("GET", f"/v1/tasks/{task_id}")
        return cast(Task, body["data"])

    async def list_tasks(self, **query: Any) -> tuple[list[Task], Optional[str]]:
        """One page of ``GET /v1/tasks`` (``queue_id=``, ``state=``, ``cursor=``, ``limit=`` ...);
        returns the tasks and the next cursor."""
        _, body = await self._call(
            "GET", "/v1/tasks", params={k: v for k, v in query.items() if v is not None}
        )
        return cast("list[Task]", body["data"]), body.get("next_cursor")

    async def cancel(self, task_id: int) -> Task:
        """``POST /v1/tasks/{id}/cancel`` (only before the task started)."""
        _, body = await self._call("POST", f"/v1/tasks/{task_id}/cancel", json={})
        return cast(Task, body["data"])

    async def attempts(self, task_id: int) -> list[Attempt]:
        """``GET /v1/tasks/{id}/attempts``: every attempt with its token."""
        _, body = await self._call("GET", f"/v1/tasks/{task_id}/attempts")
        return cast("list[Attempt]", body["data"])

    async def attempt(self, attempt_id: int) -> Attempt:
        _, body = await self._call("GET", f"/v1/attempts/{attempt_id}")
        return cast(Attempt, body["data"])

    async def create_queue(self, name: str) -> Queue:
        _, body = await self._call("POST", "/v1/queues", json={"name": name})
        return cast(Queue, body["data"])

    async def queues(self) -> list[Queue]:
        _, body = await self._call("GET", "/v1/queues")
        return cast("list[Queue]", body["data"])

    async def set_key_policy(
        self,
        namespace: int,
        match: str,
        key: str,
        on_busy: str = "queue",
        *,
        limit: int = 1,
        rate: tuple[int, int] | None = None,
    ) -> dict[str, Any]:
        """``POST /v1/key-policies`` for a key (``match="exact"``) or every key with a prefix
        (``"prefix"``): ``on_busy`` is what a submit does when the key is busy (``queue``,
        ``reject``, ``replace_waiting`` or ``cancel_running``), ``limit`` how many attempts may
        hold it at once (1-1000), ``rate`` at most ``(grants, per_seconds)`` grants of it in any
        window of that many seconds (``None``: no rate)."""
        body: dict[str, Any] = {
            "namespace": namespace, "match": match, "key": key, "on_busy": on_busy, "limit": limit,
        }
        if rate is not None:
            body["rate"] = {"grants": rate[0], "per_seconds": rate[1]}
        _, answer = await self._call("POST", "/v1/key-policies", json=body)
        return cast("dict[str, Any]", answer["data"])


__all__ = ["Client", "Task", "Attempt", "Queue", "Submitted", "attempt_token", "ApiError"]
