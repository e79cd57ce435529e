"""Named leases in the database: one process at a time runs a periodic task.

`take` gives the lease to `holder` when nobody holds it, its holder's time ran out, or
`holder` already has it (a renewal); it answers the task's `Progress` (how far it got: a
`mark`, and the `cursor` of a walk it has not finished). On
PostgreSQL the row is locked while it is decided, and a first insert that loses the race
is refused by the primary key, so two processes never both hold it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from bot.db.engine import Database
from bot.db.models import Lease


def aware(moment: datetime) -> datetime:
    """SQLite gives back naive datetimes: they are UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


class Held(Exception):
    """The lease belongs to another process for now."""


@dataclass(frozen=True)
class Progress:
    """How far a task got: its `mark`, and where an unfinished walk goes on (`cursor`)."""

    mark: datetime | None = None
    cursor: str | None = None


async def take(db: Database, name: str, holder: str, *, ttl: timedelta, now: datetime) -> Progress:
    """Take or renew the lease; its progress. Raises :class:`Held` when another process holds it."""
    try:
        async with db.write() as session:
            row = (await session.execute(select(Lease).where(Lease.name == name).with_for_update())).scalar()
            if row is None:
                session.add(Lease(name=name, holder=holder, expires_at=now + ttl, mark=None))
                return Progress()
            if row.holder != holder and aware(row.expires_at) > now:
                raise Held(f"{name} is held by {row.holder} until {aware(row.expires_at).isoformat()}")
            row.holder, row.expires_at = holder, now + ttl
            return Progress(aware(row.mark) if row.mark is not None else None, row.cursor)
    except IntegrityError as exc:  # another process inserted it first
        raise Held(f"{name} was just taken by another process") from exc


async def record(db: Database, name: str, holder: str, progress: Progress) -> bool:
    """Record how far the task got, if `holder` still holds the lease."""
    async with db.write() as session:
        result = await session.execute(
            update(Lease)
            .where(Lease.name == name, Lease.holder == holder)
            .values(mark=progress.mark, cursor=progress.cursor)
        )
        return bool(getattr(result, "rowcount", 0))


async def progress_of(db: Database, name: str) -> Progress:
    """A task's progress as recorded, whoever holds its lease (empty when it never ran)."""
    async with db.read() as session:
        row = (await session.execute(select(Lease.mark, Lease.cursor).where(Lease.name == name))).first()
    if row is None:
        return Progress()
    return Progress(aware(row.mark) if row.mark is not None else None, row.cursor)
