"""The `schedules` table: each repository's schedules, when each runs next, how each last ran.

A due schedule is fired in one transaction that moves its `next_at` on (compare-and-swap on the
value read) and queues its run as a job (`bot.db.queue.job_row`): whoever fires a slot, the slot
has exactly one run, and the run is as durable as any job. The look for due schedules is itself a
job of one group (see `bot.schedules.runs`), so the queue runs one look at a time across
every process. A slot missed while no process ran is fired once: the next time is the first one
after *now*, never each missed one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import Connection, Table, and_, delete, func, select, update

from bot.config.cron import CronError, next_after, parse_cron, zone_named
from bot.config.schedules import Resolved
from bot.db.engine import Database
from bot.db.models import PlanRecord, ScheduleRecord
from bot.db.queue import JOBS, job_row

SCHEDULES = cast(Table, ScheduleRecord.__table__)


def aware(value: datetime | None) -> datetime | None:
    """A datetime read back from SQLite (naive, UTC) made aware."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class SyncResult:
    """What a sync changed: schedule names added, rescheduled (their time or zone changed), removed."""

    added: list[str]
    changed: list[str]
    removed: list[str]


@dataclass(frozen=True)
class Fired:
    """A slot fired: the run queued for it."""

    repo: str
    name: str
    slot: datetime
    next_at: datetime | None
    job_id: int


def _sync_in(
    conn: Connection, *, repo: str, installation_id: int | None, schedules: Sequence[Resolved], now: datetime
) -> SyncResult:
    rows = {r["name"]: r for r in conn.execute(select(SCHEDULES).where(SCHEDULES.c.repo == repo)).mappings()}
    added, changed = [], []
    for resolved in schedules:
        zone, enabled = resolved.schedule.timezone, resolved.schedule.enabled
        row = rows.pop(resolved.name, None)
        same = (
            row is not None
            and row["cron"] == resolved.cron
            and row["timezone"] == zone
            and bool(row["enabled"]) == enabled
            and (row["next_at"] is not None or not enabled)
        )
        values: dict[str, Any] = {"installation_id": installation_id, "updated_at": now}
        if not same:
            values.update(
                cron=resolved.cron,
                timezone=zone,
                enabled=enabled,
                next_at=resolved.next_after(now) if enabled else None,
            )
        if row is None:
            conn.execute(SCHEDULES.insert().values(repo=repo, name=resolved.name, runs=0, skips=0, **values))
            added.append(resolved.name)
            continue
        conn.execute(
            update(SCHEDULES)
            .where(SCHEDULES.c.repo == repo, SCHEDULES.c.name == resolved.name)
            .values(**values)
        )
        if not same:
            changed.append(resolved.name)
    if rows:
        conn.execute(delete(SCHEDULES).where(SCHEDULES.c.repo == repo, SCHEDULES.c.name.in_(list(rows))))
    return SyncResult(added=added, changed=changed, removed=sorted(rows))


async def sync(
    db: Database, *, repo: str, installation_id: int | None, schedules: Sequence[Resolved], now: datetime
) -> SyncResult:
    """Make `repo`'s rows what its config says: new schedules get their first time, a changed time
    or zone is rescheduled from `now`, an unchanged one keeps its time, a removed one its row."""
    return await db.transaction(
        lambda conn: _sync_in(conn, repo=repo, installation_id=installation_id, schedules=schedules, now=now)
    )


def _following(row: Any, now: datetime) -> datetime | None:
    """The first time after `now` (None: the stored expression no longer parses; it stops)."""
    try:
        return next_after(parse_cron(row["cron"]), now, zone_named(row["timezone"]))
    except CronError:
        return None


