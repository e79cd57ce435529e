"""The `execute_plan` job: build a Run for an approved plan and drive the engine.

`cancel` kills running agents and gates (their process groups), removes the worktrees and
marks the plan cancelled. In this process it cancels the engine task directly; another
process notices the cancelled status in the database within a few seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from bot.agent.registry import AgentRegistry
from bot.config.repo import RepoConfig
from bot.db.models import PlanRecord
from bot.db.queue import ClaimedJob
from bot.gates.dependencies import AdvisoryCache, AdvisoryLookup
from bot.gates.detect import GateSpec
from bot.handlers.approval import EXECUTE_JOB
from bot.handlers.epic import child_moved, waiting_for
from bot.handlers.epic_children import open_children
from bot.handlers.plan_io import save_plan
from bot.handlers.session import Session, session_for_job
from bot.orchestration.actions_backend import ActionsStoryRunner
from bot.orchestration.engine import announce_outcome, execute
from bot.orchestration.run import CONTINUABLE, Run
from bot.plan.epic import spans_repositories
from bot.plan.state import PlanState, PlanStatus, StoryStatus, transition
from bot.publishing.github import GitHubPublisher, GitHubReporter
from bot.runtime.services import Services
from bot.runtime.worker import JobKinds
from bot.workspace.mirror import mirror_slug

log = logging.getLogger(__name__)
kinds = JobKinds()
RUNNABLE = (PlanStatus.APPROVED, PlanStatus.RUNNING, PlanStatus.PAUSED, PlanStatus.FAILED)


@dataclass
class Running:
    """An engine task of this process, for `cancel`."""

    run: Run
    task: asyncio.Task[PlanState]


def _registry(services: Services) -> dict[str, Running]:
    return services.extras.setdefault("running", {})  # type: ignore[no-any-return]


class NoSave:
    """A scratch run's reporter: gate results go to GitHub as usual, its throwaway state is not saved."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def save(self, state: PlanState, *, important: bool = False) -> PlanState | None:
        return None

    async def gate_started(self, *, scope: str, gate: GateSpec, head_sha: str, attempt: int) -> object:
        return await self.inner.gate_started(scope=scope, gate=gate, head_sha=head_sha, attempt=attempt)

    async def gate_finished(self, handle: object, **kwargs: Any) -> None:
        await self.inner.gate_finished(handle, **kwargs)

    async def message(self, body: str, *, key: str | None = None) -> None:
        await self.inner.message(body, key=key)


def still_wanted(
    session: Session, plan_hash: str, *, fix_batch: int | None = None, ci: bool = False
) -> Callable[[], Awaitable[str | None]]:
    """The check before each agent run: the plan read afresh (never an older state pasted back,
    see `bot.store.trust`) must still be this revision and runnable (a story run) or not
    cancelled (a fix on batch `fix_batch`'s PR); for the CI loop's fix (`ci`), the loop on that
    batch must not have been stopped meanwhile (a cancel, a push by someone else, a review)."""

    async def why_not() -> str | None:
        fresh = await session.store.load(
            session.port, session.repo, session.issue, bot_login=session.bot_login
        )
        if fresh is None:
            return "the plan can no longer be read"
        state = fresh.state
        if state.plan_hash != plan_hash:
            return f"the plan was revised to revision {state.revision}"
        if fix_batch is None:
            runnable = state.status in CONTINUABLE
            return None if runnable else f"the plan is {state.status.value.replace('_', ' ')}"
        if state.status == PlanStatus.CANCELLED:
            return "the plan was cancelled"
        record = state.batches[fix_batch - 1] if fix_batch <= len(state.batches) else None
        if record is None or record.hands_off:
            return "the batch is not the bot's to change any more"
        if ci and record.ci_stopped:
            return f"the CI loop was stopped ({record.ci_stopped})"
        return None

    return why_not


async def build_run(session: Session, state: PlanState, comment_id: int, comment_url: str | None) -> Run:
    """Everything the engine needs for this plan on this server."""
    services, config = session.services, session.config
    assert config is not None and session.clone_url is not None
    data = services.settings.data_dir.resolve()
    slug = mirror_slug(session.clone_url)
    mirror = session.mirror()

    async def save_comment(new: PlanState) -> PlanState:
        return (await save_plan(session, new, comment_id=comment_id)).state

    async def save_progress(new: PlanState) -> PlanState:
        return (await save_plan(session, new, comment_id=comment_id, progress=True)).state

    llm_for = services.llm_for

    def llm_factory() -> Any:
        assert llm_for is not None
        return llm_for(config, None)

    reflection_llm = None
    if llm_for is not None:
        try:
            reflection_llm = llm_for(config, None)
        except Exception as exc:  # no key configured: reflection is skipped, execution goes on
            log.info("no reflection model: %s", exc)
    story_runner = None
    if config.execution.backend == "actions":
        story_runner = actions_story_runner(session, config)
    approvers = [a.user for a in state.current_approvals()]
    return Run(
        state=state,
        config=config,
        mirror=mirror,
        identity=await session.commit_identity(approvers),
        base_branch=config.execution.base_branch or session.default_branch,
        branch_prefix=f"plan-cascade/{session.issue}",
        work_root=data / "worktrees" / slug / str(session.issue),
        transcripts=data / "transcripts" / slug / str(session.issue),
        agents=AgentRegistry(llm_factory if llm_for is not None else None, config.agent.commands),
        reporter=GitHubReporter(
            session.port,
            session.repo,
            session.issue,
            save_comment=save_comment,
            save_progress=save_progress,
            bot_login=session.bot_login,
        ),
        publisher=GitHubPublisher(
            session.port, session.repo, plan_url=comment_url or "", bot_login=session.bot_login
        ),
        push=True,
        tool_path=services.settings.tool_path,
        clock=services.clock,
        parallel_cap=services.extras.get("story_cap"),
        reflection_llm=reflection_llm,
        review_llm=reflection_llm,
        story_runner=story_runner,
        sandbox=services.sandbox_policy(),
        still_wanted=still_wanted(session, state.plan_hash),
        advisories=AdvisoryLookup(session.port, services.extras.setdefault("advisories", AdvisoryCache())),
        scanned=services.extras.setdefault("scanned", set()),  # the process's: a push is scanned once
    )


