"""`/readyz`: whether this process can do its work now, beside `/healthz` (it is alive).

Ready means the database answers, the App is configured and GitHub's API answers, each within
READY_TIMEOUT seconds. A load balancer or orchestrator sends traffic only to a ready process;
the answer names what failed (503) so whoever reads it knows where to look, without the error
text (a host name, a user) a public endpoint should not show: that goes to the log, once per
change.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from bot.app.doctor import api_check
from bot.db.engine import Database
from bot.runtime.settings import Settings

log = logging.getLogger(__name__)

READY_TIMEOUT = 5.0
"""Seconds each check may take before it counts as failed."""
GITHUB_FRESH_SECONDS = 60.0
"""How long GitHub's last answer counts: a probe every few seconds must not spend the API's
unauthenticated hourly limit (60 requests) asking it."""


@dataclass
class Readiness:
    """The checks of `/readyz` for one process."""

    db: Database
    settings: Settings
    transport: httpx.AsyncBaseTransport | None = None
    clock: Callable[[], float] = time.monotonic
    _github_until: float = field(default=float("-inf"), init=False)
    _failing: frozenset[str] = field(default=frozenset(), init=False)

    async def check(self) -> tuple[bool, dict[str, object]]:
        """(ready, the JSON body): every check's outcome, and which failed."""
        database, app, github = await asyncio.gather(self._database(), self._app(), self._github())
        checks = {"database": database, "app": app, "github": github}
        failed = sorted(name for name, (ok, _) in checks.items() if not ok)
        if frozenset(failed) != self._failing:
            details = "; ".join(f"{name}: {checks[name][1]}" for name in failed) or "every check passes"
            (log.warning if failed else log.info)("readiness: %s", details)
            self._failing = frozenset(failed)
        body: dict[str, object] = {
            "status": "not ready" if failed else "ready",
            "checks": {name: "ok" if ok else _public(name) for name, (ok, _) in checks.items()},
        }
        if failed:
            body["failed"] = failed
        return not failed, body

    async def _database(self) -> tuple[bool, str]:
        try:
            await asyncio.wait_for(self.db.ping(), READY_TIMEOUT)
        except Exception as exc:  # any failure to answer is "not ready", never an error page
            return False, f"{exc.__class__.__name__}: {str(exc)[:200]}"
        return True, "answers"

    async def _app(self) -> tuple[bool, str]:
        problems = self.settings.app_problems()
        return not problems, "; ".join(problems.values()) or "configured"

    async def _github(self) -> tuple[bool, str]:
        if self.clock() < self._github_until:
            return True, "answered recently"
        ok, _, detail = await api_check(self.settings, transport=self.transport, wait=READY_TIMEOUT)
        if ok:
            self._github_until = self.clock() + GITHUB_FRESH_SECONDS
        return ok is True, detail


def _public(name: str) -> str:
    """What `/readyz` says of a failed check (the details are in the log)."""
    return {
        "database": "does not answer",
        "app": "not configured: see `plan-cascade doctor`",
        "github": "GitHub's API does not answer",
    }[name]
