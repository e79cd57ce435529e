"""Events that make what a process remembers stale: it forgets at once (else after its TTL).

- `push` to the default branch touching `.github/plan-cascade.yml`: the repository's config;
- `repository` (renamed, default branch changed, …): everything about the repository;
- `member` (a collaborator added, removed or given another role): that user's permission.

Each process keeps its own caches: with several worker processes, the one that handles the
event forgets at once and the others when their entries expire (60 s for permissions).
"""

from __future__ import annotations

import logging

from bot.config.repo import CONFIG_PATH
from bot.runtime.routing import Event, Router
from bot.runtime.services import Services

router = Router()
log = logging.getLogger(__name__)


@router.register("push")
async def on_push(event: Event, services: Services) -> None:
    """Forget the config when a push to the default branch touched it."""
    data, repo = event.payload, event.repo
    default = (data.get("repository") or {}).get("default_branch") or ""
    if repo is None or data.get("ref") != f"refs/heads/{default}":
        return
    touched = {
        path
        for commit in data.get("commits") or []
        for key in ("added", "modified", "removed")
        for path in commit.get(key) or []
    }
    if CONFIG_PATH in touched or data.get("forced") or len(data.get("commits") or []) >= 20:
        log.info("%s changed on %s: config forgotten", CONFIG_PATH, repo)
        services.repo_cache.forget(repo)


@router.register("repository")
async def on_repository(event: Event, services: Services) -> None:
    if event.repo is not None:
        services.repo_cache.forget(event.repo)
        services.permissions.forget(event.repo)


@router.register("member")
async def on_member(event: Event, services: Services) -> None:
    login = (event.payload.get("member") or {}).get("login")
    if event.repo is not None and login:
        services.permissions.forget(event.repo, login.lower())
