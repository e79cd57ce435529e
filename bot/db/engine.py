"""Engine and session factory, plus `migrate` through Alembic."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

from bot.db.checkpoint import Checkpointer
from bot.db.sqlite import ensure_sqlite_dir, sqlite_path, sqlite_pragmas

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
T = TypeVar("T")


class Database:
    """An async engine with a session factory.

    SQLite allows one writer at a time; writers are serialised in-process with a lock so
    concurrent requests queue up instead of spinning on `database is locked`.
    """

    def __init__(self, url: str, *, echo: bool = False) -> None:
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        kwargs: dict[str, object] = {"echo": echo}
        if self.is_sqlite:
            ensure_sqlite_dir(url)
            kwargs["connect_args"] = {"timeout": 30}
        else:
            kwargs.update(pool_size=10, max_overflow=10, pool_pre_ping=True)
        self.engine: AsyncEngine = create_async_engine(url, **kwargs)
        if self.is_sqlite:
            event.listen(self.engine.sync_engine, "connect", sqlite_pragmas)
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        self._write_lock = asyncio.Lock()
        self._sync: Engine | None = None
        self.checkpointer: Checkpointer | None = Checkpointer(url) if self.is_sqlite else None
        """SQLite: checkpoints the write-ahead log in a thread of its own, for every writer of
        this process that turns SQLite's own checkpoints off (the intake's and the queue's)."""

    async def transaction(self, work: Callable[[Connection], T], *, in_thread: bool = False) -> T:
        """Run `work` on a (sync) connection in one write transaction; its result.

        For short, hot writes (the job queue's claims and completions). On SQLite the transaction
        is one synchronous call, `BEGIN IMMEDIATE` to `COMMIT`, made on the loop itself when the
        database is free (well under a millisecond), or in a thread that waits when another
        connection holds SQLite's write lock. Either way the lock is held for SQLite's own time:
        not across turns of a loop busy answering webhooks, as an async session would (a turn for
        every statement), nor while a thread waits for the GIL. `in_thread`: straight to the
        thread (the loop is busy answering webhooks: SQLite's I/O stays off it). Elsewhere: the
        async engine.
        """
        if not self.is_sqlite:
            async with self.engine.begin() as conn:
                return await conn.run_sync(work)
        async with self._write_lock:
            if self._sync is None:
                self._sync = sync_sqlite_engine(self.url)
            if not in_thread:
                try:
                    return _in_transaction(self._sync, work, wait=False, checkpointer=self.checkpointer)
                except _Busy:
                    pass
            return await asyncio.to_thread(
                _in_transaction, self._sync, work, wait=True, checkpointer=self.checkpointer
            )

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncSession]:
        """A session in a transaction that commits on success; serialised on SQLite."""
        if self.is_sqlite:
            async with self._write_lock, self.sessions() as session, session.begin():
                yield session
        else:
            async with self.sessions() as session, session.begin():
                yield session

    @asynccontextmanager
    async def write_lock(self) -> AsyncIterator[None]:
        """The in-process write lock alone (SQLite), for a writer with a connection of its own."""
        if self.is_sqlite:
            async with self._write_lock:
                yield
        else:
            yield

    def write_locked(self) -> bool:
        """Whether a writer of this process holds the SQLite write lock right now."""
        return self.is_sqlite and self._write_lock.locked()

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        """A session for reads."""
        async with self.sessions() as session:
            yield session

    async def ping(self) -> None:
        """Raise if the database does not answer."""
        async with self.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))

    async def migrate(self) -> None:
        """Bring the schema to the newest Alembic revision."""
        async with self.engine.begin() as conn:
            await conn.run_sync(_upgrade_head)

    async def dispose(self) -> None:
        """Close every pooled connection (and stop the checkpoint thread)."""
        if self.checkpointer is not None:
            self.checkpointer.close()
        await self.engine.dispose()
        if self._sync is not None:
            self._sync.dispose()
            self._sync = None


class _Busy(Exception):
    """Another connection holds SQLite's write lock (and we were asked not to wait)."""


BUSY_WAIT_MS = 30_000


QUEUE_ROW_BYTES = 4 * 4096
"""What one row a queue transaction changes adds to the write-ahead log, about: its table's page
and those of the indexes over the columns it changes."""


def _in_transaction(
    engine: Engine, work: Callable[[Connection], T], *, wait: bool, checkpointer: Checkpointer | None
) -> T:
    with engine.connect() as conn:
        raw = conn.connection.dbapi_connection  # not through `conn`: that would begin a transaction
        raw.execute(f"PRAGMA busy_timeout={BUSY_WAIT_MS if wait else 0}")  # type: ignore[union-attr]
        before = raw.total_changes  # type: ignore[union-attr]
        try:
            conn.begin()
        except OperationalError as exc:
            code = getattr(exc.orig, "sqlite_errorcode", 0)
            if not wait and code & 0xFF == sqlite3.SQLITE_BUSY:
                raise _Busy(str(exc)) from exc
            raise
        result = work(conn)
        conn.commit()
        if checkpointer is not None:
            checkpointer.written(QUEUE_ROW_BYTES * (raw.total_changes - before))  # type: ignore[union-attr]
        return result


def sync_sqlite_engine(url: str) -> Engine:
    """A plain (pysqlite) engine on the same file, whose transactions begin `IMMEDIATE`: the write
    lock is taken first, so a transaction never fails half-way on another writer's commit.

    Its connections never checkpoint by themselves (`wal_autocheckpoint=0`): SQLite's default
    runs a checkpoint, with its disk syncs, inside whichever commit crosses 1,000 pages of log,
    and under a burst of deliveries that was nearly every claim and completion (10-20 ms each,
    on the loop when the intake was quiet). Each transaction reports what it wrote to the
    `Database`'s `Checkpointer` instead."""
    engine = create_engine(
        f"sqlite:///{sqlite_path(url)}", connect_args={"timeout": 30, "check_same_thread": False}
    )

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: object, _record: object) -> None:
        sqlite_pragmas(dbapi_conn)
        dbapi_conn.execute("PRAGMA wal_autocheckpoint=0")  # type: ignore[attr-defined]
        dbapi_conn.isolation_level = None  # type: ignore[attr-defined]  # we say BEGIN ourselves

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def alembic_config(connection: Connection | None = None) -> object:
    """An Alembic Config pointing at our migrations (no alembic.ini needed)."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def _upgrade_head(connection: Connection) -> None:
    from alembic import command

    command.upgrade(alembic_config(connection), "head")  # type: ignore[arg-type]
