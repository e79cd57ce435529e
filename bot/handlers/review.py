"""Batch pull requests: the review loop and completion.

- `/plan-cascade fix <feedback>` on a batch PR, or a review requesting changes by a
  permitted user, sends the agent (review phase) to the batch branch with the feedback
  and the review's line comments; gates re-run; the bot pushes and replies.
- A merged batch PR is recorded; with `stacking: sequential` it starts the next batch;
  when every batch PR is merged, a final summary is posted on the issue. Only the recorded
  PR, from this repository, merged at (or after) the recorded head counts (`merge_problem`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bot.db.queue import ClaimedJob
from bot.errors import GitHubError
from bot.github.models import PullRequest
from bot.handlers.approval import start_execution
from bot.handlers.epic import child_moved, on_child_merged
from bot.handlers.plan_io import update_plan
from bot.handlers.review_fix import apply_review_fix
from bot.handlers.session import Session, open_session, session_for_job
from bot.plan.state import BatchState, PlanState, PlanStatus, transition
from bot.rendering import messages
from bot.rendering.pr_body import parse_batch_marker
from bot.runtime.commands import Command
from bot.runtime.routing import Event, Router
from bot.runtime.services import Services
from bot.runtime.worker import JobKinds
from bot.store.permissions import is_bot

if TYPE_CHECKING:
    from bot.handlers.commands import Author

router = Router()
kinds = JobKinds()
log = logging.getLogger(__name__)
FIX_JOB = "review_fix"
_BATCH_BRANCH = re.compile(r"^plan-cascade/(\d+)/batch-(\d+)$")


def batch_of_pr(repo: str, head_ref: str, body: str | None) -> tuple[int, int] | None:
    """(issue, batch) of a batch PR, from its body marker or its head branch name."""
    marker = parse_batch_marker(body)
    if marker is not None and marker[0].lower() == repo.lower():
        return marker[1], marker[2]
    match = _BATCH_BRANCH.match(head_ref or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def merge_problem(repo: str, record: BatchState, pr: PullRequest, commits: Sequence[str]) -> str | None:
    """Why a merged pull request is not the batch's merge (None when it is).

    Only the pull request the plan recorded for the batch counts, with its head branch in this
    repository (a fork can name its branch like ours and copy our body marker), merged with
    the head the bot recorded or a later one: `commits` (the pull request's commits) must hold
    the recorded head when the merged head is another.
    """
    if record.pr_number is None or pr.number != record.pr_number:
        return f"the batch's pull request is #{record.pr_number}" if record.pr_number else "no PR recorded"
    if not pr.merged:
        return "it is not merged"
    if pr.head_repo.lower() != repo.lower() or pr.base_repo.lower() != repo.lower():
        return f"its head is in {pr.head_repo or 'an unknown repository'}, not {repo}"
    if not record.head_sha:
        return "no head was recorded for the batch"
    if pr.head_sha != record.head_sha and record.head_sha not in commits:
        return f"its head {pr.head_sha[:12]} does not build on the batch's head {record.head_sha[:12]}"
    return None


async def _merge_problem(session: Session, record: BatchState, number: int) -> str | None:
    """`merge_problem` on the pull request as GitHub has it now; a GitHub error counts nothing."""
    if record.pr_number != number:  # the common case for foreign PRs: no request needed
        return merge_problem(session.repo, record, PullRequest(number=number), [])
    try:
        pr = await session.port.get_pull_request(session.repo, number)
        commits: list[str] = []
        if pr.head_sha != record.head_sha:
            commits = [c.sha for c in await session.port.list_pull_request_commits(session.repo, number)]
    except GitHubError as exc:
        return f"GitHub could not confirm it ({exc.message})"
    return merge_problem(session.repo, record, pr, commits)


async def on_pr_command(session: Session, cmd: Command, *, author: Author, pr_number: int) -> None:
    """Commands commented on a pull request: `fix` on batch PRs, `help` anywhere."""
    if cmd.name == "help":
        await session.reply(
            messages.help_text(
                session.app_slug, session.config.trigger_label if session.config else "plan-cascade"
            )
        )
        return
    if not cmd.valid:
        await session.reply(messages.unknown_command(cmd.problem or cmd.name))
        return
    if cmd.name != "fix":
        await session.reply(
            messages.state_refusal(
                cmd.name,
                "on a pull request only `fix <feedback>` works; other commands go on the plan's issue",
            )
        )
        return
    pr = await session.port.get_pull_request(session.repo, pr_number)
    found = batch_of_pr(session.repo, pr.head_ref, pr.body)
    if found is None:
        await session.reply(messages.state_refusal("fix", "this pull request is not a Plan Cascade batch"))
        return
    # `fix` starts an agent: the same approval rule as `approve`.
    verdict = await session.may_start(author.login, author.association, author.type)
    if not verdict.allowed:
        await session.refuse(author.login, verdict)
        return
    await _queue_fix(
        session, issue=found[0], batch=found[1], pr_number=pr_number, feedback=cmd.text, review_id=None
    )


async def _queue_fix(
    session: Session, *, issue: int, batch: int, pr_number: int, feedback: str, review_id: int | None
) -> None:
    enqueue = session.services.enqueue
    assert enqueue is not None
    await enqueue(
        FIX_JOB,
        f"{session.repo}#{issue}/run",
        {
            "repo": session.repo,
            "issue": issue,
            "batch": batch,
            "pr": pr_number,
            "feedback": feedback,
            "review_id": review_id,
            "installation_id": session.installation_id,
        },
    )


@router.register("pull_request_review", "submitted")
async def on_review_submitted(event: Event, services: Services) -> None:
    """A review requesting changes on a batch PR starts the review loop."""
    env, payload = event.envelope, event.payload
    review, pr = env.review, env.pull_request
    if review is None or pr is None or event.repo is None or review.state.lower() != "changes_requested":
        return
    if is_bot(review.user.login, review.user.type):
        return
    found = batch_of_pr(event.repo, pr.head.ref, pr.body)
    if found is None:
        return
    session = await open_session(
        services,
        repo=event.repo,
        issue=pr.number,
        installation_id=event.installation_id,
        default_branch=(payload.get("repository") or {}).get("default_branch"),
    )
    if await session.load_config() is None:
        return
    verdict = await session.may_start(review.user.login, review.author_association, review.user.type)
    if not verdict.allowed:
        log.info("changes requested by %s start nothing: %s", review.user.login, verdict.reason)
        return
    await _queue_fix(
        session,
        issue=found[0],
        batch=found[1],
        pr_number=pr.number,
        feedback=review.body or "Address the review comments.",
        review_id=review.id,
    )


@router.register("pull_request", "closed")
async def on_pull_request_closed(event: Event, services: Services) -> None:
    """A batch PR was merged: record it; start the next batch (sequential); summarise at the end."""
    pr = event.envelope.pull_request
    if pr is None or event.repo is None or not pr.merged:
        return
    found = batch_of_pr(event.repo, pr.head.ref, pr.body)
    if found is None:
        return
    issue, batch = found
    session = await open_session(
        services, repo=event.repo, issue=issue, installation_id=event.installation_id
    )
    if await session.load_config() is None:
        return
    loaded = await session.load_plan()
    if loaded is None or batch > len(loaded.state.batches):
        return
    problem = await _merge_problem(session, loaded.state.batches[batch - 1], pr.number)
    if problem is not None:
        log.info("merged #%s does not count as batch %s of #%s: %s", pr.number, batch, issue, problem)
        return
    waiting = done = announce = False

    def merged(state: PlanState) -> PlanState:
        nonlocal waiting, done, announce
        batches = list(state.batches)
        batches[batch - 1] = batches[batch - 1].model_copy(update={"merged": True})
        state = state.model_copy(update={"batches": batches})
        waiting = state.status == PlanStatus.PAUSED and (state.note or "").startswith(
            f"waiting for batch {batch} "
        )
        if waiting:
            state = transition(state, PlanStatus.RUNNING, at=services.clock(), note=f"batch {batch} merged")
        opened = [b for b in state.batches if b.pr_number is not None]
        done = state.status == PlanStatus.COMPLETED and bool(opened) and all(b.merged for b in opened)
        announce = done and not state.summary_posted
        if announce:
            state = state.model_copy(update={"summary_posted": True})
        return state

    saved = await update_plan(session, loaded, merged)
    state = saved.state
    opened = [b for b in state.batches if b.pr_number is not None]
    if waiting:
        await start_execution(session, saved)
    if done:  # a child of an epic: the siblings that waited for its code may start now
        await on_child_merged(session)
    else:
        await child_moved(session)
    if announce:
        elapsed = (services.clock() - state.created_at).total_seconds() / 60 if state.created_at else 0
        await session.reply(
            messages.plan_completed(
                state,
                pull_requests=[(b.pr_number, b.pr_url or "") for b in opened if b.pr_number is not None],
                elapsed_minutes=elapsed,
            )
        )


@kinds.register(FIX_JOB)
async def run_fix_job(job: ClaimedJob, services: Services) -> None:
    """The review phase on a batch branch: agent, gates, commit, push, reply."""
    data = job.payload
    session = await session_for_job(services, job)
    if session is None:
        return
    await apply_review_fix(
        session,
        batch=int(data["batch"]),
        pr_number=int(data["pr"]),
        feedback=data["feedback"],
        review_id=data.get("review_id"),
    )
