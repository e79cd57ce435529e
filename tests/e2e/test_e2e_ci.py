"""End to end: the CI loop through the real server process, GitHub the fake over HTTP."""

from __future__ import annotations

import copy

import pytest

from bot.testing.deliveries import load_fixture
from bot.testing.fake_github_actions import add_workflow_run
from tests.e2e.world import REPO, World
from tests.execution_support import git

pytestmark = pytest.mark.e2e
BRANCH = "plan-cascade/1/batch-1"
FAILURE = "FAILED tests/test_story.py::test_story_001 - AssertionError: story-001.txt is wrong\n1 failed\n"


def _suite(head: str) -> dict:
    data = copy.deepcopy(load_fixture("check_suite.completed.2"))
    data["repository"].update({"full_name": REPO, "name": "shop", "clone_url": "", "default_branch": "main"})
    data["repository"]["owner"]["login"] = "octo-org"
    data["installation"] = {"id": 777}
    data["check_suite"].update({"head_branch": BRANCH, "head_sha": head, "conclusion": "failure"})
    data["check_suite"]["app"]["slug"] = "github-actions"
    return data


def _ci_comment(world: World) -> str:
    pull = next(p for p in world.fake.repo(REPO).pulls.values() if p.head_ref == BRANCH)
    found = [c.body for c in world.fake.comments(REPO, pull.number) if "plan-cascade:ci batch-1" in c.body]
    return found[0] if found else ""


def test_a_failing_workflow_gets_a_fix_and_then_passes(world: World) -> None:
    world.run_greetings()
    first = git("rev-parse", BRANCH, cwd=world.remote)
    add_workflow_run(
        world.fake, REPO, head_sha=first, head_branch=BRANCH, name="CI", jobs=[("test", "failure", FAILURE)]
    )
    assert world.post("check_suite", _suite(first)).status_code == 202
    world.wait(lambda: "Fixed in" in _ci_comment(world), timeout=120)
    second = git("rev-parse", BRANCH, cwd=world.remote)
    assert second != first
    add_workflow_run(
        world.fake, REPO, head_sha=second, head_branch=BRANCH, name="CI", jobs=[("test", "success", "ok")]
    )
    assert world.post("check_suite", _suite(second)).status_code == 202
    world.wait(lambda: "CI passed" in _ci_comment(world), timeout=60)
    _, state = world.plan()
    assert state.batches[0].ci_fixes == 1 and state.batches[0].head_sha == second
