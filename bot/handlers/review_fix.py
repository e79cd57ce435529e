"""The review phase on a batch branch: the same agent-and-gates loop as a story, then a push
that never overwrites someone else's work, and a reply that says what changed."""

from __future__ import annotations

import functools
import logging
from dataclasses import replace
from typing import Any

from bot.agent.base import Phase
from bot.errors import AgentError, GitHubError, WorkspaceError
from bot.handlers.execution import NoSave, build_run, still_wanted
from bot.handlers.plan_io import update_plan
from bot.handlers.session import Session
from bot.handlers.stack import enqueue_restack
from bot.orchestration.run import RunSuperseded
from bot.orchestration.scheduler import batch_branch
from bot.orchestration.story import _attempts
from bot.plan import Story
from bot.plan.stack import is_open
from bot.plan.state import PlanState, StoryState, StoryStatus, with_batch
from bot.rendering import messages
from bot.sandbox.removal import discard
from bot.workspace.git import PushRejected
from bot.workspace.worktree import add_worktree, changed_files, head_sha, remove_worktree

log = logging.getLogger(__name__)


async def review_context(
    session: Session, pr_number: int, review_id: int | None, feedback: str
) -> tuple[str, list[str]]:
    """The feedback plus the review's line comments, and the files they point at."""
    lines = [feedback.strip()]
    files: list[str] = []
    if review_id is not None:
        try:
            comments = await session.port.list_review_comments(session.repo, pr_number, review_id)
        except GitHubError as exc:
            log.warning("could not read the review's comments: %s", exc.message)
            comments = []
        for c in comments:
            lines.append(f"- {c.path}:{c.line or '?'}: {c.body}")
            if c.path and c.path not in files:
                files.append(c.path)
    return "\n".join(lines), files


async def apply_review_fix(
    session: Session,
    *,
    batch: int,
    pr_number: int,
    feedback: str,
    review_id: int | None,
    announce: bool = True,
    files: list[str] | None = None,
    ci_output: str | None = None,
    ci_loop: bool = False,
) -> tuple[str | None, str]:
    """Run the review phase on the batch branch and push the result.

    Returns the pushed head (None when nothing was pushed) and what happened, in a sentence;
    with `announce`, that is also said on the PR. A human review requesting changes stops the
    CI loop on the PR (the review loop takes over). With `ci_output` (the CI loop's fix) the
    `feedback` is the bot's own instructions and `ci_output` what CI printed, fenced as data:
    the agent gets the `ci` phase, never a reviewer's feedback to address point by point.
    Right before the agent runs, the plan is read again: a cancel (or, for the CI loop's fix, a
    stopped loop) since then runs nothing.
    """
    loaded = await session.load_plan()
    if loaded is None or batch > len(loaded.state.batches):
        await session.port.create_issue_comment(
            session.repo, pr_number, body="This batch has no plan any more."
        )
        return None, "this batch has no plan any more"
    record = loaded.state.batches[batch - 1]
    if record.pr_number != pr_number:  # a fork's PR can copy our branch name and body marker
        body = f"This pull request is not batch {batch}'s (#{record.pr_number}): nothing to fix here."
        await session.port.create_issue_comment(session.repo, pr_number, body=body)
        return None, "not the batch's pull request"
    branch = record.branch or batch_branch(f"plan-cascade/{session.issue}", batch)
    if record.hands_off:
        await session.port.create_issue_comment(session.repo, pr_number, body=messages.hands_off(branch))
        return None, "someone else pushed to the branch"
    if review_id is not None and not record.ci_stopped:
        stop = functools.partial(_ci_stopped, batch=batch, why="a review requested changes")
        loaded = await update_plan(session, loaded, stop)
    text, named = await review_context(session, pr_number, review_id, feedback)
    files = [*named, *(f for f in files or [] if f not in named)]
    story = _fix_story(
        batch, text, [f for f in files if not f.startswith(("/", ".."))], ci=ci_output is not None
    )
    comment = await session.port.get_issue_comment(session.repo, loaded.comment_id)
    base_run = await build_run(session, loaded.state, loaded.comment_id, comment.html_url)
    scratch = loaded.state.model_copy(
        update={
            "prd": loaded.state.prd.model_copy(update={"stories": [*loaded.state.prd.stories, story]}),
            "stories": {**loaded.state.stories, story.id: StoryState(status=StoryStatus.RUNNING)},
        }
    )
    wanted = still_wanted(session, loaded.state.plan_hash, fix_batch=batch, ci=ci_loop)
    run = replace(base_run, state=scratch, reporter=NoSave(base_run.reporter), still_wanted=wanted)
    await run.mirror.fetch()  # clones a missing mirror
    remote = await run.mirror.remote_sha(branch)
    if remote is None or (record.head_sha and remote != record.head_sha):
        await _hands_off(session, pr_number, branch, loaded, batch)
        return None, "someone else pushed to the branch"
    path = run.work_root / f"review-{batch}"
    home = run.work_root / f".home-review-{batch}"
    home.mkdir(parents=True, exist_ok=True)
    wt = await add_worktree(
        run.mirror, branch=branch, base_ref=f"refs/remotes/origin/{branch}", path=path, reset=True
    )
    try:
        before = await head_sha(wt)
        phase: Phase = "review" if ci_output is None else "ci"
        await _attempts(run, story, wt, home, before, start=0, first_phase=phase, feedback=ci_output or text)
        result = run.state.stories[story.id]
        after = await head_sha(wt)
        changed = await changed_files(wt, before) if after != before else []
        if after != before and result.status == StoryStatus.PASSED:
            try:
                after = await run.mirror.push(branch, expected_remote_sha=remote, force=True)
            except PushRejected:
                await _hands_off(session, pr_number, branch, loaded, batch)
                return None, "someone else pushed to the branch"
            loaded = await update_plan(
                session, loaded, functools.partial(_with_head, batch=batch, head=after)
            )
            await _flow_up(session, loaded.state, batch=batch, pr_number=pr_number)
        if announce:
            await session.port.create_issue_comment(
                session.repo, pr_number, body=_reply(result, changed, after != before)
            )
        if after != before and result.status == StoryStatus.PASSED:
            return after, f"pushed {after[:12]} ({', '.join(changed[:5]) or 'no file names'})"
        return None, f"nothing pushed: {result.reason or 'the gates did not pass'}"
    except RunSuperseded as exc:
        log.info("review fix on batch %s not run: %s", batch, exc.why)
        return None, f"nothing run: {exc.why}"
    except (WorkspaceError, AgentError) as exc:
        if announce:
            await session.port.create_issue_comment(
                session.repo, pr_number, body=f"Plan Cascade could not apply the feedback: {exc.message}"
            )
        return None, f"the agent could not run: {exc.message}"
    finally:
        await remove_worktree(wt)
        await discard(home)


