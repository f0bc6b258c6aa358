"""The hot key in Python: `orbit bench hotkey`'s scenario with Python workers, for BENCHMARKS.md.

N tasks on one key across two fresh queues (all accepted before the workers start), two workers of
capacity 4; throughput = N / (last handler end - first handler start); hand-off = a handler
starting after the previous holder's handler ended (result, ack, grant, assign[, start]).

    ORBIT_URL=http://127.0.0.1:8080 ORBIT_CREDENTIALS_FILE=creds.json \\
      python clients/python/bench/hotkey.py --tasks 1000 --start-on-assign
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import sys
import time

from orbit_client import Client, TaskContext, Worker


async def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--tasks", type=int, default=1000)
    p.add_argument("--start-on-assign", action="store_true")
    opts = p.parse_args()
    url = os.environ["ORBIT_URL"]
    with open(os.environ["ORBIT_CREDENTIALS_FILE"], encoding="utf-8") as f:
        token = json.load(f)["token"]
    run_id = secrets.token_hex(6)
    async with Client(url, token) as c:
        queues = [(await c.create_queue(f"hot-py-{run_id}-{i}"))["id"] for i in range(2)]
        items = [(f"hot-{run_id}-{n}", {"queue_id": queues[n % 2], "handler": "bench.noop",
                                         "handler_version": "v1", "payload_version": "v1",
                                         "payload": {"n": n}, "concurrency_key": f"hot-{run_id}"})
                 for n in range(opts.tasks)]
        for i in range(0, len(items), 1000):
            await c.submit_many(items[i:i + 1000])
    spans: list[tuple[int, float, float]] = []
    done = asyncio.Event()

    async def noop(ctx: TaskContext) -> None:
        entered = time.perf_counter()
        spans.append((ctx.concurrency_token or 0, entered, time.perf_counter()))
        if len(spans) >= opts.tasks:
            done.set()
        return None

    workers = []
    for i in range(2):
        w = Worker(url, token, f"hot-py-{run_id}-{i}", queues=queues, capacity=4,
                   start_on_assign=opts.start_on_assign)
        w.add_handler("bench.noop", "v1", noop)
        workers.append(w)
    runs = [asyncio.ensure_future(w.run()) for w in workers]
    await done.wait()
    for w in workers:
        w.drain()
    await asyncio.gather(*runs)
    spans.sort()
    handoffs = sorted((b[1] - a[2]) * 1000 for a, b in zip(spans, spans[1:]))
    seconds = spans[-1][2] - spans[0][1]

    def pct(q: float) -> float:
        return round(handoffs[min(len(handoffs) - 1, int(q * len(handoffs)))], 2)

    print(json.dumps({"scenario": "hotkey-python", "tasks": opts.tasks,
                      "start_on_assign": opts.start_on_assign,
                      "tasks_per_s": round(opts.tasks / seconds, 1),
                      "handoff_p50_ms": pct(0.50), "handoff_p99_ms": pct(0.99)}))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
