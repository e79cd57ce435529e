"""Engine and session factory, plus `migrate` through Alembic."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from sqlalchemy import event, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

MIGRATIONS_DIR = Path(__file__).with_name("migrations")


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
            _ensure_sqlite_dir(url)
            kwargs["connect_args"] = {"timeout": 30}
        else:
            kwargs.update(pool_size=10, max_overflow=10, pool_pre_ping=True)
        self.engine: AsyncEngine = create_async_engine(url, **kwargs)
        if self.is_sqlite:
            event.listen(self.engine.sync_engine, "connect", sqlite_pragmas)
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        self._write_lock = asyncio.Lock()

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
        """Close every pooled connection."""
        await self.engine.dispose()


def sqlite_path(url: str) -> str:
    """The file of a `sqlite+aiosqlite:///…` URL."""
    return url.split(":///", 1)[-1]


def _ensure_sqlite_dir(url: str) -> None:
    path = sqlite_path(url)
    if path and path != ":memory:" and not path.startswith("file:"):
        Path(path).parent.mkdir(parents=True, exist_ok=True)


def sqlite_pragmas(dbapi_conn: object, _record: object = None) -> None:
    """What every SQLite connection of ours runs first: WAL, NORMAL sync, a 30 s busy wait."""
    cursor = dbapi_conn.cursor()  # type: ignore[attr-defined]
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


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
