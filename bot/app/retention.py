"""Old rows are removed in the background: done jobs and delivery records past
`PLAN_CASCADE_RETENTION_DAYS` (0: never), at start-up and every `EVERY`, by one process at a
time (a lease row in the database, like the look for missed deliveries).

What is kept, and why, is `bot.db.retention`'s to say. Here: the batches are paced, `PAUSE`
apart and `BUSY_PAUSE` apart while this process's intake is answering deliveries, so a prune
never holds the database's write lock for long while a burst comes in. The lease's mark is
when the last prune ended (the status page shows it).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from bot.db import leases
from bot.db.engine import Database
from bot.db.retention import LEASE, Pruned, prune

if TYPE_CHECKING:
    from bot.metrics import Metrics
    from bot.runtime.services import Services

log = logging.getLogger(__name__)

EVERY = timedelta(hours=1)
PAUSE = 0.05
"""Seconds between two batches."""
BUSY_PAUSE = 0.5
"""Seconds between two batches while deliveries are coming in."""


async def prune_once(
    db: Database,
    *,
    days: int,
    holder: str,
    now: datetime,
    busy: Callable[[], bool] = lambda: False,
    stop: asyncio.Event | None = None,
    metrics: Metrics | None = None,
) -> Pruned | None:
    """One prune, if this process holds the lease (None when another does); `stop` ends it
    between two batches."""
    try:
        await leases.take(db, LEASE, holder, ttl=EVERY, now=now)
    except leases.Held as held:
        log.debug("not pruning: %s", held)
        return None

    async def pause() -> bool:
        await asyncio.sleep(BUSY_PAUSE if busy() else PAUSE)
        return stop is None or not stop.is_set()

    done = await prune(db, keep=timedelta(days=days), now=now, pause=pause)
    await leases.record(db, LEASE, holder, leases.Progress(mark=now))
    if metrics is not None:
        metrics.pruned.labels("jobs").inc(done.jobs)
        metrics.pruned.labels("deliveries").inc(done.deliveries)
    if done.jobs or done.deliveries:
        log.info(
            "removed %d done jobs and %d delivery records older than %d days (%d batches)",
            done.jobs,
            done.deliveries,
            days,
            done.batches,
        )
    return done


async def retention_loop(services: Services, stop: asyncio.Event) -> None:
    """At start-up and every `EVERY`, remove what is past `PLAN_CASCADE_RETENTION_DAYS`."""
    days = services.settings.retention_days
    if days <= 0 or services.db is None:
        return
    holder = uuid.uuid4().hex[:12]
    pressure = services.extras.get("intake_pressure")
    busy = (lambda: not pressure.calm()) if pressure is not None else (lambda: False)
    while not stop.is_set():
        try:
            await prune_once(
                services.db,
                days=days,
                holder=holder,
                now=services.clock(),
                busy=busy,
                stop=stop,
                metrics=services.metrics,
            )
        except Exception:
            log.exception("removing old jobs and delivery records failed")
        try:
            await asyncio.wait_for(stop.wait(), timeout=EVERY.total_seconds())
        except TimeoutError:
            pass
