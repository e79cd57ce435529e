"""The status page's signed-in sessions, kept in the database: signing out ends one everywhere.

A session cookie (see `bot.status.access`) is good only while its session's row exists. Signing
out deletes the row, so a copy of the cookie (a stolen one) stops working at once, in every
`serve` process, not 7 days later. The table holds the SHA-256 of each session id, never the id
itself: whoever reads the database cannot sign in with it. Rows past their time are removed at
each sign-in.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import delete, select

from bot.clock import utcnow
from bot.db.engine import Database
from bot.db.leases import aware
from bot.db.models import StatusSession
from bot.status.access import SESSION_SECONDS


def _key(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


class Sessions:
    """Open, check and end sessions in `db`."""

    def __init__(
        self,
        db: Database,
        *,
        ttl: timedelta = timedelta(seconds=SESSION_SECONDS),
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._db, self._ttl, self._clock = db, ttl, clock

    async def start(self, session_id: str) -> None:
        """A browser signed in: its session is open until it signs out or its time is up."""
        now = self._clock()
        async with self._db.write() as session:
            await session.execute(delete(StatusSession).where(StatusSession.expires_at < now))
            session.add(StatusSession(id=_key(session_id), created_at=now, expires_at=now + self._ttl))

    async def open(self, session_id: str) -> bool:
        """Whether the session is open (signed in, not signed out, not past its time)."""
        async with self._db.read() as session:
            found = await session.execute(
                select(StatusSession.expires_at).where(StatusSession.id == _key(session_id))
            )
            expires = found.scalar()
        return expires is not None and aware(expires) > self._clock()

    async def end(self, session_id: str) -> None:
        """Sign the session out: every copy of its cookie stops working."""
        async with self._db.write() as session:
            await session.execute(delete(StatusSession).where(StatusSession.id == _key(session_id)))
