"""GitHub making the bot's commits through its API: the same trees and messages, signed, one
compare-and-swap per branch, the mirror left holding GitHub's commits (`bot.publishing.verified`)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from bot.errors import WorkspaceError
from bot.github import GitHubKitPort, token_port
from bot.publishing.commit_mode import RULES_TTL, BranchRules, CommitPublisher
from bot.testing.fake_github import FakeGitHub
from bot.workspace import PushRejected
from bot.workspace.mirror import Mirror
from tests.execution_support import git, make_remote

REPO = "octo/widgets"
BRANCH = "plan-cascade/7/story-001"


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    return make_remote(tmp_path, {"README.md": "# demo\n", "old.txt": "old\n", "keep/a.txt": "a\n"})


@pytest.fixture
def fake(remote: Path) -> FakeGitHub:
    fake = FakeGitHub(strict=True)
    fake.add_repo(REPO, clone_url=f"file://{remote}")
    return fake


@pytest.fixture
def port(fake: FakeGitHub) -> GitHubKitPort:
    return token_port("ghs_test", base_url=fake.api_url, transport=fake.transport(), auto_retry=False)


@pytest.fixture
async def mirror(tmp_path: Path, remote: Path, port: GitHubKitPort) -> Mirror:
    pusher = CommitPublisher(port, REPO, mode="api", default_branch="main")
    mirror = Mirror(root=tmp_path / "data", clone_url=f"file://{remote}", pusher=pusher)
    await mirror.fetch()
    return mirror


def _commit(mirror: Mirror, parent: str, files: dict[str, bytes | None], message: str, tmp: Path) -> str:
    """A commit of the bot's (its git, its identity) on `parent` writing `files` (None: remove)."""
    work = tmp / f"work-{len(list(tmp.glob('work-*')))}"
    git("worktree", "add", "-q", "--detach", str(work), parent, cwd=mirror.path)
    for name, data in files.items():
        path = work / name
        if data is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".link"):
            os.symlink(data.decode(), path)
        else:
            path.write_bytes(data)
        if name.endswith(".sh"):
            path.chmod(0o755)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", message, cwd=work, email="7+plan-cascade[bot]@users.noreply.github.test")
    return git("rev-parse", "HEAD", cwd=work)


def _tree(path: Path, rev: str) -> str:
    return git("rev-parse", f"{rev}^{{tree}}", cwd=path)


async def test_github_makes_each_commit_with_the_same_tree_and_message(
    mirror: Mirror, fake: FakeGitHub, remote: Path, tmp_path: Path
) -> None:
    base = git("rev-parse", "refs/remotes/origin/main", cwd=mirror.path)
    one = _commit(
        mirror,
        base,
        {"hello.txt": b"hi\n", "run.sh": b"#!/bin/sh\necho hi\n", "logo.png": b"\x89PNG\0\x01\x02",
         "old.txt": None, "docs.link": b"hello.txt", "keep/b.txt": b"b\n"},
        "STORY-001: Hello\n\nPlan-Cascade-Story: STORY-001",
        tmp_path,
    )  # fmt: skip
    two = _commit(mirror, one, {"hello.txt": b"hello\n"}, "STORY-001: again", tmp_path)
    git("update-ref", f"refs/heads/{BRANCH}", two, cwd=mirror.path)

    head = await mirror.push(BRANCH, expected_remote_sha=None)

    assert head != two and head == git("rev-parse", BRANCH, cwd=remote)
    made = git("rev-list", f"main..{BRANCH}", cwd=remote).split()
    assert made == list(reversed(fake.made_commits)) and all(fake.verified(REPO, sha) for sha in made)
    assert [_tree(remote, sha) for sha in made] == [_tree(mirror.path, two), _tree(mirror.path, one)]
    assert (
        git("log", "-1", "--format=%B", made[-1], cwd=remote)
        == "STORY-001: Hello\n\nPlan-Cascade-Story: STORY-001"
    )
    assert git("log", "-1", "--format=%an <%ae>", head, cwd=remote).startswith("plan-cascade[bot] <")
    # Blobs only for what changed and cannot go inside the tree request (the binary file).
    assert len(fake.requests_to("POST", rf"/repos/{REPO}/git/blobs")) == 1
    assert len(fake.requests_to("POST", rf"/repos/{REPO}/git/trees")) == 2
    assert len(fake.requests_to("POST", "/graphql")) == 1  # one ref update for the branch
    # The mirror now holds GitHub's commits, locally and as the remote's.
    assert git("rev-parse", f"refs/heads/{BRANCH}", cwd=mirror.path) == head
    assert git("rev-parse", f"refs/remotes/origin/{BRANCH}", cwd=mirror.path) == head
    assert mirror.published_as(two) == head
    # Pushing again makes nothing new.
    assert await mirror.push(BRANCH, expected_remote_sha=head) == head
    assert len(fake.made_commits) == 2


