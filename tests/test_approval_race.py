"""Attack 5: plan writes are compare-and-swap, so no interleaving of handlers loses a revision.

The execute job (its own queue group) and the issue's handlers can interleave. These tests
pin one interleaving each, deterministically: the execute job has loaded the plan and built
its run, then another handler writes, then the execution goes on.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.handlers.execution import build_run
from bot.handlers.plan_io import update_plan
from bot.handlers.session import open_session
from bot.orchestration.engine import execute
from bot.plan.state import PlanStatus
from bot.plan.state_block import decode_state
from tests.execution_support import agent_script, make_remote, remote_branches
from tests.harness import INSTALLATION, REPO, Harness, commented
from tests.test_github_flow import PRD

WRITE = 'id=$(echo "$1" | tr A-Z a-z)\necho done > "$2/$id.txt"\n'


@pytest.fixture
async def h(tmp_path: Path):
    async with Harness(tmp_path) as harness:
        remote = make_remote(tmp_path)
        harness.remote = remote
        harness.fake.repo(REPO).clone_url = f"file://{remote}"
        script = agent_script(tmp_path, "ok.sh", WRITE)
        harness.fake.set_file(
            REPO,
            ".github/plan-cascade.yml",
            f'agent:\n  default: script\n  commands:\n    script: "{script} {{story_id}} {{worktree}}"\n'
            "  sandbox: none\ngates:\n  detect: false\n  strict: true\n",
        )
        harness.fake.add_issue(REPO, title="Rate limiting", body=PRD)
        harness.fake.set_permission(REPO, "maint", "maintain")
        await harness.deliver("issue_comment", commented(number=1, body="/plan-cascade plan", user="maint"))
        await harness.drain()
        await harness.deliver(
            "issue_comment",
            commented(number=1, body="/plan-cascade approve", user="maint", association="MEMBER"),
        )
        await harness.drain()
        assert len(harness.started) == 1
        yield harness


async def execute_job_view(h: Harness):  # type: ignore[no-untyped-def]
    """What `run_execute_job` holds after loading the plan and building its run."""
    session = await open_session(h.services, repo=REPO, issue=1, installation_id=INSTALLATION)
    await session.load_config()
    loaded = await session.load_plan()
    assert loaded is not None and loaded.state.status == PlanStatus.APPROVED
    return await build_run(session, loaded.state, loaded.comment_id, None)


def state_now(h: Harness):  # type: ignore[no-untyped-def]
    (comment,) = h.plan_comments(1)
    return decode_state(comment.body)


async def test_a_revise_is_not_lost_to_an_execution_that_loaded_the_old_revision(h: Harness) -> None:
    run = await execute_job_view(h)
    revised = PRD.replace("title: Docs", "title: Documentation")
    await h.deliver(
        "issue_comment",
        commented(number=1, body=f"/plan-cascade revise\n{revised[revised.index('```prd') :]}", user="maint"),
    )
    await h.drain()
    assert state_now(h).revision == 2
    final = await execute(run)
    state = state_now(h)
    assert (state.revision, state.status) == (2, PlanStatus.AWAITING_APPROVAL)
    assert final.revision == 2 and run.superseded
    assert not [b for b in remote_branches(h.remote) if b.startswith("plan-cascade/1/story")]


async def test_a_cancel_wins_over_an_execution_that_has_not_written_yet(h: Harness) -> None:
    run = await execute_job_view(h)
    await h.deliver("issue_comment", commented(number=1, body="/plan-cascade cancel", user="maint"))
    await h.drain()
    await execute(run)
    assert state_now(h).status == PlanStatus.CANCELLED
    assert not [b for b in remote_branches(h.remote) if b.startswith("plan-cascade/1/story")]


async def test_another_write_to_the_same_revision_is_kept_and_the_run_goes_on(h: Harness) -> None:
    run = await execute_job_view(h)
    session = await open_session(h.services, repo=REPO, issue=1, installation_id=INSTALLATION)
    await session.load_config()
    loaded = await session.load_plan()
    assert loaded is not None
    await update_plan(session, loaded, lambda s: s.model_copy(update={"warnings": ["kept"]}))
    final = await execute(run)
    state = state_now(h)
    assert state.status == PlanStatus.COMPLETED and final.status == PlanStatus.COMPLETED
    assert "kept" in state.warnings and not run.superseded


async def test_revise_on_a_running_plan_says_cancel_first(h: Harness) -> None:
    run = await execute_job_view(h)
    await run.update(lambda s: s.model_copy(update={"status": PlanStatus.RUNNING}), important=True)
    revised = PRD.replace("title: Docs", "title: Documentation")
    await h.deliver(
        "issue_comment",
        commented(number=1, body=f"/plan-cascade revise\n{revised[revised.index('```prd') :]}", user="maint"),
    )
    await h.drain()
    assert state_now(h).revision == 1 and "cancel" in h.comments(1)[-1]
