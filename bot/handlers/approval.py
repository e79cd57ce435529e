"""The approval gate: nothing runs until permitted users approve the exact plan revision.

Three ways in: `/plan-cascade approve [<hash>] [batch N | STORY-…]`, a 👍 on the plan
comment (polled: GitHub sends no webhook for reactions), and an approving review on the
plan pull request (see `plan_pr`). Each goes through the one approval rule
(`Session.may_start`) and counts only for the revision its author could have seen: a
command or a 👍 older than the revision approves nothing, and `approve <hash>` names it.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta
from typing import Literal

from bot.db.queue import ClaimedJob
from bot.errors import StateError
from bot.github.models import ReactionsPage
from bot.handlers.plan_io import sign_pending, update_plan
from bot.handlers.session import Session, open_session
from bot.plan.approval import add_approval, scope_for, written_for_revision
from bot.plan.state import Approval, PlanState, PlanStatus
from bot.rendering import messages
from bot.runtime.commands import Command
from bot.runtime.services import Services
from bot.runtime.worker import JobKinds
from bot.store.permissions import is_bot
from bot.store.plans import LoadedPlan

log = logging.getLogger(__name__)
kinds = JobKinds()
POLL_JOB = "poll_approvals"
UNSIGNED_FOR = timedelta(minutes=1)
"""A new plan comment still without its signed state after this long lost its signing edit."""
EXECUTE_JOB = "execute_plan"


async def approve_command(
    session: Session,
    cmd: Command,
    *,
    actor: str,
    association: str | None,
    written_at: datetime | None,
    user_type: str | None = None,
) -> None:
    """`/plan-cascade approve …`: approve the revision that was current when the comment was written."""
    loaded = await session.load_plan()
    if loaded is None:
        await session.reply(messages.state_refusal("approve", "this issue has no plan to approve"))
        return
    verdict = await session.may_start(actor, association, user_type)
    if not verdict.allowed:
        await session.refuse(actor, verdict)
        return
    state = loaded.state
    if cmd.revision is not None and not state.plan_hash.startswith(cmd.revision):
        log.info(
            "approve %s by %s refused: the current revision is %s", cmd.revision, actor, state.plan_hash[:12]
        )
        await session.reply(messages.stale_approval(state, user=actor, approved_hash=cmd.revision))
        return
    if not written_for_revision(written_at, state):
        log.info("approve by %s refused: written before revision %s was posted", actor, state.revision)
        await session.reply(messages.approval_predates(state, user=actor))
        return
    try:
        scope = scope_for(state, batch=cmd.batch, story_ids=cmd.stories or None)
        if cmd.batch is None and not cmd.stories:
            scope = []
        await record_approval(session, loaded, user=actor, via="command", scope=scope)
    except StateError as exc:
        await session.reply(messages.state_refusal("approve", exc.message))


async def record_approval(
    session: Session,
    loaded: LoadedPlan,
    *,
    user: str,
    via: Literal["reaction", "command", "review"],
    scope: list[str],
    plan_hash: str | None = None,
    reply: bool = True,
) -> PlanState:
    """Add an approval of `plan_hash` (default: the revision loaded), save, start when approved.

    The approval binds to the revision its author saw: if the plan changed meanwhile (a
    revise won the race), `add_approval` refuses it as stale instead of approving the new one.
    """
    bound = plan_hash or loaded.state.plan_hash
    outcome = ""
    paused_before = loaded.state.status == PlanStatus.PAUSED

    def approve(current: PlanState) -> PlanState | None:
        nonlocal outcome
        approval = Approval(user=user, at=session.services.clock(), via=via, plan_hash=bound, scope=scope)
        new, outcome = add_approval(current, approval)
        return None if new == current else new

    saved = await update_plan(session, loaded, approve)
    state = saved.state
    if reply:
        await session.reply(messages.approval_recorded(state, user, outcome=outcome))
    if saved is loaded and state.status == PlanStatus.APPROVED:
        # Approving an approved plan starts it again: a child of an epic that waited for
        # the children it needs is started this way (the execute job is queued once).
        await start_execution(session, saved)
    elif state.status == PlanStatus.APPROVED or (paused_before and outcome == "approved"):
        await start_execution(session, saved)
    return state


async def start_execution(session: Session, loaded: LoadedPlan) -> None:
    """Queue the plan's execution (its own job group, so `cancel` is never stuck behind it)."""
    enqueue = session.services.enqueue
    if enqueue is None:
        log.warning("no executor wired: plan %s#%s approved but not started", session.repo, session.issue)
        return
    await enqueue(
        EXECUTE_JOB,
        f"{session.repo}#{session.issue}/run",
        {
            "repo": session.repo,
            "issue": session.issue,
            "installation_id": session.installation_id,
            "plan_hash": loaded.state.plan_hash,
        },
    )


