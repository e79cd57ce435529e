"""What handlers get to work with: built once by the app factory (or a test), never global."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from bot.clock import utcnow
from bot.config.cache import RepoCache
from bot.errors import GitHubError, UnknownIdentity
from bot.runtime.identity import AppIdentity
from bot.store.permissions import PermissionCache
from bot.store.plans import PlanStore
from bot.store.refusals import RefusalLimiter

if TYPE_CHECKING:
    from bot.config.repo import RepoConfig
    from bot.db.engine import Database
    from bot.db.queue import JobQueue
    from bot.github.port import GitHubPort
    from bot.llm.base import LLM
    from bot.metrics import Metrics
    from bot.runtime.settings import Settings
    from bot.sandbox.confinement import Sandbox

log = logging.getLogger(__name__)
IDENTITY_RETRY_DELAYS = (0.5, 2.0)
"""Pauses between attempts to learn the App's slug before the job is retried later."""


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
    refusals: RefusalLimiter = field(default_factory=RefusalLimiter)
    """Who was told no where: an outsider is refused once per issue, then not again."""
    repo_cache: RepoCache = field(default_factory=RepoCache)
    plan_store: PlanStore = field(default_factory=PlanStore)
    # Runs a job now (the Action) or queues it (the server): `enqueue(kind, group_key, payload)`.
    enqueue: Callable[[str, str, dict[str, Any]], Awaitable[None]] | None = None
    # Where the App's slug comes from (the App-level JWT client); else asked of the port.
    slug_source: Callable[[], Awaitable[str | None]] | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    sandbox: Sandbox | None = None
    """The operator's sandbox policy; None builds it from the settings (server default: required)."""
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    _identity: AppIdentity | None = None
    _slug: str | None = None
    _slug_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _plan_locks: dict[str, asyncio.Lock] = field(default_factory=dict)

    @property
    def identity(self) -> AppIdentity:
        """The App as GitHub knows it (its page, its bot's and the approvers' addresses), learned once."""
        if self._identity is None:
            settings = self.settings
            self._identity = AppIdentity(
                api_url=settings.github_api_url, server_url=settings.github_server_url
            )
        return self._identity

    async def app_slug(self, port: GitHubPort) -> str | None:
        """The App's slug (for `@slug` mentions and our comments' author), learned once.

        Only a known answer is kept: a failed lookup is retried with backoff and then raises
        (the job is retried later). It never falls back to "any bot": the bot's login decides
        which comments carry plan state. With `bot_login` set (the Action) a missing slug is fine.
        """
        if self._slug is not None:
            return self._slug or None
        async with self._slug_lock:
            if self._slug is None:
                self._slug = await self._learn_slug(port)
        return self._slug or None

    async def _learn_slug(self, port: GitHubPort) -> str:
        source = self.slug_source or port.get_app_slug
        problem = "GitHub did not say"
        for delay in (*IDENTITY_RETRY_DELAYS, None):
            try:
                slug = await source()
            except GitHubError as exc:
                slug, problem = None, exc.message
            if slug:
                return slug
            if self.bot_login:
                return ""  # an explicit login (the Action's token): no slug needed
            if delay is None:
                break
            log.warning("could not learn the App's slug (%s): retrying in %ss", problem, delay)
            await self.sleep(delay)
        raise UnknownIdentity(f"the App's own identity is unknown ({problem}): retrying later")

    def sandbox_policy(self) -> Sandbox:
        """The sandbox every untrusted process of this process runs in."""
        if self.sandbox is None:
            sandbox = self.settings.sandbox_policy()
            if self.metrics is not None:  # what the egress proxies refuse is counted on /metrics
                counter = self.metrics.egress_blocked
                sandbox = replace(sandbox, on_blocked=lambda proxy: counter.labels(proxy).inc())
            self.sandbox = sandbox
        return self.sandbox

    def plan_lock(self, repo: str, issue: int) -> asyncio.Lock:
        """Serialises this process's writes of one plan (the database compare-and-swap spans processes)."""
        return self._plan_locks.setdefault(f"{repo.lower()}#{issue}", asyncio.Lock())
