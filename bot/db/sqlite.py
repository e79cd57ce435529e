"""SQLite's file and the settings every connection of ours runs first (below the engine and the
checkpointer, which both need them)."""

from __future__ import annotations

from pathlib import Path


def sqlite_path(url: str) -> str:
    """The file of a `sqlite+aiosqlite:///…` URL."""
    return url.split(":///", 1)[-1]


def ensure_sqlite_dir(url: str) -> None:
    """Create the folder of a SQLite file."""
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
