"""A command that comes late is obeyed only while its comment still says it (issue 37, item 7).

GitHub never sends a failed delivery again by itself; the server's missed-delivery recovery asks
for it, maybe hours later. Meanwhile the approver may have deleted the `approve` (or someone with
write access edited it): the replayed delivery still carries the old text. Everything goes through
the real intake, the recovery look and the worker against the fake GitHub.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from bot.app.redelivery import look
from bot.plan.state import PlanStatus
from bot.plan.state_block import decode_state
from tests.harness import REPO, Harness, commented
from tests.support import WEBHOOK_SECRET
from tests.test_github_flow import PRD

TTL = timedelta(minutes=10)


@pytest.fixture
async def h(tmp_path: Path):
    async with Harness(tmp_path) as harness:
        harness.fake.add_issue(REPO, title="Rate limiting", body=PRD)
        harness.fake.set_permission(REPO, "maint", "maintain")
        harness.fake.hooks.secret = WEBHOOK_SECRET
        # The plan was posted an hour ago: an approve written since then approves this revision.
        real = harness.services.clock
        harness.services.clock = lambda: real() - timedelta(hours=1)
        await harness.deliver("issue_comment", commented(number=1, body="/plan-cascade plan", user="maint"))
        await harness.drain()
        harness.services.clock = real
        yield harness


async def _approve_while_down(h: Harness, *, body: str = "/plan-cascade approve") -> int:
    """`maint` writes the command ten minutes ago, while the server was down; its comment's id."""
    written = (datetime.now(UTC) - timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
    comment = h.fake.add_comment(REPO, 1, body=body, user="maint", created_at=written)
    payload = commented(number=1, body=body, user="maint", association="MEMBER", comment_id=comment.id)
    payload["comment"]["created_at"] = written
    attempt = await h.fake.hooks.deliver("issue_comment", payload)
    assert attempt.status == "failed to connect to host"
    return comment.id


async def _server_back(h: Harness) -> None:
    """The server is up again: its look asks GitHub for the missed delivery, which arrives."""
    h.fake.hooks.target = httpx.ASGITransport(app=h.app)
    done = await look(
        h.runtime.db, h.services.extras["app_port"](), holder="me", now=datetime.now(UTC), ttl=TTL
    )
    assert done is not None and len(done.asked) == 1
    await h.fake.hooks.settle()


def _status(h: Harness) -> PlanStatus:
    (comment,) = h.plan_comments(1)
    return decode_state(comment.body).status


async def test_an_approve_deleted_during_the_outage_is_not_obeyed(h: Harness) -> None:
    comment_id = await _approve_while_down(h)
    del h.fake.repo(REPO).comments[comment_id]  # the approver takes it back
    await _server_back(h)
    await h.drain()
    assert h.started == [] and _status(h) == PlanStatus.AWAITING_APPROVAL
    assert h.fake.requests_to("GET", rf"/repos/{REPO}/issues/comments/{comment_id}")


async def test_an_approve_edited_during_the_outage_is_not_obeyed(h: Harness) -> None:
    comment_id = await _approve_while_down(h)
    h.fake.edit_comment(REPO, comment_id, body="/plan-cascade approve STORY-001", editor="maint")
    await _server_back(h)
    await h.drain()
    assert h.started == [] and _status(h) == PlanStatus.AWAITING_APPROVAL


async def test_an_approve_still_there_is_obeyed_when_it_comes_late(h: Harness) -> None:
    await _approve_while_down(h)
    await _server_back(h)
    await h.drain()
    assert len(h.started) == 1 and _status(h) == PlanStatus.APPROVED


async def test_a_github_error_on_the_read_back_approves_nothing(h: Harness) -> None:
    comment_id = await _approve_while_down(h)
    h.fake.faults.fail("GET", rf"/repos/{REPO}/issues/comments/{comment_id}", status=403, message="Forbidden")
    await _server_back(h)
    with pytest.raises(AssertionError, match="403"):
        await h.drain()
    assert h.started == [] and _status(h) == PlanStatus.AWAITING_APPROVAL


async def test_a_fresh_command_is_not_read_back(h: Harness) -> None:
    fresh = commented(
        number=1, body="/plan-cascade approve", user="maint", association="MEMBER", comment_id=77
    )
    await h.deliver("issue_comment", fresh)
    await h.drain()
    assert len(h.started) == 1
    assert not h.fake.requests_to("GET", rf"/repos/{REPO}/issues/comments/77")