@kinds.register(EXECUTE_JOB, holds_worker=True)
async def run_execute_job(job: ClaimedJob, services: Services) -> None:
    """Run (or resume) an approved plan."""
    data = job.payload
    session = await session_for_job(services, job)
    if session is None:
        return
    loaded = await session.load_plan()
    if loaded is None or loaded.state.status not in RUNNABLE:
        log.info("nothing to run: plan is %s", loaded.state.status.value if loaded else "missing")
        return
    if data.get("plan_hash") and data["plan_hash"] != loaded.state.plan_hash:
        log.info("execution job is for an older revision: skipped")
        return
    if spans_repositories(loaded.state.prd, session.repo):
        await open_children(session, loaded)  # an epic across repositories runs nothing itself
        return
    pending = await waiting_for(session)
    if pending:
        waits = ", ".join(pending)
        await session.reply(
            f"This plan is approved and waits for {waits} to be merged first (an epic runs its "
            "features in dependency order, each on the code of the ones it needs). It starts by "
            "itself when the last of them is merged."
        )
        return
    comment = await session.port.get_issue_comment(session.repo, loaded.comment_id)
    run = await build_run(session, loaded.state, loaded.comment_id, comment.html_url)
    run.job_key = f"job-{job.id}"
    if loaded.state.finished_by == run.job_key:
        # This job finished the run before its worker died: say how it ended (once), nothing more.
        await announce_outcome(run)
        return
    key = f"{session.repo}#{session.issue}"
    reporter = run.reporter
    task = asyncio.create_task(execute(run))
    _registry(services)[key] = Running(run, task)
    watcher = asyncio.create_task(_watch_for_cancel(services, session, run, task))
    try:
        await task
    except asyncio.CancelledError:
        if not run.cancel.is_set():
            raise
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        _registry(services).pop(key, None)
        await _close_checks(reporter, run, task)
        if not run.superseded:
            await run.flush()
    if run.superseded:
        log.info("execution of %s stopped: %s", key, run.superseded)
        return
    if run.cancel.is_set():
        await _mark_cancelled(run, note=run.budget_note or "cancelled")
    await child_moved(session)


async def _close_checks(reporter: object, run: Run, task: asyncio.Task[Any]) -> None:
    """No check run of ours is left running when the engine stops, however it stopped."""
    if not isinstance(reporter, GitHubReporter) or not reporter.open_runs:
        return
    if run.superseded:
        conclusion, reason = "cancelled", f"superseded: {run.superseded}"
    elif run.cancel.is_set() or not task.done() or task.cancelled():
        conclusion, reason = "cancelled", "the plan's execution was cancelled"
    elif task.exception() is not None:
        conclusion, reason = "neutral", f"the run stopped before this gate finished: {task.exception()}"
    else:
        conclusion, reason = "neutral", "GitHub did not take this gate's result; see the plan comment"
    closing = asyncio.ensure_future(reporter.close_open_runs(conclusion=conclusion, reason=reason[:500]))
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.shield(closing)


async def _watch_for_cancel(services: Services, session: Session, run: Run, task: asyncio.Task[Any]) -> None:
    """A cancel written by another process shows up in the database: stop within seconds."""
    if services.db is None:
        return
    while not task.done():
        await asyncio.sleep(3)
        async with services.db.read() as db:
            row = await db.get(PlanRecord, (session.repo, session.issue))
        if row is not None and row.status == PlanStatus.CANCELLED.value:
            run.cancel.set()
            task.cancel()
            return


async def _mark_cancelled(run: Run, *, note: str) -> None:
    if run.state.status == PlanStatus.CANCELLED:
        return
    stories = {
        sid: (
            st.model_copy(update={"status": StoryStatus.CANCELLED})
            if st.status in (StoryStatus.PENDING, StoryStatus.RUNNING)
            else st
        )
        for sid, st in run.state.stories.items()
    }
    await run.update(
        lambda s: transition(
            s.model_copy(update={"stories": stories}), PlanStatus.CANCELLED, at=run.clock(), note=note
        ),
        important=True,
    )


async def cancel_execution(services: Services, repo: str, issue: int) -> int:
    """Stop this process's engine for the plan; returns how many worktrees were removed."""
    running = _registry(services).get(f"{repo}#{issue}")
    if running is None:
        return 0
    active = [sid for sid, st in running.run.state.stories.items() if st.status == StoryStatus.RUNNING]
    running.run.cancel.set()
    running.task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await asyncio.wait_for(asyncio.shield(running.task), timeout=60)
    return len(active)


def actions_story_runner(session: Session, config: RepoConfig) -> ActionsStoryRunner:
    """The `Run.story_runner` for `execution.backend: actions` (see `build_run`)."""
    execution = config.execution
    return ActionsStoryRunner(
        port=session.port,
        repo=session.repo,
        workflow=execution.workflow,
        ref=session.default_branch,
        timeout_seconds=execution.runner_timeout_minutes * 60,
    )
