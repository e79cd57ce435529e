"""One execution of a plan: the `Run` record every part of the engine shares.

The engine drives it, the story runner, the batch merge, the publishers and the reporters
read and update it; it lives here, below all of them, so none imports the engine back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.clock import utcnow
from bot.config.identity import CommitIdentity, commit_identity
from bot.config.repo import RepoConfig
from bot.errors import StalePlan, StateError
from bot.gates.dependencies import AdvisoryLookup
from bot.orchestration.scheduler import batch_branch
from bot.plan.baseline import BaseCheck
from bot.plan.blocked import BlockedRequest, merge_blocked
from bot.plan.state import PlanState, PlanStatus, totals, update_story
from bot.sandbox.confinement import Sandbox
from bot.workspace.merging import Merging
from bot.workspace.mirror import Mirror, read_ref

if TYPE_CHECKING:
    from bot.orchestration.ports import Publisher, Reporter


class BudgetExceeded(Exception):
    """The plan-wide cost or token limit was reached."""


class BaseCheckFailed(Exception):
    """The base check's gates stopped with an error: a story that waits for them stops too (it is
    not the story's failure; the engine stops the batch and raises the base check's own error)."""


class RunSuperseded(Exception):
    """Someone changed the plan under the run (a revise, a cancel): it stops without writing."""

    def __init__(self, state: PlanState, why: str) -> None:
        super().__init__(why)
        self.state = state
        self.why = why


CONTINUABLE = (PlanStatus.APPROVED, PlanStatus.RUNNING, PlanStatus.PAUSED, PlanStatus.FAILED)
"""Statuses in which another writer's version of the same revision may be continued."""
UPDATE_ATTEMPTS = 5


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
    review_llm: Any = None
    """The model of the acceptance review of each batch; None: batches are not reviewed."""
    sandbox: Sandbox = field(default_factory=Sandbox)
    """The operator's sandbox policy for every agent, gate and setup command of the run."""
    # Runs one story elsewhere (e.g. a GitHub Actions runner) instead of `run_story`:
    # `story_runner(run, story_id, base_ref)` must leave the story passed or failed.
    story_runner: Callable[[Run, str, str], Awaitable[None]] | None = None
    job_key: str | None = None
    """The execute job driving the run: what it says is said once, however often it is redone."""
    checkpoint: Callable[[str, str], Awaitable[None]] | None = None
    """Called at each step boundary (`reached`); tests use it to stop a run as a crash would."""
    superseded: str | None = None
    """Why the run stopped because someone else changed the plan (then it writes nothing more)."""
    still_wanted: Callable[[], Awaitable[str | None]] | None = None
    """Asked right before every agent run: why the run must stop now (the plan cancelled or
    revised, the CI loop stopped), read afresh from the plan; None to go on."""
    protected: dict[Path, list[Path]] = field(default_factory=dict)
    """Worktree path → its paths bound read-only (listed once per worktree; see setup.protected)."""
    advisories: AdvisoryLookup | None = None
    """GitHub's Advisory Database for the `dependencies` check; None skips the check (local runs)."""
    base_pending: asyncio.Task[BaseCheck] | None = None
    """The base check's gates while they run beside the first batch (its setup passed already):
    its whole result, saved in the state when it is done; stories wait for it to judge their gates."""
    scanned: set[tuple[str, str, int]] = field(default_factory=set)
    """(mirror, commit, what was looked for) of the heads scanned clean, with every commit before
    them that the remote lacked (`orchestration.secretgate`): pushing them again scans nothing.
    The server shares one set between its runs; a run made without one keeps its own."""
    pip_includes: dict[str, list[tuple[str, frozenset[str]]]] = field(default_factory=dict)
    """Base commit → its requirements files that name an include option, each with the repository
    paths it includes (`orchestration.depcheck`): read once per base, not once per story."""
    pip_includes_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    tidying: dict[Path, asyncio.Task[None]] | None = None
    """While the engine runs the plan (`execute`): the story and batch worktrees being removed in
    the background, by path, off the run's way (a batch's merge does not wait for its stories',
    nor the next batch for the merge's; the next worktree at a path waits for its removal,
    `execute` for all of them); None: each is removed before its step returns (`tidy`)."""
    merges_ahead: dict[int, Callable[[], Awaitable[Merging | None]]] = field(default_factory=dict)
    """Batch → its merges begun in the mirror while its stories ran (`batch.MergeAhead`), waited
    for: what `merge_batch` takes up where it still leads to the batch's merge."""
    identity: CommitIdentity | None = None
    """Who the run's commits are by (the App's bot, learned from GitHub) and whom story commits
    credit; None: the repository config's author, else the defaults."""
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _unsaved: list[Callable[[PlanState], PlanState]] = field(default_factory=list)

    async def tidy(self, path: Path, removal: Awaitable[None]) -> None:
        """Remove the worktree at `path` (`removal`): in the background while the engine runs the
        plan (`tidying`), else now."""
        if self.tidying is None:
            await removal
        else:
            self.tidying[path] = asyncio.ensure_future(removal)

    async def untidied(self, path: Path) -> None:
        """Wait until the worktree last at `path` is gone, when it is still being removed."""
        if self.tidying is not None and path in self.tidying:
            await self.tidying.pop(path)

    async def commit_of(self, ref: str) -> str:
        """The sha `ref` names in the mirror: read from git's files when it can be (a branch or a
        remote-tracking branch, which name commits), else asked of git."""
        if ref.startswith(("refs/heads/", "refs/remotes/")):
            found = read_ref(self.mirror.path, ref)
            if found:
                return found
        return await self.mirror.resolve(ref)

    @property
    def author(self) -> CommitIdentity:
        """The identity of the run's commits."""
        return self.identity or commit_identity(self.config.agent)

    async def update(self, change: Callable[[PlanState], PlanState], *, important: bool = False) -> PlanState:
        """Apply a change to the state and save it before going on.

        Saving is a compare-and-swap. When someone else wrote the plan in between, the
        changes not yet saved are applied again to their version, if it is still this
        revision and runnable; otherwise (a revise or a cancel won) the run stops with
        RunSuperseded and writes nothing.
        """
        async with self._lock:
            if self.superseded:
                raise RunSuperseded(self.state, self.superseded)
            self._unsaved.append(change)
            state = change(self.state).model_copy(update={"updated_at": self.clock()})
            for _ in range(UPDATE_ATTEMPTS):
                try:
                    saved = await self.reporter.save(state, important=important)
                except StalePlan as exc:
                    state = self._rebase(exc)
                    important = True
                    continue
                if saved is not None:
                    self._unsaved.clear()
                self.state = saved or state
                return self.state
            raise StalePlan("the plan kept changing under the run", fresh=state)

    def _rebase(self, exc: StalePlan) -> PlanState:
        fresh = getattr(exc.fresh, "state", exc.fresh)
        assert isinstance(fresh, PlanState)
        why = None
        if fresh.plan_hash != self.state.plan_hash:
            why = f"the plan was revised to revision {fresh.revision} while it ran"
        elif fresh.status not in CONTINUABLE:
            why = f"the plan became {fresh.status.value.replace('_', ' ')} while it ran"
        if why is None:
            try:
                for change in self._unsaved:
                    fresh = change(fresh)
            except StateError as err:
                why = err.message
        if why is not None:
            self.superseded = why
            self.state = fresh
            raise RunSuperseded(fresh, why) from None
        return fresh.model_copy(update={"updated_at": self.clock()})

    async def base_check(self) -> BaseCheck | None:
        """The plan's base check, once its gates are done (None: the plan has none)."""
        pending = self.base_pending
        if pending is None:
            return self.state.base_check
        try:
            return await asyncio.shield(pending)  # a story cancelled while it waits leaves it running
        except (asyncio.CancelledError, RunSuperseded):
            raise
        except Exception as exc:
            raise BaseCheckFailed(f"the base check stopped: {exc}") from exc

    async def check_still_wanted(self) -> None:
        """RunSuperseded (nothing more is written) when the plan no longer wants this agent run."""
        why = await self.still_wanted() if self.still_wanted is not None else None
        if why is not None:
            self.superseded = why
            raise RunSuperseded(self.state, why)

    async def flush(self) -> None:
        """Write progress the reporter deferred (nothing once superseded)."""
        if self._unsaved and not self.superseded:
            await self.update(lambda s: s, important=True)

    async def say(self, kind: str, body: str) -> None:
        """Tell the maintainers something, once per job and kind."""
        await self.reporter.message(body, key=f"{self.job_key}/{kind}" if self.job_key else None)

    async def reached(self, step: str, subject: str) -> None:
        """A step boundary: `agent-finished`, `committed`, `pushed`, `gates-running` (per story),
        `merged`, `opening-pr` (per batch)."""
        if self.checkpoint is not None:
            await self.checkpoint(step, subject)

    async def story(self, story_id: str, *, important: bool = False, **changes: object) -> PlanState:
        """Change one story's record and save."""
        return await self.update(lambda s: update_story(s, story_id, **changes), important=important)

    async def note_blocked(self, story_id: str, requests: Sequence[BlockedRequest]) -> None:
        """Add what the egress proxy refused (for its agent or setup) to a story's record."""
        if not requests:
            return

        def add(state: PlanState) -> PlanState:
            kept = state.stories[story_id].blocked if story_id in state.stories else []
            return update_story(state, story_id, blocked=merge_blocked(kept, requests))

        await self.update(add)

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
    if batch == 1 or run.config.execution.stacking == "sequential":
        return f"refs/remotes/origin/{run.base_branch}"
    return f"refs/heads/{batch_branch(run.branch_prefix, batch - 1)}"
