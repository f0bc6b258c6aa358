"""The HTTP client against a real server: every call, and the envelope as typed exceptions."""

import asyncio

import pytest

from orbit_client import (
    Client,
    IdempotencyConflict,
    InvalidArgument,
    NotFound,
    PayloadTooLarge,
    Unauthenticated,
    Unavailable,
    attempt_token,
)


def task(queue_id, **extra):
    return {"queue_id": queue_id, "handler": "object.update", "handler_version": "v1",
            "payload_version": "v1", "payload": {"n": 1}, **extra}


def test_submit_batch_get_list_cancel_and_attempts(orbit):
    async def main():
        async with Client(orbit.url, orbit.token) as c:
            first = await c.submit("op-1", task(orbit.queue_id, concurrency_key="object/1"))
            assert first.created and first.task["state"] == "WAITING"
            again = await c.submit("op-1", task(orbit.queue_id, concurrency_key="object/1"))
            assert not again.created and again.task["id"] == first.task["id"]
            batch = await c.submit_many(
                [("b-1", task(orbit.queue_id)), ("op-1", task(orbit.queue_id, concurrency_key="object/1"))]
            )
            assert [s.created for s in batch] == [True, False]
            assert batch[1].task["id"] == first.task["id"]
            got = await c.get(first.task["id"])
            assert got["concurrency_key"] == "object/1"
            tasks, _ = await c.list_tasks(queue_id=orbit.queue_id)
            assert {t["id"] for t in tasks} == {first.task["id"], batch[0].task["id"]}
            cancelled = await c.cancel(batch[0].task["id"])
            assert cancelled["state"] == "CANCELLED"
            assert await c.attempts(first.task["id"]) == []
            queue = await c.create_queue("second")
            assert queue["name"] == "second"
            assert {q["id"] for q in await c.queues()} >= {orbit.queue_id, queue["id"]}

    asyncio.run(main())


def test_the_error_envelope_becomes_typed_exceptions(orbit):
    async def main():
        async with Client(orbit.url, orbit.token) as c:
            with pytest.raises(InvalidArgument) as e:
                await c.submit("bad-1", task(orbit.queue_id, handler=""))
            assert (e.value.status, e.value.code, e.value.field) == (400, "INVALID_ARGUMENT", "handler")
            assert e.value.request_id
            with pytest.raises(InvalidArgument) as e:
                await c.submit_many([("ok", task(orbit.queue_id)), ("bad", task(orbit.queue_id, handler=""))])
            assert e.value.field == "tasks[1].handler"
            with pytest.raises(NotFound) as e:
                await c.get(999999)
            assert e.value.status == 404
            await c.submit("conflict", task(orbit.queue_id))
            with pytest.raises(IdempotencyConflict) as e:
                await c.submit("conflict", task(orbit.queue_id, payload={"other": True}))
            assert e.value.status == 409
            # 4 MB: over the 1 MiB request body limit, refused with 413 and the envelope.
            with pytest.raises(PayloadTooLarge) as e:
                await c.submit("huge", task(orbit.queue_id, payload={"blob": "x" * (4 * 1024 * 1024)}))
            assert (e.value.status, e.value.code) == (413, "INVALID_ARGUMENT")
            assert isinstance(e.value, InvalidArgument)
        async with Client(orbit.url, "not-a-token") as c:
            with pytest.raises(Unauthenticated) as e:
                await c.get(1)
            assert e.value.status == 401
        async with Client("http://127.0.0.1:1", "x", timeout=2) as c:
            with pytest.raises(Unavailable) as e:
                await c.get(1)
            assert e.value.status == 0

    asyncio.run(main())


def test_attempt_token_reads_the_decimal_string():
    assert attempt_token({"concurrency_token": "18446744073709551615"}) == 2**64 - 1
    assert attempt_token({"concurrency_token": None}) is None
