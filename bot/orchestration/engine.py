"""The execution engine: batches in order, stories of a batch in parallel, then publish.

Every transition goes through `Run.update`, which saves the state before the next step,
so an interrupted run resumes: passed stories are never re-run and an interrupted story
restarts from its branch.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from typing import Any

from bot.environment.setup import missing_program
from bot.gates.report import fenced_tail
from bot.orchestration.basecheck import check_base, needs_base_check
from bot.orchestration.batch import MergeAhead, merge_batch
from bot.orchestration.reflection import reflect
from bot.orchestration.run import BudgetExceeded, Run, RunSuperseded, batch_base
from bot.orchestration.scheduler import in_scope, outcome, runnable, shared_files
from bot.orchestration.story import run_story
from bot.plan.baseline import BaseCheck
from bot.plan.state import PlanState, PlanStatus, StoryStatus, skip_dependents, transition
from bot.rendering import messages

SETUP_COMMENT_CHARS = 6000

log = logging.getLogger(__name__)


def _add_warnings(state: PlanState, *, warnings: list[str]) -> PlanState:
    return state.model_copy(update={"warnings": [*state.warnings, *warnings]})


async def execute(run: Run) -> PlanState:
    """Run the plan's approved stories to an outcome; returns the final state.

    When someone else changes the plan meanwhile (a revise, a cancel), the run stops where
    it is and returns their state without writing over it.
    """
    run.tidying = {}
    try:
        return await _execute(run)
    except RunSuperseded as exc:
        log.info("execution stopped: %s", exc.why)
        return exc.state
    finally:
        await _tidied(run)


async def _tidied(run: Run) -> None:
    """Wait for the story and batch worktrees still being removed (`Run.tidying`): none outlives
    the run."""
    pending, run.tidying = run.tidying or {}, None
    ended = await asyncio.gather(*pending.values(), return_exceptions=True)
    for path, done in zip(pending, ended, strict=True):
        if isinstance(done, BaseException):
            log.warning("could not remove worktree %s: %s", path, done)


async def _execute(run: Run) -> PlanState:
    if run.state.status in (PlanStatus.APPROVED, PlanStatus.PAUSED, PlanStatus.FAILED):
        await run.update(
            lambda s: transition(s, PlanStatus.RUNNING, at=run.clock(), note=None), important=True
        )
    if run.state.status != PlanStatus.RUNNING:
        log.info("plan is %s: nothing to execute", run.state.status.value)
        return run.state
    await run.mirror.fetch()  # clones (and fetches) a missing mirror, else fetches once
    if needs_base_check(run):
        check = await check_base(run)  # its setup; its gates may go on beside the first batch
        if check.setup_failed:
            return await _stop_for_base_setup(run, check)
    try:
        return await _batches(run)
    finally:
        await _stop_base_check(run)  # still running only when the run stops early


async def _batches(run: Run) -> PlanState:
    batches = run.state.batches_ids()
    for number, ids in enumerate(batches, start=1):
        if run.cancel.is_set():
            break
        if number > 1 and run.config.execution.stacking == "sequential" and not _previous_merged(run, number):
            if any(
                in_scope(run.state, sid) and run.state.stories[sid].status in (StoryStatus.PENDING,)
                for sid in ids
            ):
                return await _wait_for_merge(run, number)
        ready = runnable(run.state, ids)
        overlap = [w for w in shared_files(run.state, ready) if w not in run.state.warnings]
        if overlap:
            await run.update(functools.partial(_add_warnings, warnings=overlap), important=True)
        base = batch_base(run, number)
        # Each story merged as it is done, in the batch's order (those not run now are done).
        ahead = MergeAhead(run, number, ids, base, done=[sid for sid in ids if sid not in ready])
        run.merges_ahead[number] = ahead.taken
        try:
            stopped = await _run_batch(run, number, ids, ready, base, ahead)
        finally:
            ahead.close()
            run.merges_ahead.pop(number, None)
        if stopped is not None:
            return stopped
        if run.cancel.is_set():
            break
    if run.cancel.is_set():
        return run.state
    return await _finish(run)


async def _run_batch(
    run: Run, number: int, ids: list[str], ready: list[str], base: str, ahead: MergeAhead
) -> PlanState | None:
    """Run batch `number`'s `ready` stories, then merge and publish what passed; the state to
    return when the run stops here (a budget pause), else None."""
    if ready:
        limit = asyncio.Semaphore(run.config.execution.max_parallel)
        runner = run.story_runner or run_story
        tasks: list[asyncio.Task[Any]] = [
            asyncio.create_task(_guarded(run, sid, base, limit, runner, ahead.finished)) for sid in ready
        ]
        if run.base_pending is not None:  # its error stops the batch at once, not when judged
            tasks.append(run.base_pending)
        try:
            await asyncio.gather(*tasks)
        except BaseException as exc:
            # Stop every story (and the base check's gates) and let their cleanup (worktrees,
            # processes) finish; the base check's own error is the one that counts.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if isinstance(exc, BudgetExceeded):
                return await _pause_for_budget(run)
            error = _base_error(run)
            if error is not None and error is not exc:
                raise error from None
            raise
    if run.cancel.is_set():
        return None
    await _base_check_done(run)  # before the first batch is merged: its integration gates judge too
    passed = [sid for sid in ids if run.state.stories[sid].status == StoryStatus.PASSED]
    batch_state = run.state.batches[number - 1] if number - 1 < len(run.state.batches) else None
    # Publish what changed, and what a crash left unpublished (no PR recorded yet).
    unpublished = batch_state is not None and batch_state.pr_number is None
    if passed and run.publisher is not None and (ready or unpublished):
        run.state = await run.publisher.publish_batch(run, number, passed)
    elif passed and run.publisher is None and ready:
        # Nothing publishes, but the next batch still starts from this batch's merge.
        await merge_batch(run, number, passed)
    return None


async def _base_check_done(run: Run) -> None:
    """Wait for the base check's gates (saved in the state by then); their error is raised here."""
    pending, run.base_pending = run.base_pending, None
    if pending is not None:
        await pending


