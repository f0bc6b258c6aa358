"""The Python worker against a real `orbit serve` and MariaDB (and a fake server for the checks)."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from typing import Any

import pytest
from websockets.asyncio.server import serve

from conftest import Orbit, Proc
from orbit_client import (
    Accepted,
    BadSlot,
    BadToken,
    ChangedAssignment,
    Client,
    FenceWrite,
    KeyNotDeclared,
    MissingToken,
    MySqlFence,
    ProtocolError,
    SlotWithoutKey,
    Stale,
    TaskContext,
    TokenWithoutKey,
    Worker,
    attempt_token,
)

from conftest import mysql_args


def task(queue_id: str, key: str | None, n: int, **extra: Any) -> dict[str, Any]:
    t = {"queue_id": queue_id, "handler": "object.update", "handler_version": "v1",
         "payload_version": "v1", "payload": {"n": n}, **extra}
    if key:
        t["concurrency_key"] = key
    return t


async def wait_state(c: Client, task_id: int, state: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        t = await c.get(task_id)
        if t["state"] == state:
            return dict(t)
        assert time.monotonic() < deadline, f"task {task_id} is {t['state']}, not {state}"
        await asyncio.sleep(0.05)


def test_one_key_across_two_queues_runs_one_at_a_time_with_increasing_tokens(orbit: Orbit) -> None:
    async def main() -> None:
        async with Client(orbit.url, orbit.token) as c:
            second = (await c.create_queue("second"))["id"]
            queues = [orbit.queue_id, second]
            items = [(f"hot-{i}", task(queues[i % 2], "object/hot", i)) for i in range(40)]
            ids = [s.task["id"] for s in await c.submit_many(items)]
            active, seen = 0, []
            overlap = []

            async def handle(ctx: TaskContext) -> Any:
                nonlocal active
                active += 1
                if active > 1:
                    overlap.append(ctx.attempt_id)
                seen.append(ctx.concurrency_token)
                await asyncio.sleep(0.005)
                active -= 1
                return {"token": str(ctx.concurrency_token)}

            workers = []
            for w in range(2):
                worker = Worker(orbit.url, orbit.token, f"hot-{w}", queues=queues, capacity=4)
                worker.add_handler("object.update", "v1", handle)
                workers.append(worker)
            runs = [asyncio.ensure_future(w.run()) for w in workers]
            for i in ids:
                await wait_state(c, i, "SUCCEEDED")
            for w in workers:
                w.drain()
            reports = await asyncio.gather(*runs)
            assert all(r.drained for r in reports)
            assert sum(r.completed for r in reports) == 40
            assert overlap == [], "two handlers of one key ran at once"
            grants = []
            for i in ids:
                for a in await c.attempts(i):
                    grants.append((a["granted_at"], attempt_token(a)))
            tokens = [t for _, t in sorted(grants)]
            assert len(tokens) == 40
            assert all(a < b for a, b in zip(tokens, tokens[1:])), tokens
            assert sorted(seen) == tokens, "each handler saw its grant's token"

    asyncio.run(main())


def test_a_worker_killed_mid_task_is_resumed_by_its_next_process_with_the_same_token(
    orbit: Orbit, tmp_path
) -> None:
    journal = str(tmp_path / "worker.journal")
    args = [orbit.url, orbit.token, orbit.queue_id, "crashy"]

    async def submit() -> int:
        async with Client(orbit.url, orbit.token) as c:
            return (await c.submit("crash-1", task(orbit.queue_id, "object/crash", 1))).task["id"]

    task_id = asyncio.run(submit())
    first = Proc(*args, journal, "block")
    try:
        _, t, attempt_id, token = first.expect("started").split()
        assert int(t) == task_id
        first.kill9()
    finally:
        first.close()
    second = Proc(*args, journal, "finish")
    try:
        _, t, again, token_again = second.expect("started").split()
        assert (again, token_again) == (attempt_id, token), "the same attempt and token continue"

        async def check() -> None:
            async with Client(orbit.url, orbit.token) as c:
                done = await wait_state(c, task_id, "SUCCEEDED")
                assert done["output"] == {"token": token, "by": "crashy"}
                attempts = await c.attempts(task_id)
                assert [(a["id"], a["concurrency_token"]) for a in attempts] == [(int(attempt_id), token)]

        asyncio.run(check())
        second.signal(signal.SIGTERM)
        report = json.loads(second.expect("report").split(" ", 1)[1])
        assert report["drained"] and report["restored"] == 1 and report["completed"] == 1, report
        assert second.wait() == 0
    finally:
        second.close()


def test_sigterm_drains_the_worker_after_its_task_finishes(orbit: Orbit, tmp_path) -> None:
    async def submit() -> int:
        async with Client(orbit.url, orbit.token) as c:
            return (await c.submit("drain-1", task(orbit.queue_id, None, 1))).task["id"]

    task_id = asyncio.run(submit())
    p = Proc(orbit.url, orbit.token, orbit.queue_id, "drainer", str(tmp_path / "j"), "slow")
    try:
        p.expect("started")
        p.signal(signal.SIGTERM)
        report = json.loads(p.expect("report").split(" ", 1)[1])
        assert report["drained"] and report["completed"] == 1, report
        assert p.wait() == 0

        async def check() -> None:
            async with Client(orbit.url, orbit.token) as c:
                assert (await c.get(task_id))["state"] == "SUCCEEDED"

        asyncio.run(check())
    finally:
        p.close()


def test_a_server_restart_mid_task_resumes_the_same_attempt(orbit: Orbit) -> None:
    async def main() -> None:
        async with Client(orbit.url, orbit.token) as c:
            task_id = (await c.submit("restart-1", task(orbit.queue_id, "object/7", 1))).task["id"]
            started: asyncio.Queue[tuple[int, int | None]] = asyncio.Queue()
            release = asyncio.Event()
            worker = Worker(orbit.url, orbit.token, "resumer", queues=[orbit.queue_id])

            @worker.handler("object.update", "v1")
            async def handle(ctx: TaskContext) -> Any:
                await started.put((ctx.attempt_id, ctx.concurrency_token))
                await release.wait()
                return {"done": True}

            run = asyncio.ensure_future(worker.run())
            attempt_id, token = await asyncio.wait_for(started.get(), 20)
            await asyncio.to_thread(orbit.restart)
            release.set()
            await wait_state(c, task_id, "SUCCEEDED")
            attempts = await c.attempts(task_id)
            assert [(a["id"], attempt_token(a)) for a in attempts] == [(attempt_id, token)]
            worker.drain()
            report = await asyncio.wait_for(run, 30)
            assert report.connections >= 2 and report.completed == 1, report

    asyncio.run(main())


def test_a_payload_near_the_limit_and_a_large_earlier_error_reach_the_handler(orbit: Orbit) -> None:
    """The second attempt's task.assign carries the ~1 MiB payload and the ~0.9 MiB error of the
    first: a frame near 2 MiB, over the 1 MiB default of WebSocket libraries."""

    async def main() -> None:
        async with Client(orbit.url, orbit.token) as c:
            blob = "p" * (1024 * 1024 - 4096)
            t = task(orbit.queue_id, None, 1, retry_base_ms=1, retry_max_ms=1, max_attempts=2)
            t["payload"] = {"blob": blob}
            task_id = (await c.submit("big-1", t)).task["id"]
            seen: list[tuple[int, int, int]] = []
            worker = Worker(orbit.url, orbit.token, "big", queues=[orbit.queue_id])

            @worker.handler("object.update", "v1")
            async def handle(ctx: TaskContext) -> Any:
                err = ctx.task.get("error") or {}
                seen.append((ctx.attempt_no, len(ctx.payload["blob"]), len(err.get("pad", ""))))
                if ctx.attempt_no == 1:
                    from orbit_client import RetryableError
                    raise RetryableError({"pad": "e" * (900 * 1024)})
                return {"size": len(ctx.payload["blob"])}

            run = asyncio.ensure_future(worker.run())
            done = await wait_state(c, task_id, "SUCCEEDED")
            assert done["output"] == {"size": len(blob)}
            assert seen == [(1, len(blob), 0), (2, len(blob), 900 * 1024)], [s[:2] for s in seen]
            worker.drain()
            assert (await asyncio.wait_for(run, 30)).drained

    asyncio.run(main())


# ---- a fake server ---------------------------------------------------------------------------


def fake_assign(key: str | None, token: Any, attempt_id: int = 7, payload: Any = None) -> dict[str, Any]:
    t: dict[str, Any] = {"id": 1, "queue_id": "q", "state": "LEASED", "handler": "object.update",
                         "handler_version": "v1", "payload_version": "v1", "payload": payload or {},
                         "priority": 5, "max_attempts": 3, "attempt_count": 1}
    if key is not None:
        t["concurrency_key"] = key
    f: dict[str, Any] = {"type": "task.assign", "attempt_id": attempt_id, "attempt_no": 1,
                         "lease_expires_at": "2026-01-01T00:00:00Z", "task": t, "started": True}
    if token is not None:
        f["concurrency_token"] = token
    return f


async def against_fake_server(frames: list[dict[str, Any]], keys: bool = True) -> tuple[Any, list[Any], list[dict[str, Any]]]:
    """Runs a worker against a server that welcomes it and sends ``frames``; returns what
    ``run()`` raised (or returned), the contexts its handler saw and the frames it sent."""
    seen: list[Any] = []
    received: list[dict[str, Any]] = []

    async def session(ws: Any) -> None:
        received.append(json.loads(await ws.recv()))
        await ws.send(json.dumps({"type": "welcome", "session_id": 1, "lease_seconds": 3,
                                  "renew_interval_seconds": 1, "resumed": []}))
        for f in frames:
            await ws.send(json.dumps(f))
        async for m in ws:
            frame = json.loads(m)
            received.append(frame)
            if frame["type"] == "task.result":
                await ws.send(json.dumps({"type": "task.result.ack", "attempt_id": frame["attempt_id"],
                                          "task_state": "SUCCEEDED"}))
            if frame["type"] == "drain":
                await ws.send(json.dumps({"type": "drained"}))

    async with serve(session, "127.0.0.1", 0, max_size=None) as server:
        port = list(server.sockets)[0].getsockname()[1]
        worker = Worker(f"http://127.0.0.1:{port}", "t", "fake", queues=["q"], concurrency_keys=keys)

        @worker.handler("object.update", "v1")
        async def handle(ctx: TaskContext) -> Any:
            seen.append(ctx)
            worker.drain()
            return {"len": len(json.dumps(ctx.payload))}

        try:
            outcome: Any = await asyncio.wait_for(worker.run(), 20)
        except ProtocolError as e:
            outcome = e
    return outcome, seen, received


@pytest.mark.parametrize(
    "frames,keys,error",
    [
        ([fake_assign("k", None)], True, MissingToken),
        ([fake_assign(None, "5")], True, TokenWithoutKey),
        ([fake_assign("k", "1")], False, KeyNotDeclared),
        ([fake_assign("k", "0")], True, BadToken),
        ([fake_assign("k", 5)], True, BadToken),
        ([fake_assign("k", "18446744073709551616")], True, BadToken),
        ([fake_assign(None, None) | {"key_slot": 0}], True, SlotWithoutKey),
        ([fake_assign("k", "5") | {"key_slot": "1"}], True, BadSlot),
        ([fake_assign("k", "3", attempt_id=9) | {"started": False}, fake_assign("k", "4", attempt_id=9)], True, ChangedAssignment),
    ],
)
def test_the_worker_refuses_each_protocol_error_before_any_handler_runs(frames, keys, error) -> None:
    outcome, seen, _ = asyncio.run(against_fake_server(frames, keys))
    assert isinstance(outcome, error), outcome
    assert seen == [], "no handler saw the assignment"


def test_a_4_mb_assignment_frame_reaches_the_handler() -> None:
    payload = {"blob": "x" * (4 * 1024 * 1024)}
    outcome, seen, received = asyncio.run(
        against_fake_server([fake_assign("k", "18446744073709551615", payload=payload)])
    )
    assert outcome.drained, outcome
    assert [ctx.concurrency_token for ctx in seen] == [2**64 - 1]
    results = [f for f in received if f["type"] == "task.result"]
    assert results[0]["output"] == {"len": len(json.dumps(payload))}
    hello = received[0]
    assert (hello["type"], hello["concurrency_keys"], hello["handlers"]) == ("hello", True, ["object.update"])


def test_the_handler_sees_the_key_slot_and_the_journal_keeps_it(tmp_path) -> None:
    """``ctx.key_slot`` is the assignment's slot (0 when a server that predates slots omits it),
    and the journal restores it (0 for an entry written before slots)."""
    from orbit_client.worker import _Journal

    outcome, seen, _ = asyncio.run(against_fake_server([fake_assign("k", "7") | {"key_slot": 2}]))
    assert outcome.drained, outcome
    assert [(ctx.concurrency_token, ctx.key_slot) for ctx in seen] == [(7, 2)]
    outcome, seen, _ = asyncio.run(against_fake_server([fake_assign("k", "7")]))
    assert [ctx.key_slot for ctx in seen] == [0]
    outcome, seen, _ = asyncio.run(against_fake_server([fake_assign(None, None)]))
    assert [ctx.key_slot for ctx in seen] == [None]

    journal = _Journal(str(tmp_path / "journal.json"), "w")
    from orbit_client.protocol import AssignmentCheck

    a = AssignmentCheck(True).check(fake_assign("k", "7", attempt_id=5) | {"key_slot": 2})
    assert a is not None
    journal.add(a)
    again = _Journal(journal.path, "w")
    again.load()
    assert _Journal.assignment(5, again.attempts[5]) == a
    older = dict(again.attempts[5])
    del older["key_slot"]
    assert _Journal.assignment(5, older).key_slot == 0


# ---- lost leases and the fence ---------------------------------------------------------------


def test_a_lost_lease_cancels_the_handler_and_its_late_write_is_fenced_off(
    orbit_short_lease: Orbit, resource_db: str
) -> None:
    """Task 1's lease runs out mid-handler (moved past expiry in the database); the renewal is
    rejected, the handler is cancelled and the slot of this capacity-1 worker takes task 2 of the
    same key with a larger token, which writes through the MySQL fence. Task 1's handler ignores
    the cancellation and writes late with its old token: the fence refuses it."""
    orbit = orbit_short_lease
    fence = MySqlFence("py-test", **mysql_args(resource_db))

    async def main() -> None:
        async with Client(orbit.url, orbit.token) as c:
            first = (await c.submit("lost-1", task(orbit.queue_id, "object/9", 1))).task["id"]
            second = (await c.submit("lost-2", task(orbit.queue_id, "object/9", 2))).task["id"]
            started: asyncio.Queue[tuple[int, int, int | None]] = asyncio.Queue()
            successor_wrote = asyncio.Event()
            late: asyncio.Queue[Any] = asyncio.Queue()
            worker = Worker(orbit.url, orbit.token, "loses-a-lease", queues=[orbit.queue_id], capacity=1)

            @worker.handler("object.update", "v1")
            async def handle(ctx: TaskContext) -> Any:
                await started.put((ctx.task["id"], ctx.attempt_id, ctx.concurrency_token))
                n = ctx.payload["n"]
                assert ctx.concurrency_token is not None
                if n == 1:
                    try:
                        await asyncio.Event().wait()
                    except asyncio.CancelledError:
                        pass  # a handler that ignores its cancellation: the fence still protects
                    await late.put(ctx.cancel_reason)
                    await successor_wrote.wait()
                    await late.put(await fence.write(FenceWrite(
                        "py", "object/9", ctx.concurrency_token, "op-1", "late write")))
                    return {"late": True}
                d = await fence.write(FenceWrite("py", "object/9", ctx.concurrency_token, "op-2", "by task 2"))
                assert d == Accepted()
                successor_wrote.set()
                return {"n": n}

            run = asyncio.ensure_future(worker.run())
            task_id, attempt_id, token1 = await asyncio.wait_for(started.get(), 20)
            assert task_id == first
            await asyncio.to_thread(orbit.expire_lease, attempt_id)
            reason = await asyncio.wait_for(late.get(), 5)
            assert "lease renewal rejected" in reason
            task_id, _, token2 = await asyncio.wait_for(started.get(), 20)
            assert task_id == second and token2 > token1
            decision = await asyncio.wait_for(late.get(), 20)
            assert decision == Stale(highest=token2)
            assert await fence.read("py", "object/9") == (token2, "by task 2")
            await wait_state(c, second, "SUCCEEDED")
            assert (await c.get(first))["state"] != "SUCCEEDED"
            worker.drain()
            report = await asyncio.wait_for(run, 30)
            assert (report.lost, report.completed) == (1, 1), report

    asyncio.run(main())


def test_a_cancel_running_policy_cancels_the_handler_at_once_and_fences_its_late_write(
    orbit: Orbit, resource_db: str
) -> None:
    """Under a ``cancel_running`` key policy, a new submit ends the key's running attempt at once:
    the worker gets ``task.cancel`` (long before a renewal: the lease is 30 s), the handler's
    cancellation fires, the new task runs with a larger token and writes through the fence, and
    the old handler's late write with its old token is refused."""
    fence = MySqlFence("py-test", **mysql_args(resource_db))
    namespace = json.loads(orbit.credentials_file.read_text())["namespace_id"]

    async def main() -> None:
        async with Client(orbit.url, orbit.token) as c:
            await c.set_key_policy(namespace, "exact", "acct/3", "cancel_running")
            started: asyncio.Queue[tuple[int, int | None]] = asyncio.Queue()
            successor_wrote = asyncio.Event()
            late: asyncio.Queue[Any] = asyncio.Queue()
            worker = Worker(orbit.url, orbit.token, "cancellable", queues=[orbit.queue_id], capacity=2)

            @worker.handler("object.update", "v1")
            async def handle(ctx: TaskContext) -> Any:
                await started.put((ctx.task["id"], ctx.concurrency_token))
                assert ctx.concurrency_token is not None
                if ctx.payload["n"] == 1:
                    try:
                        await asyncio.Event().wait()
                    except asyncio.CancelledError:
                        pass  # ignores the cancellation: the fence still protects
                    await late.put(ctx.cancel_reason)
                    await successor_wrote.wait()
                    await late.put(await fence.write(FenceWrite(
                        "py", "acct/3", ctx.concurrency_token, "old-late", "late write")))
                    return {"late": True}
                d = await fence.write(FenceWrite("py", "acct/3", ctx.concurrency_token, "new", "by task 2"))
                assert d == Accepted()
                successor_wrote.set()
                return {"n": 2}

            run = asyncio.ensure_future(worker.run())
            first = (await c.submit("acct-1", task(orbit.queue_id, "acct/3", 1))).task["id"]
            task_id, token1 = await asyncio.wait_for(started.get(), 20)
            assert task_id == first
            await wait_state(c, first, "RUNNING")
            second = (await c.submit("acct-2", task(orbit.queue_id, "acct/3", 2))).task["id"]
            reason = await asyncio.wait_for(late.get(), 5)
            assert "cancelled by the server" in reason
            task_id, token2 = await asyncio.wait_for(started.get(), 20)
            assert task_id == second and token2 > token1
            assert await asyncio.wait_for(late.get(), 20) == Stale(highest=token2)
            assert await fence.read("py", "acct/3") == (token2, "by task 2")
            await wait_state(c, second, "SUCCEEDED")
            assert (await c.get(first))["state"] == "CANCELLED"
            worker.drain()
            report = await asyncio.wait_for(run, 30)
            assert (report.lost, report.completed) == (1, 1), report

    asyncio.run(main())


