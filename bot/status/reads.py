"""The status page's database reads: a handful of bounded queries, no writes (but `requeue`)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from datetime import datetime

from pydantic import ValidationError
from sqlalchemy import Text, case, func, select, text, tuple_, type_coerce, update

from bot.db.engine import Database
from bot.db.models import Delivery, Job, PlanRecord
from bot.db.retention import last_prune
from bot.db.sqlite import sqlite_path
from bot.plan.state import PlanState
from bot.status.operations import Storage, WaitingRow

log = logging.getLogger(__name__)
LIST_LIMIT = 50
"""Rows per list (running, retrying and dead jobs, deliveries): the page stays small."""
STATE_CHUNK = 400
"""Plans whose state one query reads (SQLite allows 999 bound parameters in old versions)."""


@dataclass(frozen=True)
class PlanHead:
    """A `plans` row without its state: enough to tell whether the state changed."""

    repo: str
    issue_number: int
    status: str
    installation_id: int | None
    updated_at: datetime
    version: int

    @property
    def key(self) -> tuple[str, int]:
        return self.repo, self.issue_number

    @property
    def stamp(self) -> tuple[str, int, datetime, int | None]:
        """Changes whenever the row is written (every write sets `updated_at`)."""
        return self.status, self.version, self.updated_at, self.installation_id


def parse_state(raw: object, *, key: tuple[str, int]) -> PlanState | None:
    """A row's plan state from the column's JSON text (or a decoded dict), or None when it does
    not parse (a cache written by another version)."""
    try:
        if isinstance(raw, str | bytes):
            return PlanState.model_validate_json(raw)
        return PlanState.model_validate(raw)
    except ValidationError:
        log.warning("status page: the cached state of %s#%s does not parse", *key)
        return None


async def read_heads(db: Database) -> list[PlanHead]:
    """Every cached plan's row, without the state (one query)."""
    columns = (
        PlanRecord.repo,
        PlanRecord.issue_number,
        PlanRecord.status,
        PlanRecord.installation_id,
        PlanRecord.updated_at,
        PlanRecord.version,
    )
    async with db.read() as session:
        rows = await session.execute(select(*columns))
        return [PlanHead(*row) for row in rows.all()]


async def read_states(db: Database, keys: list[tuple[str, int]]) -> dict[tuple[str, int], object]:
    """The states of some plans as the column holds them: JSON text, for :func:`parse_state`
    (pydantic parses and validates it in one step)."""
    found: dict[tuple[str, int], object] = {}
    raw_state = type_coerce(PlanRecord.state, Text)
    async with db.read() as session:
        for start in range(0, len(keys), STATE_CHUNK):
            chunk = keys[start : start + STATE_CHUNK]
            rows = await session.execute(
                select(PlanRecord.repo, PlanRecord.issue_number, raw_state).where(
                    tuple_(PlanRecord.repo, PlanRecord.issue_number).in_(chunk)
                )
            )
            for repo, issue, raw in rows.all():
                found[(repo, issue)] = raw
    return found


async def read_plan(db: Database, repo: str, issue: int) -> tuple[PlanRecord, PlanState] | None:
    """One cached plan, its repository matched case-insensitively (GitHub's names are)."""
    async with db.read() as session:
        record = await session.get(PlanRecord, (repo, issue))
        if record is None:
            found = await session.execute(
                select(PlanRecord).where(
                    func.lower(PlanRecord.repo) == repo.lower(), PlanRecord.issue_number == issue
                )
            )
            record = found.scalars().first()
    if record is None:
        return None
    state = parse_state(record.state, key=(record.repo, record.issue_number))
    return None if state is None else (record, state)


@dataclass(frozen=True)
class WorkRows:
    """What the queue's part of the page is made of."""

    counts: dict[str, int]
    waiting: list[WaitingRow]
    running: list[Job]
    retrying: list[Job]
    dead: list[Job]


async def read_work(db: Database, *, now: datetime) -> WorkRows:
    """Counts by status, queued jobs by kind, running jobs, failing and dead ones."""
    async with db.read() as session:
        counts = dict((await session.execute(select(Job.status, func.count()).group_by(Job.status))).all())  # type: ignore[arg-type]
        due = func.sum(case((Job.run_after <= now, 1), else_=0))
        waiting = await session.execute(
            select(Job.kind, func.count(), due, func.min(Job.created_at))
            .where(Job.status == "queued")
            .group_by(Job.kind)
        )
        rows = [WaitingRow(kind, int(count), int(d or 0), oldest) for kind, count, d, oldest in waiting.all()]
        running = await session.execute(
            select(Job).where(Job.status == "running").order_by(Job.id).limit(LIST_LIMIT)
        )
        retrying = await session.execute(
            select(Job)
            .where(Job.status == "queued", Job.last_error.is_not(None))
            .order_by(Job.updated_at.desc())
            .limit(LIST_LIMIT)
        )
        dead = await session.execute(
            select(Job).where(Job.status == "dead").order_by(Job.updated_at.desc()).limit(LIST_LIMIT)
        )
        return WorkRows(
            counts=counts,
            waiting=rows,
            running=list(running.scalars()),
            retrying=list(retrying.scalars()),
            dead=list(dead.scalars()),
        )


@dataclass(frozen=True)
class IntakeRows:
    """Recent deliveries with their jobs, and the deliveries whose job died."""

    recent: list[Delivery]
    jobs: list[Job]
    failed: list[tuple[Delivery, Job]]


async def read_intake(db: Database) -> IntakeRows:
    """The newest deliveries, their jobs, and the newest deliveries whose job is dead."""
    async with db.read() as session:
        recent = list(
            (
                await session.execute(
                    select(Delivery).order_by(Delivery.received_at.desc()).limit(LIST_LIMIT)
                )
            ).scalars()
        )
        ids = [d.id for d in recent]
        jobs = (
            list((await session.execute(select(Job).where(Job.delivery_id.in_(ids)))).scalars())
            if ids
            else []
        )
        failed = await session.execute(
            select(Delivery, Job)
            .join(Job, Job.delivery_id == Delivery.id)
            .where(Job.status == "dead")
            .order_by(Delivery.received_at.desc())
            .limit(LIST_LIMIT)
        )
        return IntakeRows(recent=recent, jobs=jobs, failed=[(d, j) for d, j in failed.all()])


async def requeue(db: Database, job_id: int, *, now: datetime) -> bool:
    """Give a dead job its attempts back and queue it now; False when it is not dead (any more)."""
    async with db.write() as session:
        done = await session.execute(
            update(Job)
            .where(Job.id == job_id, Job.status == "dead")
            .values(
                status="queued", attempts=0, run_after=now, locked_by=None, lease_until=None, updated_at=now
            )
        )
        return bool(getattr(done, "rowcount", 0))


async def read_storage(db: Database, *, retention_days: int) -> Storage:
    """The database's size (SQLite: its pages, the free ones among them, its write-ahead log)."""
    async with db.read() as session:
        if not db.is_sqlite:
            size = (await session.execute(text("SELECT pg_database_size(current_database())"))).scalar()
            return Storage("PostgreSQL", int(size or 0), None, None, retention_days, await last_prune(db))
        page = int((await session.execute(text("PRAGMA page_size"))).scalar() or 0)
        pages = int((await session.execute(text("PRAGMA page_count"))).scalar() or 0)
        free = int((await session.execute(text("PRAGMA freelist_count"))).scalar() or 0)
    try:
        wal = os.stat(sqlite_path(db.url) + "-wal").st_size
    except OSError:
        wal = 0
    return Storage("SQLite", page * pages, page * free, wal, retention_days, await last_prune(db))
