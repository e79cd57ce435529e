"""An older signed plan state pasted back into the plan comment (issue 27, defect 5).

A writer who is not an approver copies a body from the plan comment's edit history (signed by
the bot, so it verifies) back into the comment after a `/plan-cascade cancel`. The state must
not go back: the server believes its own newest version, and the CI loop stays stopped.
"""

from __future__ import annotations

from pathlib import Path

from bot.orchestration.engine import execute
from bot.plan.state import PlanStatus
from bot.plan.state_block import decode_state, encode_state, find_block
from bot.testing.fake_github_actions import add_workflow_run
from tests.execution_support import (
    agent_script,
    approved_state,
    config_for,
    make_remote,
    make_run,
    remote_branches,
)
from tests.harness import REPO, Harness, commented
from tests.test_ci_loop import BRANCH, TEST_FAILURE, _agent_runs, _head, _suite_completed, h  # noqa: F401
from tests.test_github_flow import PRD

ONE_STORY = """
version: 1
title: One file
summary: Write one file.
stories:
  - id: STORY-001
    title: First file
    acceptance_criteria: ["story-001.txt contains the line 'done'"]
"""


async def test_a_pre_cancel_body_pasted_back_runs_no_agent(h: Harness) -> None:  # noqa: F811
    (comment,) = h.plan_comments(1)
    before_cancel = comment.body
    assert decode_state(before_cancel).batches[0].ci_stopped is None
    await h.deliver(
        "issue_comment", commented(number=1, body="/plan-cascade cancel", user="maint", association="MEMBER")
    )
    await h.drain()
    assert decode_state(h.plan_comments(1)[0].body).batches[0].ci_stopped == "cancelled by @maint"
    h.fake.set_permission(REPO, "writer", "write")
    h.fake.edit_comment(REPO, comment.id, body=before_cancel, editor="writer")
    head = _head(h)
    add_workflow_run(
        h.fake, REPO, head_sha=head, head_branch=BRANCH, name="CI", jobs=[("test", "failure", TEST_FAILURE)]
    )
    await _suite_completed(h, head)
    assert len(_agent_runs(h)) == 1, "no agent ran for the cancelled plan"
    assert _head(h) == head and h.fake.branch_head(REPO, BRANCH) == head, "nothing was pushed"


async def test_a_cancel_seen_right_before_an_agent_run_runs_no_agent(tmp_path: Path) -> None:
    """Every agent run asks the plan first (`Run.still_wanted`): a cancel written meanwhile by
    anyone, in any process, stops the run before the agent starts, and nothing is pushed."""
    ran = tmp_path / "agent-ran"
    script = agent_script(tmp_path, "agent.sh", f'touch "{ran}"\necho done > "$2/story-001.txt"\n')
    remote = make_remote(tmp_path)
    asked: list[str] = []

    async def cancelled() -> str | None:
        asked.append("asked")
        return "the plan is cancelled"

    run = make_run(tmp_path, remote, approved_state(ONE_STORY), config_for(script), still_wanted=cancelled)
    await execute(run)
    assert asked and not ran.exists(), "the agent never started"
    assert run.superseded == "the plan is cancelled"
    assert remote_branches(remote) == ["main"], "nothing was pushed"


async def test_a_block_signed_before_the_comment_binding_is_accepted_and_re_signed(tmp_path: Path) -> None:
    """Migration: a v2 block (signed, not bound to its comment) written by an older server is
    believed while the database vouches for its version, and the next write binds it."""
    async with Harness(tmp_path) as world:
        world.fake.add_issue(REPO, title="Rate limiting", body=PRD)
        world.fake.set_permission(REPO, "maint", "maintain")
        await world.deliver("issue_comment", commented(number=1, body="/plan-cascade plan", user="maint"))
        await world.drain()
        (comment,) = world.plan_comments(1)
        state = decode_state(comment.body)
        old = encode_state(state, key=world.services.plan_store.key)
        assert old.startswith("<!-- plan-cascade:state v2 sig=")
        body = comment.body.replace(_inline_block(comment.body), old)
        world.fake.edit_comment(REPO, comment.id, body=body, editor=world.fake.actor)
        await world.deliver("issue_comment", commented(number=1, body="/plan-cascade approve", user="maint"))
        await world.drain()
        (comment,) = world.plan_comments(1)
        assert decode_state(comment.body).status == PlanStatus.APPROVED
        block = find_block(comment.body)
        assert block is not None and block.version == 3 and block.comment == comment.id


def _inline_block(body: str) -> str:
    start = body.index("<!-- plan-cascade:state v")
    return body[start : body.index("-->", start) + 3]


async def test_a_fix_asks_the_plan_before_its_agent_runs(h: Harness) -> None:  # noqa: F811
    """The check `apply_review_fix` gives its run: a stopped CI loop stops the CI loop's fix only;
    a cancel stops every fix; an older state pasted back changes nothing of that."""
    import functools

    from bot.handlers.execution import still_wanted
    from bot.handlers.plan_io import update_plan
    from bot.handlers.review_fix import _ci_stopped
    from bot.handlers.session import open_session
    from tests.harness import INSTALLATION

    (comment,) = h.plan_comments(1)
    before = comment.body
    session = await open_session(h.services, repo=REPO, issue=1, installation_id=INSTALLATION)
    await session.load_config()
    loaded = await session.load_plan()
    assert loaded is not None
    plan_hash = loaded.state.plan_hash
    assert await still_wanted(session, plan_hash, fix_batch=1, ci=True)() is None
    await update_plan(
        session, loaded, functools.partial(_ci_stopped, batch=1, why="a review requested changes")
    )
    h.fake.set_permission(REPO, "writer", "write")
    h.fake.edit_comment(REPO, comment.id, body=before, editor="writer")
    why = await still_wanted(session, plan_hash, fix_batch=1, ci=True)()
    assert why == "the CI loop was stopped (a review requested changes)"
    assert await still_wanted(session, plan_hash, fix_batch=1)() is None, "a human's fix still runs"
    assert (
        await still_wanted(session, "0" * 64)() == f"the plan was revised to revision {loaded.state.revision}"
    )