async def poll_reactions(
    session: Session, loaded: LoadedPlan | None = None, *, page: ReactionsPage | None = None
) -> PlanState | None:
    """Look for 👍 on the plan comment (conditional request: a 304 costs no rate limit).

    A 👍 counts when it is not a bot's, was given after the current revision was posted,
    and its author passes the approval rule. `page` is a reactions page already read.
    """
    loaded = loaded or await session.load_plan()
    if loaded is None or loaded.state.status not in (PlanStatus.AWAITING_APPROVAL, PlanStatus.PAUSED):
        return None
    if loaded.pending_since is not None and session.services.clock() - loaded.pending_since > UNSIGNED_FOR:
        loaded = await sign_pending(session, loaded)
    if page is None:
        page = await session.port.list_comment_reactions(
            session.repo, loaded.comment_id, etag=loaded.reactions_etag
        )
    if page.reactions is None:  # 304 Not Modified
        return None
    loaded.reactions_etag = page.etag
    state = loaded.state
    ignored = set(state.ignored_reactions)
    for reaction in page.reactions:
        if reaction.content != "+1" or reaction.id in ignored:
            continue
        if any(a.user == reaction.user_login for a in state.current_approvals()):
            continue
        why = _reaction_problem(state, reaction.user_login, reaction.user_type, reaction.created_at)
        if why is None:
            verdict = await session.may_start(reaction.user_login, user_type=reaction.user_type)
            why = None if verdict.allowed else (verdict.reason or verdict.permission)
        if why is not None:
            log.info("👍 by %s does not count: %s", reaction.user_login, why)
            continue
        try:
            state = await record_approval(
                session,
                LoadedPlan(state, loaded.comment_id, page.etag, loaded.parts),
                user=reaction.user_login,
                via="reaction",
                scope=[],
                plan_hash=state.plan_hash,
            )
        except StateError as exc:
            log.info("👍 by %s not recorded: %s", reaction.user_login, exc.message)
        if state.status != PlanStatus.AWAITING_APPROVAL:
            break
    current = session._plan or loaded
    await session.store.cache(
        LoadedPlan(current.state, current.comment_id, page.etag, current.parts),
        installation_id=session.installation_id,
    )
    return state


def _reaction_problem(state: PlanState, login: str, user_type: str, at: datetime | None) -> str | None:
    """Why a 👍 cannot approve this revision, before any permission lookup (None if it may)."""
    if is_bot(login, user_type):
        return "bots and Apps never approve"
    if not written_for_revision(at, state):
        return f"it was given before revision {state.revision} was posted"
    return None


@kinds.register(POLL_JOB)
async def run_poll_job(job: ClaimedJob, services: Services) -> None:
    """Poll one plan's reactions (queued by the poller in the plan's job group).

    One conditional request from the cached plan: GitHub answers 304 (free) until the
    reactions change. Only a new 👍 costs the rest (repository, config, plan comment, permission).
    """
    data = job.payload
    repo, issue, installation = data["repo"], int(data["issue"]), data.get("installation_id")
    record = await services.plan_store.cached(repo, issue)
    page = None
    if record is not None and record.plan_comment_id and services.github_for is not None:
        port = await services.github_for(installation, repo)
        page = await port.list_comment_reactions(repo, record.plan_comment_id, etag=record.reactions_etag)
        if page.reactions is None:
            return
        cached = PlanState.model_validate(record.state)
        seen = set(cached.ignored_reactions) | {a.user for a in cached.current_approvals()}  # type: ignore[arg-type]
        if not [
            r for r in page.reactions if r.content == "+1" and r.id not in seen and r.user_login not in seen
        ]:
            await services.plan_store.remember_etag(repo, issue, page.etag)
            return
    session = await open_session(services, repo=repo, issue=issue, installation_id=installation)
    await session.load_config()
    if session.config is None:
        return
    await poll_reactions(session, page=page)


async def approval_poller(services: Services, stop: asyncio.Event) -> None:
    """Every PLAN_CASCADE_APPROVAL_POLL_SECONDS, queue a reaction poll per plan awaiting approval."""
    interval = services.settings.approval_poll_seconds
    while not stop.is_set():
        try:
            await queue_polls(services)
        except Exception:
            log.exception("queueing approval polls failed")
        try:
            await asyncio.wait_for(stop.wait(), timeout=interval)
        except TimeoutError:
            pass


def poll_interval(revised_at: datetime | None, *, now: datetime, base: float) -> float:
    """How often a plan is polled: every `base` seconds in its first hour, every 10 minutes in its
    first day, hourly after (most approvals come soon; waiting plans must not eat the rate limit)."""
    age = (now - revised_at).total_seconds() if revised_at is not None else 0.0
    if age < 3600:
        return base
    if age < 86400:
        return max(base, 600.0)
    return max(base, 3600.0)


async def queue_polls(services: Services) -> int:
    """Queue a poll job for each cached plan awaiting approval that is due; returns how many."""
    if services.enqueue is None:
        return 0
    now = services.clock()
    last: dict[str, datetime] = services.extras.setdefault("last_polls", {})
    records = await services.plan_store.with_status(PlanStatus.AWAITING_APPROVAL, PlanStatus.PAUSED)
    queued = 0
    for record in records:
        key = f"{record.repo}#{record.issue_number}"
        revised = (record.state or {}).get("revised_at")
        revised_at = datetime.fromisoformat(revised) if isinstance(revised, str) else None
        every = poll_interval(revised_at, now=now, base=services.settings.approval_poll_seconds)
        if key in last and (now - last[key]).total_seconds() < every - 1:
            continue
        last[key] = now
        await services.enqueue(
            POLL_JOB,
            key,
            {"repo": record.repo, "issue": record.issue_number, "installation_id": record.installation_id},
        )
        queued += 1
    return queued
