"""Batch pull request titles."""

from __future__ import annotations

from bot.plan import Strategy
from bot.rendering.pr_body import pr_title
from tests.rendering.samples import approved_state


def test_a_hybrid_plan_numbers_its_batch_prs() -> None:
    state = approved_state()
    first = state.batches_ids()[0]
    title = pr_title(state, 1, first)
    assert title.startswith(f"[Plan Cascade] #{state.issue} batch 1/{len(state.batches_ids())}: ")


def test_a_direct_plan_has_one_pr_without_batch_numbers() -> None:
    state = approved_state()
    story = state.prd.stories[0].model_copy(update={"depends_on": []})
    prd = state.prd.model_copy(update={"strategy": Strategy.DIRECT, "stories": [story]})
    direct = state.model_copy(update={"prd": prd})
    assert pr_title(direct, 1, [story.id]) == f"[Plan Cascade] #{state.issue}: {story.title}"
