"""Keeping the `schedules` table in step with each repository's config (`bot.db.schedules.sync`).

A repository's schedules are read again when a push to its default branch touches
`.github/plan-cascade.yml`, when the App is installed on it, every `RESYNC_EVERY` for the
repositories that have schedules, and once at start for every repository the server has planned
in (an upgrade finds the schedules already in their files). A repository the App leaves loses
its rows. The Action keeps no table: it reads the config each time it runs.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from bot.config.repo import CONFIG_PATH
from bot.config.schedules import resolve
from bot.db import schedules as table
from bot.db.queue import ClaimedJob
from bot.handlers.session import open_session
from bot.runtime.routing import Event, Router
from bot.runtime.services import Services
from bot.runtime.worker import JobKinds

router = Router()
kinds = JobKinds()
log = logging.getLogger(__name__)

SYNC_JOB = "schedule_sync"
RESYNC_EVERY = timedelta(minutes=10)
"""How often the repositories that have schedules have their config read again (a missed push)."""
MAX_SYNCED_REPOSITORIES = 100
"""Repositories of one installation event read at once (the poll gets the others later)."""


async def _sync(services: Services, repo: str, installation_id: int | None) -> None:
    assert services.enqueue is not None
    await services.enqueue(SYNC_JOB, f"{repo}#schedules", {"repo": repo, "installation_id": installation_id})


@router.register("push")
async def on_push(event: Event, services: Services) -> None:
    """A push to the default branch that touches the config reschedules the repository."""
    data, repo = event.payload, event.envelope.repository
    if event.repo is None or repo is None or services.enqueue is None or services.db is None:
        return  # the Action keeps no table
    if data.get("ref") != f"refs/heads/{repo.default_branch}":
        return
    touched = {
        path
        for commit in data.get("commits") or []
        if isinstance(commit, dict)
        for key in ("added", "modified", "removed")
        for path in commit.get(key) or []
    }
    if CONFIG_PATH in touched:
        await _sync(services, event.repo, event.installation_id)


def _names(event: Event, key: str) -> list[str]:
    found = [r.get("full_name") for r in event.payload.get(key) or [] if isinstance(r, dict)]
    return [name for name in found if isinstance(name, str)]


@router.register("installation", "created")
@router.register("installation_repositories", "added")
async def on_installed(event: Event, services: Services) -> None:
    """The App came to repositories: read their schedules."""
    if services.enqueue is None or services.db is None:
        return
    key = "repositories" if event.name == "installation" else "repositories_added"
    for name in _names(event, key)[:MAX_SYNCED_REPOSITORIES]:
        await _sync(services, name, event.installation_id)


@router.register("installation", "deleted")
@router.register("installation_repositories", "removed")
async def on_removed(event: Event, services: Services) -> None:
    """The App left repositories: their schedules stop."""
    if services.db is None:
        return
    key = "repositories" if event.name == "installation" else "repositories_removed"
    for name in _names(event, key):
        await table.forget_repository(services.db, repo=name)


@kinds.register(SYNC_JOB)
async def run_sync(job: ClaimedJob, services: Services) -> None:
    """Read one repository's config and make its rows say the same (an invalid config changes
    nothing: its problems go to the rows, which the status page shows)."""
    repo, installation_id = job.payload["repo"], job.payload.get("installation_id")
    assert services.db is not None
    session = await open_session(services, repo=repo, issue=0, installation_id=installation_id)
    config = await session.load_config()
    if config is None:
        problems = "; ".join(session.config_error.problems if session.config_error else [])
        log.warning("%s: schedules left as they were: %s", repo, problems)
        await table.note_problem(services.db, repo=repo, text=f"{CONFIG_PATH} is invalid: {problems}"[:500])
        return
    found = [resolve(repo, s) for s in config.schedules]
    now = services.clock()
    result = await table.sync(
        services.db, repo=repo, installation_id=installation_id, schedules=found, now=now
    )
    if result.added or result.changed or result.removed:
        log.info("%s: schedules +%s ~%s -%s", repo, result.added, result.changed, result.removed)


async def queue_syncs(services: Services, *, everywhere: bool) -> None:
    """Queue a re-read of every repository with schedules (`everywhere`: and every repository the
    server has a plan of)."""
    assert services.db is not None and services.queue is not None
    repos = dict(await table.repositories(services.db))
    if everywhere:
        repos = dict(await table.planned_repositories(services.db)) | repos
    for repo, installation_id in repos.items():
        payload = {"repo": repo, "installation_id": installation_id}
        await services.queue.enqueue(
            kind=SYNC_JOB, group_key=f"{repo}#schedules", payload=payload, unique=True
        )