async def test_a_concurrent_push_is_never_overwritten(
    mirror: Mirror, fake: FakeGitHub, tmp_path: Path
) -> None:
    base = git("rev-parse", "refs/remotes/origin/main", cwd=mirror.path)
    git(
        "update-ref",
        f"refs/heads/{BRANCH}",
        _commit(mirror, base, {"a.txt": b"1\n"}, "one", tmp_path),
        cwd=mirror.path,
    )
    first = await mirror.push(BRANCH, expected_remote_sha=None)
    theirs = fake.commit_to(REPO, BRANCH, files={"theirs.txt": "mine"}, author="maint")  # between two pushes
    git(
        "update-ref",
        f"refs/heads/{BRANCH}",
        _commit(mirror, first, {"a.txt": b"2\n"}, "two", tmp_path),
        cwd=mirror.path,
    )
    with pytest.raises(PushRejected):  # a fast-forward of what the bot saw
        await mirror.push(BRANCH, expected_remote_sha=first)
    assert fake.branch_head(REPO, BRANCH) == theirs
    with pytest.raises(PushRejected):  # a restack replacing the branch's history, on a stale lease
        await mirror.push(BRANCH, expected_remote_sha=first, force=True)
    assert fake.branch_head(REPO, BRANCH) == theirs
    with pytest.raises(PushRejected):  # a new branch that exists by now
        await mirror.push(BRANCH, expected_remote_sha=None)
    assert fake.branch_head(REPO, BRANCH) == theirs
    # On a lease that holds, the restack goes through.
    pushed = await mirror.push(BRANCH, expected_remote_sha=theirs, force=True)
    assert fake.branch_head(REPO, BRANCH) == pushed


async def test_without_update_refs_only_safe_rest_updates_are_made(
    mirror: Mirror, fake: FakeGitHub, tmp_path: Path
) -> None:
    """An Enterprise Server whose GraphQL lacks `updateRefs`: create and fast-forward through REST;
    a history replaced is refused (no compare-and-swap), never forced."""
    fake.graphql_update_refs = False
    base = git("rev-parse", "refs/remotes/origin/main", cwd=mirror.path)
    git(
        "update-ref",
        f"refs/heads/{BRANCH}",
        _commit(mirror, base, {"a.txt": b"1\n"}, "one", tmp_path),
        cwd=mirror.path,
    )
    first = await mirror.push(BRANCH, expected_remote_sha=None)
    git(
        "update-ref",
        f"refs/heads/{BRANCH}",
        _commit(mirror, first, {"a.txt": b"2\n"}, "two", tmp_path),
        cwd=mirror.path,
    )
    second = await mirror.push(BRANCH, expected_remote_sha=first, force=True)  # a fast-forward: fine
    assert fake.branch_head(REPO, BRANCH) == second and fake.verified(REPO, second)
    assert fake.requests_to("POST", rf"/repos/{REPO}/git/refs") and fake.requests_to(
        "PATCH", rf"/repos/{REPO}/git/refs/heads/.*"
    )
    git(
        "update-ref",
        f"refs/heads/{BRANCH}",
        _commit(mirror, base, {"a.txt": b"3\n"}, "three", tmp_path),
        cwd=mirror.path,
    )
    with pytest.raises(WorkspaceError, match="updateRefs"):  # a restack: refused, and said why
        await mirror.push(BRANCH, expected_remote_sha=second, force=True)
    assert fake.branch_head(REPO, BRANCH) == second
    theirs = fake.commit_to(REPO, BRANCH, files={"theirs.txt": "mine"}, author="maint")
    git(
        "update-ref",
        f"refs/heads/{BRANCH}",
        _commit(mirror, second, {"a.txt": b"4\n"}, "four", tmp_path),
        cwd=mirror.path,
    )
    with pytest.raises(PushRejected):  # a concurrent push: the lease rules
        await mirror.push(BRANCH, expected_remote_sha=second, force=True)
    assert fake.branch_head(REPO, BRANCH) == theirs


