"""Group commit for webhook deliveries.

Each accepted delivery needs a delivery row, a job row and its body's row (`job_bodies`)
written atomically. Under a
burst, committing per request serialises everything on SQLite's single writer; here
concurrent requests are written together in one transaction instead, and each request
still learns whether its delivery was new or a redelivery, through
`INSERT … ON CONFLICT DO NOTHING RETURNING id`.

On SQLite (`_SqliteIntake`) the deliveries read during one turn of the event loop are
written at the start of the next turn, on the loop itself, when the database is free: a
batch of 50 takes about 2 ms, less than handing it to a thread and back, and no delivery
waits for a batch it just missed to finish first. When the database is busy (another
writer of this process holds the write lock, or another process holds SQLite's) the batch
waits in a worker thread instead, so the loop never blocks on a lock. Checkpoints, which
copy the write-ahead log into the database file and sync it, run in a thread of their own
(`Checkpointer`), never in a delivery's write.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import insert

from bot.db.checkpoint import Checkpointer
from bot.db.engine import Database
from bot.db.models import Delivery, Job, JobBody
from bot.db.sqlite import sqlite_path, sqlite_pragmas

ROW_BYTES = 200
"""Roughly what a row costs in the write-ahead log besides a job's body."""

Pending = list[tuple["DeliveryRecord", "asyncio.Future[bool]"]]


@dataclass(frozen=True)
class DeliveryRecord:
    """What to write for one delivery; `job` is None for events nobody handles."""

    id: str
    event: str
    action: str | None
    target: str | None
    outcome: str
    received_at: datetime
    job: dict[str, Any] | None
    body: str | None = None
    """The job's input (the raw delivery), written to `job_bodies` beside it."""


class DeliveryWriter:
    """Writes delivery+job pairs in batches; `submit` answers True (new) or False (seen before)."""

    def __init__(self, db: Database, *, max_batch: int = 500) -> None:
        self.db = db
        self.max_batch = max_batch
        self._pending: Pending = []
        self._lock = asyncio.Lock()
        self._sqlite: _SqliteIntake | None = None

    async def submit(self, record: DeliveryRecord) -> bool:
        """Write the record (with others waiting at the same time); True unless a duplicate."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        if self.db.is_sqlite:
            if self._sqlite is None:
                self._sqlite = _SqliteIntake(self.db, self.max_batch)
            self._sqlite.add(record, future)
            return await future
        self._pending.append((record, future))
        async with self._lock:
            if not future.done():
                batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
                try:
                    fresh = await self._write_postgres(unique_records(batch))
                except BaseException as exc:
                    settle(batch, error=exc)
                    raise
                settle(batch, fresh)
        return await future

    def close(self) -> None:
        """Stop the checkpoint thread and close the SQLite connection (idempotent)."""
        if self._sqlite is not None:
            self._sqlite.close()
            self._sqlite = None

    async def _write_postgres(self, unique: dict[str, DeliveryRecord]) -> set[str]:
        """Insert the batch; returns the ids that were new."""
        rows = [
            {
                "id": r.id,
                "event": r.event,
                "action": r.action,
                "target": r.target,
                "outcome": r.outcome,
                "received_at": r.received_at,
            }
            for r in unique.values()
        ]
        from sqlalchemy.dialects.postgresql import insert as dialect_insert

        stmt = dialect_insert(Delivery).on_conflict_do_nothing(index_elements=["id"]).returning(Delivery.id)
        async with self.db.write() as session:
            result = await session.execute(stmt, rows)
            fresh = {row[0] for row in result.all()}
            jobs: list[dict[str, Any]] = [job for i in fresh if (job := unique[i].job) is not None]
            if jobs:
                made = await session.execute(insert(Job).returning(Job.id, Job.delivery_id), jobs)
                bodies = [
                    {"job_id": job_id, "body": body}
                    for job_id, delivery in made.all()
                    if delivery is not None and (body := unique[delivery].body) is not None
                ]
                if bodies:
                    await session.execute(insert(JobBody), bodies)
        return fresh


def unique_records(batch: Pending) -> dict[str, DeliveryRecord]:
    """The batch's records by id, the first of each id kept."""
    unique: dict[str, DeliveryRecord] = {}
    for rec, _ in batch:
        unique.setdefault(rec.id, rec)
    return unique


def settle(batch: Pending, fresh: set[str] | None = None, *, error: BaseException | None = None) -> None:
    """Answer every waiting request: True for the first of each new id, else False; or the error."""
    first = set(fresh or ())
    for rec, fut in batch:
        if fut.done():
            continue
        if isinstance(error, asyncio.CancelledError):
            fut.cancel()
        elif error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(rec.id in first)
            first.discard(rec.id)


