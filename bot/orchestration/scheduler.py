"""Pure scheduling rules: which stories may run, and how a run ends."""

from __future__ import annotations

from collections.abc import Sequence

from bot.errors import StateError
from bot.plan import compute_batches, transitive_dependents
from bot.plan.state import PlanState, PlanStatus, StoryStatus, update_story

RUNNABLE = (StoryStatus.PENDING, StoryStatus.RUNNING)
BLOCKING = (StoryStatus.FAILED, StoryStatus.SKIPPED, StoryStatus.CANCELLED)
"""A dependency in one of these states keeps its dependents from running by themselves."""


def in_scope(state: PlanState, story_id: str) -> bool:
    """Partial approval: only approved stories run."""
    return not state.approved_scope or story_id in state.approved_scope


def runnable(state: PlanState, batch: list[str]) -> list[str]:
    """Stories of a batch that should run now: approved, not finished, every dependency passed.

    A skipped dependency is not done: its work does not exist, so its dependents never run on
    top of it (`resume` keeps them skipped).
    """
    ready = []
    for sid in batch:
        if not in_scope(state, sid) or state.stories[sid].status not in RUNNABLE:
            continue
        deps = state.prd.story(sid).depends_on
        if all(state.stories[d].status == StoryStatus.PASSED for d in deps):
            ready.append(sid)
    return ready


def resume(state: PlanState, *, retry: Sequence[str] = (), skip: Sequence[str] = (), actor: str) -> PlanState:
    """The stories of a failed or paused plan after `retry` / `skip` (the plan's status is unchanged).

    The rule, said the same way in the help, the plan comment and the failure message:
    - `skip X` accepts X as skipped; every story that depends on X (directly or not) and has not
      passed is skipped too, because it would build on work that does not exist.
    - `retry X` runs X again; the stories skipped only because X failed run again with it.
    - A story cannot be retried while a story it depends on failed (retry that one too) or was
      skipped (revise the plan to drop the dependency instead).
    """
    unknown = [s for s in [*retry, *skip] if s not in state.stories]
    if unknown:
        raise StateError(f"unknown stories: {', '.join(unknown)}")
    for sid in skip:
        state = update_story(state, sid, status=StoryStatus.SKIPPED, reason=f"skipped by @{actor}")
    for sid in skip:
        for dep in sorted(transitive_dependents(state.prd, sid)):
            if dep not in skip and state.stories[dep].status != StoryStatus.PASSED:
                state = update_story(
                    state, dep, status=StoryStatus.SKIPPED, reason=f"depends on {sid}, which was skipped"
                )
    for sid in retry:
        state = update_story(state, sid, status=StoryStatus.PENDING, reason=None, attempts=0)
    blocked = [
        f"{sid} depends on {dep}, which failed: retry {dep} too"
        if state.stories[dep].status == StoryStatus.FAILED
        else f"{sid} depends on {dep}, which was {state.stories[dep].status.value}: "
        "`revise` the plan to drop that dependency"
        for sid in retry
        for dep in state.prd.story(sid).depends_on
        if state.stories[dep].status in BLOCKING and dep not in retry
    ]
    if blocked:
        raise StateError("; ".join(blocked))
    # Stories skipped because a retried story failed run again once nothing they need is blocked.
    order = [sid for batch in compute_batches(state.prd) for sid in batch]
    lifted = {dep for sid in retry for dep in transitive_dependents(state.prd, sid)}
    for sid in order:
        record = state.stories[sid]
        if sid not in lifted or record.status != StoryStatus.SKIPPED:
            continue
        if not (record.reason or "").endswith("which failed"):
            continue
        if all(state.stories[d].status not in BLOCKING for d in state.prd.story(sid).depends_on):
            state = update_story(state, sid, status=StoryStatus.PENDING, reason=None)
    return state


def outcome(state: PlanState) -> PlanStatus:
    """How a run ends once no story can make progress."""
    statuses = {sid: st.status for sid, st in state.stories.items()}
    if any(s == StoryStatus.FAILED for s in statuses.values()):
        return PlanStatus.FAILED
    left = [sid for sid, s in statuses.items() if s in RUNNABLE]
    if left and all(not in_scope(state, sid) for sid in left):
        return PlanStatus.AWAITING_APPROVAL
    if left:
        return PlanStatus.FAILED
    return PlanStatus.COMPLETED


def story_branch(prefix: str, story_id: str) -> str:
    """`plan-cascade/<issue>/<story-id, lower case>`."""
    return f"{prefix}/{story_id.lower()}"


def batch_branch(prefix: str, batch: int) -> str:
    """`plan-cascade/<issue>/batch-<k>`."""
    return f"{prefix}/batch-{batch}"


def shared_files(state: PlanState, batch: list[str]) -> list[str]:
    """Warnings for stories of one batch that name the same files (likely merge conflicts)."""
    owners: dict[str, list[str]] = {}
    for sid in batch:
        for path in state.prd.story(sid).files:
            owners.setdefault(path, []).append(sid)
    return [
        f"{' and '.join(sids)} run in parallel and both change `{path}`: expect a conflict "
        "(the later one is redone on top of the merged batch)"
        for path, sids in sorted(owners.items())
        if len(sids) > 1
    ]