def test_a_key_of_limit_two_runs_two_holders_in_their_own_slots(orbit: Orbit, resource_db: str) -> None:
    """A key policy of ``limit=2``: two handlers hold the key at once, in slots 0 and 1 with
    different tokens, and each writes its own slot's fenced register; a third task waits for a
    slot and gets a freed one with a larger token."""
    fence = MySqlFence("py-test", **mysql_args(resource_db))
    namespace = json.loads(orbit.credentials_file.read_text())["namespace_id"]

    async def main() -> None:
        async with Client(orbit.url, orbit.token) as c:
            policy = await c.set_key_policy(namespace, "exact", "pair/1", limit=2, rate=(100, 1))
            assert (policy["limit"], policy["rate"]) == (2, {"grants": 100, "per_seconds": 1})
            running: asyncio.Queue[tuple[int, int | None, int | None]] = asyncio.Queue()
            release = asyncio.Event()
            worker = Worker(orbit.url, orbit.token, "pair", queues=[orbit.queue_id], capacity=3)

            @worker.handler("object.update", "v1")
            async def handle(ctx: TaskContext) -> Any:
                assert ctx.concurrency_token is not None and ctx.key_slot is not None
                d = await fence.write(FenceWrite(
                    "py", "pair/1", ctx.concurrency_token, f"w{ctx.task['id']}", f"by {ctx.task['id']}",
                    slot=ctx.key_slot))
                assert d == Accepted()
                await running.put((ctx.task["id"], ctx.concurrency_token, ctx.key_slot))
                if ctx.payload["n"] < 3:
                    await release.wait()
                return {"n": ctx.payload["n"]}

            run = asyncio.ensure_future(worker.run())
            ids = [(await c.submit(f"pair-{n}", task(orbit.queue_id, "pair/1", n))).task["id"] for n in (1, 2, 3)]
            first = [await asyncio.wait_for(running.get(), 20) for _ in range(2)]
            assert sorted(slot for _, _, slot in first) == [0, 1]
            assert {task_id for task_id, _, _ in first} == set(ids[:2])
            # The third waits: both slots are held.
            await asyncio.sleep(0.5)
            assert running.empty()
            release.set()
            task_id, token3, slot3 = await asyncio.wait_for(running.get(), 20)
            assert task_id == ids[2] and token3 > max(t for _, t, _ in first)
            assert await fence.read_slot("py", "pair/1", slot3) == (token3, f"by {ids[2]}")
            for i in ids:
                await wait_state(c, i, "SUCCEEDED")
            worker.drain()
            report = await asyncio.wait_for(run, 30)
            assert report.completed == 3, report

    asyncio.run(main())
