"""Missed webhook deliveries are recovered: GitHub never sends a failed delivery again by itself.

A delivery fails when the server is down, answers non-2xx, or takes over 10 s; the labelled
issue then never gets a plan. At start-up and every `PLAN_CASCADE_REDELIVERY_SECONDS` (0: off),
one process (a lease row in the database) reads the App's deliveries back to its mark
(`GET /app/hook/deliveries`, newest first, cursor pages, never past GitHub's 3-day retention)
and asks GitHub to send again (`POST …/{id}/attempts`) each GUID that no attempt delivered
("OK") and that the deliveries table has not recorded: oldest first, so commands are replayed
in the order they were made, at most `MAX_ASKS` a look and once per GUID per look, never a
recorded GUID. The redelivery keeps the GUID, so the intake's dedupe applies if it arrives twice.

The mark moves only past what is settled (asked for, delivered, recorded, or refused by GitHub
for good). When a look reaches its ask budget, or GitHub fails a request to redeliver, the mark
stays at the oldest GUID not asked for, and the next look, soon after (`CATCH_UP`), starts
there. A window longer than a look's `PAGE_BUDGET` pages is read over several looks (the lease
keeps the cursor of the next page), and nothing is asked before its oldest end is known.
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
from bot.db.leases import Progress, aware
from bot.db.models import Delivery
from bot.db.retention import GITHUB_KEEPS_DELIVERIES
from bot.errors import GitHubError
from bot.github.models import HookDelivery

if TYPE_CHECKING:
    from bot.metrics import Metrics
    from bot.runtime.services import Services

log = logging.getLogger(__name__)

LEASE = "redelivery"
RETENTION = GITHUB_KEEPS_DELIVERIES
"""GitHub keeps deliveries this long: older ones cannot be redelivered."""
OVERLAP = timedelta(minutes=5)
"""After a look that read up to the newest delivery, the next reads back this far before it
(attempts still in flight were not listed yet)."""
PAGE_BUDGET = 10
PER_PAGE = 100
MAX_ASKS = 100
"""Redeliveries asked per look at most (the oldest first; the rest wait for the next look)."""
CATCH_UP = 30.0
"""Seconds to the next look while missed deliveries are left over (instead of the interval)."""
HOPELESS = {400, 413}
"""Answers a redelivery cannot change: the payload itself was refused (bad JSON, over 25 MB)."""
REFUSED_FOR_GOOD = {400, 404, 410, 422}
"""GitHub's answers to a request to redeliver that asking again cannot change (the delivery is
gone or cannot be sent again); any other failure stops the look and is asked again next time."""


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
    """GUIDs asked for again, in the order asked."""
    left: int = 0
    """Missed GUIDs left for the next look (the ask budget ran out, or GitHub failed)."""
    walking: bool = False
    """The pages ran out before the look's oldest end: the next look reads on from there."""
    resumed: bool = False
    """The look read on from a kept cursor: what is newer than that is still to be read."""

    @property
    def behind(self) -> bool:
        """Whether missed deliveries may be waiting for the next look."""
        return self.walking or self.resumed or self.left > 0


@dataclass(frozen=True)
class Missed:
    """A GUID to ask for again: its newest attempt (what is asked by) and its first seen."""

    attempt: HookDelivery
    first: datetime
    first_id: int


def missed(attempts: Sequence[HookDelivery], recorded: Collection[str]) -> list[Missed]:
    """Each GUID that no attempt delivered, that the server has not recorded and whose payload
    was not refused as such, oldest first (by its first attempt seen): what to ask for again."""
    newest: dict[str, HookDelivery] = {}
    first: dict[str, HookDelivery] = {}
    delivered: set[str] = set()
    for attempt in attempts:
        if attempt.status == "OK":
            delivered.add(attempt.guid)
        if attempt.guid not in newest or attempt.id > newest[attempt.guid].id:
            newest[attempt.guid] = attempt
        if attempt.guid not in first or attempt.id < first[attempt.guid].id:
            first[attempt.guid] = attempt
    chosen = [
        Missed(a, aware(first[guid].delivered_at), first[guid].id)
        for guid, a in newest.items()
        if guid not in delivered and guid not in recorded and a.status_code not in HOPELESS
    ]
    return sorted(chosen, key=lambda m: (m.first, m.first_id))


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


async def read_back(
    app: HookDeliveries, *, since: datetime, cursor: str | None, budget: int
) -> tuple[list[HookDelivery], str | None, int]:
    """Pages from `cursor` (None: the newest) down to `since`, at most `budget` of them: the
    attempts made since `since`, the cursor to read on from when `since` was not reached (None
    when it was), and the pages read."""
    attempts: list[HookDelivery] = []
    pages = 0
    while pages < budget:
        page, after = await app.list_hook_deliveries(per_page=PER_PAGE, cursor=cursor)
        pages += 1
        attempts += [a for a in page if aware(a.delivered_at) >= since]
        if after is None or not page or aware(page[-1].delivered_at) < since:
            return attempts, None, pages
        cursor = after
    return attempts, cursor, pages


