"""End to end: the CI loop through the real server process, GitHub the fake over HTTP."""

from __future__ import annotations

import pytest

from bot.testing.fake_github_actions import add_workflow_run
from bot.testing.fake_github_forks import workflow_run_event
from bot.testing.fake_github_model import FakeWorkflowRun
from tests.e2e.world import REPO, World
from tests.execution_support import git

pytestmark = pytest.mark.e2e
BRANCH = "plan-cascade/1/batch-1"
FAILURE = "FAILED tests/test_story.py::test_story_001 - AssertionError: story-001.txt is wrong\n1 failed\n"


def _completed(world: World, run: FakeWorkflowRun) -> int:
    """GitHub delivers `workflow_run.completed` for the run."""
    return world.post("workflow_run", workflow_run_event(world.fake, REPO, run, installation=777)).status_code


def _ci_comment(world: World) -> str:
    pull = next(p for p in world.fake.repo(REPO).pulls.values() if p.head_ref == BRANCH and not p.head_repo)
    found = [c.body for c in world.fake.comments(REPO, pull.number) if "plan-cascade:ci batch-1" in c.body]
    return found[0] if found else ""


def test_a_failing_workflow_gets_a_fix_and_then_passes(world: World) -> None:
    world.run_greetings()
    first = git("rev-parse", BRANCH, cwd=world.remote)
    failed = add_workflow_run(
        world.fake, REPO, head_sha=first, head_branch=BRANCH, name="CI", jobs=[("test", "failure", FAILURE)]
    )
    assert _completed(world, failed) == 202
    world.wait(lambda: "Fixed in" in _ci_comment(world), timeout=120)
    second = git("rev-parse", BRANCH, cwd=world.remote)
    assert second != first
    passed = add_workflow_run(
        world.fake, REPO, head_sha=second, head_branch=BRANCH, name="CI", jobs=[("test", "success", "ok")]
    )
    assert _completed(world, passed) == 202
    world.wait(lambda: "CI passed" in _ci_comment(world), timeout=60)
    _, state = world.plan()
    assert state.batches[0].ci_fixes == 1 and state.batches[0].head_sha == second
