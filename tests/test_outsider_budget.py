"""An outsider cannot spend the installation's writes, and a throttled installation stalls no one.

Anyone can comment `/plan-cascade <anything>` on a public repository. GitHub lets an installation
create 500 things an hour; each answer to a refused command is one of them. These tests send an
outsider's commands by the hundred and count what the bot created on GitHub; then fill one
installation's hour of creations and check that another installation's plan is not held behind it.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from bot.github.throttle import Throttle
from bot.store.refusals import REFUSALS_PER_HOUR
from tests.harness import INSTALLATION, REPO, Harness, commented, labeled
from tests.support import SleepClock

PRD = """```prd
version: 1
title: Two
summary: Two stories.
stories:
  - id: STORY-001
    title: One
    acceptance_criteria: ["one.txt holds 1 line"]
  - id: STORY-002
    title: Two
    depends_on: [STORY-001]
    acceptance_criteria: ["two.txt holds 2 lines"]
```
"""
OTHER_REPO = "other-org/tools"
CLONE = "https://github.example/octo-org/hello-world.git"
OTHER_INSTALLATION = 777


def _created(h: Harness) -> list[str]:
    """Every content-creating request the bot sent to a repository (comments, reactions…)."""
    return [
        f"{r.method} {r.path}" for r in h.fake.requests if r.method == "POST" and r.path.startswith("/repos/")
    ]


def _refusals(h: Harness, outcome: str) -> float:
    """What /metrics says of refused commands (`posted` or `silenced`)."""
    assert h.services.metrics is not None
    value = h.services.metrics.registry.get_sample_value("plan_cascade_refusals_total", {"outcome": outcome})
    return value or 0.0


@pytest.fixture
async def h(tmp_path: Path):
    async with Harness(tmp_path) as harness:
        for number in (1, 2, 3):
            harness.fake.add_issue(REPO, title=f"Issue {number}", body=PRD)
        harness.fake.set_permission(REPO, "maint", "maintain")
        harness.fake.set_permission(REPO, "reader", "read")
        yield harness


async def test_an_outsiders_300_commands_on_an_issue_cost_one_write(h: Harness) -> None:
    for n in range(300):
        command = commented(
            number=1, body=f"/plan-cascade plan {n}", user="mallory", association="NONE", clone_url=CLONE
        )
        await h.deliver("issue_comment", command)
    await h.drain()
    assert _created(h) == [f"POST /repos/{REPO}/issues/1/comments"], "one refusal, no 👀, nothing else"
    assert "mallory" in h.comments(1)[-1]
    assert (_refusals(h, "posted"), _refusals(h, "silenced")) == (1, 299)
    reads = [r for r in h.fake.requests if r.method == "GET" and r.path.startswith("/repos/")]
    assert len(reads) <= 1, "an outsider's commands cost no reads either (the refusal's config at most)"


async def test_a_reader_gets_no_eyes_and_one_refusal(h: Harness) -> None:
    for _ in range(30):
        command = commented(number=2, body="/plan-cascade approve", user="reader", association="COLLABORATOR")
        await h.deliver("issue_comment", command)
    await h.drain()
    assert _created(h) == [f"POST /repos/{REPO}/issues/2/comments"]
    permission = [r for r in h.fake.requests if r.path.endswith("/collaborators/reader/permission")]
    assert len(permission) == 1, "the permission is read once, then cached"


async def test_many_outsiders_on_many_issues_cost_at_most_the_hourly_refusals(h: Harness) -> None:
    for n in range(1, 41):
        h.fake.add_issue(REPO, title=f"Spam {n}")
    for person in range(10):
        for number in range(4, 44, 3):  # 10 accounts x 14 issues
            command = commented(
                number=number, body="/plan-cascade plan", user=f"sock{person}", association="NONE"
            )
            await h.deliver("issue_comment", command)
    await h.drain()
    assert len(_created(h)) == REFUSALS_PER_HOUR
    assert _refusals(h, "silenced") == 140 - REFUSALS_PER_HOUR


async def test_a_writer_still_gets_the_eyes_and_the_plan(h: Harness) -> None:
    asked = h.fake.add_comment(REPO, 3, body="/plan-cascade plan", user="maint")
    command = commented(number=3, body=asked.body, user="maint", association="MEMBER", comment_id=asked.id)
    await h.deliver("issue_comment", command)
    await h.drain()
    assert [r.content for r in h.fake.repo(REPO).comment_reactions[asked.id]] == ["eyes"]
    assert h.plan_comments(3)


async def test_a_throttled_installation_does_not_hold_a_worker_or_delay_another(tmp_path: Path) -> None:
    clock = SleepClock()
    pacing = functools.partial(
        Throttle, per_minute=80, per_hour=500, min_interval=1.0, clock=clock, sleep=clock.sleep
    )
    async with Harness(tmp_path, throttle=pacing) as h:
        h.fake.clock = clock
        h.fake.add_issue(REPO, title="Busy", body=PRD)
        h.fake.add_repo(OTHER_REPO)
        h.fake.add_issue(OTHER_REPO, title="Quiet", body=PRD)
        busy = h.services.extras["throttles"].get(INSTALLATION)
        for _ in range(500):  # the installation's hour of creations, used up
            await busy.wait()
        full = clock.now
        await h.deliver("issues", labeled(number=1, sender="octo-org"))  # queued first
        other = labeled(number=1, sender="other-org", repo=OTHER_REPO)
        other["installation"]["id"] = OTHER_INSTALLATION
        await h.deliver("issues", other)
        outcomes = await h.drain(deferred=True)
        assert outcomes == ["deferred", "done"], "the throttled job was put back; the worker took the next"
        made = h.fake.requests_to("POST", rf"/repos/{OTHER_REPO}/issues/1/comments")
        assert made and made[0].at - full < 60, "the other installation's plan waited for nobody's hour"
        assert not h.plan_comments(1), "the throttled plan waits for its installation's hour"
        assert await h.runtime.queue.counts() == {"done": 1, "queued": 1}, "put back, holding no worker"
        (job,) = [j for j in [await h.runtime.queue.get(n) for n in (1, 2)] if j and j.status == "queued"]
        assert job.attempts == 0, "waiting for GitHub is not a failed attempt"