async def test_a_crash_after_github_moved_the_branch_adopts_its_commit(
    mirror: Mirror, fake: FakeGitHub, tmp_path: Path
) -> None:
    base = git("rev-parse", "refs/remotes/origin/main", cwd=mirror.path)
    local = _commit(mirror, base, {"a.txt": b"1\n"}, "one", tmp_path)
    git("update-ref", f"refs/heads/{BRANCH}", local, cwd=mirror.path)
    made = await mirror.push(BRANCH, expected_remote_sha=None)
    git("update-ref", f"refs/heads/{BRANCH}", local, cwd=mirror.path)  # as if the mirror never took it back
    restarted = Mirror(root=mirror.root, clone_url=mirror.clone_url, pusher=mirror.pusher)  # a new process
    again = await restarted.push(BRANCH, expected_remote_sha=made, force=True)
    assert again == made and fake.made_commits == [made]
    assert git("rev-parse", f"refs/heads/{BRANCH}", cwd=mirror.path) == made


async def test_auto_uses_the_api_only_where_rules_require_signatures(
    mirror: Mirror, fake: FakeGitHub, port: GitHubKitPort, tmp_path: Path, remote: Path
) -> None:
    """The default branch's rules are read; a ruleset on the branch pushed is learnt from GitHub's
    refusal of the `git push` (nothing lands), and the push is made through the API."""
    mirror.pusher = CommitPublisher(port, REPO, mode="auto", default_branch="main")
    base = git("rev-parse", "refs/remotes/origin/main", cwd=mirror.path)
    git(
        "update-ref",
        "refs/heads/plain",
        _commit(mirror, base, {"a.txt": b"1\n"}, "one", tmp_path),
        cwd=mirror.path,
    )
    assert await mirror.push("plain", expected_remote_sha=None) == git("rev-parse", "plain", cwd=mirror.path)
    assert fake.made_commits == []  # git push
    fake.add_ruleset(REPO, ["required_signatures"], include=["refs/heads/plan-cascade/**"])
    local = _commit(mirror, base, {"b.txt": b"1\n"}, "two", tmp_path)
    git("update-ref", f"refs/heads/{BRANCH}", local, cwd=mirror.path)
    head = await mirror.push(BRANCH, expected_remote_sha=None)
    assert fake.made_commits == [head] and fake.verified(REPO, head) and head != local
    assert git("rev-parse", BRANCH, cwd=remote) == head
    assert len(fake.requests_to("GET", rf"/repos/{REPO}/rules/branches/main")) == 1  # once, kept
    assert not fake.requests_to("GET", rf"/repos/{REPO}/rules/branches/{BRANCH}")


