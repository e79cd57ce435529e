"""Planning: an issue labelled for Plan Cascade (or `/plan-cascade plan|revise`) gets a plan comment.

A `prd` fenced block in the comment or the issue body is used as is; otherwise the LLM
plans. A bad PRD, an LLM failure or an invalid config becomes a comment on the issue,
and the plan that existed before stays as it was.
"""

from __future__ import annotations

import logging

from bot.errors import GitHubError, LLMError, PlanValidationError, StateError
from bot.handlers.session import Session, session_for_event
from bot.permissions import is_bot
from bot.plan import changelog_lines, diff_prds, extract_prd_block, parse_prd
from bot.plans import LoadedPlan, write_state
from bot.rendering import messages
from bot.rendering.plan_comment import render_plan_comment
from bot.repoconfig import RepoConfig
from bot.routing import Event, Router
from bot.services import Services
from bot.state import INLINE_STATE_LIMIT, PlanSource, PlanState, PlanStatus, new_plan, revise, state_payload

router = Router()
log = logging.getLogger(__name__)
DEFAULT_TRIGGER = "plan-cascade"


@router.register("issues", "labeled")
async def on_issue_labeled(event: Event, services: Services) -> None:
    """The trigger label was added: plan the issue."""
    env = event.envelope
    if env.issue is None or env.label is None or event.repo is None or env.issue.is_pull_request:
        return
    if is_bot(env.sender.login, env.sender.type):
        return
    session = await session_for_event(services, event, issue=env.issue.number)
    config = await session.load_config()
    trigger = config.trigger_label if config else DEFAULT_TRIGGER
    if env.label.name != trigger:
        return
    await session.react_issue("eyes")
    verdict = await session.may_act(env.sender.login)
    if not verdict.allowed:
        await session.reply(
            messages.permission_denied(
                env.sender.login, verdict.permission, approvers=list(config.approvers) if config else []
            )
        )
        return
    if session.config_error is not None:
        await session.report_config_error()
        return
    await plan_issue(session, actor=env.sender.login, text="")