def _fire_in(conn: Connection, *, now: datetime, kind: str, limit: int) -> list[Fired]:
    due = conn.execute(
        select(SCHEDULES)
        .where(SCHEDULES.c.enabled.is_(True), SCHEDULES.c.next_at <= now)
        .order_by(SCHEDULES.c.next_at)
        .limit(limit)
    ).mappings()
    fired = []
    for row in list(due):
        slot = aware(row["next_at"])
        assert slot is not None
        following = _following(row, now)
        moved = conn.execute(
            update(SCHEDULES)
            .where(
                and_(
                    SCHEDULES.c.repo == row["repo"],
                    SCHEDULES.c.name == row["name"],
                    SCHEDULES.c.next_at == row["next_at"],
                )
            )
            .values(next_at=following, updated_at=now)
        )
        if not moved.rowcount:
            continue  # fired meanwhile: its run is queued already
        payload = {
            "repo": row["repo"],
            "name": row["name"],
            "installation_id": row["installation_id"],
            "slot": slot.isoformat(),
            "next_at": following.isoformat() if following else None,
        }
        job = job_row(kind=kind, group_key=f"{row['repo']}#schedule:{row['name']}", payload=payload, now=now)
        job_id = conn.execute(JOBS.insert().values(**job)).inserted_primary_key[0]  # type: ignore[index]
        fired.append(Fired(row["repo"], row["name"], slot, following, int(job_id)))
    return fired


async def fire_due(db: Database, *, now: datetime, kind: str, limit: int = 100) -> list[Fired]:
    """Fire every schedule due at `now` (up to `limit`): move each one's time on and queue a job of
    `kind` for its run, in one transaction."""
    return await db.transaction(lambda conn: _fire_in(conn, now=now, kind=kind, limit=limit))


async def record(
    db: Database,
    *,
    repo: str,
    name: str,
    slot: datetime,
    outcome: str,
    now: datetime,
    issue: int | None = None,
    error: str | None = None,
) -> None:
    """Write how the run of `slot` went (`opened`, `skipped`, `failed`…)."""
    values: dict[str, Any] = {
        "last_slot": slot,
        "last_outcome": outcome,
        "last_error": error,
        "updated_at": now,
    }
    if issue is not None:
        values["last_issue"] = issue
    if outcome == "opened":
        values["runs"] = SCHEDULES.c.runs + 1
    elif outcome == "skipped":
        values["skips"] = SCHEDULES.c.skips + 1
    where = and_(SCHEDULES.c.repo == repo, SCHEDULES.c.name == name)
    await db.transaction(lambda conn: conn.execute(update(SCHEDULES).where(where).values(**values)))


async def forget(db: Database, *, repo: str, name: str) -> None:
    """Drop a schedule's row (it left the config)."""
    where = and_(SCHEDULES.c.repo == repo, SCHEDULES.c.name == name)
    await db.transaction(lambda conn: conn.execute(delete(SCHEDULES).where(where)))


async def rows(db: Database, *, repo: str | None = None) -> list[ScheduleRecord]:
    """Every schedule (of `repo`), by repository and name."""
    query = select(ScheduleRecord).order_by(ScheduleRecord.repo, ScheduleRecord.name)
    if repo is not None:
        query = query.where(ScheduleRecord.repo == repo)
    async with db.read() as session:
        return list((await session.execute(query)).scalars())


async def repositories(db: Database) -> list[tuple[str, int | None]]:
    """(repository, installation) of every repository with a schedule: the ones the poll re-reads."""
    query = select(ScheduleRecord.repo, ScheduleRecord.installation_id).distinct()
    async with db.read() as session:
        return [(repo, inst) for repo, inst in (await session.execute(query)).all()]


async def planned_repositories(db: Database) -> list[tuple[str, int | None]]:
    """(repository, installation) of every repository with a cached plan (read at start: their
    configs may hold schedules the table has not seen)."""
    query = select(PlanRecord.repo, func.max(PlanRecord.installation_id)).group_by(PlanRecord.repo)
    async with db.read() as session:
        return [(repo, inst) for repo, inst in (await session.execute(query)).all()]


async def forget_repository(db: Database, *, repo: str) -> None:
    """Drop every schedule of `repo` (the App left it)."""
    await db.transaction(lambda conn: conn.execute(delete(SCHEDULES).where(SCHEDULES.c.repo == repo)))


async def note_problem(db: Database, *, repo: str, text: str) -> None:
    """Say on `repo`'s rows why its schedules were not read again (its config is invalid)."""
    where = SCHEDULES.c.repo == repo
    await db.transaction(lambda conn: conn.execute(update(SCHEDULES).where(where).values(last_error=text)))
