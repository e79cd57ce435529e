"""A server process for the schedule tests: `python -m tests.schedule_worker_script DB_URL OUT NOW`.

Runs a WorkerPool with the real look for due schedules, queueing a look every 20 ms as the
server's poll does (every PLAN_CASCADE_SCHEDULE_POLL_SECONDS), with the time fixed at NOW. Each
look run and each schedule run is written to OUT as `look|run <pid> [name slot]`; the run itself
(GitHub's part) is not made. Stops after two seconds.
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import datetime

from bot.db.engine import Database
from bot.db.queue import JobQueue
from bot.runtime.routing import Router
from bot.runtime.services import Services
from bot.runtime.settings import Settings
from bot.runtime.worker import JobKinds, WorkerPool
from bot.schedules import runs as schedules


async def main(db_url: str, out: str, now: datetime) -> None:
    db = Database(db_url)
    queue = JobQueue(db, lease_seconds=30, clock=lambda: now)
    services = Services(settings=Settings(), db=db, queue=queue, clock=lambda: now)
    kinds = JobKinds()

    def write(line: str) -> None:
        with open(out, "a") as fh:
            fh.write(f"{line}\n")

    @kinds.register(schedules.LOOK_JOB)
    async def _look(job, services) -> None:  # type: ignore[no-untyped-def]
        write(f"look {os.getpid()}")
        await schedules.run_look(job, services)

    @kinds.register(schedules.RUN_JOB)
    async def _run(job, services) -> None:  # type: ignore[no-untyped-def]
        write(f"run {os.getpid()} {job.payload['name']} {job.payload['slot']}")

    pool = WorkerPool(
        queue=queue, router=Router(), services=services, kinds=kinds, concurrency=3, poll_interval=0.01
    )
    stop = asyncio.Event()
    task = asyncio.create_task(pool.run(stop))
    for _ in range(100):
        await queue.enqueue(kind=schedules.LOOK_JOB, group_key=schedules.LOOK_GROUP, payload={}, unique=True)
        await asyncio.sleep(0.02)
    stop.set()
    await task
    await db.dispose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], datetime.fromisoformat(sys.argv[3])))
