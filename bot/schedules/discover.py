"""Finding the repositories the App is installed on that the server knows nothing of yet.

A repository installed before schedules existed, with no plan here and no push touching its config
since, sends no event that would have it read. At start and every `RESYNC_PLANNED_EVERY`,
`queue_syncs` asks GitHub for the App's installations (`GET /app/installations`, the App's JWT)
and each one's repositories (`GET /installation/repositories`, that installation's token, 100 a
page), and queues a read of at most `MAX_DISCOVERED` of those it has neither a schedule nor a plan
of; the others wait for the next pass. A repository queued this way is not queued by it again while
the process runs (a push, an installation event or a restart reads it again), so an installation's
rate limit pays for one config read per repository, and for listing pages only until enough are
found. An installation that lost a repository no longer lists it: it is not read.
"""

from __future__ import annotations

import logging
from typing import Any

from bot.errors import GitHubError
from bot.runtime.services import Services

log = logging.getLogger(__name__)

MAX_DISCOVERED = 50
"""Repositories unknown to the server queued for a read in one pass (the next pass queues more)."""
PER_PAGE = 100
"""Repositories asked for per page of `GET /installation/repositories` (GitHub's most)."""
_QUEUED = "schedules_discovered"
"""`Services.extras` key: the repositories discovery has queued while this process runs."""


async def unknown_repositories(services: Services, known: set[str]) -> dict[str, int]:
    """Repositories of the App's installations that are neither in `known` (lower-cased full names)
    nor queued by an earlier pass, at most `MAX_DISCOVERED`, with their installation's id. GitHub
    failing skips what it failed for (the next pass tries again); none where the server runs
    without an App (tests, the Action)."""
    app_port = services.extras.get("app_port")
    if app_port is None or services.github_for is None:
        return {}
    queued: set[str] = services.extras.setdefault(_QUEUED, set())
    try:
        installations = await app_port().list_installations()
    except GitHubError as exc:
        log.warning("the App's installations were not listed (%s); the next pass tries again", exc.message)
        return {}
    found: dict[str, int] = {}
    for installation in installations:
        if len(found) >= MAX_DISCOVERED:
            break
        if installation.suspended:
            continue  # GitHub gives a suspended installation no token
        try:
            port = await services.github_for(installation.id, f"installation {installation.id}")
            await _collect(port, installation.id, known | queued, found)
        except GitHubError as exc:
            log.warning("installation %s: repositories not listed (%s)", installation.id, exc.message)
    queued.update(name.lower() for name in found)
    return found


async def _collect(port: Any, installation_id: int, skip: set[str], found: dict[str, int]) -> None:
    """Page through one installation's repositories until `found` is full or the list ends."""
    page, more = 1, True
    while more and len(found) < MAX_DISCOVERED:
        names, more = await port.list_installation_repositories(page=page, per_page=PER_PAGE)
        for name in names:
            if name.lower() not in skip and len(found) < MAX_DISCOVERED:
                found.setdefault(name, installation_id)
        page += 1
