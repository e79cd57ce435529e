"""Batch pull requests: the review loop and completion.

- `/plan-cascade fix <feedback>` on a batch PR, or a review requesting changes by a
  permitted user, sends the agent (review phase) to the batch branch with the feedback
  and the review's line comments; gates re-run; the bot pushes and replies.
- `/plan-cascade rebase` on a batch PR rebuilds it (and the batches above) on what it must
  sit on now (`bot.handlers.stack`, which also handles merged batch PRs).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bot.db.queue import ClaimedJob
from bot.handlers.review_fix import apply_review_fix
from bot.handlers.session import Session, open_session, session_for_job
from bot.handlers.stack import batch_of_pr, request_rebase
from bot.rendering import messages
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


async def on_pr_command(session: Session, cmd: Command, *, author: Author, pr_number: int) -> None:
    """Commands commented on a pull request: `fix` and `rebase` on batch PRs, `help` anywhere."""
    if cmd.name == "help":
        await session.reply(
            messages.help_text(
                session.app_url, session.config.trigger_label if session.config else "plan-cascade"
            )
        )
        return
    if not cmd.valid:
        await session.reply(messages.unknown_command(cmd.problem or cmd.name))
        return
    if cmd.name not in ("fix", "rebase"):
        await session.reply(
            messages.state_refusal(
                cmd.name,
                "on a pull request only `fix <feedback>` and `rebase` work; other commands go on the "
                "plan's issue",
            )
        )
        return
    pr = await session.port.get_pull_request(session.repo, pr_number)
    found = batch_of_pr(session.repo, pr.head_ref, pr.body)
    if found is None:
        await session.reply(messages.state_refusal(cmd.name, "this pull request is not a Plan Cascade batch"))
        return
    # Both may start an agent (a fix; a story redone on conflicts): the same rule as `approve`.
    verdict = await session.may_start(author.login, author.association, author.type)
    if not verdict.allowed:
        await session.refuse(author.login, verdict)
        return
    if cmd.name == "rebase":
        plan = await open_session(
            session.services, repo=session.repo, issue=found[0], installation_id=session.installation_id
        )
        if await plan.load_config() is None:
            await plan.report_config_error()
            return
        record = await plan.load_plan()
        if (
            record is None
            or found[1] > len(record.state.batches)
            or record.state.batches[found[1] - 1].pr_number != pr_number
        ):
            await session.reply(
                messages.state_refusal("rebase", "this pull request is not its batch's pull request")
            )
            return
        await request_rebase(plan, batch=found[1], reply_on=pr_number)
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


@kinds.register(FIX_JOB, holds_worker=True)
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
