"""Planning: an issue labelled for Plan Cascade (or `/plan-cascade plan|revise`) gets a plan comment.

A `prd` fenced block in the comment or the issue body is used as is; otherwise the LLM
plans. A bad PRD, an LLM failure or an invalid config becomes a comment on the issue,
and the plan that existed before stays as it was.
"""

from __future__ import annotations

import asyncio
import logging

from bot.config.repo import RepoConfig
from bot.db.queue import ClaimedJob
from bot.errors import GitHubError, LLMError, PlanValidationError, StateError
from bot.handlers.environment import planned_setup
from bot.handlers.epic import (
    PLAN_CHILD_JOB,
    child_moved,
)
from bot.handlers.epic_children import check_epic, epic_cancelled
from bot.handlers.epic_revision import known_children, sync_children
from bot.handlers.llm_planning import plan_with_llm
from bot.handlers.plan_io import save_plan, update_plan
from bot.handlers.plan_pr import open_plan_pr
from bot.handlers.session import Session, session_for_event, session_for_job
from bot.plan import Strategy, changelog_lines, diff_prds, extract_prd_block, parse_prd, vague_criteria
from bot.plan.epic import spans_repositories
from bot.plan.scheduled import ScheduledBy
from bot.plan.state import PlanSource, PlanState, PlanStatus, new_plan, revise
from bot.planning.answers import intent_reply
from bot.planning.exploration import NeedsAnswers, NotATask
from bot.rendering import messages
from bot.runtime.routing import Event, Router
from bot.runtime.services import Services
from bot.runtime.worker import JobKinds
from bot.store.permissions import Verdict, is_bot
from bot.store.plans import LoadedPlan
from bot.tasks import forget

router = Router()
kinds = JobKinds()
log = logging.getLogger(__name__)


@router.register("issues", "labeled")
async def on_issue_labeled(event: Event, services: Services) -> None:
    """The trigger label was added: plan the issue."""
    env = event.envelope
    if env.issue is None or env.label is None or event.repo is None or env.issue.is_pull_request:
        return
    if is_bot(env.sender.login, env.sender.type):
        return
    session = await session_for_event(services, event, issue=env.issue.number)
    label, sender = env.label.name, env.sender.login
    # Nothing is written before the label is known to be the trigger and the sender to have write
    # access. The sender's permission is read with the config (and the file tree) when the label is
    # likely the trigger: the 👀 then goes out with the job's other reads, one round trip later.
    permission = asyncio.ensure_future(session.may_act(sender)) if session.may_be_trigger(label) else None
    try:
        trigger = await session.trigger_label(asked=label)
        if label != trigger:
            return
        await _plan_labeled(session, event, permission or asyncio.ensure_future(session.may_act(sender)))
    finally:
        if permission is not None:  # not wanted (or already used): a failure is not reported as lost
            forget(permission)
        await session.acknowledged()


async def _plan_labeled(session: Session, event: Event, permission: asyncio.Future[Verdict]) -> None:
    env = event.envelope
    assert env.label is not None
    # The 👀 once write access is known, with the job's reads (the plan, the issue, the manifests).
    # A permission read that fails refuses (fail closed): nothing is planned.
    permitted = session.permitted(permission, env.sender.login)
    verdict, config = await session.prefetch(permitted, session.fresh_config())
    assert isinstance(verdict, Verdict) and (config is None or isinstance(config, RepoConfig))
    if config is not None and env.label.name != config.trigger_label:
        return  # the trigger label changed a moment ago
    if not verdict.allowed:
        await session.refuse(env.sender.login, verdict)
        return
    if session.config_error is not None:
        await session.report_config_error()
        return
    await plan_issue(session, actor=env.sender.login, text="")