def next_mark(
    *, since: datetime, attempts: Sequence[HookDelivery], left: Sequence[Missed], from_newest: bool
) -> datetime:
    """Where the next look reads back to: the oldest GUID left unasked; else past everything
    read (less `OVERLAP` when the read began at the newest delivery: attempts in flight)."""
    if left:
        return max(left[0].first, since)
    if not attempts:
        return since
    newest = max(aware(a.delivered_at) for a in attempts)
    return max(newest - OVERLAP if from_newest else newest, since)


async def look(
    db: Database,
    app: HookDeliveries,
    *,
    holder: str,
    now: datetime,
    ttl: timedelta,
    metrics: Metrics | None = None,
    page_budget: int = PAGE_BUDGET,
    max_asks: int = MAX_ASKS,
) -> Look | None:
    """One look for missed deliveries, if this process holds the lease (None when another does)."""
    try:
        progress = await leases.take(db, LEASE, holder, ttl=ttl, now=now)
    except leases.Held as held:
        log.debug("not looking for missed deliveries: %s", held)
        return None
    oldest = now - RETENTION
    since = max(progress.mark, oldest) if progress.mark is not None else oldest
    done, start = Look(), progress.cursor
    try:
        attempts, cursor, done.pages = await read_back(app, since=since, cursor=start, budget=page_budget)
    except GitHubError as exc:
        if start is None or exc.status not in REFUSED_FOR_GOOD:
            raise
        log.warning("GitHub refused the kept cursor (%s): reading from the newest delivery", exc.message)
        start = None
        attempts, cursor, done.pages = await read_back(app, since=since, cursor=None, budget=page_budget)
    done.attempts, done.resumed = len(attempts), start is not None
    if cursor is not None:  # the oldest end is not known yet: nothing is asked before it is
        done.walking = True
        await leases.record(db, LEASE, holder, Progress(progress.mark, cursor))
        log.info("missed deliveries: %d pages read, the next look reads on", done.pages)
        return done
    todo = missed(attempts, await recorded_guids(db, {a.guid for a in attempts}))
    settled = await _ask(app, todo[: max(max_asks, 0)], done, metrics)
    left = todo[settled:]
    done.left = len(left)
    if left:
        log.warning("%d missed deliveries wait for the next look", len(left))
    mark = next_mark(since=since, attempts=attempts, left=left, from_newest=start is None)
    await leases.record(db, LEASE, holder, Progress(mark, None))
    return done


async def _ask(app: HookDeliveries, todo: Sequence[Missed], done: Look, metrics: Metrics | None) -> int:
    """Ask for each of `todo` again, in order, until GitHub fails; how many are settled."""
    settled = 0
    for item in todo:
        attempt = item.attempt
        try:
            await app.redeliver(attempt.id)
        except GitHubError as exc:
            if exc.status not in REFUSED_FOR_GOOD:
                log.warning("could not ask for delivery %s again (%s): next look", attempt.guid, exc.message)
                return settled
            log.warning("GitHub will not send delivery %s again: %s", attempt.guid, exc.message)
            settled += 1
            continue
        settled += 1
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
    return settled


async def redelivery_loop(services: Services, stop: asyncio.Event) -> None:
    """At start-up and every PLAN_CASCADE_REDELIVERY_SECONDS, look for missed deliveries
    (every `CATCH_UP` seconds while some are left over)."""
    interval = services.settings.redelivery_seconds
    app_port: Any = services.extras.get("app_port")
    if interval <= 0 or services.db is None or app_port is None:
        return
    holder = f"{uuid.uuid4().hex[:12]}"
    ttl = timedelta(seconds=max(interval * 2, 60))
    while not stop.is_set():
        wait = interval
        try:
            now, metrics = services.clock(), services.metrics
            done = await look(services.db, app_port(), holder=holder, now=now, ttl=ttl, metrics=metrics)
            if done is not None and done.asked:
                log.info("asked GitHub again for %d missed deliveries", len(done.asked))
            if done is not None and done.behind:
                wait = min(interval, CATCH_UP)
        except GitHubError as exc:
            log.warning("could not look for missed deliveries: %s", exc.message)
        except Exception:
            log.exception("looking for missed deliveries failed")
        try:
            await asyncio.wait_for(stop.wait(), timeout=wait)
        except TimeoutError:
            pass