async def _flow_up(session: Session, state: PlanState, *, batch: int, pr_number: int) -> None:
    """A fix pushed to batch `batch`: the open batches stacked on it are rebuilt on top of it."""
    assert session.config is not None
    if session.config.execution.stacking != "stacked":
        return
    if any(is_open(b) for b in state.batches[batch:]):
        cause = f"after the fix pushed to batch {batch} (#{pr_number})"
        await enqueue_restack(session, start=batch + 1, reason="fix", cause=cause)


def _fix_story(batch: int, text: str, files: list[str], *, ci: bool) -> Story:
    """The scratch story of a fix: a reviewer's feedback to address, or CI to make pass."""
    if ci:
        return Story(
            id=f"CI-{batch:03d}",
            title=f"Make the repository's CI pass on batch {batch}",
            description=text,
            acceptance_criteria=["The failing CI checks pass and every story's criteria still hold"],
            files=files,
        )
    return Story(
        id=f"FIX-{batch:03d}",
        title=f"Address review feedback on batch {batch}",
        description=text,
        acceptance_criteria=["Every point of the reviewer's feedback is addressed and all gates pass"],
        files=files,
    )


def _reply(result: StoryState, changed: list[str], moved: bool) -> str:
    if result.status == StoryStatus.PASSED and moved:
        files = "\n".join(f"- `{f}`" for f in changed[:50]) or "- (no file names)"
        gates = ", ".join(f"{k}: {v}" for k, v in sorted(result.gates.items())) or "no gates"
        summary = (result.summary or "").strip()
        return f"Pushed a new commit for this feedback ({gates}).\n\n**Changed files**\n{files}" + (
            f"\n\n**Agent's summary**\n\n{summary}" if summary else ""
        )
    reason = result.reason or "the gates did not pass"
    return f"Plan Cascade tried to apply the feedback but did not push: {reason}."


def _with_head(state: PlanState, *, batch: int, head: str) -> PlanState:
    return with_batch(state, state.batches[batch - 1].model_copy(update={"head_sha": head}))


def _ci_stopped(state: PlanState, *, batch: int, why: str) -> PlanState:
    return with_batch(state, state.batches[batch - 1].model_copy(update={"ci_stopped": why}))


def _hands_off_record(state: PlanState, *, batch: int) -> PlanState:
    return with_batch(state, state.batches[batch - 1].model_copy(update={"hands_off": True}))


async def _hands_off(session: Session, pr_number: int, branch: str, loaded: Any, batch: int) -> None:
    await update_plan(session, loaded, functools.partial(_hands_off_record, batch=batch))
    await session.port.create_issue_comment(session.repo, pr_number, body=messages.hands_off(branch))
