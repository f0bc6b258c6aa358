"""Resource-side fencing (SPEC §6): the resource, not Orbit, has the last word on a write.

In ONE atomic operation a fence checks the namespace and key, rejects a token lower than the highest
it has seen, raises the highest, deduplicates by a stable operation id, and records the write. What
this can prove, and what not: a highest-token check rejects a write only once the resource has
already seen a larger token. If a paused holder writes before its successor ever reaches the
resource, the resource cannot tell; when that matters, the successor touches the resource (a write
with ``value=None``) before acting. The token grants no authority either: the resource still
authenticates the caller.

Keys with several holders (a key policy's ``limit`` N > 1): up to N attempts hold the key at once,
each with its own token and ``TaskContext.key_slot`` (0..N-1, never shared by two live holders).
One highest-token register per key would refuse every live holder below the newest; guard such a
key with a register per slot instead: ``FenceWrite(..., slot=ctx.key_slot)`` and
``fence.read_slot(namespace, key, slot)``. A slot's holders follow each other with strictly larger
tokens, so a slot's register refuses a stale holder of that slot once the slot's newer holder has
written (touch, read, write, per slot). Slot registers and the key's plain register are
independent: use one kind per key. Slots 0-999; the key, a separator and the slot's digits must
fit in 764 bytes. Operation ids are per register (per slot). See docs/protocol.md.

:class:`MySqlFence` calls the shipped procedures ``orbit_fence_write`` / ``orbit_fence_read``
(``orbit_fence_write_slot`` / ``orbit_fence_read_slot`` for a slot; ``generated-sql/fence/
install.sql``, installed in the RESOURCE's database); it needs the ``mysql`` extra (PyMySQL).
:class:`InMemoryFence` is the same rule in one process, for tests and examples.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol, Union


#: The largest slot a per-slot register takes.
SLOT_MAX = 999

#: The longest register key, in bytes (a slot's register key is the key, one separator byte and
#: the slot's decimal digits).
KEY_MAX_BYTES = 764


@dataclass(frozen=True)
class FenceWrite:
    namespace: str
    key: str
    #: The ``concurrency_token`` of the grant the writer holds.
    token: int
    #: Stable identity of the operation: a retry of the same operation is deduplicated.
    operation_id: str
    #: The value to record; ``None`` is a touch: raise the highest token, keep the stored value.
    value: Optional[str] = None
    #: The writer's ``key_slot``: writes that slot's register of the key (keys with several
    #: holders); ``None`` writes the key's one register.
    slot: Optional[int] = None


@dataclass(frozen=True)
class Accepted:
    """Written; the highest token is now the writer's."""


@dataclass(frozen=True)
class Duplicate:
    """This operation id was already written with this token: nothing written again."""


@dataclass(frozen=True)
class Stale:
    """Refused: the resource has seen ``highest``, larger than the writer's token (or the
    operation id was used with another token)."""

    highest: int


FenceDecision = Union[Accepted, Duplicate, Stale]


class FenceError(Exception):
    """The fence's storage failed."""


class FenceInvalid(FenceError):
    """The write breaks a bound (empty key or operation id, token 0, ...)."""


class Fence(Protocol):
    async def write(self, w: FenceWrite) -> FenceDecision: ...

    async def read(self, namespace: str, key: str) -> Optional[tuple[int, str]]: ...

    async def read_slot(self, namespace: str, key: str, slot: int) -> Optional[tuple[int, str]]: ...


def register_key(key: str, slot: Optional[int]) -> str:
    """The register a key (and slot) addresses, checked as the SQL procedures check it: the key
    itself, or for a slot the key, U+001F and the slot in decimal (``orbit_fence_write_slot``)."""
    if slot is not None and (
        not isinstance(slot, int) or isinstance(slot, bool) or not 0 <= slot <= SLOT_MAX
    ):
        raise FenceInvalid(f"slot must be 0-{SLOT_MAX}, not {slot!r}")
    register = key if slot is None else f"{key}\x1f{slot}"
    if not key or len(register.encode("utf-8")) > KEY_MAX_BYTES:
        raise FenceInvalid(
            f"key must be 1-{KEY_MAX_BYTES} bytes, with a slot's separator and digits"
        )
    return register


def decide(highest: int, previous_for_operation: Optional[int], token: int) -> FenceDecision:
    """The decision rule shared by every implementation (the MySQL procedure encodes the same)."""
    if previous_for_operation is not None:
        return Duplicate() if previous_for_operation == token else Stale(highest)
    if token < highest:
        return Stale(highest)
    return Accepted()


@dataclass
class _Register:
    highest: int = 0
    value: str = ""
    operations: dict[str, int] = field(default_factory=dict)


