"""End to end, issue 36: a three-batch plan merged batch by batch with "Squash and merge" and
"Automatically delete head branches", through the real server. The fake GitHub merges as GitHub
does (a squash commit on main, the head branch deleted, the PR above retargeted) and the test
posts every event GitHub would send. At the end main holds all the work, the last PR closed the
issue, and the plan said it was done once."""

from __future__ import annotations

import pytest

from bot.plan.state import PlanStatus
from tests.e2e.world import REPO, World, payload
from tests.execution_support import git

pytestmark = pytest.mark.e2e
PRD = """Three steps, one after the other.

```prd
version: 1
title: Greetings
summary: Three files, each needing the one before.
stories:
  - id: STORY-001
    title: First file
    acceptance_criteria: ["story-001.txt contains the line 'done'"]
  - id: STORY-002
    title: Second file
    depends_on: [STORY-001]
    acceptance_criteria: ["story-002.txt contains the line 'done'"]
  - id: STORY-003
    title: Third file
    depends_on: [STORY-002]
    acceptance_criteria: ["story-003.txt contains the line 'done'"]
```
"""


def _deliver_events(world: World) -> int:
    """Post what GitHub sent since the last call (merges, retargets, pushes, closed issues)."""
    events = world.fake.take_events()
    for event, body in events:
        assert world.post(event, body).status_code in (202, 200), event
    return len(events)


def _three_dot(world: World, head: str) -> list[str]:
    return git("diff", "--name-only", f"main...{head}", cwd=world.remote).split()


def test_a_three_batch_stack_squash_merged_batch_by_batch_lands_whole(world: World) -> None:
    fake = world.fake
    fake.installation_id = 777
    fake.repo(REPO).delete_branch_on_merge = True
    fake.add_issue(REPO, title="Greetings", body=PRD)
    maint = {"login": "maint", "type": "User"}
    labeled = payload("issues.labeled.1", number=1, label={"name": "plan-cascade"}, sender=maint)
    assert world.post("issues", labeled).status_code == 202
    comment, _ = world.wait(lambda: world.plan()[1] and world.plan())
    fake.add_reaction(REPO, comment.id, "maint", "+1")
    world.wait(lambda: world.plan()[1].status == PlanStatus.COMPLETED, timeout=180)
    state = world.plan()[1]
    numbers = [b.pr_number for b in state.batches]
    assert len(numbers) == 3 and all(numbers)
    pulls = fake.repo(REPO).pulls
    assert [pulls[n].base_ref for n in numbers] == [
        "main",
        "plan-cascade/1/batch-1",
        "plan-cascade/1/batch-2",
    ]

    for k, number in enumerate(numbers, start=1):
        _deliver_events(world)
        fake.merge_pull(REPO, number, method="squash")
        assert pulls[number].merged

        def settled(k: int = k) -> bool:
            _deliver_events(world)
            plan = world.plan()[1]
            if not plan.batches[k - 1].merged:
                return False
            if k == len(numbers):  # the summary is saved as posted, then posted
                return plan.summary_posted and any("Plan completed" in c.body for c in fake.comments(REPO, 1))
            following = plan.batches[k]
            branch = f"plan-cascade/1/batch-{k + 1}"
            return (
                pulls[following.pr_number].base_ref == "main"
                and following.head_sha == git("rev-parse", branch, cwd=world.remote)
                and _three_dot(world, branch) == [f"story-00{k + 1}.txt"]
            )

        world.wait(settled, timeout=180)

    files = sorted(git("ls-tree", "--name-only", "main", cwd=world.remote).split())
    assert {"story-001.txt", "story-002.txt", "story-003.txt"} <= set(files)
    assert fake.repo(REPO).issues[1].state == "closed"  # by the last PR's "Closes #1"
    assert sum("Plan completed" in c.body for c in fake.comments(REPO, 1)) == 1
    assert all(b.merged for b in world.plan()[1].batches)
