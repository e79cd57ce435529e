"""What handlers get to work with: built once by the app factory (or a test), never global."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from bot.db.queue import utcnow
from bot.permissions import PermissionCache
from bot.plans import PlanStore

if TYPE_CHECKING:
    from bot.db.engine import Database
    from bot.db.queue import JobQueue
    from bot.github.port import GitHubPort
    from bot.llm.base import LLM
    from bot.metrics import Metrics
    from bot.repoconfig import RepoConfig
    from bot.settings import Settings


@dataclass
class Services:
    """Settings, storage and the factories for the edges (GitHub, LLM, workspace)."""

    settings: Settings
    db: Database | None = None
    queue: JobQueue | None = None
    metrics: Metrics | None = None
    clock: Callable[[], datetime] = utcnow
    # `github_for(installation_id, repo)` returns the GitHub port for that installation.
    github_for: Callable[[int | None, str], Awaitable[GitHubPort]] | None = None
    # `llm_for(repo_config, model_override)` returns an LLM for planning and the builtin agent.
    llm_for: Callable[[RepoConfig | None, str | None], LLM] | None = None
    # The login our comments are written under (e.g. `my-app[bot]`); derived from the slug if None.
    bot_login: str | None = None
    permissions: PermissionCache = field(default_factory=PermissionCache)
    plan_store: PlanStore = field(default_factory=PlanStore)
    # Runs a job now (the Action) or queues it (the server): `enqueue(kind, group_key, payload)`.
    enqueue: Callable[[str, str, dict[str, Any]], Awaitable[None]] | None = None
    # Where the App's slug comes from (the App-level JWT client); else asked of the port.
    slug_source: Callable[[], Awaitable[str | None]] | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    _slug: str | None = None
    _slug_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def app_slug(self, port: GitHubPort) -> str | None:
        """The App's slug (for `@slug` mentions and our comments' author), asked once."""
        if self._slug is None:
            async with self._slug_lock:
                if self._slug is None:
                    source = self.slug_source or port.get_app_slug
                    self._slug = await source() or ""
        return self._slug or None
