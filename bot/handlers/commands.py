"""`/plan-cascade <command>` comments on issues: a table from command to handler.

A command from someone with write access is acknowledged with 👀 as soon as that is known
(at once when the permission is cached, else with the command's first reads); users without
write access get no 👀, one short reply per issue (then none) and nothing runs: anyone can
comment on a public repository, and no write is spent for them before their permission is known.
Commands that do not fit the plan's state answer why. Comments that are not commands still
trigger a reaction poll when the issue has a plan awaiting approval ("whenever another event for
that issue arrives").

A command that comes late (written over `LATE` before its job runs: a missed delivery
recovered or redelivered, a queue that was behind, a workflow run re-run) is read back from
GitHub first, and obeyed only while its comment still exists and still says it: an `approve`
its author deleted (or anyone edited) during an outage is not. A comment GitHub says is gone is
dropped; any other GitHub error fails the job (it is tried again), so nothing runs on a guess.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.config.repo import RepoConfig
from bot.errors import NotFound, StateError
from bot.handlers.approval import approve_command, start_execution
from bot.handlers.ask import answer_question
from bot.handlers.clarify import on_plain_comment
from bot.handlers.epic import epic_children
from bot.handlers.epic_children import cancel_children, recheck_targets
from bot.handlers.plan_io import update_plan
from bot.handlers.planning import plan_issue
from bot.handlers.review import on_pr_command
from bot.handlers.session import Session, session_for_event
from bot.handlers.stack import request_rebase
from bot.orchestration.scheduler import resume
from bot.plan import extract_prd_block
from bot.plan.state import PlanState, PlanStatus, StoryStatus, transition, with_batch
from bot.rendering import messages
from bot.runtime.commands import Command, parse_command
from bot.runtime.routing import Event, Router
from bot.runtime.services import Services
from bot.store.permissions import Verdict, is_bot, known_refusal

router = Router()
log = logging.getLogger(__name__)
LATE = timedelta(seconds=30)
"""GitHub delivers a comment within seconds; a command older than this when its job runs came late."""


@dataclass(frozen=True)
class Author:
    """Who wrote the command comment, as the delivery says."""

    login: str
    association: str | None
    type: str | None
    written_at: datetime | None


CommandHandler = Callable[[Session, Command, Author], Awaitable[None]]
COMMANDS: dict[str, CommandHandler] = {}


def command(name: str) -> Callable[[CommandHandler], CommandHandler]:
    """Register the handler of one command word."""

    def decorate(fn: CommandHandler) -> CommandHandler:
        COMMANDS[name] = fn
        return fn

    return decorate


@router.register("issue_comment", "created")
async def on_issue_comment_created(event: Event, services: Services) -> None:
    """A new comment on an issue or PR: run the command in it, or poll approvals."""
    env = event.envelope
    if env.issue is None or env.comment is None or event.repo is None:
        return
    if is_bot(env.comment.user.login, env.comment.user.type) or env.comment.performed_via_github_app:
        return
    session = await session_for_event(services, event, issue=env.issue.number)
    cmd = parse_command(env.comment.body, app_slug=session.app_slug)
    if cmd is not None and not await still_says(
        session, env.comment.id, cmd, written_at=env.comment.created_at
    ):
        return
    if cmd is None:
        if not env.issue.is_pull_request and await session.load_config() is not None:
            user = env.comment.user
            await on_plain_comment(
                session,
                login=user.login,
                association=env.comment.author_association,
                user_type=user.type,
                body=env.comment.body or "",
            )
        return
    try:
        await _command(session, event, cmd)
    finally:
        await session.acknowledged()


async def still_says(session: Session, comment_id: int, cmd: Command, *, written_at: datetime | None) -> bool:
    """Whether to act on `cmd`: at once when it is fresh; when it came late, only while its
    comment still exists and still says it (read back from GitHub; an error other than 404 raises)."""
    now = session.services.clock()
    if written_at is not None and now - written_at <= LATE:
        return True
    try:
        current = await session.port.get_issue_comment(session.repo, comment_id)
    except NotFound:
        log.info("`%s` came late and its comment %s is gone: not obeyed", cmd.name, comment_id)
        return False
    if parse_command(current.body, app_slug=session.app_slug) != cmd:
        log.info(
            "`%s` came late and its comment %s says something else now: not obeyed", cmd.name, comment_id
        )
        return False
    return True


async def _command(session: Session, event: Event, cmd: Command) -> None:
    env = event.envelope
    assert env.issue is not None and env.comment is not None
    author = Author(
        env.comment.user.login, env.comment.author_association, env.comment.user.type, env.comment.created_at
    )
    actor = author.login
    refused = known_refusal(actor, author.association, author.type)
    if refused is not None:  # an outsider: no read, no 👀; one reply per issue at most
        await session.refuse(actor, refused)
        return
    # The config and the permission in one round trip (with a plan request's reads too); the 👀
    # once write access is known.
    asked = session.may_act(actor, author.association, author.type)
    checks = (session.load_config(), session.permitted(asked, actor, comment_id=env.comment.id))
    planning = cmd.name in ("plan", "revise") and not env.issue.is_pull_request
    # A read that fails raises: fail closed, the job is retried and nothing runs meanwhile.
    config, verdict = await (session.prefetch(*checks) if planning else asyncio.gather(*checks))
    assert isinstance(verdict, Verdict) and (config is None or isinstance(config, RepoConfig))
    if not verdict.allowed:
        await session.refuse(actor, verdict)
        return
    if config is None:
        await session.report_config_error()
        return
    if env.issue.is_pull_request:
        await on_pr_command(session, cmd, author=author, pr_number=env.issue.number)
        return
    if not cmd.valid:
        await session.reply(
            messages.unknown_command(cmd.problem or cmd.name)
            if cmd.name == "unknown"
            else messages.state_refusal(cmd.name, cmd.problem or "")
        )
        return
    handler = COMMANDS.get(cmd.name)
    if handler is None:
        await session.reply(messages.unknown_command(cmd.name))
        return
    await handler(session, cmd, author)


@command("help")
async def _help(session: Session, cmd: Command, author: Author) -> None:
    trigger = session.config.trigger_label if session.config else "plan-cascade"
    await session.reply(messages.help_text(session.app_url, trigger))


@command("plan")
async def _plan(session: Session, cmd: Command, author: Author) -> None:
    await plan_issue(session, actor=author.login, text=cmd.text)


@command("ask")
async def _ask(session: Session, cmd: Command, author: Author) -> None:
    await answer_question(session, question=cmd.text, actor=author.login)


@command("revise")
async def _revise(session: Session, cmd: Command, author: Author) -> None:
    if extract_prd_block(cmd.text):
        await plan_issue(session, actor=author.login, text=cmd.text)
    else:
        await plan_issue(session, actor=author.login, text="", feedback=cmd.text)


@command("approve")
async def _approve(session: Session, cmd: Command, author: Author) -> None:
    # An epic across repositories that could not open its children: looked at again first.
    await recheck_targets(session, actor=author.login, association=author.association, user_type=author.type)
    await approve_command(
        session,
        cmd,
        actor=author.login,
        association=author.association,
        written_at=author.written_at,
        user_type=author.type,
    )


@command("status")
async def _status(session: Session, cmd: Command, author: Author) -> None:
    loaded = await session.load_plan()
    if loaded is None:
        await session.reply(messages.state_refusal("status", "this issue has no plan yet"))
        return
    await session.reply(messages.status_reply(loaded.state))


@command("cancel")
async def _cancel(session: Session, cmd: Command, author: Author) -> None:
    loaded = await session.load_plan()
    if loaded is None:
        await session.reply(messages.state_refusal("cancel", "this issue has no plan"))
        return
    if loaded.state.status in (PlanStatus.COMPLETED, PlanStatus.CANCELLED):
        watched = [b for b in loaded.state.batches if b.pr_number and not b.merged and not b.ci_stopped]
        if not watched:
            await session.reply(
                messages.state_refusal("cancel", f"the plan is already {loaded.state.status.value}")
            )
            return
        why = f"cancelled by @{author.login}"

        def unwatched(state: PlanState) -> PlanState:
            for record in watched:
                state = with_batch(
                    state, state.batches[record.number - 1].model_copy(update={"ci_stopped": why})
                )
            return state

        await update_plan(session, loaded, unwatched)
        prs = ", ".join(f"#{b.pr_number}" for b in watched)
        await session.reply(
            f"The plan is {loaded.state.status.value}; Plan Cascade stopped watching CI on {prs}."
        )
        return
    removed = 0
    if loaded.state.status == PlanStatus.RUNNING:
        cancel = session.services.extras.get("cancel_execution")
        if cancel is not None:
            removed = await cancel(session.repo, session.issue)
        loaded = await session.load_plan() or loaded
    at = session.services.clock()

    def cancelled(state: PlanState) -> PlanState | None:
        if state.status in (PlanStatus.COMPLETED, PlanStatus.CANCELLED):
            return None
        stories = {
            sid: (
                st.model_copy(update={"status": StoryStatus.CANCELLED})
                if st.status in (StoryStatus.PENDING, StoryStatus.RUNNING)
                else st
            )
            for sid, st in state.stories.items()
        }
        return transition(
            state.model_copy(update={"stories": stories}),
            PlanStatus.CANCELLED,
            at=at,
            note=f"cancelled by @{author.login}",
        )

    saved = await update_plan(session, loaded, cancelled)
    await session.reply(messages.cancelled(saved.state, removed))
    if saved.state.status == PlanStatus.CANCELLED and epic_children(saved.state):
        said = await cancel_children(session, saved.state, by=author.login)
        await session.reply("The epic's children:\n\n" + "\n".join(f"- {line}" for line in said))


@command("rebase")
async def _rebase(session: Session, cmd: Command, author: Author) -> None:
    """Every open batch PR onto what it must sit on now: it may run agents (a conflicting story
    is redone), so the approval rule applies."""
    verdict = await session.may_start(author.login, author.association, author.type)
    if not verdict.allowed:
        await session.refuse(author.login, verdict)
        return
    await request_rebase(session, batch=None, reply_on=session.issue)


@command("retry")
async def _retry(session: Session, cmd: Command, author: Author) -> None:
    await _retry_or_skip(session, cmd, author, skip=False)


@command("skip")
async def _skip(session: Session, cmd: Command, author: Author) -> None:
    await _retry_or_skip(session, cmd, author, skip=True)


async def _retry_or_skip(session: Session, cmd: Command, author: Author, *, skip: bool) -> None:
    """Resume a failed or paused plan: both start work again, so both need the approval rule."""
    name = "skip" if skip else "retry"
    loaded = await session.load_plan()
    if loaded is None:
        await session.reply(messages.state_refusal(name, "this issue has no plan"))
        return
    verdict = await session.may_start(author.login, author.association, author.type)
    if not verdict.allowed:
        await session.refuse(author.login, verdict)
        return
    actor, at = author.login, session.services.clock()

    def resumed(state: PlanState) -> PlanState:
        if state.status not in (PlanStatus.FAILED, PlanStatus.PAUSED):
            raise StateError(
                f"`{name}` acts on a failed or paused plan; "
                f"this one is {state.status.value.replace('_', ' ')}"
            )
        if skip:
            state = resume(state, skip=cmd.stories, actor=actor)
        else:  # a bare `retry`: every failed story (and a base check that failed, first)
            failed = [sid for sid, record in state.stories.items() if record.status == StoryStatus.FAILED]
            state = resume(state, retry=cmd.stories or failed, actor=actor)
        return transition(
            state, PlanStatus.RUNNING, at=at, note=f"{name} {' '.join(cmd.stories) or 'all'} by @{actor}"
        )

    try:
        saved = await update_plan(session, loaded, resumed)
    except StateError as exc:
        await session.reply(messages.state_refusal(name, exc.message))
        return
    await start_execution(session, saved)
