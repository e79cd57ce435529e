"""`plan_pr: true`: the PRD in a draft PR; an approving review of an edited file approves that file."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from bot.state import PlanStatus, decode_state
from bot.testing.deliveries import load_fixture
from tests.execution_support import git, make_remote
from tests.harness import INSTALLATION, REPO, Harness, labeled
from tests.test_github_flow import PRD


def review_payload(
    *,
    pr_number: int,
    head_ref: str,
    commit: str,
    user: str,
    state: str = "approved",
    association: str = "MEMBER",
) -> dict:
    payload = copy.deepcopy(load_fixture("pull_request_review.submitted.1"))
    payload["repository"]["full_name"] = REPO
    payload["installation"] = {"id": INSTALLATION}
    payload["review"].update(
        {"state": state, "commit_id": commit, "author_association": association, "id": 77}
    )
    payload["review"]["user"].update({"login": user, "type": "User"})
    payload["pull_request"].update({"number": pr_number})
    payload["pull_request"]["head"].update({"ref": head_ref, "sha": commit})
    return payload


@pytest.fixture
async def h(tmp_path: Path):
    async with Harness(tmp_path) as harness:
        remote = make_remote(tmp_path)
        harness.remote = remote
        harness.fake.repo(REPO).clone_url = f"file://{remote}"
        harness.fake.set_permission(REPO, "maint", "maintain")
        harness.fake.set_permission(REPO, "reader", "read")
        harness.fake.set_file(REPO, ".github/plan-cascade.yml", "plan_pr: true\n")
        harness.fake.add_issue(REPO, title="Rate limiting", body=PRD)
        yield harness


def state_of(h: Harness):
    (comment,) = h.plan_comments(1)
    return decode_state(comment.body)


async def test_plan_pr_edit_then_approve(h: Harness) -> None:
    await h.deliver("issues", labeled(number=1, sender="maint"))
    await h.drain()
    first = state_of(h)
    (pull,) = h.fake.repo(REPO).pulls.values()
    assert pull.draft and pull.head_ref == "plan-cascade/1/plan" and first.plan_pr == pull.number
    committed = git("show", "plan-cascade/1/plan:.plan-cascade/1/prd.yaml", cwd=h.remote)
    assert "STORY-003" in committed
    # A maintainer edits the PRD in the branch (a new commit), then approves the PR.
    edited = committed.replace("title: Docs", "title: Documentation for limits")
    edit_sha = "e" * 40
    h.fake.set_file(REPO, ".plan-cascade/1/prd.yaml", edited, ref=edit_sha)
    await h.deliver(
        "pull_request_review",
        review_payload(pr_number=pull.number, head_ref=pull.head_ref, commit=edit_sha, user="maint"),
    )
    await h.drain()
    state = state_of(h)
    assert state.revision == 2 and state.source == "plan-pr"
    assert state.prd.story("STORY-002").title == "Documentation for limits"
    assert state.status == PlanStatus.APPROVED
    (approval,) = state.approvals
    assert (approval.user, approval.via, approval.plan_hash) == ("maint", "review", state.plan_hash)
    assert len(h.started) == 1 and h.started[0]["plan_hash"] == state.plan_hash


async def test_plan_pr_review_by_a_reader_or_of_an_invalid_file_approves_nothing(h: Harness) -> None:
    await h.deliver("issues", labeled(number=1, sender="maint"))
    await h.drain()
    (pull,) = h.fake.repo(REPO).pulls.values()
    committed = git("show", "plan-cascade/1/plan:.plan-cascade/1/prd.yaml", cwd=h.remote)
    h.fake.set_file(REPO, ".plan-cascade/1/prd.yaml", committed, ref="a" * 40)
    await h.deliver(
        "pull_request_review",
        review_payload(
            pr_number=pull.number,
            head_ref=pull.head_ref,
            commit="a" * 40,
            user="reader",
            association="COLLABORATOR",
        ),
    )
    broken = committed.replace("depends_on:\n  - STORY-001", "depends_on:\n  - STORY-404")
    broken = broken if broken != committed else committed + "\nbogus_key: 1\n"
    h.fake.set_file(REPO, ".plan-cascade/1/prd.yaml", broken, ref="b" * 40)
    await h.deliver(
        "pull_request_review",
        review_payload(pr_number=pull.number, head_ref=pull.head_ref, commit="b" * 40, user="maint"),
    )
    await h.drain()
    state = state_of(h)
    assert state.status == PlanStatus.AWAITING_APPROVAL and state.revision == 1 and h.started == []
    replies = [c.body for c in h.fake.comments(REPO, pull.number)]
    assert any("write access" in r for r in replies)
    assert any("STORY-404" in r or "bogus_key" in r for r in replies)