async def plan_issue(session: Session, *, actor: str, text: str, feedback: str | None = None) -> None:
    """Make (or remake) the issue's plan and write the plan comment.

    `text` is the command's text (may hold a `prd` block or notes); `feedback` is set for
    `revise`. Refuses when the plan is running.
    """
    assert session.config is not None
    loaded = await session.load_plan()
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
    issue = await session.port.get_issue(session.repo, session.issue)
    block = extract_prd_block(text) or (None if feedback else extract_prd_block(issue.body or ""))
    max_stories = session.config.limits.max_stories
    planning = None
    source: PlanSource
    try:
        if block is not None:
            prd = parse_prd(block, max_stories=max_stories)
            source = "prd-block"
        else:
            from bot.handlers.llm_planning import plan_with_llm

            planning = await plan_with_llm(
                session,
                issue=issue,
                notes=text,
                feedback=feedback,
                previous=loaded.state.prd if loaded else None,
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
    now = session.services.clock()
    if loaded is None or loaded.state.status == PlanStatus.COMPLETED:
        state = new_plan(
            repo=session.repo,
            issue=session.issue,
            prd=prd,
            at=now,
            required_approvals=session.config.required_approvals,
            source=source,
        )  # type: ignore[arg-type]
    else:
        try:
            state = revise(
                loaded.state,
                prd,
                at=now,
                changelog=changelog_lines(diff_prds(loaded.state.prd, prd)),
                source=source,
            )  # type: ignore[arg-type]
        except StateError as exc:
            await session.reply(messages.state_refusal("revise", exc.message))
            return
        state = state.model_copy(
            update={
                "required_approvals": session.config.required_approvals,
                "planning_tokens": loaded.state.planning_tokens,
                "planning_cost_usd": loaded.state.planning_cost_usd,
                "ignored_reactions": await _current_reactions(session, loaded),
            }
        )
    if planning is not None:
        state = state.model_copy(
            update={
                "planning_tokens": state.planning_tokens
                + planning.usage.input_tokens
                + planning.usage.output_tokens,
                "planning_cost_usd": state.planning_cost_usd + planning.cost_usd,
                "perspectives": planning.perspectives,
                "warnings": planning.warnings,
            }
        )
    comment_id = loaded.comment_id if loaded and loaded.state.status != PlanStatus.COMPLETED else None
    saved = await save_plan(session, state, comment_id=comment_id)
    log.info(
        "plan revision %s (%s) written to comment %s by request of %s",
        state.revision,
        state.plan_hash[:12],
        saved.comment_id,
        actor,
    )
    if planning is not None and planning.epic is not None and prd.strategy.value == "mega":
        from bot.handlers.epic import create_children

        children = await create_children(session, planning.epic, title=prd.title)
        state = saved.state.model_copy(
            update={
                "children": [n for _, n in children],
                "note": "an epic: each feature is planned and approved in its own issue",
            }
        )
        saved = await save_plan(session, state, comment_id=saved.comment_id)
        listed = "\n".join(f"- {fid}: #{n}" for fid, n in children)
        await session.reply(
            f"This issue is an epic. Each feature is planned in its own issue, in this "
            f"order; approve them there:\n\n{listed}"
        )
        return
    if session.config.plan_pr:
        from bot.handlers.plan_pr import open_plan_pr

        await open_plan_pr(session, saved)


async def _current_reactions(session: Session, loaded: LoadedPlan) -> list[int]:
    """Reaction ids on the plan comment now: a 👍 for an earlier revision approves nothing."""
    try:
        page = await session.port.list_comment_reactions(session.repo, loaded.comment_id)
    except GitHubError:
        return list(loaded.state.ignored_reactions)
    ids = {r.id for r in page.reactions or []}
    return sorted(ids | set(loaded.state.ignored_reactions))


def render(session: Session, state: PlanState, *, state_block: str | None = None) -> str:
    """The plan comment body for `state`."""
    config: RepoConfig | None = session.config
    return render_plan_comment(
        state,
        estimate=_estimate(state, config, model=_agent_model(session, config)),
        trigger_label=config.trigger_label if config else DEFAULT_TRIGGER,
        app_slug=session.app_slug,
        state_block=state_block,
    )


def _agent_model(session: Session, config: RepoConfig | None) -> str:
    """The model the builtin agent will use, for pricing the estimate."""
    from bot.llm.registry import DEFAULT_MODELS

    settings = session.services.settings
    provider = (config.llm.provider if config and config.llm.provider else None) or settings.llm_provider
    return (config.llm.model if config else None) or settings.llm_model or DEFAULT_MODELS.get(provider, "")


def _estimate(state: PlanState, config: RepoConfig | None, *, model: str):  # type: ignore[no-untyped-def]
    """The execution estimate at the model's price (the repo's `llm.prices` override it)."""
    from bot.llm.pricing import Price, repo_price_table
    from bot.rendering.estimate import estimate_execution

    price = repo_price_table(config.llm.prices if config else None).price(model) or Price(
        input_per_mtok=3.0, output_per_mtok=15.0
    )
    return estimate_execution(
        state.prd,
        price_in_per_mtok=price.input_per_mtok,
        price_out_per_mtok=price.output_per_mtok,
        max_parallel=config.execution.max_parallel if config else 3,
        max_retries=config.gates.max_retries if config else 2,
    )


async def save_plan(session: Session, state: PlanState, *, comment_id: int | None) -> LoadedPlan:
    """Write the plan comment (edit it when it exists) and refresh the cache.

    A state too large for one comment goes into continuation comments written after the
    plan comment, so the plan stays first in the issue's timeline.
    """
    previous = session._plan if session._plan and session._plan.comment_id == comment_id else None
    if comment_id is None and len(state_payload(state)) <= INLINE_STATE_LIMIT:
        # A new plan that fits one comment is written once, state and all.
        block, parts = await write_state(session.port, state, existing={})
        body = render(session, state, state_block=block)
        comment_id = (await session.port.create_issue_comment(session.repo, session.issue, body=body)).id
    else:
        if comment_id is None:
            # Parts need the plan comment to exist first (it stays first in the timeline).
            pending = render(session, state, state_block="<!-- plan-cascade:state-pending -->")
            comment_id = (
                await session.port.create_issue_comment(session.repo, session.issue, body=pending)
            ).id
        block, parts = await write_state(session.port, state, existing=previous.parts if previous else {})
        await session.port.update_issue_comment(
            session.repo, comment_id, body=render(session, state, state_block=block)
        )
    loaded = LoadedPlan(state, comment_id, previous.reactions_etag if previous else None, parts)
    session._plan = loaded
    await session.store.cache(loaded, installation_id=session.installation_id)
    return loaded
