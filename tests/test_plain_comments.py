"""Every comment on every issue of an installed repository reaches the bot; one that holds no
command costs at most one listing of the issue's comments (none when a plan is cached: the plan
comment is read by id), and still resumes planning when it answers the bot's questions."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness import REPO, Harness, commented

PRD = """Add a greeting.

```prd
version: 1
title: Greeting
summary: One file.
stories:
  - id: STORY-001
    title: Greet
    acceptance_criteria: ["hello.txt contains the word hello"]
```
"""


@pytest.fixture
async def h(tmp_path: Path):
    async with Harness(tmp_path) as harness:
        harness.fake.set_permission(REPO, "maint", "maintain")
        harness.fake.add_issue(REPO, title="Unplanned", body="Just talk.")
        harness.fake.add_issue(REPO, title="Greeting", body=PRD)
        yield harness


async def _comment(h: Harness, number: int, body: str) -> list[str]:
    """The GitHub requests one comment caused, as `METHOD path`."""
    before = len(h.fake.requests)
    await h.deliver("issue_comment", commented(number=number, body=body, user="maint", association="MEMBER"))
    await h.drain()
    return [f"{r.method} {r.path}" for r in h.fake.requests[before:]]


async def test_a_comment_on_an_issue_without_a_plan_lists_its_comments_once(h: Harness) -> None:
    await _comment(h, 1, "warming up: token and config")
    calls = await _comment(h, 1, "I think this is a duplicate of #3")
    assert calls.count(f"GET /repos/{REPO}/issues/1/comments") == 1, calls
    assert not [c for c in calls if c.startswith(("POST", "PATCH"))], "nothing is written"


async def test_a_comment_on_a_planned_issue_reads_the_plan_by_id_and_looks_for_approvals(h: Harness) -> None:
    await _comment(h, 2, "/plan-cascade plan")
    (plan,) = h.plan_comments(2)
    calls = await _comment(h, 2, "looks good to me")
    assert f"GET /repos/{REPO}/issues/2/comments" not in calls, calls
    assert calls.count(f"GET /repos/{REPO}/issues/comments/{plan.id}") == 1, calls
    assert f"GET /repos/{REPO}/issues/comments/{plan.id}/reactions" in calls
