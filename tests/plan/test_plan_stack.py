"""What a merged batch PR delivers, and where each PR of the stack must point. Pure."""

from __future__ import annotations

from bot.plan.stack import expected_base, lowest_open, record_merge, stranded
from bot.plan.state import BatchState, PlanState, revision_hash
from tests.plan.plan_builders import build_prd, build_story

B = "plan-cascade/7/batch-{}"


def _state(batches: int = 3, **changes: dict) -> PlanState:
    prd = build_prd(*(build_story(n, *([n - 1] if n > 1 else [])) for n in range(1, batches + 1)))
    records = [
        BatchState(number=n, branch=B.format(n), pr_number=10 + n, head_sha=f"{n:040d}", **changes.get(n, {}))
        for n in range(1, batches + 1)
    ]
    return PlanState(repo="o/r", issue=7, plan_hash=revision_hash(prd), prd=prd, batches=records)


def test_a_merge_into_the_base_branch_delivers_and_retargets_the_next() -> None:
    out = record_merge(_state(), 1, into="main", base_branch="main", head="h1", stacked=True)
    assert out.delivered == [1] and out.retarget == [2] and out.elsewhere is None
    first = out.state.batches[0]
    assert first.merged and first.merged_head == "h1"
    assert expected_base(out.state, 2, base_branch="main", stacked=True) == "main"
    assert expected_base(out.state, 3, base_branch="main", stacked=True) == B.format(2)
    assert lowest_open(out.state) == 2


def test_a_merge_into_the_previous_batchs_branch_waits_for_it() -> None:
    out = record_merge(_state(), 2, into=B.format(1), base_branch="main", head="h2", stacked=True)
    assert out.delivered == [] and out.elsewhere == B.format(1) and out.waits_for == 1
    assert not out.state.batches[1].merged and out.state.batches[1].merged_into == B.format(1)
    assert stranded(out.state) is None  # batch 1 will carry it
    # Batch 3 was stacked on batch 2, whose work now sits on batch 1's branch.
    assert expected_base(out.state, 3, base_branch="main", stacked=True) == B.format(1)
    done = record_merge(out.state, 1, into="main", base_branch="main", head="h1", stacked=True)
    assert done.delivered == [1, 2] and done.retarget == [3]
    assert [b.merged for b in done.state.batches] == [True, True, False]


def test_a_merge_into_a_delivered_batchs_branch_is_stranded() -> None:
    state = record_merge(_state(), 1, into="main", base_branch="main", head="h1", stacked=True).state
    out = record_merge(state, 2, into=B.format(1), base_branch="main", head="h2", stacked=True)
    assert out.delivered == [] and out.waits_for is None
    assert stranded(out.state) == 2
    assert not out.state.batches[1].merged


def test_a_merge_into_any_other_branch_counts_nothing() -> None:
    out = record_merge(_state(), 1, into="release", base_branch="main", head="h1", stacked=True)
    assert out.delivered == [] and out.elsewhere == "release" and out.waits_for is None
    assert stranded(out.state) == 1


def test_without_stacking_every_pr_targets_the_base_branch() -> None:
    out = record_merge(_state(), 1, into="main", base_branch="main", head="h1", stacked=False)
    assert out.retarget == []
    assert expected_base(out.state, 3, base_branch="main", stacked=False) == "main"
