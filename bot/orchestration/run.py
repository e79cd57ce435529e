"""One execution of a plan: the `Run` record every part of the engine shares.

The engine drives it, the story runner, the batch merge, the publishers and the reporters
read and update it; it lives here, below all of them, so none imports the engine back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.db.queue import utcnow
from bot.repoconfig import RepoConfig
from bot.state import PlanState, totals, update_story
from bot.workspace.mirror import Mirror

if TYPE_CHECKING:
    from bot.orchestration.ports import Publisher, Reporter


class BudgetExceeded(Exception):
    """The plan-wide cost or token limit was reached."""


@dataclass
class Run:
    """One execution of a plan and everything it needs."""

    state: PlanState
    config: RepoConfig
    mirror: Mirror
    base_branch: str
    branch_prefix: str
    work_root: Path
    transcripts: Path
    agents: Any  # bot.agent.registry.AgentRegistry
    reporter: Reporter
    publisher: Publisher | None = None
    push: bool = True
    tool_path: str | None = None
    clock: Callable[[], datetime] = utcnow
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    parallel_cap: asyncio.Semaphore | None = None
    budget_note: str | None = None
    reflection_llm: Any = None  # an LLM for the reflection step after failures; None skips it
    # Runs one story elsewhere (e.g. a GitHub Actions runner) instead of `run_story`:
    # `story_runner(run, story_id, base_ref)` must leave the story passed or failed.
    story_runner: Callable[[Run, str, str], Awaitable[None]] | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def update(self, change: Callable[[PlanState], PlanState], *, important: bool = False) -> PlanState:
        """Apply a change to the state and save it before going on."""
        async with self._lock:
            self.state = change(self.state).model_copy(update={"updated_at": self.clock()})
            await self.reporter.save(self.state, important=important)
            return self.state

    async def story(self, story_id: str, *, important: bool = False, **changes: object) -> PlanState:
        """Change one story's record and save."""
        return await self.update(lambda s: update_story(s, story_id, **changes), important=important)

    def over_budget(self) -> str | None:
        """Why the plan must pause for cost, or None."""
        tokens, cost = totals(self.state)
        limits = self.config.limits
        if cost > limits.max_cost_usd:
            return f"cost ${cost:.2f} passed limits.max_cost_usd (${limits.max_cost_usd:.2f})"
        if tokens > limits.max_tokens:
            return f"{tokens:,} tokens passed limits.max_tokens ({limits.max_tokens:,})"
        return None


def batch_base(run: Run, batch: int) -> str:
    """The ref a batch's stories start from."""
    from bot.orchestration.scheduler import batch_branch

    if batch == 1 or run.config.execution.stacking == "sequential":
        return f"refs/remotes/origin/{run.base_branch}"
    return f"refs/heads/{batch_branch(run.branch_prefix, batch - 1)}"
