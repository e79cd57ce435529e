"""The fake GitHub merges pull requests as GitHub does (merge, squash, rebase) and refuses what
GitHub refuses, through `PUT /repos/{o}/{r}/pulls/{n}/merge` on a real bare repository."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from bot.testing.fake_github import FakeGitHub
from tests.execution_support import git
from tests.github.merge_support import BATCH_1, BATCH_2, REPO, build_stack, fake_with_remote, head


@pytest.fixture
def world(tmp_path: Path) -> tuple[FakeGitHub, Path]:
    return fake_with_remote(tmp_path)


@pytest.fixture
async def client(world: tuple[FakeGitHub, Path]):
    fake, _ = world
    async with httpx.AsyncClient(transport=fake.transport(), base_url=fake.api_url) as http:
        yield http


def _merge_url(number: int) -> str:
    return f"/repos/{REPO}/pulls/{number}/merge"


@pytest.mark.parametrize("method", ["merge", "squash", "rebase"])
async def test_each_method_puts_the_batch_on_its_base_like_github(
    world: tuple[FakeGitHub, Path], client: httpx.AsyncClient, tmp_path: Path, method: str
) -> None:
    fake, remote = world
    build_stack(tmp_path, remote)
    before, batch = head(remote, "main"), head(remote, BATCH_1)
    pull = fake.add_pull(REPO, head=BATCH_1, base="main", title="Batch 1")
    answer = await client.put(_merge_url(pull.number), json={"merge_method": method, "sha": batch})
    assert answer.status_code == 200
    sha = answer.json()["sha"]
    assert answer.json() == {"sha": sha, "merged": True, "message": "Pull Request successfully merged"}
    assert head(remote, "main") == sha
    merged_tree = git("merge-tree", "--write-tree", before, batch, cwd=remote)
    assert git("rev-parse", f"{sha}^{{tree}}", cwd=remote) == merged_tree
    parents = git("log", "-1", "--format=%P", sha, cwd=remote).split()
    assert git("log", "-1", "--format=%cn <%ce>", sha, cwd=remote) == "GitHub <noreply@github.com>"
    if method == "merge":
        assert parents == [before, batch]
        assert (
            git("log", "-1", "--format=%s", sha, cwd=remote) == f"Merge pull request #1 from octo/{BATCH_1}"
        )
    elif method == "squash":
        assert parents == [before]
        message = git("log", "-1", "--format=%B", sha, cwd=remote)
        assert message.splitlines()[0] == "Batch 1 (#1)" and "* Add a" in message and "* Add b" in message
        assert git("log", "-1", "--format=%an", sha, cwd=remote) == "plan-cascade[bot]"
    else:  # the stories' commits, replayed one by one as new commits; the merges are gone
        replayed = git("log", "--reverse", "--format=%H %P|%s|%an|%cn", f"{before}..{sha}", cwd=remote)
        lines = replayed.splitlines()
        assert [line.split("|", 1)[1] for line in lines] == ["Add a|Dev|GitHub", "Add b|Dev|GitHub"]
        assert all(len(line.split("|")[0].split()) == 2 for line in lines), "no merge commits"
        originals = git("rev-list", "--no-merges", f"{before}..{batch}", cwd=remote).split()
        assert not set(originals) & {line.split()[0] for line in lines}
    data = (await client.get(f"/repos/{REPO}/pulls/{pull.number}")).json()
    assert (data["merged"], data["state"], data["merge_commit_sha"]) == (True, "closed", sha)
    assert data["head"]["sha"] == batch and data["merged_by"]["login"] == "plan-cascade[bot]"
    assert (await client.get(_merge_url(pull.number))).status_code == 204


async def test_a_rebase_makes_new_commits_even_when_a_fast_forward_was_possible(
    world: tuple[FakeGitHub, Path], client: httpx.AsyncClient
) -> None:
    fake, remote = world
    before = head(remote, "main")
    tip = fake.commit_to(REPO, "feature", files={"f.txt": "f\n"}, message="Add f", author="dev")
    pull = fake.add_pull(REPO, head="feature", base="main")
    assert (await client.get(_merge_url(pull.number))).status_code == 404
    answer = await client.put(_merge_url(pull.number), json={"merge_method": "rebase"})
    sha = answer.json()["sha"]
    assert sha != tip and head(remote, "main") == sha and head(remote, "main^") == before
    assert git("rev-parse", f"{sha}^{{tree}}", cwd=remote) == git("rev-parse", f"{tip}^{{tree}}", cwd=remote)
    assert head(remote, "feature") == tip


async def test_a_rebase_drops_a_commit_whose_change_the_base_has_already(
    world: tuple[FakeGitHub, Path], client: httpx.AsyncClient
) -> None:
    fake, remote = world
    fake.commit_to(REPO, "main", files={"f.txt": "x\n", "g.txt": "1\n"})
    fake.commit_to(REPO, "feature", files={"f.txt": "y\n", "g.txt": "2\n"}, message="Both")
    fake.commit_to(REPO, "feature", files={"h.txt": "h\n"}, message="Add h")
    fake.commit_to(REPO, "main", files={"f.txt": "y\n"}, message="f")
    before = fake.commit_to(REPO, "main", files={"g.txt": "2\n"}, message="g")
    pull = fake.add_pull(REPO, head="feature", base="main")
    sha = (await client.put(_merge_url(pull.number), json={"merge_method": "rebase"})).json()["sha"]
    assert git("log", "--format=%s", f"{before}..{sha}", cwd=remote) == "Add h"


async def test_a_rebase_that_would_not_give_the_merge_result_is_refused(
    world: tuple[FakeGitHub, Path], client: httpx.AsyncClient
) -> None:
    fake, remote = world
    fake.commit_to(REPO, "main", files={"f.txt": "x\n"})
    fake.commit_to(REPO, "feature", files={"f.txt": "y\n"}, message="To y")
    fake.commit_to(REPO, "feature", files={"f.txt": "x\n"}, message="Back to x")
    fake.commit_to(REPO, "main", files={"f.txt": "y\n"}, message="Main to y")
    before = head(remote, "main")
    pull = fake.add_pull(REPO, head="feature", base="main")
    data = (await client.get(f"/repos/{REPO}/pulls/{pull.number}")).json()
    assert (data["mergeable"], data["mergeable_state"]) == (True, "clean")
    refused = await client.put(_merge_url(pull.number), json={"merge_method": "rebase"})
    assert (refused.status_code, refused.json()["message"]) == (405, "This branch can't be rebased")
    assert head(remote, "main") == before
    assert (await client.put(_merge_url(pull.number), json={})).status_code == 200
    assert git("show", "main:f.txt", cwd=remote) == "y"


async def test_a_conflict_shows_once_github_has_computed_it_and_nothing_merges(
    world: tuple[FakeGitHub, Path], client: httpx.AsyncClient
) -> None:
    fake, remote = world
    fake.commit_to(REPO, "feature", files={"README.md": "theirs\n"})
    pull = fake.add_pull(REPO, head="feature", base="main")
    url = f"/repos/{REPO}/pulls/{pull.number}"
    assert ((await client.get(url)).json()["mergeable"]) is True
    fake.commit_to(REPO, "main", files={"README.md": "ours\n"})  # the base branch moves
    first, second = (await client.get(url)).json(), (await client.get(url)).json()
    assert (first["mergeable"], first["mergeable_state"]) == (None, "unknown")
    assert (second["mergeable"], second["mergeable_state"]) == (False, "dirty")
    before = head(remote, "main")
    for method, message in [
        ("merge", "Pull Request is not mergeable"),
        ("squash", "Pull Request is not mergeable"),
        ("rebase", "This branch can't be rebased"),
    ]:
        refused = await client.put(_merge_url(pull.number), json={"merge_method": method})
        assert (refused.status_code, refused.json()["message"]) == (405, message)
    assert head(remote, "main") == before and not pull.merged
    with pytest.raises(ValueError, match="not mergeable"):
        fake.merge_pull(REPO, pull.number)


async def test_merges_github_refuses(world: tuple[FakeGitHub, Path], client: httpx.AsyncClient) -> None:
    fake, remote = world
    tip = fake.commit_to(REPO, "feature", files={"f.txt": "f\n"})
    pull = fake.add_pull(REPO, head="feature", base="main")
    url = _merge_url(pull.number)
    unknown = await client.put(url, json={"merge_method": "octopus"})
    assert unknown.status_code == 422 and "octopus" in unknown.json()["message"]
    pull.draft = True
    draft = await client.put(url, json={})
    assert (draft.status_code, draft.json()["message"]) == (405, "Pull Request is still a draft")
    pull.draft = False
    stale = await client.put(url, json={"sha": "e" * 40})
    assert stale.status_code == 409
    assert stale.json()["message"] == "Head branch was modified. Review and try the merge again."
    fake.repo(REPO).allow_squash_merge = False
    squash = await client.put(url, json={"merge_method": "squash"})
    assert (squash.status_code, squash.json()["message"]) == (
        405,
        "Squash merges are not allowed on this repository.",
    )
    closed = await client.patch(f"/repos/{REPO}/pulls/{pull.number}", json={"state": "closed"})
    assert closed.json()["state"] == "closed"
    refused = await client.put(url, json={})
    assert (refused.status_code, refused.json()["message"]) == (405, "Pull Request is not mergeable")
    await client.patch(f"/repos/{REPO}/pulls/{pull.number}", json={"state": "open"})
    assert (await client.put(url, json={"sha": tip})).status_code == 200
    again = await client.put(url, json={})
    assert (again.status_code, again.json()["message"]) == (405, "Pull Request is not mergeable")
    assert head(remote, "main^2") == tip


async def test_closing_keywords_close_issues_only_through_the_default_branch(
    world: tuple[FakeGitHub, Path], client: httpx.AsyncClient
) -> None:
    fake, _ = world
    issues = [fake.add_issue(REPO, title=f"Issue {n}").number for n in range(1, 6)]
    fake.commit_to(REPO, "side", files={"s.txt": "s\n"})
    fake.commit_to(REPO, "feature", files={"f.txt": "f\n"}, message="Add f\n\nresolved #4")
    aside = fake.add_pull(REPO, head="feature", base="side", body="Fixes #5")
    body = "FIXES #1, and closes: octo/widgets#2; see #3, resolves other/repo#3"
    pull = fake.add_pull(REPO, head="feature", base="main", body=body)
    await client.put(_merge_url(aside.number), json={})
    assert {fake.repo(REPO).issues[n].state for n in issues} == {"open"}
    fake.take_events()
    await client.put(_merge_url(pull.number), json={})
    states = {n: (fake.repo(REPO).issues[n].state, fake.repo(REPO).issues[n].state_reason) for n in issues}
    done = ("closed", "completed")
    assert states == {1: done, 2: done, 3: ("open", None), 4: done, 5: ("open", None)}
    issue = (await client.get(f"/repos/{REPO}/issues/1")).json()
    assert (issue["state"], issue["state_reason"]) == done
    closed = [p["issue"]["number"] for e, p in fake.take_events() if e == "issues"]
    assert closed == [1, 2, 4]
    # A push to another branch closes nothing; a push to the default branch does.
    fake.commit_to(REPO, "side", files={"t.txt": "t\n"}, message="Fix #3")
    assert fake.repo(REPO).issues[3].state == "open"
    fake.commit_to(REPO, "main", files={"t.txt": "t\n"}, message="Fix #3")
    assert (fake.repo(REPO).issues[3].state, fake.repo(REPO).issues[3].state_reason) == done


async def test_the_helper_keeps_its_old_call_and_merges_into_a_stacked_base(
    world: tuple[FakeGitHub, Path], tmp_path: Path
) -> None:
    fake, remote = world
    build_stack(tmp_path, remote)
    pull = fake.add_pull(REPO, head=BATCH_2, base=BATCH_1)
    before = head(remote, BATCH_1)
    sha = fake.merge_pull(REPO, pull.number)
    assert head(remote, BATCH_1) == sha and head(remote, f"{BATCH_1}^1") == before
    assert head(remote, "main") != sha and pull.merge_commit_sha == sha and pull.merged


async def test_a_repository_without_git_merges_too() -> None:
    fake = FakeGitHub()
    fake.add_repo(REPO)
    fake.add_branch(REPO, "main")
    fake.add_branch(REPO, "feature")
    pull = fake.add_pull(REPO, head="feature", base="main")
    async with httpx.AsyncClient(transport=fake.transport(), base_url=fake.api_url) as client:
        answer = await client.put(_merge_url(pull.number), json={"merge_method": "squash"})
        assert answer.status_code == 200
        sha = answer.json()["sha"]
        assert fake.branch_head(REPO, "main") == sha and fake.has_commit(REPO, sha)
        data = (await client.get(f"/repos/{REPO}/pulls/{pull.number}")).json()
    assert data["merged"] and data["merge_commit_sha"] == sha
    (push,) = [p for e, p in fake.take_events() if e == "push"]
    assert push["after"] == sha and "installation" not in push
