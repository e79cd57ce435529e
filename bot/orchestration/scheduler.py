"""Pure scheduling rules: which stories may run, and how a run ends."""

from __future__ import annotations

from bot.state import PlanState, PlanStatus, StoryStatus

RUNNABLE = (StoryStatus.PENDING, StoryStatus.RUNNING)


def in_scope(state: PlanState, story_id: str) -> bool:
    """Partial approval: only approved stories run."""
    return not state.approved_scope or story_id in state.approved_scope


def runnable(state: PlanState, batch: list[str]) -> list[str]:
    """Stories of a batch that should run now: approved, not finished, dependencies passed."""
    ready = []
    for sid in batch:
        if not in_scope(state, sid) or state.stories[sid].status not in RUNNABLE:
            continue
        deps = state.prd.story(sid).depends_on
        if all(state.stories[d].status in (StoryStatus.PASSED, StoryStatus.SKIPPED) for d in deps):
            ready.append(sid)
    return ready


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
