"""The status page's database reads: a handful of bounded queries, no writes (but `requeue`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from pydantic import ValidationError
from sqlalchemy import case, func, select, update

from bot.db.engine import Database
from bot.db.models import Delivery, Job, PlanRecord
from bot.state import PlanState
from bot.status.operations import WaitingRow

log = logging.getLogger(__name__)
LIST_LIMIT = 50
"""Rows per list (running, retrying and dead jobs, deliveries): the page stays small."""


@dataclass(frozen=True)
class PlanRows:
    """Every cached plan that parses, and the keys of those that do not."""

    plans: list[tuple[PlanRecord, PlanState]]
    unreadable: list[str]


def parse_state(record: PlanRecord) -> PlanState | None:
    """The row's plan state, or None when it does not parse (a cache written by another version)."""
    try:
        return PlanState.model_validate(record.state)
    except ValidationError:
        log.warning("status page: the cached state of %s#%s does not parse", record.repo, record.issue_number)
        return None


async def read_plans(db: Database) -> PlanRows:
    """All cached plans (one query)."""
    async with db.read() as session:
        records = list((await session.execute(select(PlanRecord))).scalars())
    plans, unreadable = [], []
    for record in records:
        state = parse_state(record)
        if state is None:
            unreadable.append(f"{record.repo}#{record.issue_number}")
        else:
            plans.append((record, state))
    return PlanRows(plans, unreadable)


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
    state = parse_state(record)
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
