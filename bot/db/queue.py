"""A durable job queue on one table: claims with leases, retries with backoff, dead jobs.

- A job survives restarts: it is a row until it is done. A webhook job's body is a row of
  `job_bodies` beside it, removed when the job completes (see `bot.db.retention` for how long
  the job's own row stays).
- A claimed job carries a lease; a worker that dies stops renewing it, and after
  `lease_until` another worker reclaims the job.
- Jobs of one `group_key` (one issue) run one at a time, oldest first; a partial unique
  index (`status = 'running'`) makes the database refuse a second running job per group.
- On PostgreSQL, workers in several processes claim with `FOR UPDATE SKIP LOCKED`.
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, cast

from sqlalchemy import BindParameter, Connection, Table, and_, bindparam, exists, func, select, update
from sqlalchemy.exc import IntegrityError

from bot.clock import Clock, utcnow
from bot.db.engine import Database
from bot.db.models import Job, JobBody
from bot.procinfo import dead_holder

log = logging.getLogger(__name__)


def _aware(value: datetime | None) -> datetime | None:
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class ClaimedJob:
    """A job a worker holds: what to run and the lease it must keep alive."""

    id: int
    kind: str
    group_key: str
    payload: dict[str, Any]
    delivery_id: str | None
    attempts: int
    max_attempts: int
    created_at: datetime
    body: str | None = None


JOBS = cast(Table, Job.__table__)
BODIES = cast(Table, JobBody.__table__)
_BODY_OF = select(BODIES.c.body).where(BODIES.c.job_id == bindparam("job_id"))
_DROP_BODY = BODIES.delete().where(BODIES.c.job_id == bindparam("job_id"))
_RUNNING, _OLDER = JOBS.alias("running"), JOBS.alias("older")
_NOW: BindParameter[datetime] = bindparam("now")
_EXPIRED = and_(JOBS.c.status == "running", JOBS.c.lease_until < _NOW)
_FRESH = and_(
    JOBS.c.status == "queued",
    JOBS.c.run_after <= _NOW,
    ~exists().where(and_(_RUNNING.c.group_key == JOBS.c.group_key, _RUNNING.c.status == "running")),
    ~exists().where(
        and_(_OLDER.c.group_key == JOBS.c.group_key, _OLDER.c.status == "queued", _OLDER.c.id < JOBS.c.id)
    ),
)
# Two queries, not one with OR: each walks an index in (run_after, id) order and stops at the first
# row that qualifies, so a claim costs the same with 10 or 10,000 jobs queued (with OR, SQLite
# sorted every queued row on each claim). A lease that ran out is older than any queued job.
_CANDIDATES = tuple(
    select(JOBS).where(where).order_by(JOBS.c.run_after, JOBS.c.id).limit(1) for where in (_EXPIRED, _FRESH)
)
_LOCKING_CANDIDATES = tuple(c.with_for_update(skip_locked=True, of=JOBS) for c in _CANDIDATES)
_THIS = JOBS.c.id == bindparam("job_id")
_HELD = and_(_THIS, JOBS.c.locked_by == bindparam("holder"), JOBS.c.status == "running")
_TAKE = (
    update(JOBS)
    .where(_THIS)
    .values(
        status="running",
        attempts=bindparam("tries"),
        locked_by=bindparam("holder"),
        lease_until=bindparam("until"),
        updated_at=bindparam("now"),
    )
)
_DONE = (
    update(JOBS)
    .where(_HELD)
    .values(status="done", locked_by=None, lease_until=None, updated_at=bindparam("now"))
)


def _complete_in(conn: Connection, done: dict[str, Any]) -> bool:
    """Mark a held job done and drop its body (a webhook's payload, ~10 KB): no longer needed.
    A job that fails keeps it for its next attempt, a dead one for the status page's requeue."""
    if not conn.execute(_DONE, done).rowcount:
        return False
    conn.execute(_DROP_BODY, done)
    return True


_RETIRED = object()
"""A claim's answer when the job it found had used its last attempt: marked dead, look again."""


def _claim_in(conn: Connection, *, worker_id: str, now: datetime, lease: timedelta, locking: bool) -> object:
    """One claim in an open transaction: a ClaimedJob, None (nothing due), or _RETIRED."""
    row = None
    for candidate in _LOCKING_CANDIDATES if locking else _CANDIDATES:
        row = conn.execute(candidate, {"now": now}).mappings().first()
        if row is not None:
            break
    if row is None:
        return None
    if row["status"] == "running":
        log.warning(
            "reclaiming job %s (%s) whose lease expired (held by %s)",
            row["id"],
            row["kind"],
            row["locked_by"],
            extra={"job_id": row["id"], "kind": row["kind"]},
        )
    if row["attempts"] >= row["max_attempts"]:
        error = (row["last_error"] or "") + "\nlease expired after the last attempt"
        dead = {"status": "dead", "last_error": error, "locked_by": None, "lease_until": None}
        conn.execute(update(JOBS).where(JOBS.c.id == row["id"]).values(**dead, updated_at=now))
        return _RETIRED
    attempts = row["attempts"] + 1
    take = {"job_id": row["id"], "tries": attempts, "holder": worker_id, "until": now + lease, "now": now}
    conn.execute(_TAKE, take)
    return ClaimedJob(
        id=row["id"],
        kind=row["kind"],
        group_key=row["group_key"],
        payload=dict(row["payload"]),
        delivery_id=row["delivery_id"],
        attempts=attempts,
        max_attempts=row["max_attempts"],
        created_at=_aware(row["created_at"]) or now,
        body=conn.execute(_BODY_OF, {"job_id": row["id"]}).scalar(),
    )


def _update_held(conn: Connection, job_id: int, worker_id: str, values: dict[str, Any]) -> bool:
    """Update a job this worker holds; False when it is no longer ours."""
    held = {"job_id": job_id, "holder": worker_id}
    return bool(conn.execute(update(JOBS).where(_HELD).values(**values), held).rowcount)


def _fail_in(conn: Connection, job_id: int, worker_id: str, error: str, now: datetime) -> str:
    row = conn.execute(select(JOBS.c.attempts, JOBS.c.max_attempts).where(JOBS.c.id == job_id)).first()
    if row is None:
        return "lost"
    values: dict[str, Any] = {"last_error": error[-4000:], "locked_by": None, "lease_until": None}
    if row.attempts >= row.max_attempts:
        values["status"] = "dead"
    else:
        values.update(status="queued", run_after=now + timedelta(seconds=backoff_seconds(row.attempts)))
    ours = _update_held(conn, job_id, worker_id, {**values, "updated_at": now})
    return str(values["status"]) if ours else "lost"


def backoff_seconds(attempts: int) -> float:
    """Delay before attempt `attempts + 1`: 5 s, 20 s, 80 s … capped at 15 minutes."""
    return float(min(5 * 4 ** max(attempts - 1, 0), 900))


def job_row(
    *,
    kind: str,
    group_key: str,
    payload: dict[str, Any],
    delivery_id: str | None = None,
    max_attempts: int = 5,
    run_after: datetime | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Every column of a new, queued job (for `Job(**row)` or a bulk insert); a body goes to
    `JobBody`."""
    moment = now or utcnow()
    return {
        "kind": kind,
        "group_key": group_key,
        "payload": payload,
        "delivery_id": delivery_id,
        "status": "queued",
        "attempts": 0,
        "max_attempts": max_attempts,
        "run_after": run_after or moment,
        "locked_by": None,
        "lease_until": None,
        "last_error": None,
        "created_at": moment,
        "updated_at": moment,
    }


class JobQueue:
    """Enqueue, claim, heartbeat, complete and fail jobs."""

    def __init__(self, db: Database, *, lease_seconds: float = 300, clock: Clock = utcnow) -> None:
        self.db = db
        self.lease = timedelta(seconds=lease_seconds)
        self.clock = clock

    async def enqueue(
        self,
        *,
        kind: str,
        group_key: str,
        payload: dict[str, Any],
        delivery_id: str | None = None,
        max_attempts: int = 5,
        delay_seconds: float = 0,
        unique: bool = False,
    ) -> int:
        """Add a job; returns its id.

        With `unique`, a job of the same kind already waiting for the same group is reused
        instead (periodic polls must not pile up while a worker is busy or down).
        """
        now = self.clock()
        if unique:
            async with self.db.read() as session:
                waiting = await session.execute(
                    select(Job.id).where(Job.kind == kind, Job.group_key == group_key, Job.status == "queued")
                )
                existing = waiting.scalars().first()
            if existing is not None:
                return existing
        job = Job(
            **job_row(
                kind=kind,
                group_key=group_key,
                payload=payload,
                delivery_id=delivery_id,
                max_attempts=max_attempts,
                run_after=now + timedelta(seconds=delay_seconds),
                now=now,
            )
        )
        async with self.db.write() as session:
            session.add(job)
            await session.flush()
            return job.id

    async def claim(self, worker_id: str, *, in_thread: bool = False) -> ClaimedJob | None:
        """Take the next runnable job (or an expired lease), or None when nothing is due.

        One transaction per try (on SQLite: one call to a thread, see `Database.transaction`), with
        statements built once: a claim costs the loop next to nothing while it answers webhooks.
        """
        locking = not self.db.is_sqlite
        for _ in range(5):
            now = self.clock()
            try:
                claimed = await self.db.transaction(
                    partial(_claim_in, worker_id=worker_id, now=now, lease=self.lease, locking=locking),
                    in_thread=in_thread,
                )
            except IntegrityError:
                # Another worker started a job of the same group between our select and
                # update; the unique index refused ours. Try the next candidate.
                continue
            if claimed is not _RETIRED:
                return claimed  # type: ignore[return-value]
        return None

    async def release_dead_holders(self) -> list[int]:
        """Expire the leases of running jobs whose holder is a dead process of this host; their ids.

        A restarted server (or any worker) knows its predecessor's jobs are dead (the pid is gone,
        or belongs to another process now): they are reclaimed at once, not when the lease runs out.
        """
        host = socket.gethostname()
        async with self.db.read() as session:
            rows = await session.execute(
                select(Job.id, Job.locked_by).where(Job.status == "running", Job.locked_by.like(f"{host}:%"))
            )
            candidates = [(job_id, holder, dead_holder(holder)) for job_id, holder in rows.all()]
        released = []
        now = self.clock()
        for job_id, holder, why in candidates:
            if why is None:
                continue
            note = f"reclaimed at once: its worker {holder} died ({why})"
            async with self.db.write() as session:
                done = await session.execute(
                    update(Job)
                    .where(Job.id == job_id, Job.status == "running", Job.locked_by == holder)
                    .values(lease_until=now - timedelta(seconds=1), last_error=note, updated_at=now)
                )
            if getattr(done, "rowcount", 0):
                log.warning("job %s: %s", job_id, note, extra={"job_id": job_id})
                released.append(job_id)
        return released

    async def heartbeat(self, job_id: int, worker_id: str) -> bool:
        """Extend the lease; False when the job is no longer ours (it was reclaimed)."""
        now = self.clock()
        values = {"lease_until": now + self.lease, "updated_at": now}
        return await self.db.transaction(lambda conn: _update_held(conn, job_id, worker_id, values))

    async def complete(self, job_id: int, worker_id: str, *, in_thread: bool = False) -> bool:
        """Mark a job done; False when another worker had reclaimed it."""
        done = {"job_id": job_id, "holder": worker_id, "now": self.clock()}
        return await self.db.transaction(partial(_complete_in, done=done), in_thread=in_thread)

    async def fail(self, job_id: int, worker_id: str, error: str) -> str:
        """Record a failure: back to the queue with backoff, or `dead` after the last attempt.

        Returns the new status (`queued`, `dead`, or `lost` if the job was not ours).
        """
        now = self.clock()
        return await self.db.transaction(lambda conn: _fail_in(conn, job_id, worker_id, error, now))

    async def defer(self, job_id: int, worker_id: str, *, seconds: float, note: str) -> bool:
        """Put a held job back, due in `seconds`, its attempt not counted: it did not fail, GitHub's
        pacing asked it to wait (and a worker must not wait with it). False when it was not ours."""
        now = self.clock()
        values = {
            "status": "queued",
            "run_after": now + timedelta(seconds=max(seconds, 0.0)),
            "attempts": JOBS.c.attempts - 1,
            "locked_by": None,
            "lease_until": None,
            "last_error": note[-4000:],
            "updated_at": now,
        }
        return await self.db.transaction(lambda conn: _update_held(conn, job_id, worker_id, values))

    async def counts(self) -> dict[str, int]:
        """Number of jobs per status."""
        async with self.db.read() as session:
            rows = await session.execute(select(Job.status, func.count()).group_by(Job.status))
            return {status: count for status, count in rows.all()}

    async def get(self, job_id: int) -> Job | None:
        """A job row, for inspection."""
        async with self.db.read() as session:
            return await session.get(Job, job_id)

    async def dead_jobs(self, limit: int = 50) -> list[Job]:
        """The newest dead jobs with their last error."""
        async with self.db.read() as session:
            rows = await session.execute(
                select(Job).where(Job.status == "dead").order_by(Job.updated_at.desc()).limit(limit)
            )
            return list(rows.scalars())