class _SqliteIntake:
    """The SQLite path: one batch per turn of the event loop, written on the loop when it can be."""

    def __init__(self, db: Database, max_batch: int) -> None:
        self.db = db
        self.max_batch = max_batch
        if db.checkpointer is None:  # a SQLite database always has one, closed by its dispose()
            raise TypeError("the SQLite intake needs a SQLite database")
        self.checkpointer = db.checkpointer
        self.batches = SqliteBatches(db.url, self.checkpointer)
        self._due: Pending = []
        self._held: Pending = []  # arrived while a batch waits in a thread: written after it
        self._scheduled = False
        self._waiting = asyncio.Lock()  # held while a batch waits for the database in a thread
        self._tasks: set[asyncio.Task[None]] = set()

    def add(self, record: DeliveryRecord, future: asyncio.Future[bool]) -> None:
        self._due.append((record, future))
        self._schedule()

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Runs once per turn of the loop in which deliveries arrived."""
        self._scheduled = False
        while self._due:
            batch, self._due = self._due[: self.max_batch], self._due[self.max_batch :]
            if self._waiting.locked():
                # Kept in order behind the batch in the thread, and back on the loop once it is
                # written: a burst that met one busy moment (a worker's claim) does not go on
                # paying for a thread per batch until it ends.
                self._held += batch
                continue
            if self.db.write_locked():
                self._wait_in_thread(batch)
                continue
            try:
                fresh = self.batches.write(unique_records(batch), wait=False)
            except SqliteBusy:
                self._wait_in_thread(batch)
                continue
            except Exception as exc:
                settle(batch, error=exc)
                continue
            settle(batch, fresh)

    def _wait_in_thread(self, batch: Pending) -> None:
        task = asyncio.get_running_loop().create_task(self._write_waiting(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write_waiting(self, batch: Pending) -> None:
        try:
            async with self._waiting:
                try:
                    async with self.db.write_lock():
                        fresh = await asyncio.to_thread(self.batches.write, unique_records(batch), wait=True)
                except BaseException as exc:
                    settle(batch, error=exc)
                    if not isinstance(exc, Exception):
                        raise
                    return
            settle(batch, fresh)
        finally:
            if self._held:
                self._due, self._held = self._held + self._due, []
                self._schedule()

    def close(self) -> None:
        if not self._waiting.locked():  # else the thread still writing owns the connection
            self.batches.close()


class SqliteBusy(Exception):
    """Another connection holds SQLite's write lock and the write was asked not to wait."""


class SqliteBatches:
    """A sqlite3 connection of the intake's own, used by one batch at a time.

    SQLAlchemy's async session (greenlet switches, per-row type processing, RETURNING
    emulation) costs several times SQLite's own time here, the intake benchmark's hot path.
    Values are written in exactly the formats SQLAlchemy uses for these columns (naive ISO
    datetimes, JSON text), so every other reader goes on using the ORM. The connection never
    checkpoints by itself (`wal_autocheckpoint=0`): the `Checkpointer` does.
    """

    DELIVERY_COLS = ("id", "event", "action", "target", "outcome", "received_at")
    WAIT_MS = 30_000

    def __init__(self, url: str, checkpointer: Checkpointer) -> None:
        self.conn = sqlite3.connect(
            sqlite_path(url), timeout=30, isolation_level=None, check_same_thread=False
        )
        sqlite_pragmas(self.conn)
        self.conn.execute("PRAGMA wal_autocheckpoint=0")
        self.checkpointer = checkpointer
        self.job_cols = tuple(c.name for c in Job.__table__.columns if c.name != "id")
        self._waits = True

    def write(self, unique: dict[str, DeliveryRecord], *, wait: bool) -> set[str]:
        """Insert both rows of each new delivery in one transaction; the ids that were new.

        With `wait=False` a database locked by another connection raises `SqliteBusy` at once
        instead of waiting up to 30 s (SQLite's busy handler sleeps, which would block the loop).
        """
        if wait != self._waits:
            self.conn.execute(f"PRAGMA busy_timeout={self.WAIT_MS if wait else 0}")
            self._waits = wait
        params: list[Any] = []
        times = _TimeTexts()  # a delivery's four times are one instant: formatted once
        for r in unique.values():
            params += [r.id, r.event, r.action, r.target, r.outcome, times[r.received_at]]
        values = ",".join(["(?,?,?,?,?,?)"] * len(unique))
        sql = (
            f"INSERT INTO deliveries ({','.join(self.DELIVERY_COLS)}) VALUES {values} "  # noqa: S608 - fixed columns
            "ON CONFLICT(id) DO NOTHING RETURNING id"
        )
        marks = "(" + ",".join("?" * len(self.job_cols)) + ")"
        cursor = self.conn.cursor()
        try:
            cursor.execute("BEGIN IMMEDIATE")
            try:
                fresh = {row[0] for row in cursor.execute(sql, params).fetchall()}
                jobs = [job for i in fresh if (job := unique[i].job) is not None]
                if jobs:
                    cells = [sqlite_value(job[c], times) for job in jobs for c in self.job_cols]
                    rows = ",".join([marks] * len(jobs))
                    insert_jobs = f"INSERT INTO jobs ({','.join(self.job_cols)}) VALUES {rows} RETURNING id, delivery_id"  # noqa: S608, E501 - fixed columns
                    made = cursor.execute(insert_jobs, cells).fetchall()
                    bodies = [(job_id, body) for job_id, i in made if (body := unique[i].body) is not None]
                    cursor.executemany("INSERT INTO job_bodies (job_id, body) VALUES (?, ?)", bodies)
                cursor.execute("COMMIT")
            except BaseException:
                cursor.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as exc:
            if not wait and exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY:
                raise SqliteBusy(str(exc)) from exc
            raise
        self.checkpointer.written(
            ROW_BYTES * (len(fresh) + 2 * len(jobs)) + sum(len(unique[i].body or "") for i in fresh)
        )
        return fresh

    def close(self) -> None:
        self.conn.close()


def sqlite_time(value: datetime) -> str:
    """How SQLAlchemy's SQLite DateTime stores a value."""
    return value.strftime("%Y-%m-%d %H:%M:%S.%f")


class _TimeTexts(dict[datetime, str]):
    """`sqlite_time` of each instant, computed once (`strftime` was 4 % of the loop under a burst)."""

    def __missing__(self, value: datetime) -> str:
        text = self[value] = sqlite_time(value)
        return text


def sqlite_value(value: Any, times: _TimeTexts) -> Any:
    if isinstance(value, datetime):
        return times[value]
    if isinstance(value, dict):
        return json.dumps(value)
    return value
