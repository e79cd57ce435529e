"""`execution.backend: actions`: the App plans, approves and publishes; stories run on runners.

`ActionsStoryRunner` is the engine's `Run.story_runner`. The first story of a batch starts
ONE `workflow_dispatch` run of the repository's workflow for every runnable story of the
batch (a matrix job per story). Each story then waits for its `plan-cascade / <STORY-ID>`
check run on the story branch the runner pushed, records passed or failed, and fetches
the branch into the mirror so `merge_batch` can merge it. A runner that never answers
within `execution.runner_timeout_minutes` fails its story with a link to the workflow.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from bot.errors import GitHubError, WorkspaceError
from bot.github.models import CheckRun
from bot.github.port import GitHubPort
from bot.orchestration.actions_contract import StoryReport, dispatch_inputs, gate_of, story_check_name
from bot.orchestration.run import Run
from bot.orchestration.scheduler import runnable, story_branch
from bot.plan.state import StoryStatus

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoryResult:
    """The final check run found for a story, on the pushed head `sha`."""

    sha: str
    check: CheckRun
    report: StoryReport
    gates: dict[str, str]


@dataclass
class ActionsStoryRunner:
    """Runs stories as matrix jobs of a dispatched workflow and waits for their results."""

    port: GitHubPort
    repo: str
    workflow: str
    ref: str
    timeout_seconds: float
    poll_seconds: float = 10.0
    max_poll_seconds: float = 60.0
    clock: Callable[[], float] = time.monotonic
    new_id: Callable[[], str] = field(default=lambda: uuid.uuid4().hex[:12])
    dispatches: dict[str, str] = field(default_factory=dict)
    """Story id → the dispatch id that runs it (one dispatch per batch)."""
    refused: dict[str, str] = field(default_factory=dict)
    """Story id → why GitHub refused the dispatch meant to run it."""
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def __call__(self, run: Run, story_id: str, base_ref: str) -> None:
        """Run one story on Actions: dispatch (once per batch), wait, record the outcome."""
        branch = story_branch(run.branch_prefix, story_id)
        try:
            dispatch_id = await self._dispatch(run, story_id)
        except GitHubError as exc:
            await run.story(
                story_id,
                important=True,
                status=StoryStatus.FAILED,
                reason=f"could not start workflow {self.workflow}: {exc.message}",
            )
            return
        await run.story(story_id, important=True, status=StoryStatus.RUNNING, branch=branch, reason=None)
        result = await self._wait(run, story_id, branch, dispatch_id)
        if run.cancel.is_set():
            return
        if result is None:
            minutes = self.timeout_seconds / 60
            await run.story(
                story_id,
                important=True,
                status=StoryStatus.FAILED,
                reason=(
                    f"no result from GitHub Actions within {minutes:g} minutes "
                    f"(dispatch {dispatch_id}): {await self._runs_url()}"
                ),
            )
            return
        await self._record(run, story_id, branch, result)

    async def _dispatch(self, run: Run, story_id: str) -> str:
        async with self._lock:
            if story_id in self.refused:
                raise GitHubError(self.refused[story_id])
            if story_id in self.dispatches:
                return self.dispatches[story_id]
            batch, ids = _batch_of(run, story_id)
            stories = [sid for sid in runnable(run.state, ids) if sid not in self.dispatches]
            if story_id not in stories:
                stories.append(story_id)
            dispatch_id = self.new_id()
            inputs = dispatch_inputs(
                issue=run.state.issue,
                batch=batch,
                story_ids=stories,
                plan_hash=run.state.plan_hash,
                dispatch_id=dispatch_id,
            )
            try:
                await self.port.create_workflow_dispatch(
                    self.repo, self.workflow, ref=self.ref, inputs=inputs
                )
            except GitHubError as exc:
                for sid in stories:
                    self.refused[sid] = exc.message
                raise
            log.info("batch %s dispatched to %s (%s): %s", batch, self.workflow, dispatch_id, stories)
            for sid in stories:
                self.dispatches[sid] = dispatch_id
            return dispatch_id

    async def _wait(self, run: Run, story_id: str, branch: str, dispatch_id: str) -> StoryResult | None:
        """Poll with backoff until the story's final check run shows up; None on timeout."""
        deadline = self.clock() + self.timeout_seconds
        delay = self.poll_seconds
        while not run.cancel.is_set():
            found = await self._look(run, story_id, branch, dispatch_id)
            if found is not None:
                return found
            left = deadline - self.clock()
            if left <= 0:
                return None
            try:
                await asyncio.wait_for(run.cancel.wait(), timeout=min(delay, left))
            except TimeoutError:
                pass
            delay = min(delay * 2, self.max_poll_seconds)
        return None

    async def _look(self, run: Run, story_id: str, branch: str, dispatch_id: str) -> StoryResult | None:
        try:
            sha = await run.mirror.remote_sha(branch)
            if sha is None:
                return None
            checks = await self.port.list_check_runs_for_ref(self.repo, sha)
        except (GitHubError, WorkspaceError) as exc:
            log.warning("looking for the result of %s failed (will retry): %s", story_id, exc.message)
            return None
        name = story_check_name(story_id)
        for check in sorted(checks, key=lambda c: -c.id):
            report = StoryReport.parse(check.external_id)
            if (
                check.name == name
                and check.status == "completed"
                and report is not None
                and report.dispatch_id == dispatch_id
                and report.story_id == story_id
            ):
                gates: dict[str, str] = {}
                for other in sorted(checks, key=lambda c: c.id):
                    gate = gate_of(other.name, story_id)
                    if gate is not None and other.conclusion:
                        gates[gate] = other.conclusion
                return StoryResult(sha=sha, check=check, report=report, gates=gates)
        return None

    async def _record(self, run: Run, story_id: str, branch: str, result: StoryResult) -> None:
        record = run.state.stories[story_id]
        usage = {
            "attempts": result.report.attempts,
            "tokens": record.tokens + result.report.tokens,
            "cost_usd": record.cost_usd + result.report.cost_usd,
            "gates": result.gates,
            "agent": "actions",
        }
        if result.check.conclusion != "success":
            reason = f"the GitHub Actions run reported {result.check.conclusion}: {result.check.html_url}"
            await run.story(story_id, important=True, status=StoryStatus.FAILED, reason=reason, **usage)
            return
        try:
            await run.mirror.fetch()
            await run.mirror.git("update-ref", f"refs/heads/{branch}", result.sha)
        except WorkspaceError as exc:
            await run.story(
                story_id,
                important=True,
                status=StoryStatus.FAILED,
                reason=f"could not fetch {branch} pushed by GitHub Actions: {exc.message}",
                **usage,
            )
            return
        await run.story(
            story_id, important=True, status=StoryStatus.PASSED, commit=result.sha, reason=None, **usage
        )

    async def _runs_url(self) -> str:
        try:
            info = await self.port.get_repository(self.repo)
        except GitHubError:
            return f"workflow {self.workflow}"
        return f"{info.html_url}/actions/workflows/{self.workflow}"


def _batch_of(run: Run, story_id: str) -> tuple[int, list[str]]:
    for number, ids in enumerate(run.state.batches_ids(), start=1):
        if story_id in ids:
            return number, ids
    raise KeyError(story_id)