async def plan_issue(
    session: Session,
    *,
    actor: str,
    text: str,
    feedback: str | None = None,
    clarifications: str | None = None,
    scheduled: ScheduledBy | None = None,
) -> None:
    """Make (or remake) the issue's plan and write the plan comment.

    `text` is the command's text (may hold a `prd` block or notes); `feedback` is set for
    `revise`; `scheduled`: the schedule that opened the issue (shown in the comment). Refuses
    when the plan is running.
    """
    assert session.config is not None
    loaded = await session.current_plan()
    if loaded is not None and loaded.state.status in (PlanStatus.RUNNING,):
        await session.reply(
            messages.state_refusal(
                "revise" if feedback else "plan",
                "the plan is running; `/plan-cascade cancel` it first, or wait for it to finish",
            )
        )
        return
    if feedback is not None and loaded is None:
        await session.reply(
            messages.state_refusal("revise", "this issue has no plan yet; comment `/plan-cascade plan` first")
        )
        return
    issue = await session.issue_info()
    block = extract_prd_block(text) or (None if feedback else extract_prd_block(issue.body or ""))
    max_stories = session.config.limits.max_stories
    planning = None
    source: PlanSource
    try:
        if block is not None:
            prd = await asyncio.to_thread(parse_prd, block, max_stories=max_stories, vague=False)
            source = "prd-block"
        else:
            # The model costs money: ask it only when the answer can be written without waiting
            # (else the job is put back until then, and nothing is spent twice).
            await session.port.ready_to_write()
            planning = await plan_with_llm(
                session,
                issue=issue,
                notes=text,
                feedback=feedback,
                previous=loaded.state.prd if loaded else None,
                actor=actor,
            )
            prd, source = planning.prd, "llm"
    except PlanValidationError as exc:
        await session.reply(
            messages.prd_invalid(
                exc.problems or [exc.message], "the `prd` block" if block else "the model's plan"
            )
        )
        return
    except LLMError as exc:
        await session.reply(messages.planning_failed(exc.message))
        return
    except (NotATask, NeedsAnswers) as exc:
        await session.reply(intent_reply(exc))
        return
    config = session.config
    setup = await planned_setup(session)

    def with_planning(state: PlanState) -> PlanState:
        state = state.model_copy(update=setup.state_fields())
        if planning is None:  # a maintainer's own PRD: vague criteria are theirs to judge
            return state.model_copy(update={"warnings": vague_criteria(prd)})
        return state.model_copy(
            update={
                "planning_tokens": state.planning_tokens
                + planning.usage.input_tokens
                + planning.usage.output_tokens,
                "planning_cost_usd": state.planning_cost_usd + planning.cost_usd,
                "perspectives": planning.perspectives,
                "cross_check": planning.cross_check,
                "looked_at": planning.looked_at,
                "clarifications": clarifications,
                "warnings": planning.warnings,
            }
        )

    if loaded is None or loaded.state.status == PlanStatus.COMPLETED:
        state = new_plan(
            repo=session.repo,
            issue=session.issue,
            prd=prd,
            at=session.services.clock(),
            required_approvals=config.required_approvals,
            source=source,
        )  # type: ignore[arg-type]
        if scheduled is not None:
            state = state.model_copy(update={"scheduled": scheduled})
        saved = await save_plan(session, with_planning(state), comment_id=None)
    else:
        seen = await _current_reactions(session, loaded)

        def revised(current: PlanState) -> PlanState:
            # Applied to the newest plan: a plan that started running meanwhile refuses (StateError).
            new = revise(
                current,
                prd,
                at=session.services.clock(),
                changelog=changelog_lines(diff_prds(current.prd, prd)),
                source=source,
            )  # type: ignore[arg-type]
            new = new.model_copy(
                update={
                    "required_approvals": config.required_approvals,
                    "ignored_reactions": sorted(set(seen) | set(current.ignored_reactions)),
                    # Read from the PRD being replaced: which feature each existing child is.
                    "child_features": known_children(current),
                }
            )
            return with_planning(new)

        try:
            saved = await update_plan(session, loaded, revised)
        except StateError as exc:
            await session.reply(messages.state_refusal("revise", exc.message))
            return
    state = saved.state
    log.info(
        "plan revision %s (%s) written to comment %s by request of %s",
        state.revision,
        state.plan_hash[:12],
        saved.comment_id,
        actor,
    )
    if prd.features and prd.strategy is Strategy.MEGA and spans_repositories(prd, session.repo):
        # Across repositories: nothing is opened before a writer here approves this plan.
        await check_epic(session, saved)
        return
    if prd.features and prd.strategy is Strategy.MEGA:
        # Within one repository: open the children its features have none of yet (a revision keeps
        # the ones it still has and tells the ones it dropped).
        await sync_children(session, saved, actor=actor)
        return
    await child_moved(session, body=issue.body)
    if session.config.plan_pr:
        await open_plan_pr(session, saved)


async def _current_reactions(session: Session, loaded: LoadedPlan) -> list[int]:
    """Reaction ids on the plan comment now: a 👍 for an earlier revision approves nothing.

    If GitHub cannot list them, nothing is lost: a 👍 older than the revision's
    `revised_at` never counts anyway (see `approval.poll_reactions`).
    """
    try:
        page = await session.port.list_comment_reactions(session.repo, loaded.comment_id)
    except GitHubError as exc:
        log.warning("could not snapshot the plan's reactions before the revise: %s", exc.message)
        return list(loaded.state.ignored_reactions)
    ids = {r.id for r in page.reactions or []}
    return sorted(ids | set(loaded.state.ignored_reactions))


@kinds.register(PLAN_CHILD_JOB)
async def run_plan_child(job: ClaimedJob, services: Services) -> None:
    """Plan a child issue of an epic (its label was added by the bot, which sends no event we act on)."""
    session = await session_for_job(services, job)
    if session is None:
        return
    if await epic_cancelled(session, (await session.issue_info()).body):
        log.info("%s#%s is not planned: its epic was cancelled", session.repo, session.issue)
        return
    await plan_issue(session, actor="plan-cascade", text="")
