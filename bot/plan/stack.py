"""The batch pull requests as a stack: what a merge delivers and which PR must follow. Pure.

A batch is *delivered* (`BatchState.merged`) only when its work reaches the plan's base branch:
its own pull request merged into that branch, or merged into another batch's branch that was
then delivered itself. A pull request merged into any other branch (a stacked PR whose base
still was the previous batch's branch) delivers nothing: the plan keeps waiting.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.github.models import PullRequest
from bot.plan.state import BatchState, PlanState, with_batch

_BATCH_BRANCH = re.compile(r"^plan-cascade/(\d+)/batch-(\d+)$")


def batch_of_branch(branch: str, issue: int) -> int | None:
    """The batch number of `issue`'s batch branch `branch`, or None for any other branch."""
    match = _BATCH_BRANCH.match(branch or "")
    return int(match.group(2)) if match and int(match.group(1)) == issue else None


def is_open(record: BatchState) -> bool:
    """A batch whose pull request is still to be merged: opened, neither delivered nor merged
    into another branch, and still the bot's to change."""
    return record.pr_number is not None and not record.merged and record.merged_into is None


@dataclass(frozen=True)
class MergeOutcome:
    """What merging batch `batch`'s pull request did to the plan."""

    state: PlanState
    delivered: list[int] = field(default_factory=list)
    """Batches whose work reached the base branch with this merge (empty: none did)."""
    elsewhere: str | None = None
    """The branch the pull request went into when that is not the base branch."""
    waits_for: int | None = None
    """The batch whose branch now holds this one's work, when merging that batch can still
    deliver it (None: nothing will bring it to the base branch by itself)."""
    retarget: list[int] = field(default_factory=list)
    """Open batches whose pull request must target the base branch now."""


def record_merge(
    state: PlanState, batch: int, *, into: str, base_branch: str, head: str, stacked: bool
) -> MergeOutcome:
    """Record that batch `batch`'s pull request was merged into `into` at `head`."""
    record = state.batches[batch - 1]
    if into != base_branch:
        state = with_batch(state, record.model_copy(update={"merged_into": into, "merged_head": head}))
        target = batch_of_branch(into, state.issue)
        holder = state.batches[target - 1] if target is not None and target <= len(state.batches) else None
        waits = target if holder is not None and not holder.merged and holder.merged_into is None else None
        return MergeOutcome(state=state, elsewhere=into, waits_for=waits)
    delivered = _carried(state, batch)
    for number in delivered:
        done = state.batches[number - 1]
        changes: dict[str, object] = {"merged": True}
        if number == batch:
            changes.update(merged_head=head, merged_into=None)
        state = with_batch(state, done.model_copy(update=changes))
    retarget = []
    if stacked:
        following = [n + 1 for n in delivered if n < len(state.batches)]
        retarget = sorted({n for n in following if is_open(state.batches[n - 1])})
    return MergeOutcome(state=state, delivered=delivered, retarget=retarget)


def _carried(state: PlanState, batch: int) -> list[int]:
    """`batch` and every batch merged (directly or not) into its branch before it was merged."""
    found = [batch]
    branches = {f"plan-cascade/{state.issue}/batch-{batch}"}
    changed = True
    while changed:
        changed = False
        for record in state.batches:
            if record.number in found or record.merged or record.merged_into not in branches:
                continue
            found.append(record.number)
            branches.add(f"plan-cascade/{state.issue}/batch-{record.number}")
            changed = True
    return sorted(found)


def all_delivered(state: PlanState) -> bool:
    """Every batch that opened a pull request has its work on the base branch."""
    opened = [b for b in state.batches if b.pr_number is not None]
    return bool(opened) and all(b.merged for b in opened)


def lowest_open(state: PlanState) -> int | None:
    """The first open batch: the one whose pull request targets the base branch."""
    return next((b.number for b in state.batches if is_open(b)), None)


def stranded(state: PlanState) -> int | None:
    """The first batch whose PR was merged into a branch that will not bring it to the base
    branch (a delivered batch's, or no batch's): `rebase` opens a new PR for it."""
    for record in state.batches:
        if record.merged or record.merged_into is None:
            continue
        holder = batch_of_branch(record.merged_into, state.issue)
        if holder is None or holder > len(state.batches) or not is_open(state.batches[holder - 1]):
            return record.number
    return None


def expected_base(state: PlanState, batch: int, *, base_branch: str, stacked: bool) -> str:
    """The branch batch `batch`'s pull request must target now: the base branch for the lowest
    open batch (and always without stacking), else the previous batch's branch."""
    if not stacked or batch == 1:
        return base_branch
    if batch - 2 >= len(state.batches):
        return f"plan-cascade/{state.issue}/batch-{batch - 1}"
    previous = state.batches[batch - 2]
    if previous.merged:
        return base_branch
    if previous.merged_into is not None:  # its work went into that branch: follow it there
        holder = batch_of_branch(previous.merged_into, state.issue)
        if holder is not None and holder < batch and is_open(state.batches[holder - 1]):
            return previous.merged_into
        return base_branch
    return previous.branch or f"plan-cascade/{state.issue}/batch-{batch - 1}"


def merge_problem(repo: str, record: BatchState, pr: PullRequest, commits: Sequence[str]) -> str | None:
    """Why a merged pull request is not the batch's merge (None when it is).

    Only the pull request the plan recorded for the batch counts, with its head branch in this
    repository (a fork can name its branch like ours and copy our body marker), merged with
    the head the bot recorded or a later one: `commits` (the pull request's commits) must hold
    the recorded head when the merged head is another.
    """
    if record.pr_number is None or pr.number != record.pr_number:
        return f"the batch's pull request is #{record.pr_number}" if record.pr_number else "no PR recorded"
    if not pr.merged:
        return "it is not merged"
    if pr.head_repo.lower() != repo.lower() or pr.base_repo.lower() != repo.lower():
        return f"its head is in {pr.head_repo or 'an unknown repository'}, not {repo}"
    if not record.head_sha:
        return "no head was recorded for the batch"
    if pr.head_sha != record.head_sha and record.head_sha not in commits:
        return f"its head {pr.head_sha[:12]} does not build on the batch's head {record.head_sha[:12]}"
    return None
