"""The Action keeps no database: an older signed plan state pasted back into the plan comment
(issue 27, defect 5) is refused because the comment's last edit is not the bot's."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from bot.action.runner import run_action
from bot.plan.state_block import decode_state
from bot.testing.deliveries import load_fixture
from bot.testing.fake_github_actions import add_workflow_run
from tests.action.action_support import ActionWorld, comment_event, labeled_event
from tests.execution_support import git
from tests.harness import REPO

BRANCH = "plan-cascade/1/batch-1"
TEST_FAILURE = "FAILED tests/test_a.py::test_a - AssertionError (story-001.txt line 1)\n1 failed\n"


@pytest.fixture
def world(tmp_path: Path) -> ActionWorld:
    return ActionWorld(tmp_path)


def run(world: ActionWorld, event: str, payload: dict, **extra: str) -> int:  # type: ignore[type-arg]
    env = world.env(event, payload, PLAN_CASCADE_STATE_KEY="a-state-key-of-the-repository", **extra)
    return run_action(env, transport=world.fake.transport())


def test_a_pre_cancel_body_pasted_back_runs_no_agent_in_the_action(world: ActionWorld) -> None:
    assert run(world, "issues", labeled_event(world)) == 0
    assert run(world, "issue_comment", comment_event(world, "/plan-cascade approve")) == 0
    (comment,) = world.plan_comments()
    before_cancel = comment.body
    assert decode_state(before_cancel).batches[0].pr_number is not None
    assert run(world, "issue_comment", comment_event(world, "/plan-cascade cancel")) == 0
    (comment,) = world.plan_comments()
    assert decode_state(comment.body).batches[0].ci_stopped == "cancelled by @maint"
    world.fake.set_permission(REPO, "writer", "write")
    world.fake.edit_comment(REPO, comment.id, body=before_cancel, editor="writer")
    head = git("rev-parse", BRANCH, cwd=world.remote)
    ci = add_workflow_run(
        world.fake,
        REPO,
        head_sha=head,
        head_branch=BRANCH,
        name="CI",
        jobs=[("test", "failure", TEST_FAILURE)],
    )
    payload = copy.deepcopy(load_fixture("workflow_run.completed.2"))
    payload["repository"].update({"full_name": REPO, "name": REPO.split("/")[1], "default_branch": "main"})
    payload["repository"]["owner"]["login"] = REPO.split("/")[0]
    payload["workflow_run"].update(
        {"id": ci.id, "head_branch": BRANCH, "head_sha": head, "conclusion": "failure"}
    )
    run(world, "workflow_run", payload)
    assert git("rev-parse", BRANCH, cwd=world.remote) == head, "no agent ran, nothing was pushed"
    assert ci.reruns == 0
