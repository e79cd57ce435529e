"""The Mermaid diagrams of docs/how-it-works.md show the code's states and moves: the plan's
state machine (`bot/plan/state.py`), and what merges do to a stack of batch pull requests
(`bot/plan/stack.py`, the publisher's reopening of a stranded batch)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from itertools import pairwise

from bot.plan.model import PRD
from bot.plan.stack import batch_of_branch, is_open, record_merge, stranded
from bot.plan.state import TRANSITIONS, BatchState, PlanState, PlanStatus, new_plan, with_batch
from bot.publishing.stack import _set as set_batch
from tests.docs_support import ROOT, code

PAGE = ROOT / "docs" / "how-it-works.md"
_EDGE = re.compile(r"^\s*(\[\*\]|\w+)\s*-->\s*(\[\*\]|\w+)")


def diagram(heading: str) -> str:
    blocks = [b.text for b in code(PAGE) if b.info == "mermaid" and b.heading == heading]
    assert len(blocks) == 1, f"docs/how-it-works.md should have one Mermaid diagram under '{heading}'"
    return blocks[0]


def edges(text: str) -> set[tuple[str, str]]:
    return {(m.group(1), m.group(2)) for line in text.splitlines() if (m := _EDGE.match(line))}


def test_the_approval_diagram_is_the_state_machine() -> None:
    drawn = edges(diagram("The approval state machine"))
    code_edges = {(a.value, b.value) for a, targets in TRANSITIONS.items() for b in targets}
    start = PlanState.model_fields["status"].default.value
    ends = {s.value for s, targets in TRANSITIONS.items() if not targets}
    inner = {e for e in drawn if "[*]" not in e}
    assert inner - code_edges == set(), f"drawn but refused by TRANSITIONS: {sorted(inner - code_edges)}"
    assert code_edges - inner == set(), f"in TRANSITIONS but not drawn: {sorted(code_edges - inner)}"
    assert {b for a, b in drawn if a == "[*]"} == {start}
    assert {a for a, b in drawn if b == "[*]"} == ends


def test_the_flow_from_label_to_merge_is_a_path_the_state_machine_allows() -> None:
    statuses = re.findall(r"status: (\w+)", diagram("From label to merge"))
    assert statuses[0] == PlanState.model_fields["status"].default.value
    for a, b in pairwise(statuses):
        assert PlanStatus(b) in TRANSITIONS[PlanStatus(a)], (
            f"the flow moves {a} → {b}, which the code refuses"
        )
    assert statuses[-1] == PlanStatus.COMPLETED.value


BASE = "main"


def phase(state: PlanState, number: int) -> str:
    """Where batch `number`'s pull request is, in the diagram's words."""
    record = state.batches[number - 1]
    if record.hands_off:
        return "hands_off"
    if record.merged:
        return "delivered"
    if record.merged_into is not None:
        holder = batch_of_branch(record.merged_into, state.issue)
        reaches = holder is not None and holder <= len(state.batches) and is_open(state.batches[holder - 1])
        return "merged_elsewhere" if reaches else "stranded"
    return "open" if record.pr_number is not None else "none"


def _plan() -> PlanState:
    prd = PRD.model_validate(
        {
            "version": 1,
            "title": "Three batches",
            "summary": "s",
            "stories": [
                {"id": f"STORY-00{i}", "title": f"t{i}", "description": "d", "type": "feature",
                 "priority": "high", "depends_on": [f"STORY-00{i - 1}"] if i > 1 else [],
                 "acceptance_criteria": [f"f{i}() returns {i}"]}
                for i in (1, 2, 3)
            ],
        }
    )  # fmt: skip
    state = new_plan(repo="o/r", issue=7, prd=prd, at=datetime(2026, 1, 1, tzinfo=UTC))
    for n in (1, 2, 3):
        record = BatchState(
            number=n, branch=f"plan-cascade/7/batch-{n}", pr_number=10 + n, head_sha=f"{n}" * 40
        )
        state = with_batch(state, record)
    return state


def _merge(state: PlanState, number: int, into: str) -> PlanState:
    return record_merge(state, number, into=into, base_branch=BASE, head=f"{number}" * 40, stacked=True).state


def test_the_stack_diagram_is_what_merges_do() -> None:
    drawn = edges(diagram("Stacks after merges"))
    fresh = _plan()
    seen: set[tuple[str, str]] = {("[*]", phase(fresh, 1))}
    # merged into the base branch: delivered, and the next PR is retargeted
    outcome = record_merge(fresh, 1, into=BASE, base_branch=BASE, head="1" * 40, stacked=True)
    assert outcome.retarget == [2]
    seen.add((phase(fresh, 1), phase(outcome.state, 1)))
    # merged into the previous batch's branch: waits there, delivered with it
    waiting = _merge(fresh, 2, "plan-cascade/7/batch-1")
    seen.add((phase(fresh, 2), phase(waiting, 2)))
    seen.add((phase(waiting, 2), phase(_merge(waiting, 1, BASE), 2)))
    # the branch it waits in goes somewhere that never reaches the base branch: stranded
    lost = _merge(waiting, 1, "feature")
    assert stranded(lost) == 1
    seen.add((phase(waiting, 2), phase(lost, 2)))
    # `rebase` opens a new pull request for a stranded batch (the publisher's record of it)
    reopened = set_batch(lost, number=2, pr_number=99, pr_url="u", head_sha="9" * 40, merged_into=None)
    seen.add((phase(lost, 2), phase(reopened, 2)))
    # someone else pushed to the branch
    theirs = with_batch(fresh, fresh.batches[2].model_copy(update={"hands_off": True}))
    seen.add((phase(fresh, 3), phase(theirs, 3)))
    seen.add((phase(outcome.state, 1), "[*]"))
    assert seen == drawn, (
        f"the code does {sorted(seen - drawn)} undrawn; drawn but not done: {sorted(drawn - seen)}"
    )