async def test_the_default_branch_rules_are_read_once_per_repository_for_every_job(
    fake: FakeGitHub, port: GitHubKitPort
) -> None:
    """The answer is the process's (`BranchRules`): the next job's publisher asks nothing, until
    the answer is older than its time-to-live; then a ruleset added meanwhile counts."""
    now = [0.0]
    rules = BranchRules(clock=lambda: now[0])
    first = CommitPublisher(port, REPO, mode="auto", default_branch="main", rules=rules)
    assert not await first.through_api(BRANCH)
    assert not await first.through_api("plan-cascade/7/batch-1")
    fake.add_ruleset(REPO, ["required_signatures"])  # on the default branch
    now[0] += RULES_TTL - 1
    second = CommitPublisher(port, REPO, mode="auto", default_branch="main", rules=rules)  # the next job
    assert not await second.through_api(BRANCH)  # believed for RULES_TTL
    assert len(fake.requests_to("GET", rf"/repos/{REPO}/rules/branches/main")) == 1
    now[0] += 2
    assert await second.through_api(BRANCH)  # asked again: signed commits are required now
    assert len(fake.requests_to("GET", rf"/repos/{REPO}/rules/branches/main")) == 2
    rules.forget(REPO)
    assert rules.get(REPO, "main") is None
    third = CommitPublisher(port, REPO, mode="auto", default_branch="main", rules=rules)
    together = await asyncio.gather(*(third.through_api(f"plan-cascade/9/story-00{n}") for n in range(3)))
    assert together == [True, True, True]  # three stories pushing at once ask once
    assert len(fake.requests_to("GET", rf"/repos/{REPO}/rules/branches/main")) == 3


async def test_a_refusal_for_signatures_is_remembered_by_the_next_job(
    mirror: Mirror, fake: FakeGitHub, port: GitHubKitPort, tmp_path: Path
) -> None:
    now = [0.0]
    rules = BranchRules(clock=lambda: now[0])
    mirror.pusher = CommitPublisher(port, REPO, mode="auto", default_branch="main", rules=rules)
    fake.add_ruleset(REPO, ["required_signatures"], include=["refs/heads/plan-cascade/**"], classic=True)
    base = git("rev-parse", "refs/remotes/origin/main", cwd=mirror.path)
    git(
        "update-ref",
        f"refs/heads/{BRANCH}",
        _commit(mirror, base, {"b.txt": b"1\n"}, "two", tmp_path),
        cwd=mirror.path,
    )
    await mirror.push(BRANCH, expected_remote_sha=None)
    later = CommitPublisher(port, REPO, mode="auto", default_branch="main", rules=rules)
    assert await later.through_api("plan-cascade/8/story-001")
    now[0] += RULES_TTL + 1
    assert not await later.through_api("plan-cascade/8/story-001")  # a push will say it again


async def test_auto_turns_to_the_api_when_git_push_is_refused_for_signatures(
    mirror: Mirror, fake: FakeGitHub, port: GitHubKitPort, tmp_path: Path, remote: Path
) -> None:
    """A classic branch protection rule is not in the rules endpoint: GitHub's refusal says it."""
    mirror.pusher = CommitPublisher(port, REPO, mode="auto", default_branch="main")
    fake.add_ruleset(REPO, ["required_signatures"], include=["refs/heads/plan-cascade/**"], classic=True)
    base = git("rev-parse", "refs/remotes/origin/main", cwd=mirror.path)
    git(
        "update-ref",
        f"refs/heads/{BRANCH}",
        _commit(mirror, base, {"b.txt": b"1\n"}, "two", tmp_path),
        cwd=mirror.path,
    )
    head = await mirror.push(BRANCH, expected_remote_sha=None)
    assert fake.made_commits == [head] and git("rev-parse", BRANCH, cwd=remote) == head
    assert fake.requests_to("GET", rf"/repos/{REPO}/rules/branches/main")  # it listed nothing
    # and every later push of the job goes through the API
    assert await mirror.pusher.through_api("plan-cascade/7/batch-1")  # type: ignore[union-attr]