class InMemoryFence:
    """An in-memory fence for tests and examples (one process; a lock makes each write atomic)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._registers: dict[tuple[str, str], _Register] = {}
        self._log: list[tuple[str, str, int, str]] = []

    def accepted(self) -> list[tuple[str, str, int, str]]:
        """Every accepted write, in acceptance order: (namespace, key, token, operation id); for a
        write in a slot, the key is the slot's register key (key, U+001F, slot)."""
        with self._lock:
            return list(self._log)

    async def write(self, w: FenceWrite) -> FenceDecision:
        if w.token <= 0 or not w.key or not w.operation_id:
            raise FenceInvalid("key, operation_id and a non-zero token are required")
        key = register_key(w.key, w.slot)
        with self._lock:
            r = self._registers.setdefault((w.namespace, key), _Register())
            decision = decide(r.highest, r.operations.get(w.operation_id), w.token)
            if isinstance(decision, Accepted):
                r.highest = w.token
                if w.value is not None:
                    r.value = w.value
                r.operations[w.operation_id] = w.token
                self._log.append((w.namespace, key, w.token, w.operation_id))
            return decision

    async def read(self, namespace: str, key: str) -> Optional[tuple[int, str]]:
        with self._lock:
            r = self._registers.get((namespace, key))
            return None if r is None else (r.highest, r.value)

    async def read_slot(self, namespace: str, key: str, slot: int) -> Optional[tuple[int, str]]:
        return await self.read(namespace, register_key(key, slot))


def _text(v: Any) -> str:
    return v.decode("utf-8") if isinstance(v, (bytes, bytearray)) else str(v)


class MySqlFence:
    """The MySQL/MariaDB fence: one ``CALL orbit_fence_write`` per write, in the resource's own
    database where ``generated-sql/fence/install.sql`` is installed. ``connect`` holds the
    ``pymysql.connect`` arguments (host, port, user, password, database); each call runs on its own
    short connection in a thread, so a write never waits for another caller's connection. A
    deadlock or lock-wait timeout (1213, 1205) is retried up to 8 times, like the Rust fence."""

    def __init__(self, caller: str, **connect: Any) -> None:
        try:
            import pymysql  # noqa: F401
        except ImportError as e:  # pragma: no cover - depends on the install
            raise ImportError(
                "MySqlFence needs PyMySQL: pip install 'orbit-client[mysql]'"
            ) from e
        self.caller = caller
        self._connect = dict(connect)
        self._connect.setdefault("autocommit", True)
        self._connect.setdefault("charset", "utf8mb4")

    def _run(self, sql: str, args: tuple[Any, ...]) -> Optional[tuple[Any, ...]]:
        import pymysql

        attempt = 0
        while True:
            try:
                conn = pymysql.connect(**self._connect)
            except pymysql.MySQLError as e:
                raise FenceError(str(e)) from e
            try:
                with conn.cursor() as cur:
                    cur.execute(sql, args)
                    row = cur.fetchone()
                    while cur.nextset():
                        pass
                    return row
            except pymysql.MySQLError as e:
                number = e.args[0] if e.args else 0
                if number in (1213, 1205) and attempt < 8:
                    attempt += 1
                    continue
                text = str(e)
                if "INVALID_ARGUMENT" in text:
                    raise FenceInvalid(text) from e
                raise FenceError(text) from e
            finally:
                conn.close()

    async def write(self, w: FenceWrite) -> FenceDecision:
        key = w.key.encode("utf-8")
        if w.slot is None:
            sql, args = "CALL orbit_fence_write(%s, %s, %s, %s, %s, %s)", (w.namespace, key)
        else:
            sql = "CALL orbit_fence_write_slot(%s, %s, %s, %s, %s, %s, %s)"
            args = (w.namespace, key, w.slot)
        row = await asyncio.to_thread(
            self._run, sql, (*args, w.token, w.operation_id, self.caller, w.value)
        )
        if row is None:
            raise FenceError("the fence's write procedure returned no row")
        decision, highest = _text(row[0]), int(row[1])
        if decision == "accepted":
            return Accepted()
        if decision == "duplicate":
            return Duplicate()
        return Stale(highest)

    async def read(self, namespace: str, key: str) -> Optional[tuple[int, str]]:
        row = await asyncio.to_thread(
            self._run, "CALL orbit_fence_read(%s, %s)", (namespace, key.encode("utf-8"))
        )
        return _register(row)

    async def read_slot(self, namespace: str, key: str, slot: int) -> Optional[tuple[int, str]]:
        row = await asyncio.to_thread(
            self._run,
            "CALL orbit_fence_read_slot(%s, %s, %s)",
            (namespace, key.encode("utf-8"), slot),
        )
        return _register(row)


def _register(row: Optional[tuple[Any, ...]]) -> Optional[tuple[int, str]]:
    """A register's row (highest token, value), or ``None``."""
    if row is None:
        return None
    return int(row[0]), "" if row[1] is None else _text(row[1])
