"""Writing a plan: the plan comment (and its signed state), compare-and-swap on the version.

Every handler and the engine write plan state through `save_plan` (one write, refused with
`StalePlan` when someone else wrote since it was read) or `update_plan` (re-read and apply
the change again on a conflict). This module sits below every handler that writes plans.

A new plan comment is posted first (the answer a person waits for) and signed by an edit, since
its state is signed for the comment's id. On the server (a database) that edit and progress edits
go last in the installation's write queue and are not waited for: the database row, written
before, is the plan meanwhile (`bot.store.plans` believes the bot's own row for a comment still
pending), and a newer edit of the comment replaces one still queued.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from bot.config.repo import RepoConfig
from bot.errors import StalePlan
from bot.github.port import GitHubPort
from bot.handlers.session import DEFAULT_TRIGGER_LABEL, Session
from bot.llm.pricing import Price, repo_price_table
from bot.llm.registry import DEFAULT_MODELS
from bot.plan.state import PlanState
from bot.plan.state_block import (
    INLINE_STATE_LIMIT,
    PART_SIZE,
    PENDING_BLOCK,
    encode_state,
    part_body,
    split_payload,
    state_payload,
    state_reference,
)
from bot.rendering.estimate import estimate_execution
from bot.rendering.plan_comment import render_plan_comment
from bot.store.plans import LoadedPlan, PlanStore

log = logging.getLogger(__name__)
UPDATE_ATTEMPTS = 5
"""How often `update_plan` re-reads and re-applies a change before giving up (the job retries)."""

Change = Callable[[PlanState], PlanState | None]
"""A change to a plan: the new state, None for "nothing to do"; may raise StateError to refuse."""
RETIRED_PART = "_Plan Cascade plan data: no longer used._"


def render(session: Session, state: PlanState, *, state_block: str | None = None) -> str:
    """The plan comment body for `state`."""
    config: RepoConfig | None = session.config
    return render_plan_comment(
        state,
        estimate=_estimate(state, config, model=_agent_model(session, config)),
        trigger_label=config.trigger_label if config else DEFAULT_TRIGGER_LABEL,
        app_url=session.app_url,
        state_block=state_block,
    )


def _agent_model(session: Session, config: RepoConfig | None) -> str:
    """The model the builtin agent will use, for pricing the estimate."""
    settings = session.services.settings
    provider = (config.llm.provider if config and config.llm.provider else None) or settings.llm_provider
    return (config.llm.model if config else None) or settings.llm_model or DEFAULT_MODELS.get(provider, "")


def _estimate(state: PlanState, config: RepoConfig | None, *, model: str):  # type: ignore[no-untyped-def]
    """The execution estimate at the model's price (the repo's `llm.prices` override it)."""
    price = repo_price_table(config.llm.prices if config else None).price(model) or Price(
        input_per_mtok=3.0, output_per_mtok=15.0
    )
    return estimate_execution(
        state.prd,
        price_in_per_mtok=price.input_per_mtok,
        price_out_per_mtok=price.output_per_mtok,
        price_cache_read_per_mtok=price.cache_read_per_mtok,
        max_parallel=config.execution.max_parallel if config else 3,
        max_retries=config.gates.max_retries if config else 2,
    )


async def save_plan(
    session: Session, state: PlanState, *, comment_id: int | None, progress: bool = False
) -> LoadedPlan:
    """Write `state` (read at `state.version`) as the plan comment; StalePlan if it changed since.

    `comment_id=None` posts a new plan comment (a state too large for one comment goes into
    continuation comments written after it, so the plan stays first in the issue's timeline).
    `progress`: nobody waits for this edit (the engine's progress); with a database, the comment
    is edited when the write queue has room.
    """
    store = session.store
    async with session.services.plan_lock(session.repo, session.issue):
        previous = session._plan if session._plan and session._plan.comment_id == comment_id else None
        expected = None if comment_id is None else state.version
        version = await store.next_version(session.repo, session.issue) if expected is None else expected + 1
        state = state.model_copy(update={"version": version})
        claim = LoadedPlan(state, comment_id or 0, previous.reactions_etag if previous else None)
        claim.parts = dict(previous.parts) if previous else {}
        await store.compare_and_set(
            session.port,
            claim,
            expected=expected,
            installation_id=session.installation_id,
            bot_login=session.bot_login,
        )
        later = store.db is not None and (progress or expected is None)
        comment_id, parts, signed = await _write_comment(
            session, state, comment_id=comment_id, parts=claim.parts, later=later
        )
        loaded = LoadedPlan(state, comment_id, claim.reactions_etag, parts)
        session._plan = loaded
        if expected is None:
            await store.cache(loaded, installation_id=session.installation_id)
        if signed is not None:  # the row names the comment now: the edit may come after
            await session.port.update_issue_comment_later(session.repo, comment_id, body=signed)
        await _converge(session, store, loaded)
    return loaded


async def _write_comment(
    session: Session, state: PlanState, *, comment_id: int | None, parts: dict[int, str], later: bool = False
) -> tuple[int, dict[int, str], str | None]:
    """Write the plan comment; with `later`, the body of its (last) edit is returned, not written."""
    if comment_id is None:
        # The state is signed for the comment that holds it, so the comment must exist first
        # (it also stays first in the timeline, before any continuation comments).
        pending = render(session, state, state_block=PENDING_BLOCK)
        comment_id = (await session.port.create_issue_comment(session.repo, session.issue, body=pending)).id
    block, parts = await write_state(
        session.port, state, existing=parts, key=session.store.key, comment=comment_id
    )
    body = render(session, state, state_block=block)
    if later:
        return comment_id, parts, body
    await session.port.update_issue_comment(session.repo, comment_id, body=body)
    return comment_id, parts, None


async def sign_pending(session: Session, loaded: LoadedPlan) -> LoadedPlan:
    """Write the signed state into a plan comment still pending long after it was posted (its
    signing edit was lost: the process stopped first). The bot's database row is the plan; only
    while the row still names this comment at this version."""
    async with session.services.plan_lock(session.repo, session.issue):
        record = await session.store.cached(session.repo, session.issue)
        if (
            record is None
            or record.plan_comment_id != loaded.comment_id
            or record.version != loaded.state.version
        ):
            return loaded
        comment_id, parts, _ = await _write_comment(
            session, loaded.state, comment_id=loaded.comment_id, parts=loaded.parts
        )
    log.warning("plan comment %s was still unsigned: signed it now", comment_id)
    signed = LoadedPlan(loaded.state, comment_id, loaded.reactions_etag, parts)
    session._plan = signed
    return signed


async def write_state(
    port: GitHubPort, state: PlanState, *, existing: dict[int, str], key: bytes | None, comment: int
) -> tuple[str, dict[int, str]]:
    """The hidden block for plan comment `comment`, signed for it; writes continuation comments."""
    payload = state_payload(state)
    old_ids = list(existing)
    if len(payload) <= INLINE_STATE_LIMIT:
        block, parts = encode_state(state, key=key, comment=comment), dict[int, str]()
    else:
        chunks = split_payload(payload, PART_SIZE)
        parts = {}
        for index, chunk in enumerate(chunks, start=1):
            body = part_body(index=index, total=len(chunks), repo=state.repo, issue=state.issue, chunk=chunk)
            if index <= len(old_ids):
                part_id = old_ids[index - 1]
                if existing[part_id] != body:
                    await port.update_issue_comment(state.repo, part_id, body=body)
            else:
                part_id = (await port.create_issue_comment(state.repo, state.issue, body=body)).id
            parts[part_id] = body
        block = state_reference(list(parts), payload, key=key, comment=comment)
    for part_id in old_ids:
        if part_id not in parts and existing[part_id] != RETIRED_PART:
            await port.update_issue_comment(state.repo, part_id, body=RETIRED_PART)
    return block, parts


async def _converge(session: Session, store: PlanStore, loaded: LoadedPlan) -> None:
    """If another process wrote a newer version while our edit was in flight, write that one last."""
    record = await store.cached(session.repo, session.issue)
    if (
        record is None
        or record.version <= loaded.state.version
        or record.plan_comment_id != loaded.comment_id
    ):
        return
    newest = PlanState.model_validate(record.state)
    log.info(
        "plan version %s superseded ours (%s) in flight: writing it last",
        newest.version,
        loaded.state.version,
    )
    await _write_comment(session, newest, comment_id=loaded.comment_id, parts=loaded.parts)


async def update_plan(session: Session, loaded: LoadedPlan, change: Change) -> LoadedPlan:
    """Apply `change` to the newest plan and save it; on a conflict re-read and apply it again."""
    for _ in range(UPDATE_ATTEMPTS):
        new = change(loaded.state)
        if new is None:
            return loaded
        try:
            return await save_plan(session, new, comment_id=loaded.comment_id)
        except StalePlan as exc:
            log.info("%s: applying the change again on the newer plan", exc.message)
            fresh = exc.fresh
            assert isinstance(fresh, LoadedPlan)
            loaded = fresh
            session._plan = fresh
    raise StalePlan(
        f"the plan of {session.repo}#{session.issue} kept changing while it was being written: will retry",
        fresh=loaded,
    )
