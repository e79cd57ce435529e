"""A new plan comment goes out before its signature; until the signing edit lands, the bot's own
database row is the plan, and only while the comment is the bot's unedited pending comment."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from bot.clock import utcnow
from bot.handlers.approval import queue_polls
from bot.plan.state import PlanStatus
from bot.plan.state_block import PENDING_BLOCK, decode_state
from tests.harness import REPO, Harness, commented, labeled
from tests.test_first_answer import PRD

CLONE = "https://github.example/octo-org/hello-world.git"
EDITS = rf"/repos/{REPO}/issues/comments/\d+"


@pytest.fixture
async def h(tmp_path: Path):
    async with Harness(tmp_path) as harness:
        harness.fake.add_issue(REPO, title="Plan me", body=PRD)
        harness.fake.set_permission(REPO, "maint", "maintain")
        harness.fake.set_permission(REPO, "reader", "read")
        yield harness


async def _unsigned_plan(h: Harness) -> int:
    """Label issue 1 while GitHub refuses the signing edit (as if the process stopped before it)."""
    h.fake.fail_next("PATCH", EDITS, status=422)
    await h.deliver("issues", labeled(number=1, sender="maint", clone_url=CLONE))
    await h.drain()
    (comment,) = h.plan_comments(1)
    assert PENDING_BLOCK in comment.body
    return comment.id


async def _load(h: Harness):  # type: ignore[no-untyped-def]
    port = await h.services.github_for(4242, REPO)  # type: ignore[misc]
    return await h.services.plan_store.load(port, REPO, 1, bot_login="plan-cascade[bot]")


async def test_the_signature_comes_after_the_comment_and_the_row_is_the_plan_meanwhile(h: Harness) -> None:
    comment_id = await _unsigned_plan(h)
    loaded = await _load(h)
    assert loaded is not None and loaded.comment_id == comment_id and loaded.pending_since is not None
    assert loaded.state.status == PlanStatus.AWAITING_APPROVAL
    approve = commented(number=1, body="/plan-cascade approve", user="maint", association="MEMBER")
    await h.deliver("issue_comment", approve)
    await h.drain()
    (comment,) = h.plan_comments(1)
    state = decode_state(comment.body)
    assert state is not None and state.status == PlanStatus.APPROVED, "approved, and now signed"
    assert f"c={comment_id} " in comment.body


async def test_a_pending_comment_someone_edited_is_not_believed(h: Harness) -> None:
    comment_id = await _unsigned_plan(h)
    fake = h.fake.repo(REPO).comments[comment_id]
    h.fake.edit_comment(REPO, comment_id, body=fake.body.replace("STORY-002", "STORY-666"), editor="maint")
    fake.updated_at = "2099-01-01T00:00:00Z"  # GitHub stamps the edit
    assert await _load(h) is None, "an edited comment is judged as any other: it carries no signed state"
    assert any("plan-cascade:altered" in body for body in h.comments(1))


async def test_a_pending_comment_stamped_later_but_never_edited_is_still_the_plan(h: Harness) -> None:
    comment_id = await _unsigned_plan(h)
    h.fake.repo(REPO).comments[comment_id].updated_at = "2099-01-01T00:00:00Z"  # no edit in its history
    loaded = await _load(h)
    assert loaded is not None and loaded.pending_since is not None, "its edit history says nobody edited it"


async def test_a_lost_signature_is_written_by_the_next_poll(h: Harness) -> None:
    comment_id = await _unsigned_plan(h)
    h.fake.add_reaction(REPO, comment_id, "reader", "+1")  # a 👍 that does not count: nothing is saved
    later = utcnow() + timedelta(minutes=5)
    h.services.clock = lambda: later
    await queue_polls(h.services)
    await h.drain()
    (comment,) = h.plan_comments(1)
    assert PENDING_BLOCK not in comment.body and f"c={comment_id} " in comment.body
    state = decode_state(comment.body)
    assert state is not None and state.status == PlanStatus.AWAITING_APPROVAL
