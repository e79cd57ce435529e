from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from bot.plan.approval import add_approval, scope_for
from bot.plan.state import Approval, PlanStatus, StoryStatus, new_plan, transition, update_story
from bot.rendering import messages
from tests.rendering.samples import (
    T0,
    approved_state,
    assert_snapshot,
    at,
    awaiting_state,
    failed_state,
    running_state,
    sample_prd,
)


def _paused() -> str:
    state = transition(running_state(), PlanStatus.PAUSED, at=at(60), note="budget reached")
    return messages.cost_paused(state, 1.25)


def _completed() -> str:
    state = running_state()
    for sid in ("STORY-003", "STORY-004"):
        state = update_story(state, sid, status=StoryStatus.PASSED, attempts=1)
    state = transition(state, PlanStatus.COMPLETED, at=at(125))
    return messages.plan_completed(
        state,
        pull_requests=[
            (101, "https://github.com/acme/api/pull/101"),
            (102, "https://github.com/acme/api/pull/102"),
        ],
        elapsed_minutes=115,
    )


def _one_more_needed() -> str:
    state = new_plan(repo="acme/api", issue=42, prd=sample_prd(), at=T0, required_approvals=2)
    approval = Approval(user="alice", at=at(5), via="reaction", plan_hash=state.plan_hash)
    state, outcome = add_approval(state, approval)
    return messages.approval_recorded(state, "alice", outcome=outcome)


def _approved() -> str:
    state = new_plan(repo="acme/api", issue=42, prd=sample_prd(), at=T0)
    scope = scope_for(state, story_ids=["STORY-003"])
    approval = Approval(user="bob", at=at(5), via="command", plan_hash=state.plan_hash, scope=scope)
    state, outcome = add_approval(state, approval)
    return messages.approval_recorded(state, "bob", outcome=outcome)


def _cancelled() -> str:
    state = transition(running_state(), PlanStatus.CANCELLED, at=at(70))
    batches = list(state.batches)
    batches[0] = batches[0].model_copy(update={"merged": False})
    return messages.cancelled(state.model_copy(update={"batches": batches}), 1)


MESSAGES: dict[str, Callable[[], str]] = {
    "help": lambda: messages.help_text("https://github.com/apps/plan-cascade-bot", "plan-cascade"),
    "base_setup_failed": lambda: messages.base_setup_failed(
        label="main@abc1234",
        commands="```\nuv venv -q .venv && uv pip install -q -e . && echo @octocat <b>\n```",
        output="```\nerror: Multiple top-level packages discovered in a flat-layout\n```",
    ),
    "permission_denied_read": lambda: messages.permission_denied("mallory", "read", approvers=[]),
    "permission_denied_approvers": lambda: messages.permission_denied(
        "carol", "write", approvers=["alice", "bob"]
    ),
    "permission_denied_none": lambda: messages.permission_denied("eve", "none", approvers=["alice"]),
    "state_refusal": lambda: messages.state_refusal(
        "/plan-cascade revise", "the plan is running: `/plan-cascade cancel` it before revising"
    ),
    "approval_one_more_needed": _one_more_needed,
    "approval_approved_partial": _approved,
    "approval_already": lambda: messages.approval_recorded(
        approved_state(), "bob", outcome="already approved"
    ),
    "stale_approval": lambda: messages.stale_approval(
        awaiting_state(), user="alice", approved_hash=approved_state().plan_hash
    ),
    "prd_invalid_block": lambda: messages.prd_invalid(
        [
            "STORY-002 depends on unknown story STORY-009",
            "dependency cycle: STORY-001 → STORY-003 → STORY-001",
        ],
        "prd-block",
    ),
    "prd_invalid_described": lambda: messages.prd_invalid(["title: must not be empty"], "the `prd` block"),
    "state_refusal_bare": lambda: messages.state_refusal("status", "this issue has no plan yet"),
    "prd_invalid_llm": lambda: messages.prd_invalid(["stories[0].acceptance_criteria: at least one"], "llm"),
    "planning_failed": lambda: messages.planning_failed(
        "the model answered with no usable plan after 2 tries"
    ),
    "status_running": lambda: messages.status_reply(running_state()),
    "status_failed": lambda: messages.status_reply(failed_state()),
    "cancelled": _cancelled,
    "cost_paused": _paused,
    "plan_completed": _completed,
    "plan_failed": lambda: messages.plan_failed(failed_state()),
    "unknown_command": lambda: messages.unknown_command("/plan-cascade deploy `now`", app_url=None),
}


@pytest.mark.parametrize("name", sorted(MESSAGES))
def test_message_snapshot(name: str) -> None:
    assert_snapshot(f"message_{name}.md", MESSAGES[name]())


@pytest.mark.parametrize("name", sorted(MESSAGES))
def test_no_message_pings_anyone(name: str) -> None:
    text = re.sub(r"(`+).*?\1", "", MESSAGES[name](), flags=re.S)  # code (inline or fenced) pings nobody
    assert not re.search(r"@[A-Za-z0-9]", text)


def test_help_lists_every_command() -> None:
    text = messages.help_text(None, "needs-plan")
    commands = ["plan [notes]", "approve", "approve batch N", "approve STORY-…", "revise <feedback>"]
    commands += ["cancel", "status", "retry [STORY-…]", "skip STORY-…", "fix <feedback>", "help"]
    for command in commands:
        assert f"| `/plan-cascade {command}` |" in text
    assert "`needs-plan` label" in text
    assert "github.com/apps" not in text


def test_permission_denied_names_the_permission_and_approvers() -> None:
    text = messages.permission_denied("mallory", "read", approvers=["alice"])
    assert "Only users with write access (admin, maintain or write) can use Plan Cascade here" in text
    assert "@&#8203;mallory has read access." in text
    assert "Approving plans is also limited to @&#8203;alice." in text


def test_plan_failed_offers_retry_skip_and_revise_with_the_reason() -> None:
    text = messages.plan_failed(failed_state())
    assert "**STORY-003**" in text and "after 3 attempts" in text and "expected 429, got 200" in text
    assert "`/plan-cascade retry STORY-003`" in text and "`/plan-cascade skip STORY-003`" in text
    assert "Skipped because they depend on a failed story: STORY-004." in text


def test_prd_invalid_caps_the_problem_list() -> None:
    text = messages.prd_invalid([f"problem {i}" for i in range(60)], "prd-block")
    assert "- problem 49" in text and "- problem 50" not in text
    assert "- … and 10 more" in text
    assert "has 60 problems" in text


def test_unknown_command_shows_the_command_safely_and_the_help() -> None:
    text = messages.unknown_command("/plan-cascade deploy `now`")
    assert "`` /plan-cascade deploy `now` ``" in text
    assert "### 📋 Plan Cascade commands" in text
