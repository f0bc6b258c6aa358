"""The keyed-concurrency scenario (SPEC §7) in Python; prints the same two lines as
examples/keyed-concurrency.rs.

Two fresh queues get one task each with the same fresh concurrency_key; two workers (capacity 4)
run them. The handler writes through a fenced in-memory resource with its concurrency_token; the
attempts API shows the tokens increasing; a replay of the older write is refused by the fence;
both workers drain. Within 20 s, or it exits 1 after stopping the workers.

    ORBIT_URL=http://127.0.0.1:8080 ORBIT_CREDENTIALS_FILE=.orbit/dev/credentials.json \\
      python clients/python/examples/keyed_concurrency.py

The credential needs queues:manage, tasks:submit, tasks:read, workers:connect and workers:consume
(`orbit admin bootstrap --worker-access`; `orbit dev` writes such a file).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
from typing import Any

from orbit_client import (
    Accepted,
    Client,
    Duplicate,
    FenceWrite,
    InMemoryFence,
    PermanentError,
    RetryableError,
    Stale,
    TaskContext,
    Worker,
    attempt_token,
)

NAMESPACE = "keyed-example"


async def run(url: str, token: str, workers: list[Worker], runs: list["asyncio.Future[Any]"]) -> str:
    fence = InMemoryFence()
    run_id = secrets.token_hex(8)
    key = f"example/{run_id}"
    async with Client(url, token) as client:
        queues = [(await client.create_queue(f"keyed-{run_id}-{i}"))["id"] for i in range(2)]
        task_ids = []
        for i, q in enumerate(queues):
            submitted = await client.submit(f"{run_id}-op-{i}", {
                "queue_id": q, "handler": "object.update", "handler_version": "v1",
                "payload_version": "v1", "concurrency_key": key,
                "payload": {"operation_ref": f"update-{i}", "object_ref": key},
            })
            task_ids.append(submitted.task["id"])

        async def handle(ctx: TaskContext) -> Any:
            if ctx.concurrency_token is None:
                raise PermanentError("a keyed task without a token")
            write = FenceWrite(NAMESPACE, ctx.concurrency_key or "", ctx.concurrency_token,
                               ctx.payload["operation_ref"], f"written by attempt {ctx.attempt_id}")
            try:
                decision = await fence.write(write)
            except Exception as e:  # noqa: BLE001
                raise RetryableError(str(e)) from e
            if isinstance(decision, (Accepted, Duplicate)):
                return {"token": str(ctx.concurrency_token)}
            raise PermanentError({"stale": str(decision.highest)})

        for w in range(2):
            worker = Worker(url, token, f"keyed-example-{run_id}-{w}", queues=queues, capacity=4)
            worker.add_handler("object.update", "v1", handle)
            workers.append(worker)
            runs.append(asyncio.ensure_future(worker.run()))

        completed = 0
        while completed < 2:
            completed = 0
            for task_id in task_ids:
                state = (await client.get(task_id))["state"]
                if state == "SUCCEEDED":
                    completed += 1
                elif state in ("FAILED", "CANCELLED", "EXPIRED", "NEEDS_REVIEW"):
                    raise RuntimeError(f"task {task_id} ended {state}")
            if completed < 2:
                await asyncio.sleep(0.025)

        # Tokens from the attempts API (history only), in grant order.
        grants = []
        for task_id in task_ids:
            for a in await client.attempts(task_id):
                t = attempt_token(a)
                if t is None:
                    raise RuntimeError("an attempt of a keyed task without a token")
                grants.append((a.get("granted_at", ""), t))
        tokens = [t for _, t in sorted(grants)]
        tokens_increasing = len(tokens) >= 2 and all(a < b for a, b in zip(tokens, tokens[1:]))

        # Replay the older holder's write: the resource has seen a larger token and refuses it.
        stale = await fence.write(FenceWrite(NAMESPACE, key, tokens[0],
                                             f"{run_id}-replayed-stale-write", "stale"))
        stale_write_rejected = isinstance(stale, Stale)
        resource_writes = len(fence.accepted())

        for w in workers:
            w.drain()
        reports = await asyncio.gather(*runs, return_exceptions=True)
        worker_drained = all(not isinstance(r, BaseException) and r.drained for r in reports)
    return (
        f"queues={len(queues)} completed={completed} tokens_increasing={str(tokens_increasing).lower()}\n"
        f"resource_writes={resource_writes} stale_write_rejected={str(stale_write_rejected).lower()} "
        f"worker_drained={str(worker_drained).lower()}"
    )


async def main() -> int:
    url = os.environ.get("ORBIT_URL")
    path = os.environ.get("ORBIT_CREDENTIALS_FILE")
    if not url or not path:
        print("keyed_concurrency: set ORBIT_URL (e.g. http://127.0.0.1:8080) and "
              "ORBIT_CREDENTIALS_FILE", file=sys.stderr)
        return 2
    try:
        with open(path, encoding="utf-8") as f:
            token = json.load(f)["token"]
    except (OSError, ValueError, KeyError) as e:
        print(f"keyed_concurrency: cannot read {path}: {e}", file=sys.stderr)
        return 2
    workers: list[Worker] = []
    runs: list[asyncio.Future[Any]] = []
    try:
        lines = await asyncio.wait_for(run(url, token, workers, runs), 20)
    except asyncio.TimeoutError:
        print("keyed_concurrency: did not finish within 20 s", file=sys.stderr)
        lines = None
    except Exception as e:  # noqa: BLE001
        print(f"keyed_concurrency: {e}", file=sys.stderr)
        lines = None
    if lines is None:
        for r in runs:  # bounded cleanup: stop the workers without waiting for a drain
            r.cancel()
        return 1
    print(lines)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
