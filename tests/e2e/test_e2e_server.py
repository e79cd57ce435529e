"""End to end: the real `plan-cascade serve` process, a fake GitHub over HTTP, a bare git remote.

Deliveries are signed and posted as GitHub posts them; the assertions read what the fake
GitHub and the bare repository end up holding.
"""

from __future__ import annotations

import httpx
import pytest

from bot.plan.state import PlanStatus
from bot.testing.deliveries import encode, signed_headers
from bot.testing.fake_github_model import now_iso
from tests.e2e.world import PRD, REPO, World, payload
from tests.execution_support import git, remote_branches

pytestmark = pytest.mark.e2e


def test_labelled_issue_to_pull_requests(world: World) -> None:
    world.fake.add_issue(REPO, title="Greetings", body=PRD)
    resp = world.post(
        "issues",
        payload(
            "issues.labeled.1",
            number=1,
            label={"name": "plan-cascade"},
            sender={"login": "maint", "type": "User"},
        ),
    )
    assert resp.status_code == 202
    # Wait for a readable state, not just a comment: the fake may be mid-write when first seen.
    comment, state = world.wait(lambda: world.plan()[1] and world.plan())
    assert state.status == PlanStatus.AWAITING_APPROVAL
    assert "```mermaid" in comment.body
    world.fake.add_reaction(REPO, comment.id, "reader", "+1")  # does not count
    world.fake.add_reaction(REPO, comment.id, "maint", "+1")  # approves (polled)
    world.wait(lambda: world.plan()[1].status == PlanStatus.COMPLETED, timeout=120)
    _, state = world.plan()
    assert [(a.user, a.via) for a in state.approvals] == [("maint", "reaction")]
    pulls = sorted(world.fake.repo(REPO).pulls.values(), key=lambda p: p.number)
    assert [(p.head_ref, p.base_ref) for p in pulls] == [
        ("plan-cascade/1/batch-1", "main"),
        ("plan-cascade/1/batch-2", "plan-cascade/1/batch-1"),
    ]
    assert "Closes #1" in world.fake.repo(REPO).issues[pulls[-1].number].body
    assert "Closes #1" not in world.fake.repo(REPO).issues[pulls[0].number].body
    assert {"plan-cascade/1/batch-1", "plan-cascade/1/batch-2"} <= set(remote_branches(world.remote))
    assert git("show", "plan-cascade/1/batch-2:story-003.txt", cwd=world.remote) == "done"
    checks = [r.json["name"] for r in world.fake.requests_to("POST", rf"/api/v3/repos/{REPO}/check-runs")]
    assert {"plan-cascade / STORY-001 / files", "plan-cascade / STORY-003 / files", "plan-cascade"} <= set(
        checks
    )


def test_unhappy_paths(world: World) -> None:
    world.fake.add_issue(REPO, title="Greetings", body=PRD)
    labeled = payload(
        "issues.labeled.1",
        number=1,
        label={"name": "plan-cascade"},
        sender={"login": "maint", "type": "User"},
    )
    # A forged signature is refused and changes nothing.
    body = encode(labeled)
    headers = signed_headers(body, secret="not-the-secret", event="issues")
    assert httpx.post(f"{world.url}/webhook", content=body, headers=headers).status_code == 401
    # A plan with a cycle gets the cycle named.
    world.fake.add_issue(
        REPO,
        title="Cyclic",
        body=PRD.replace("depends_on: [STORY-001, STORY-002]", "depends_on: [STORY-003]"),
    )
    world.post(
        "issues",
        payload(
            "issues.labeled.1",
            number=2,
            label={"name": "plan-cascade"},
            sender={"login": "maint", "type": "User"},
        ),
    )
    world.wait(lambda: any("STORY-003 → STORY-003" in c.body for c in world.fake.comments(REPO, 2)))
    # A read-only user's approve is refused.
    world.post("issues", labeled)
    world.wait(lambda: world.plan()[1])
    comment = payload(
        "issue_comment.created.1",
        number=1,
        comment={
            "id": 5550001,
            "body": "/plan-cascade approve",
            "author_association": "COLLABORATOR",
            "user": {"login": "reader", "type": "User"},
            "created_at": now_iso(),  # GitHub stamps every comment; a command with no time is read back
        },
        sender={"login": "reader", "type": "User"},
    )
    world.post("issue_comment", comment)
    world.wait(lambda: any("write access" in c.body for c in world.fake.comments(REPO, 1)))
    assert world.plan()[1].status == PlanStatus.AWAITING_APPROVAL
    # An invalid config is reported on the issue and nothing runs.
    world.fake.set_file(REPO, ".github/plan-cascade.yml", "execution:\n  stacking: diagonal\n")
    world.fake.add_issue(REPO, title="Another", body=PRD)
    world.post(
        "issues",
        payload(
            "issues.labeled.1",
            number=3,
            label={"name": "plan-cascade"},
            sender={"login": "maint", "type": "User"},
        ),
    )
    world.wait(lambda: any("execution.stacking" in c.body for c in world.fake.comments(REPO, 3)))
    assert world.plan(3) == (None, None)