def _base_error(run: Run) -> BaseException | None:
    pending = run.base_pending
    if pending is None or not pending.done() or pending.cancelled():
        return None
    return pending.exception()


async def _stop_base_check(run: Run) -> None:
    """The base check's gates are cancelled when the run stops before they are done (a cancel,
    a budget pause, an error); nothing of them is left running or unawaited."""
    pending, run.base_pending = run.base_pending, None
    if pending is not None:
        pending.cancel()
        await asyncio.gather(pending, return_exceptions=True)


async def _guarded(
    run: Run, sid: str, base: str, limit: asyncio.Semaphore, runner: Any, done: Callable[[str], None]
) -> None:
    async with limit:
        if run.parallel_cap is not None:
            async with run.parallel_cap:
                await runner(run, sid, base)
        else:
            await runner(run, sid, base)
    done(sid)
    if run.state.stories[sid].status == StoryStatus.FAILED:
        await run.update(lambda s: skip_dependents(s, sid, at=run.clock()), important=True)
    reason = run.over_budget()
    if reason:
        run.budget_note = reason
        raise BudgetExceeded(reason)


def _previous_merged(run: Run, number: int) -> bool:
    previous = run.state.batches[number - 2] if number - 2 < len(run.state.batches) else None
    return previous is None or previous.merged or previous.pr_number is None


async def _wait_for_merge(run: Run, number: int) -> PlanState:
    previous = run.state.batches[number - 2]
    note = (
        f"waiting for batch {number - 1} (#{previous.pr_number}) to be merged before batch {number} starts "
        "(execution.stacking: sequential)"
    )
    return await run.update(
        lambda s: transition(s, PlanStatus.PAUSED, at=run.clock(), note=note), important=True
    )


async def _pause_for_budget(run: Run) -> PlanState:
    note = f"paused: {run.budget_note}"
    stories = {
        sid: (
            st.model_copy(update={"status": StoryStatus.PENDING}) if st.status == StoryStatus.RUNNING else st
        )
        for sid, st in run.state.stories.items()
    }
    state = await run.update(
        lambda s: transition(
            s.model_copy(update={"stories": stories}), PlanStatus.PAUSED, at=run.clock(), note=note
        ),
        important=True,
    )
    await run.say("cost-paused", messages.cost_paused(state, run.config.limits.max_cost_usd))
    return state


async def _stop_for_base_setup(run: Run, check: BaseCheck) -> PlanState:
    """Setup fails on the unchanged base: the plan stops before any agent runs, said once."""
    label = check.base_label or check.base_sha[:7]
    note = f"setup fails on {label}: no story ran; fix it, then `retry`"
    state = await run.update(
        lambda s: transition(s, PlanStatus.FAILED, at=run.clock(), note=note), important=True
    )
    output = fenced_tail(check.setup_output, budget=SETUP_COMMENT_CHARS)
    await run.say(
        f"base-setup-{check.key[:12]}",
        messages.base_setup_failed(
            label=label,
            commands=fenced_tail("\n".join(run.state.setup), budget=4000),
            output=output,
            missing=missing_program(check.setup_exit_code, check.setup_output),
        ),
    )
    return state


async def _finish(run: Run) -> PlanState:
    end = outcome(run.state)
    if end == PlanStatus.FAILED:
        revised = await reflect(run)
        if revised is not None:
            return revised
    note = {
        PlanStatus.COMPLETED: "all stories passed",
        PlanStatus.AWAITING_APPROVAL: "the approved part is done: approve the rest to continue",
        PlanStatus.FAILED: "some stories failed",
    }[end]
    state = await run.update(
        lambda s: transition(s, end, at=run.clock(), note=note).model_copy(
            update={"finished_by": run.job_key}
        ),
        important=True,
    )
    await announce_outcome(run)
    return state


async def announce_outcome(run: Run) -> None:
    """Say how the run ended: once per job, also when a job is redone after a crash."""
    if run.state.status == PlanStatus.FAILED:
        await run.say("failed", messages.plan_failed(run.state))
