"""`/plan-cascade <command>` comments on issues: a table from command to handler.

Every command is acknowledged with 👀; users without write access get one short reply
and nothing runs; commands that do not fit the plan's state answer why. Comments that
are not commands still trigger a reaction poll when the issue has a plan awaiting
approval ("whenever another event for that issue arrives").
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from bot.commands import Command, parse_command
from bot.handlers.approval import approve_command, poll_reactions, start_execution
from bot.handlers.planning import plan_issue, save_plan
from bot.handlers.session import Session, session_for_event
from bot.permissions import is_bot
from bot.rendering import messages
from bot.routing import Event, Router
from bot.services import Services
from bot.state import PlanStatus, StoryStatus, transition, update_story

router = Router()
log = logging.getLogger(__name__)
CommandHandler = Callable[[Session, Command, str, str | None], Awaitable[None]]
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
    if cmd is None:
        if not env.issue.is_pull_request and await session.load_config() is not None:
            await poll_reactions(session)
        return
    await session.react_comment(env.comment.id, "eyes")
    actor, association = env.comment.user.login, env.comment.author_association
    config = await session.load_config()
    verdict = await session.may_act(actor, association)
    if not verdict.allowed:
        await session.reply(
            messages.permission_denied(
                actor, verdict.permission, approvers=list(config.approvers) if config else []
            )
        )
        return
    if config is None:
        await session.report_config_error()
        return
    if env.issue.is_pull_request:
        from bot.handlers.review import on_pr_command

        await on_pr_command(session, cmd, actor=actor, pr_number=env.issue.number)
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
    await handler(session, cmd, actor, association)


@command("help")
async def _help(session: Session, cmd: Command, actor: str, association: str | None) -> None:
    trigger = session.config.trigger_label if session.config else "plan-cascade"
    await session.reply(messages.help_text(session.app_slug, trigger))


@command("plan")
async def _plan(session: Session, cmd: Command, actor: str, association: str | None) -> None:
    await plan_issue(session, actor=actor, text=cmd.text)


@command("revise")
async def _revise(session: Session, cmd: Command, actor: str, association: str | None) -> None:
    from bot.plan import extract_prd_block

    if extract_prd_block(cmd.text):
        await plan_issue(session, actor=actor, text=cmd.text)
    else:
        await plan_issue(session, actor=actor, text="", feedback=cmd.text)


@command("approve")
async def _approve(session: Session, cmd: Command, actor: str, association: str | None) -> None:
    await approve_command(session, cmd, actor=actor, association=association)


@command("status")
async def _status(session: Session, cmd: Command, actor: str, association: str | None) -> None:
    loaded = await session.load_plan()
    if loaded is None:
        await session.reply(messages.state_refusal("status", "this issue has no plan yet"))
        return
    await session.reply(messages.status_reply(loaded.state))


@command("cancel")
async def _cancel(session: Session, cmd: Command, actor: str, association: str | None) -> None:
    loaded = await session.load_plan()
    if loaded is None:
        await session.reply(messages.state_refusal("cancel", "this issue has no plan"))
        return
    state = loaded.state
    if state.status in (PlanStatus.COMPLETED, PlanStatus.CANCELLED):
        await session.reply(messages.state_refusal("cancel", f"the plan is already {state.status.value}"))
        return
    removed = 0
    if state.status == PlanStatus.RUNNING:
        cancel = session.services.extras.get("cancel_execution")
        if cancel is not None:
            removed = await cancel(session.repo, session.issue)
        loaded = await session.load_plan() or loaded
        state = loaded.state
        if state.status in (PlanStatus.CANCELLED,):
            await session.reply(messages.cancelled(state, removed))
            return
    stories = {
        sid: (
            st.model_copy(update={"status": StoryStatus.CANCELLED})
            if st.status in (StoryStatus.PENDING, StoryStatus.RUNNING)
            else st
        )
        for sid, st in state.stories.items()
    }
    state = transition(
        state.model_copy(update={"stories": stories}),
        PlanStatus.CANCELLED,
        at=session.services.clock(),
        note=f"cancelled by @{actor}",
    )
    await save_plan(session, state, comment_id=loaded.comment_id)
    await session.reply(messages.cancelled(state, removed))


@command("retry")
async def _retry(session: Session, cmd: Command, actor: str, association: str | None) -> None:
    await _retry_or_skip(session, cmd, actor, skip=False)


@command("skip")
async def _skip(session: Session, cmd: Command, actor: str, association: str | None) -> None:
    await _retry_or_skip(session, cmd, actor, skip=True)


async def _retry_or_skip(session: Session, cmd: Command, actor: str, *, skip: bool) -> None:
    name = "skip" if skip else "retry"
    loaded = await session.load_plan()
    if loaded is None:
        await session.reply(messages.state_refusal(name, "this issue has no plan"))
        return
    state = loaded.state
    if state.status not in (PlanStatus.FAILED, PlanStatus.PAUSED):
        await session.reply(
            messages.state_refusal(
                name,
                f"`{name}` acts on a failed or paused plan; "
                f"this one is {state.status.value.replace('_', ' ')}",
            )
        )
        return
    unknown = [s for s in cmd.stories if s not in state.stories]
    if unknown:
        await session.reply(messages.state_refusal(name, f"unknown stories: {', '.join(unknown)}"))
        return
    from bot.plan import transitive_dependents

    for sid in cmd.stories:
        if skip:
            state = update_story(state, sid, status=StoryStatus.SKIPPED, reason=f"skipped by @{actor}")
        else:
            state = update_story(state, sid, status=StoryStatus.PENDING, reason=None, attempts=0)
        # Dependents skipped because this story failed may run again.
        for dep in transitive_dependents(state.prd, sid):
            if state.stories[dep].status == StoryStatus.SKIPPED and (
                state.stories[dep].reason or ""
            ).startswith("depends on"):
                state = update_story(state, dep, status=StoryStatus.PENDING, reason=None)
    state = transition(
        state,
        PlanStatus.RUNNING,
        at=session.services.clock(),
        note=f"{name} {' '.join(cmd.stories)} by @{actor}",
    )
    saved = await save_plan(session, state, comment_id=loaded.comment_id)
    await start_execution(session, saved)
