"""What handlers get to work with: built once by the app factory (or a test), never global."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from bot.db.queue import utcnow

if TYPE_CHECKING:
    from bot.db.engine import Database
    from bot.db.queue import JobQueue
    from bot.metrics import Metrics
    from bot.settings import Settings


@dataclass
class Services:
    """Settings, storage and the factories for the edges (GitHub, LLM, workspace)."""

    settings: Settings
    db: Database | None = None
    queue: JobQueue | None = None
    metrics: Metrics | None = None
    clock: Callable[[], datetime] = utcnow
    # `github_for(installation_id, repo)` returns a GitHub port; set by the app factory.
    github_for: Callable[[int | None, str], Awaitable[Any]] | None = None
    # `llm_for(repo_config)` returns an LLM; set by the app factory.
    llm_for: Callable[[Any], Any] | None = None
    extras: dict[str, Any] = field(default_factory=dict)
