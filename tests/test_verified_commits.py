"""Commits GitHub verifies and attributes: from approval to pull requests on a repository whose
ruleset requires signed commits, in-process (the real engine, a bare remote, GitHub faked)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bot.plan.state import PlanStatus
from bot.plan.state_block import decode_state
from tests.execution_support import agent_script, git, make_remote
from tests.harness import REPO, Harness, commented
from tests.test_publishing import PRD, WRITE, config

BRANCHES = [
    "plan-cascade/1/story-001",
    "plan-cascade/1/story-002",
    "plan-cascade/1/story-003",
    "plan-cascade/1/batch-1",
    "plan-cascade/1/batch-2",
]


@pytest.fixture
async def h(tmp_path: Path):
    async with Harness(tmp_path, execute=True) as harness:
        remote = make_remote(tmp_path)
        harness.remote = remote
        harness.fake.repo(REPO).clone_url = f"file://{remote}"
        harness.fake.set_permission(REPO, "maint", "maintain")
        harness.fake.add_issue(REPO, title="Greetings", body=PRD)
        harness.fake.set_file(
            REPO, ".github/plan-cascade.yml", config(agent_script(tmp_path, "ok.sh", WRITE))
        )
        yield harness


async def _approve(h: Harness) -> None:
    await h.deliver("issue_comment", commented(number=1, body="/plan-cascade plan"))
    await h.drain()
    await h.deliver(
        "issue_comment", commented(number=1, body="/plan-cascade approve", user="maint", association="MEMBER")
    )
    await h.drain(timeout=180)


def _state(h: Harness):
    (comment,) = h.plan_comments(1)
    return decode_state(comment.body)


def _mirror(h: Harness) -> Path:
    (found,) = (h.settings.data_dir / "mirrors").glob("*.git")
    return found


def _commits(remote: Path, branch: str) -> list[str]:
    return git("rev-list", f"main..{branch}", cwd=remote).split()


async def test_a_ruleset_requiring_signatures_gets_commits_github_made(h: Harness) -> None:
    h.fake.add_ruleset(REPO, ["required_signatures"], include=["~DEFAULT_BRANCH"])
    await _approve(h)
    state = _state(h)
    assert state.status == PlanStatus.COMPLETED, state.note
    made = set(h.fake.made_commits)
    for branch in BRANCHES:  # every commit on every bot branch: made and signed by GitHub
        commits = _commits(h.remote, branch)
        assert commits and set(commits) <= made, branch
        assert all(h.fake.verified(REPO, sha) for sha in commits), branch
    # The story commits are GitHub's and the state records them; the batch's merges are too.
    for sid, record in state.stories.items():
        assert record.commit == git("rev-parse", f"plan-cascade/1/{sid.lower()}", cwd=h.remote)
    assert [b.head_sha for b in state.batches] == [
        git("rev-parse", f"plan-cascade/1/batch-{n}", cwd=h.remote) for n in (1, 2)
    ]
    # Nothing was pushed with git: the branches moved through the API, one update per push.
    assert h.fake.requests_to("POST", "/graphql")
    # The mirror holds exactly GitHub's commits: its branches and their history.
    mirror = _mirror(h)
    for branch in BRANCHES:
        assert git("rev-parse", f"refs/heads/{branch}", cwd=mirror) == git("rev-parse", branch, cwd=h.remote)
        assert _commits(mirror, f"refs/heads/{branch}") == _commits(h.remote, branch)
    # The batch PR can be merged with a merge commit into the protected default branch.
    first = state.batches[0].pr_number
    h.fake.merge_pull(REPO, first, "merge")


async def test_a_plain_repository_keeps_git_push(h: Harness) -> None:
    await _approve(h)
    assert _state(h).status == PlanStatus.COMPLETED
    assert h.fake.made_commits == []
    assert not h.fake.requests_to("POST", "/graphql")
    assert not any(h.fake.verified(REPO, sha) for sha in _commits(h.remote, "plan-cascade/1/batch-2"))


async def test_commits_are_the_apps_and_credit_the_approver(h: Harness) -> None:
    await _approve(h)
    bot = f"plan-cascade[bot] <{h.fake.noreply('plan-cascade[bot]')}>"
    assert bot.endswith("+plan-cascade[bot]@users.noreply.github.test>")  # <bot id>+<slug>[bot]@…<host>
    story = git("log", "-1", "--format=%an <%ae>%n%cn <%ce>%n%B", "plan-cascade/1/story-001", cwd=h.remote)
    assert story.splitlines()[:2] == [bot, bot]
    assert f"Co-authored-by: maint <{h.fake.noreply('maint')}>" in story
    merge = git("log", "-1", "--format=%an <%ae>", "plan-cascade/1/batch-1", cwd=h.remote)
    assert merge == bot
    # The bot's id was asked once, as was the approver's.
    assert len(h.fake.requests_to("GET", r"/users/plan-cascade\[bot\]")) == 1
    assert len(h.fake.requests_to("GET", r"/users/maint")) == 1


async def test_unsigned_pushes_are_refused_where_signatures_are_required(h: Harness, tmp_path: Path) -> None:
    """What the fake refuses, as GitHub does: a `git push` of unsigned commits to a covered branch."""
    h.fake.add_ruleset(REPO, ["required_signatures"], include=["refs/heads/plan-cascade/**"])
    work = tmp_path / "clone"
    git("clone", "-q", str(h.remote), str(work), cwd=tmp_path)
    git("checkout", "-q", "-b", "plan-cascade/9/story-001", cwd=work)
    git("commit", "-q", "--allow-empty", "-m", "unsigned", cwd=work)
    pushed = subprocess.run(
        ["git", "push", "origin", "plan-cascade/9/story-001"], cwd=work, capture_output=True, text=True
    )
    assert pushed.returncode != 0 and "Commits must have verified signatures" in pushed.stderr
    git("checkout", "-q", "-b", "elsewhere", cwd=work)
    git("push", "-q", "origin", "elsewhere", cwd=work)  # a branch no rule covers takes it
