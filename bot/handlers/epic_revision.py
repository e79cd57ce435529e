"""An epic within one repository: its children follow its plan, revision after revision.

Each child is recorded in the epic's signed plan under its feature id (`child_features`) as soon
as it is opened. A revision keeps the children of the features it still has (their issues, plans
and approvals are untouched), opens children only for its new features, and tells the child of a
feature it dropped so on its issue: that issue stays open (a person may be working on it) and is
no longer part of the epic. Run again for the same revision (a redelivered job), it opens nothing
and says nothing twice: only what the plan does not record yet is done.
"""

from __future__ import annotations

import functools

from bot.handlers.epic import child_body, queue_child_planning, refresh_rollup
from bot.handlers.plan_io import update_plan
from bot.handlers.session import Session
from bot.plan.epic import IssueRef, feature_order
from bot.plan.state import PlanState
from bot.store.plans import LoadedPlan

EPIC_NOTE = "an epic: each feature is planned and approved in its own issue"


def known_children(state: PlanState) -> dict[str, int]:
    """Feature id → child issue of an epic within one repository. A plan written before the
    feature ids were recorded lists its children in its PRD's feature order (read from that PRD,
    the one before a revision replaces it)."""
    if state.child_features or not state.children:
        return dict(state.child_features)
    order = feature_order(state.prd.features)
    return dict(zip(order, state.children, strict=False)) if len(order) == len(state.children) else {}


def _listed(state: PlanState, child_features: dict[str, int]) -> PlanState:
    """`children` follows `child_features`, in the plan's feature order (the roll-up's rows)."""
    order = [f for f in feature_order(state.prd.features) if f in child_features]
    return state.model_copy(
        update={
            "child_features": child_features,
            "children": [child_features[f] for f in order],
            "note": EPIC_NOTE,
        }
    )


def _relisted(state: PlanState) -> PlanState | None:
    listed = _listed(state, state.child_features)
    return listed if listed.children != state.children else None


def _opened(state: PlanState, *, fid: str, number: int) -> PlanState | None:
    if fid in state.child_features:
        return None  # recorded meanwhile by another run: the first record stands
    return _listed(state, {**state.child_features, fid: number})


def _forgotten(state: PlanState, *, fid: str) -> PlanState | None:
    if fid not in state.child_features:
        return None
    return _listed(state, {k: v for k, v in state.child_features.items() if k != fid})


async def sync_children(session: Session, saved: LoadedPlan, *, actor: str) -> None:
    """Open a child issue for each feature of the epic that has none (dependencies first), each
    recorded before the next is opened, and tell the children of dropped features."""
    assert session.config is not None
    saved = await update_plan(session, saved, _relisted)  # a revision's order; its dropped ones out
    state = saved.state
    by_id = {f.id: f for f in state.prd.features}
    kept = [fid for fid in feature_order(state.prd.features) if fid in state.child_features]
    opened: list[str] = []
    for fid in feature_order(state.prd.features):
        if fid in saved.state.child_features:
            continue
        feature = by_id[fid]
        known = saved.state.child_features
        issue = await session.port.create_issue(
            session.repo,
            title=feature.title,
            body=child_body(
                description=feature.description,
                parent=session.issue,
                parent_title=state.prd.title,
                needs=[known[d] for d in feature.depends_on if d in known],
                here=session.repo,
            ),
            labels=[session.config.trigger_label],
        )
        saved = await update_plan(session, saved, functools.partial(_opened, fid=fid, number=issue.number))
        opened.append(fid)
        await queue_child_planning(session, IssueRef(session.repo, issue.number), session.installation_id)
    dropped = [(fid, n) for fid, n in saved.state.child_features.items() if fid not in by_id]
    for fid, number in dropped:
        # Said before it is forgotten: a job redone in between says it again, never not at all.
        await session.port.create_issue_comment(
            session.repo,
            number,
            body=(
                f"The epic #{session.issue} was revised by @{actor} and no longer includes "
                f"this feature ({fid}): this issue is no longer part of it. It is left open, and its "
                "plan as it is: close it if the work is not wanted, or keep it to plan and run on its own."
            ),
        )
        saved = await update_plan(session, saved, functools.partial(_forgotten, fid=fid))
    if not opened and not dropped:
        return  # nothing changed for the children (or a redone job): said already
    numbers = saved.state.child_features
    lines = [f"- {fid}: #{numbers[fid]}" for fid in feature_order(state.prd.features) if fid in numbers]
    if kept:
        lines.append("")
        lines.append(f"Kept from before: {', '.join(f'#{numbers[f]}' for f in kept if f in numbers)}.")
    if dropped:
        gone = ", ".join(f"#{n} ({f})" for f, n in dropped)
        lines.append(f"No longer in the epic (told so on the issue, left open): {gone}.")
    await session.reply(
        "This issue is an epic. Each feature is planned in its own issue, in this order; approve them "
        "there:\n\n" + "\n".join(lines)
    )
    await refresh_rollup(session, session.issue)
