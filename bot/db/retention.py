"""How long the database keeps jobs and delivery records, and removing what is older.

Without it the database only grows: every delivery leaves a delivery record and, when handled,
a job. What stays, and why:

- A job that completes loses its body (its `job_bodies` row) at once (`bot.db.queue`); its own
  row stays `keep`. A dead job is never removed here: it keeps its body, so the status page can
  requeue it.
- A delivery record stays `keep`, and never less than `MIN_DELIVERY_AGE` whatever `keep` says:
  GitHub can redeliver a delivery for 3 days, and its record is what makes the redelivery a
  duplicate (`bot.db.intake`) and what stops the look for missed deliveries from asking for it
  again (`bot.app.redelivery`). The hour on top covers clocks that disagree with GitHub's.
- The record of a delivery whose job is not done (queued, running, dead) stays with its job:
  the status page lists failed deliveries through their dead job.

`prune` removes rows in batches of `BATCH`, oldest first, each batch its own short transaction
(on SQLite: in a thread, so the event loop answering webhooks never waits for one); `pause`,
awaited between batches, lets the caller pace them (and stop: it answers False).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from sqlalchemy import BindParameter, Connection, Table, bindparam, delete, select

from bot.db import leases
from bot.db.engine import Database
from bot.db.models import Delivery, Job

LEASE = "retention"
"""The lease of the process that prunes; its mark: when the last prune ended."""
GITHUB_KEEPS_DELIVERIES = timedelta(days=3)
"""How long GitHub keeps a delivery, and can send it again."""
MIN_DELIVERY_AGE = GITHUB_KEEPS_DELIVERIES + timedelta(hours=1)
"""No delivery record younger than this is removed, whatever the setting."""
BATCH = 200
"""Rows one transaction removes at most: a few milliseconds of SQLite's write lock."""

JOBS = cast(Table, Job.__table__)
DELIVERIES = cast(Table, Delivery.__table__)
_CUTOFF: BindParameter[datetime] = bindparam("cutoff")
_LIMIT: BindParameter[int] = bindparam("limit")

# Done jobs oldest first along the (status, run_after) index: a job runs after its `run_after`,
# so one last changed before the cutoff was also due before it.
_OLD_DONE = (
    select(JOBS.c.id)
    .where(JOBS.c.status == "done", JOBS.c.run_after < _CUTOFF, JOBS.c.updated_at < _CUTOFF)
    .order_by(JOBS.c.run_after)
    .limit(_LIMIT)
)
_PRUNE_JOBS = delete(JOBS).where(JOBS.c.id.in_(_OLD_DONE))

# Deliveries whose job is still in the queue or dead, of jobs due before the cutoff (a job that
# is waiting now was due recently, unless it was requeued by hand: then its record may go).
_KEPT_WITH_JOB = select(JOBS.c.delivery_id).where(
    JOBS.c.status.in_(("queued", "running", "dead")),
    JOBS.c.run_after < _CUTOFF,
    JOBS.c.delivery_id.is_not(None),
)
_OLD_DELIVERIES = (
    select(DELIVERIES.c.id)
    .where(DELIVERIES.c.received_at < _CUTOFF, DELIVERIES.c.id.not_in(_KEPT_WITH_JOB))
    .order_by(DELIVERIES.c.received_at)
    .limit(_LIMIT)
)
_PRUNE_DELIVERIES = delete(DELIVERIES).where(DELIVERIES.c.id.in_(_OLD_DELIVERIES))


@dataclass
class Pruned:
    """What one prune removed."""

    jobs: int = 0
    deliveries: int = 0
    batches: int = 0


def cutoffs(*, keep: timedelta, now: datetime) -> tuple[datetime, datetime]:
    """(jobs, deliveries): rows last changed before these go. Deliveries' never later than
    `now - MIN_DELIVERY_AGE`."""
    return now - keep, now - max(keep, MIN_DELIVERY_AGE)


def _batch(statement: object, cutoff: datetime, limit: int) -> Callable[[Connection], int]:
    def work(conn: Connection) -> int:
        return int(conn.execute(statement, {"cutoff": cutoff, "limit": limit}).rowcount)  # type: ignore[call-overload]

    return work


async def prune(
    db: Database,
    *,
    keep: timedelta,
    now: datetime,
    batch: int = BATCH,
    pause: Callable[[], Awaitable[bool]] | None = None,
) -> Pruned:
    """Remove done jobs and delivery records older than `keep` (see the module), batch by batch."""
    jobs_before, deliveries_before = cutoffs(keep=keep, now=now)
    done = Pruned()
    for statement, cutoff, field in (
        (_PRUNE_JOBS, jobs_before, "jobs"),
        (_PRUNE_DELIVERIES, deliveries_before, "deliveries"),
    ):
        while True:
            removed = await db.transaction(_batch(statement, cutoff, batch), in_thread=True)
            setattr(done, field, getattr(done, field) + removed)
            done.batches += 1
            if removed < batch:
                break
            if pause is not None and not await pause():
                return done
    return done


async def last_prune(db: Database) -> datetime | None:
    """When the last prune (of any process) ended; None: never."""
    return (await leases.progress_of(db, LEASE)).mark
