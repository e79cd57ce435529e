"""The plan state machine: transitions, approvals bound to revisions, the hidden block."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.errors import StateError
from bot.plan import parse_prd
from bot.plan.approval import add_approval, scope_for
from bot.plan.state import (
    Approval,
    PlanStatus,
    StoryStatus,
    new_plan,
    revise,
    skip_dependents,
    transition,
    update_story,
)
from bot.plan.state_block import decode_state, encode_state

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
PRD_TEXT = """
version: 1
title: Rate limiting
summary: Add a limiter.
stories:
  - id: STORY-001
    title: Limiter
    acceptance_criteria: ["allow() returns False after 10 calls within 1 s"]
  - id: STORY-002
    title: Middleware
    depends_on: [STORY-001]
    acceptance_criteria: ["a 429 is answered on the 11th request within 1 s"]
  - id: STORY-003
    title: Docs
    type: docs
    acceptance_criteria: ["README has a 'Rate limits' section with the 10/s default"]
  - id: STORY-004
    title: Metrics
    depends_on: [STORY-002]
    acceptance_criteria: ["a counter rate_limited_total increases by 1 per refused request"]
"""


@pytest.fixture
def plan():
    return new_plan(repo="o/r", issue=7, prd=parse_prd(PRD_TEXT), at=T0)


def approval(plan, user="alice", **kw) -> Approval:
    return Approval(
        user=user, at=T0, via=kw.pop("via", "command"), plan_hash=kw.pop("plan_hash", plan.plan_hash), **kw
    )


def test_new_plan_awaits_approval_with_batches(plan) -> None:
    assert plan.status == PlanStatus.AWAITING_APPROVAL
    assert plan.batches_ids() == [["STORY-001", "STORY-003"], ["STORY-002"], ["STORY-004"]]
    assert [b.number for b in plan.batches] == [1, 2, 3]
    assert set(plan.stories) == {"STORY-001", "STORY-002", "STORY-003", "STORY-004"}


def test_transition_table_refuses_illegal_moves(plan) -> None:
    with pytest.raises(StateError, match="awaiting approval cannot become running"):
        transition(plan, PlanStatus.RUNNING, at=T0)
    done = plan.model_copy(update={"status": PlanStatus.COMPLETED})
    with pytest.raises(StateError):
        transition(done, PlanStatus.RUNNING, at=T0)


def test_approval_of_the_current_revision_approves(plan) -> None:
    new, outcome = add_approval(plan, approval(plan))
    assert outcome == "approved" and new.status == PlanStatus.APPROVED
    assert new.approved_scope == ["STORY-001", "STORY-002", "STORY-003", "STORY-004"]


def test_stale_revision_is_refused(plan) -> None:
    with pytest.raises(StateError, match="older revision"):
        add_approval(plan, approval(plan, plan_hash="0" * 64))


def test_required_approvals_counts_distinct_users(plan) -> None:
    plan = plan.model_copy(update={"required_approvals": 2})
    one, outcome = add_approval(plan, approval(plan, "alice"))
    assert one.status == PlanStatus.AWAITING_APPROVAL and "1 more needed" in outcome
    again, _ = add_approval(one, approval(plan, "alice", via="reaction"))
    assert again.status == PlanStatus.AWAITING_APPROVAL
    two, outcome = add_approval(again, approval(plan, "bob"))
    assert two.status == PlanStatus.APPROVED and outcome == "approved"


def test_revise_resets_approval_and_bumps_revision(plan) -> None:
    approved, _ = add_approval(plan, approval(plan))
    prd2 = parse_prd(PRD_TEXT.replace("title: Docs", "title: Documentation"))
    revised = revise(approved, prd2, at=T0, changelog=["changed STORY-003 (title)"])
    assert revised.status == PlanStatus.AWAITING_APPROVAL
    assert revised.revision == 2 and revised.plan_hash != plan.plan_hash
    assert revised.current_approvals() == [] and revised.approved_scope == []
    with pytest.raises(StateError, match="older revision"):
        add_approval(revised, approval(plan))


def test_revise_refused_while_running(plan) -> None:
    running = plan.model_copy(update={"status": PlanStatus.RUNNING})
    with pytest.raises(StateError, match="running"):
        revise(running, plan.prd, at=T0, changelog=[])


def test_partial_approval_by_batch_and_by_story(plan) -> None:
    assert scope_for(plan, batch=1) == ["STORY-001", "STORY-003"]
    assert scope_for(plan, batch=2) == ["STORY-001", "STORY-002", "STORY-003"]
    assert scope_for(plan, story_ids=["STORY-004"]) == ["STORY-001", "STORY-002", "STORY-004"]
    with pytest.raises(StateError, match="no batch 9"):
        scope_for(plan, batch=9)
    with pytest.raises(StateError, match="unknown stories: STORY-099"):
        scope_for(plan, story_ids=["STORY-099"])
    new, _ = add_approval(plan, approval(plan, scope=scope_for(plan, batch=1)))
    assert new.approved_scope == ["STORY-001", "STORY-003"]


def test_failure_skips_every_dependent(plan) -> None:
    failed = update_story(plan, "STORY-001", status=StoryStatus.FAILED, reason="tests failed")
    skipped = skip_dependents(failed, "STORY-001", at=T0)
    assert skipped.stories["STORY-002"].status == StoryStatus.SKIPPED
    assert skipped.stories["STORY-004"].status == StoryStatus.SKIPPED
    assert skipped.stories["STORY-003"].status == StoryStatus.PENDING
    assert "STORY-001" in skipped.stories["STORY-004"].reason


def test_state_round_trips_through_the_hidden_block(plan) -> None:
    approved, _ = add_approval(plan, approval(plan))
    body = f"# Plan\n\nvisible text\n\n{encode_state(approved, key=None)}\n"
    assert "-->" not in encode_state(approved, key=None)[4:-3]
    assert decode_state(body) == approved


@pytest.mark.parametrize(
    "body",
    [
        "",
        "no marker",
        "<!-- plan-cascade:state v1 !!!notbase64 -->",
        "<!-- plan-cascade:state v9 AAAA -->",
        "<!-- plan-cascade:state v1 aGVsbG8= -->",
    ],
)
def test_unreadable_blocks_decode_to_none(body) -> None:
    assert decode_state(body) is None
