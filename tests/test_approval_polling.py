"""Approval polling is cheap: one conditional request per poll, and old plans are polled rarely."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.clock import utcnow
from bot.handlers.approval import poll_interval, queue_polls
from bot.plan.state import PlanStatus
from bot.plan.state_block import decode_state
from tests.harness import REPO, Harness, labeled
from tests.test_github_flow import PRD

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_fresh_plans_are_polled_often_and_old_ones_rarely() -> None:
    assert poll_interval(T0, now=T0 + timedelta(minutes=30), base=60) == 60
    assert poll_interval(T0, now=T0 + timedelta(hours=5), base=60) == 600
    assert poll_interval(T0, now=T0 + timedelta(days=3), base=60) == 3600
    assert poll_interval(T0, now=T0 + timedelta(hours=5), base=900) == 900  # never more often than asked


async def test_a_poll_is_one_conditional_request_until_a_new_thumbs_up(tmp_path: Path) -> None:
    async with Harness(tmp_path) as h:
        h.fake.set_permission(REPO, "maint", "maintain")
        h.fake.add_issue(REPO, title="Rate limiting", body=PRD)
        await h.deliver("issues", labeled(number=1, sender="octo-org"))
        await h.drain()
        (comment,) = h.plan_comments(1)
        base = utcnow()
        for minute in range(1, 4):
            h.services.clock = lambda m=minute: base + timedelta(minutes=m)  # type: ignore[misc]
            before = len(h.fake.requests)
            assert await queue_polls(h.services) == 1
            await h.drain()
            made = h.fake.requests[before:]
            assert [r.method + " " + r.path for r in made] == [
                f"GET /repos/{REPO}/issues/comments/{comment.id}/reactions"
            ]
            assert minute == 1 or made[0].status == 304  # the first poll learns the ETag
        # Another reaction that is not a 👍: one request, no more, and no approval.
        h.fake.add_reaction(REPO, comment.id, "maint", "heart")
        h.services.clock = lambda: base + timedelta(minutes=5)
        before = len(h.fake.requests)
        await queue_polls(h.services)
        await h.drain()
        assert len(h.fake.requests[before:]) == 1
        # A maintainer's 👍: now the poll reads what it needs and approves.
        h.fake.add_reaction(REPO, comment.id, "maint", "+1")
        h.services.clock = lambda: base + timedelta(minutes=6)
        await queue_polls(h.services)
        await h.drain()
        assert decode_state(h.plan_comments(1)[0].body).status == PlanStatus.APPROVED
        # Inside its first minute a plan is not polled twice.
        assert await queue_polls(h.services) == 0
