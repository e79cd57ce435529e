"""Keeping the `schedules` table in step with each repository's config (`bot.db.schedules.sync`).

A repository's schedules are read again when a push to its default branch touches
`.github/plan-cascade.yml`, when the App is installed on it, every `RESYNC_EVERY` for the
repositories that have schedules, and at start and hourly for every repository the server
has planned in and, a bounded number a pass, every other one its installations list
(`bot.schedules.discover`): an upgrade finds the schedules already in their files; a sync GitHub
failed is made up for. A repository the App leaves loses
its rows. The Action keeps no table: it reads the config each time it runs.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from bot.config.errors import config_error
from bot.config.load import load_repo_config
from bot.config.repo import CONFIG_PATH
from bot.config.schedules import Schedule, frequency_problems, resolve
from bot.db import schedules as table
from bot.db.queue import ClaimedJob
from bot.errors import GitHubError, RepoConfigError
from bot.handlers.session import open_session
from bot.runtime.routing import Event, Router
from bot.runtime.services import Services
from bot.runtime.worker import JobKinds
from bot.schedules.discover import unknown_repositories

router = Router()
kinds = JobKinds()
log = logging.getLogger(__name__)

SYNC_JOB = "schedule_sync"
RESYNC_EVERY = timedelta(minutes=10)
"""How often the repositories that have schedules have their config read again (a missed push)."""
RESYNC_PLANNED_EVERY = timedelta(hours=1)
"""How often every repository the server has planned in is read for schedules (a missed push or
installation event, a sync GitHub failed)."""
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
    commits = [c for c in data.get("commits") or [] if isinstance(c, dict)]
    touched = {
        path
        for commit in commits
        for key in ("added", "modified", "removed")
        for path in commit.get(key) or []
    }
    # A forced push, or one listing GitHub's most (20 commits), may have changed it unlisted.
    if CONFIG_PATH in touched or data.get("forced") or len(commits) >= 20:
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


async def read_schedules(services: Services, repo: str, installation_id: int | None) -> list[Schedule]:
    """The schedules the default branch's config holds now, read past every cache (the caches keep
    their own rules); RepoConfigError with the file's problems, or those of its schedules that
    this server refuses (`PLAN_CASCADE_SCHEDULE_MIN_MINUTES`)."""
    session = await open_session(services, repo=repo, issue=0, installation_id=installation_id)
    text = await session.port.get_file_text(repo, CONFIG_PATH, ref=session.default_branch)
    config = await asyncio.to_thread(load_repo_config, text)
    minimum = services.settings.schedule_min_minutes
    problems = await asyncio.to_thread(frequency_problems, repo, config.schedules, min_minutes=minimum)
    if problems:
        raise config_error(problems)
    return config.schedules


@kinds.register(SYNC_JOB)
async def run_sync(job: ClaimedJob, services: Services) -> None:
    """Read one repository's config and make its rows say the same (an invalid config changes
    nothing: its problems go to the rows, which the status page shows). GitHub failing is left to
    the next push or poll: a sync is never worth a retry loop."""
    repo, installation_id = job.payload["repo"], job.payload.get("installation_id")
    assert services.db is not None
    try:
        schedules = await read_schedules(services, repo, installation_id)
    except GitHubError as exc:
        log.warning("%s: schedules not read (%s); the next push or poll reads them", repo, exc.message)
        return
    except RepoConfigError as exc:
        problems = "; ".join(exc.problems)
        log.warning("%s: schedules left as they were: %s", repo, problems)
        await table.note_problem(services.db, repo=repo, text=f"{CONFIG_PATH} is invalid: {problems}"[:500])
        return
    found = [resolve(repo, s) for s in schedules]
    now = services.clock()
    result = await table.sync(
        services.db, repo=repo, installation_id=installation_id, schedules=found, now=now
    )
    if result.added or result.changed or result.removed:
        log.info("%s: schedules +%s ~%s -%s", repo, result.added, result.changed, result.removed)


async def queue_syncs(services: Services, *, everywhere: bool) -> None:
    """Queue a re-read of every repository with schedules (`everywhere`: and every repository the
    server has a plan of, and some the App is installed on that it knows nothing of
    (`bot.schedules.discover`): at start, then every `RESYNC_PLANNED_EVERY`)."""
    assert services.db is not None and services.queue is not None
    repos = dict(await table.repositories(services.db))
    if everywhere:
        repos = dict(await table.planned_repositories(services.db)) | repos
        known = {name.lower() for name in repos}
        repos |= await unknown_repositories(services, known)
    for repo, installation_id in repos.items():
        payload = {"repo": repo, "installation_id": installation_id}
        await services.queue.enqueue(
            kind=SYNC_JOB, group_key=f"{repo}#schedules", payload=payload, unique=True
        )
