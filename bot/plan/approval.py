"""The approval rule over the plan state, pure: what an approval covers, when it counts, and when
the plan becomes approved. Who may approve is `bot.store.permissions`'s concern."""

from __future__ import annotations

from datetime import datetime

from bot.errors import StateError
from bot.plan import PRD
from bot.plan.state import Approval, PlanState, PlanStatus, transition


def written_for_revision(at: datetime | None, state: PlanState) -> bool:
    """Whether something GitHub stamped `at` (a comment, a 👍) came after this revision was posted.

    GitHub's timestamps have whole seconds, so the revision's time is compared at that
    precision; a reaction given in the very second of a revise is still excluded by the
    snapshot of reactions taken then (`ignored_reactions`). Unknown times never count.
    """
    if at is None:
        return False
    return state.revised_at is None or at >= state.revised_at.replace(microsecond=0)


def scope_for(state: PlanState, *, batch: int | None = None, story_ids: list[str] | None = None) -> list[str]:
    """Story ids an approval covers: a batch, some stories (with their dependencies), or all."""
    batches = state.batches_ids()
    if batch is not None:
        if not 1 <= batch <= len(batches):
            raise StateError(f"there is no batch {batch}: the plan has {len(batches)} batches")
        ids: set[str] = set()
        for b in batches[:batch]:
            ids.update(b)
        return [s.id for s in state.prd.stories if s.id in ids]
    if story_ids:
        known = {s.id for s in state.prd.stories}
        unknown = [s for s in story_ids if s not in known]
        if unknown:
            raise StateError(f"unknown stories: {', '.join(unknown)}")
        wanted = set(story_ids)
        for sid in story_ids:
            wanted |= _dependencies(state.prd, sid)
        return [s.id for s in state.prd.stories if s.id in wanted]
    return [s.id for s in state.prd.stories]


def _dependencies(prd: PRD, story_id: str) -> set[str]:
    deps: set[str] = set()
    todo = [story_id]
    while todo:
        for dep in prd.story(todo.pop()).depends_on:
            if dep not in deps:
                deps.add(dep)
                todo.append(dep)
    return deps


def add_approval(state: PlanState, approval: Approval) -> tuple[PlanState, str]:
    """Record an approval; returns the new state and what happened, for the reply.

    Only approvals of the current revision count; one per user; the plan becomes
    approved when `required_approvals` distinct users approved.
    """
    # An epic whose children are all open is approved no more (an epic across repositories that
    # opened only some, stopped by a problem, is approved again to open the rest).
    if state.children or (state.child_issues and len(state.child_issues) >= len(state.prd.features)):
        listed = ", ".join([f"#{n}" for n in state.children] + list(state.child_issues.values()))
        raise StateError(f"this plan is an epic: its features are planned in {listed}; approve those")
    if state.epic_problems:
        raise StateError("this epic cannot open its children yet: " + "; ".join(state.epic_problems))
    if approval.plan_hash != state.plan_hash:
        raise StateError(
            f"that approval is for an older revision ({approval.plan_hash[:12]}); the current plan is "
            f"revision {state.revision} ({state.plan_hash[:12]}): review it and approve again"
        )
    if state.status not in (PlanStatus.AWAITING_APPROVAL, PlanStatus.APPROVED, PlanStatus.PAUSED):
        raise StateError(f"the plan is {state.status.value.replace('_', ' ')}: there is nothing to approve")
    if state.status == PlanStatus.APPROVED and set(approval.scope or scope_for(state)) <= set(
        state.approved_scope
    ):
        return state, "already approved"
    approval = approval.model_copy(update={"revision": state.revision})
    others = [a for a in state.approvals if not (a.user == approval.user and state.binds(a))]
    approvals = [*others, approval]
    new = state.model_copy(update={"approvals": approvals})
    current = new.current_approvals()
    if len({a.user for a in current}) < state.required_approvals:
        need = state.required_approvals - len({a.user for a in current})
        return new, f"approval recorded; {need} more needed"
    scope: set[str] = set(state.approved_scope)
    for a in current:
        scope |= set(a.scope or scope_for(state))
    ordered = [s.id for s in state.prd.stories if s.id in scope]
    new = new.model_copy(update={"approved_scope": ordered})
    if state.status == PlanStatus.PAUSED:
        return new, "approved"
    return transition(new, PlanStatus.APPROVED, at=approval.at), "approved"
