"""A worker process for the queue tests: `python -m tests.queue_worker_script MODE DB_URL OUT`.

MODE `record`: run a WorkerPool whose `record` jobs append "job group start end pid" lines
to OUT, until the queue has been empty for a second. MODE `hang`: claim one job, print
`claimed <id>`, then sleep until killed; `hang-long` does the same as a real worker with a
one-hour lease.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

from bot.db.engine import Database
from bot.db.queue import JobQueue
from bot.runtime.routing import Router
from bot.runtime.services import Services
from bot.runtime.settings import Settings
from bot.runtime.worker import JobKinds, WorkerPool


async def record(db_url: str, out: str) -> None:
    db = Database(db_url)
    queue = JobQueue(db, lease_seconds=30)
    kinds = JobKinds()

    @kinds.register("record")
    async def _record(job, services) -> None:  # type: ignore[no-untyped-def]
        start = time.time()
        await asyncio.sleep(0.005)
        with open(out, "a") as fh:
            fh.write(f"{job.id} {job.group_key} {start} {time.time()} {os.getpid()}\n")

    pool = WorkerPool(
        queue=queue,
        router=Router(),
        services=Services(settings=Settings()),
        kinds=kinds,
        concurrency=4,
        poll_interval=0.05,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(pool.run(stop))
    idle_since = None
    while True:
        await asyncio.sleep(0.2)
        counts = await queue.counts()
        if counts.get("queued", 0) == 0 and counts.get("running", 0) == 0:
            idle_since = idle_since or time.time()
            if time.time() - idle_since > 1:
                break
        else:
            idle_since = None
    stop.set()
    await task
    await db.dispose()


async def hang(db_url: str, *, lease: float = 1, worker: str = "doomed-worker") -> None:
    db = Database(db_url)
    queue = JobQueue(db, lease_seconds=lease)
    job = await queue.claim(worker)
    print(f"claimed {job.id if job else None}", flush=True)
    await asyncio.sleep(3600)


if __name__ == "__main__":
    mode, url = sys.argv[1], sys.argv[2]
    if mode == "record":
        asyncio.run(record(url, sys.argv[3]))
    elif mode == "hang-long":  # a real worker identity and an hour-long lease
        from bot.runtime.worker import worker_identity

        asyncio.run(hang(url, lease=3600, worker=worker_identity()))
    else:
        asyncio.run(hang(url))
