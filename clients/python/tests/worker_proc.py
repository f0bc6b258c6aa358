"""A worker process for the tests: prints `started TASK ATTEMPT TOKEN` when a handler starts and
`report {json}` when the worker stops; drains on SIGTERM.

usage: worker_proc.py URL TOKEN QUEUE WORKER_ID JOURNAL MODE   (MODE: block | finish | slow)
"""

import asyncio
import json
import signal
import sys
from dataclasses import asdict

from orbit_client import TaskContext, Worker


async def main() -> int:
    url, token, queue, worker_id, journal, mode = sys.argv[1:7]
    worker = Worker(url, token, worker_id, queues=[queue], capacity=1, journal=journal)

    @worker.handler("object.update", "v1")
    async def handle(ctx: TaskContext) -> object:
        print(f"started {ctx.task['id']} {ctx.attempt_id} {ctx.concurrency_token}", flush=True)
        if mode == "block":
            await asyncio.Event().wait()
        if mode == "slow":
            await asyncio.sleep(1.5)
        return {"token": str(ctx.concurrency_token), "by": worker_id}

    report = await worker.run(drain_on_signals=(signal.SIGTERM,))
    print("report " + json.dumps(asdict(report)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
