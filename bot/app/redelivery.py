"""Missed webhook deliveries are recovered: GitHub never sends a failed delivery again by itself.

A delivery fails when the server is down, answers non-2xx, or takes over 10 s; the labelled
issue then never gets a plan. At start-up and every `PLAN_CASCADE_REDELIVERY_SECONDS` (0: off),
one process (a lease row in the database) lists the App's deliveries since its last look
(`GET /app/hook/deliveries`, newest first, cursor pages, at most `PAGE_BUDGET` pages, never
past GitHub's 3-day retention) and asks GitHub to send again (`POST …/{id}/attempts`) each
GUID that no attempt delivered ("OK") and that the deliveries table has not recorded: at most
once per GUID per look, never a recorded GUID. The redelivery keeps the GUID, so the intake's
dedupe applies if it arrives twice.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import select

from bot.db import leases
from bot.db.engine import Database
from bot.db.models import Delivery
from bot.errors import GitHubError
from bot.github.models import HookDelivery

if TYPE_CHECKING:
    from bot.metrics import Metrics
    from bot.runtime.services import Services

log = logging.getLogger(__name__)

LEASE = "redelivery"
RETENTION = timedelta(days=3)
"""GitHub keeps deliveries this long: older ones cannot be redelivered."""
OVERLAP = timedelta(minutes=5)
"""A look reaches this far before the newest delivery the last look saw (attempts in flight)."""
PAGE_BUDGET = 10
PER_PAGE = 100
MAX_ASKS = 100
"""Redeliveries asked per look at most (the newest first; the rest wait for the next look)."""
HOPELESS = {400, 413}
"""Answers a redelivery cannot change: the payload itself was refused (bad JSON, over 25 MB)."""


class HookDeliveries(Protocol):
    """The App-level calls a look needs (a `GitHubKitPort` authenticated as the App)."""

    async def list_hook_deliveries(
        self, *, per_page: int = 100, cursor: str | None = None
    ) -> tuple[list[HookDelivery], str | None]: ...

    async def redeliver(self, delivery_id: int) -> None: ...


@dataclass
class Look:
    """What one look did."""

    pages: int = 0
    attempts: int = 0
    asked: list[str] = field(default_factory=list)
    """GUIDs asked for again."""


def missed(attempts: Sequence[HookDelivery], recorded: Collection[str]) -> list[HookDelivery]:
    """The newest attempt of each GUID that no attempt delivered, that the server has not
    recorded and whose payload was not refused as such, newest first: what to ask for again."""
    newest: dict[str, HookDelivery] = {}
    delivered: set[str] = set()
    for attempt in attempts:
        if attempt.status == "OK":
            delivered.add(attempt.guid)
        if attempt.guid not in newest or attempt.id > newest[attempt.guid].id:
            newest[attempt.guid] = attempt
    chosen = [
        a
        for guid, a in newest.items()
        if guid not in delivered and guid not in recorded and a.status_code not in HOPELESS
    ]
    return sorted(chosen, key=lambda a: -a.id)


async def recorded_guids(db: Database, guids: Collection[str]) -> set[str]:
    """Which of `guids` the deliveries table holds."""
    found: set[str] = set()
    wanted = sorted(guids)
    async with db.read() as session:
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            rows = await session.execute(select(Delivery.id).where(Delivery.id.in_(chunk)))
            found.update(rows.scalars())
    return found


async def look(
    db: Database,
    app: HookDeliveries,
    *,
    holder: str,
    now: datetime,
    ttl: timedelta,
    metrics: Metrics | None = None,
    page_budget: int = PAGE_BUDGET,
) -> Look | None:
    """One look for missed deliveries, if this process holds the lease (None when another does)."""
    try:
        mark = await leases.take(db, LEASE, holder, ttl=ttl, now=now)
    except leases.Held as held:
        log.debug("not looking for missed deliveries: %s", held)
        return None
    oldest = now - RETENTION
    since = max(mark - OVERLAP, oldest) if mark is not None else oldest
    done, attempts, cursor = Look(), [], None
    complete = False
    while done.pages < page_budget:
        page, cursor = await app.list_hook_deliveries(per_page=PER_PAGE, cursor=cursor)
        done.pages += 1
        attempts += [a for a in page if leases.aware(a.delivered_at) >= since]
        if cursor is None or not page or leases.aware(page[-1].delivered_at) < since:
            complete = True
            break
    if not complete:
        log.warning("missed deliveries: %d pages read, older ones wait for the next look", done.pages)
    done.attempts = len(attempts)
    recorded = await recorded_guids(db, {a.guid for a in attempts})
    for attempt in missed(attempts, recorded)[:MAX_ASKS]:
        try:
            await app.redeliver(attempt.id)
        except GitHubError as exc:
            log.warning("could not ask for delivery %s again: %s", attempt.guid, exc.message)
            continue
        done.asked.append(attempt.guid)
        if metrics is not None:
            metrics.redeliveries.inc()
        log.info(
            "asked GitHub to deliver %s again (%s.%s, failed: %s)",
            attempt.guid,
            attempt.event,
            attempt.action or "-",
            attempt.status,
            extra={"delivery": attempt.guid},
        )
    if complete and attempts:
        await leases.set_mark(db, LEASE, holder, max(leases.aware(a.delivered_at) for a in attempts))
    return done


async def redelivery_loop(services: Services, stop: asyncio.Event) -> None:
    """At start-up and every PLAN_CASCADE_REDELIVERY_SECONDS, look for missed deliveries."""
    interval = services.settings.redelivery_seconds
    app_port: Any = services.extras.get("app_port")
    if interval <= 0 or services.db is None or app_port is None:
        return
    holder = f"{uuid.uuid4().hex[:12]}"
    ttl = timedelta(seconds=max(interval * 2, 60))
    while not stop.is_set():
        try:
            now, metrics = services.clock(), services.metrics
            done = await look(services.db, app_port(), holder=holder, now=now, ttl=ttl, metrics=metrics)
            if done is not None and done.asked:
                log.info("asked GitHub again for %d missed deliveries", len(done.asked))
        except GitHubError as exc:
            log.warning("could not look for missed deliveries: %s", exc.message)
        except Exception:
            log.exception("looking for missed deliveries failed")
        try:
            await asyncio.wait_for(stop.wait(), timeout=interval)
        except TimeoutError:
            pass
