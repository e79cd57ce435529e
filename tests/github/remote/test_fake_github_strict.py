"""The fake GitHub refuses what GitHub refuses, so the bot cannot come to rely on leniency."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from bot.testing.fake_github import FakeGitHub
from tests.execution_support import git
from tests.github.remote.gitpush import push_branch

REPO = "octo/widgets"


async def test_check_run_on_an_unknown_commit_is_422(client: httpx.AsyncClient, remote: Path) -> None:
    missing = "b" * 40
    resp = await client.post(f"/repos/{REPO}/check-runs", json={"name": "t", "head_sha": missing})
    assert resp.status_code == 422 and resp.json()["message"] == f"No commit found for SHA: {missing}"
    main = git("rev-parse", "main", cwd=remote).strip()
    resp = await client.post(f"/repos/{REPO}/check-runs", json={"name": "t", "head_sha": main})
    assert resp.status_code == 201
    listed = await client.get(f"/repos/{REPO}/commits/main/check-runs")
    assert [r["head_sha"] for r in listed.json()["check_runs"]] == [main]


async def test_pull_request_needs_both_branches_and_new_commits(
    client: httpx.AsyncClient, tmp_path: Path, remote: Path
) -> None:
    missing = await client.post(f"/repos/{REPO}/pulls", json={"title": "x", "head": "nope", "base": "main"})
    assert missing.status_code == 422 and missing.json()["errors"][0]["field"] == "head"
    git("branch", "same", "main", cwd=remote)
    same = await client.post(f"/repos/{REPO}/pulls", json={"title": "x", "head": "same", "base": "main"})
    assert same.status_code == 422 and "No commits between main and same" in str(same.json()["errors"])
    sha = push_branch(tmp_path, remote, "feature", {"a.txt": "a\n"}, "dev@example.com")
    made = await client.post(f"/repos/{REPO}/pulls", json={"title": "x", "head": "feature", "base": "main"})
    assert made.status_code == 201 and made.json()["head"]["sha"] == sha
    again = await client.post(f"/repos/{REPO}/pulls", json={"title": "y", "head": "feature", "base": "main"})
    assert again.status_code == 422 and "already exists" in str(again.json()["errors"])


async def test_pull_request_commits_come_from_git_with_linked_accounts(
    client: httpx.AsyncClient, fake: FakeGitHub, tmp_path: Path, remote: Path
) -> None:
    fake.email_logins["maint@example.com"] = "maint"
    push_branch(tmp_path, remote, "feature", {"a.txt": "a\n"}, "maint@example.com")
    pull = (
        await client.post(f"/repos/{REPO}/pulls", json={"title": "x", "head": "feature", "base": "main"})
    ).json()
    (commit,) = (await client.get(f"/repos/{REPO}/pulls/{pull['number']}/commits")).json()
    assert commit["author"]["login"] == "maint" and commit["commit"]["author"]["email"] == "maint@example.com"
    push_branch(tmp_path, remote, "other", {"b.txt": "b\n"}, "stranger@example.com")
    other = (
        await client.post(f"/repos/{REPO}/pulls", json={"title": "x", "head": "other", "base": "main"})
    ).json()
    (unlinked,) = (await client.get(f"/repos/{REPO}/pulls/{other['number']}/commits")).json()
    assert unlinked["author"] is None  # GitHub links no account to an unknown email


async def test_fork_pull_request_names_the_fork_as_its_head_repository(
    client: httpx.AsyncClient, fake: FakeGitHub
) -> None:
    pull = fake.add_pull(REPO, head="plan-cascade/1/plan", user="mallory", head_repo="mallory/widgets")
    data = (await client.get(f"/repos/{REPO}/pulls/{pull.number}")).json()
    assert data["head"]["repo"]["full_name"] == "mallory/widgets" and data["head"]["repo"]["fork"] is True
    assert data["base"]["repo"]["full_name"] == REPO and data["user"]["login"] == "mallory"


async def test_reactions_are_unique_per_user_and_content(fake: FakeGitHub, client: httpx.AsyncClient) -> None:
    issue = fake.add_issue(REPO, title="t")
    comment = fake.add_comment(REPO, issue.number, body="plan")
    first = fake.add_reaction(REPO, comment.id, "alice", "+1")
    assert fake.add_reaction(REPO, comment.id, "alice", "+1") is first
    fake.add_reaction(REPO, comment.id, "alice", "heart")
    url = f"/repos/{REPO}/issues/comments/{comment.id}/reactions"
    created = await client.post(url, json={"content": "+1"})
    repeated = await client.post(url, json={"content": "+1"})
    assert (created.status_code, repeated.status_code) == (201, 200)
    assert created.json()["id"] == repeated.json()["id"]
    assert len((await client.get(url)).json()) == 3


async def test_oversized_bodies_are_422(fake: FakeGitHub, client: httpx.AsyncClient) -> None:
    issue = fake.add_issue(REPO, title="t")
    big = "x" * 65_537
    resp = await client.post(f"/repos/{REPO}/issues/{issue.number}/comments", json={"body": big})
    assert resp.status_code == 422
    resp = await client.post(f"/repos/{REPO}/issues", json={"title": "t", "body": big})
    assert resp.status_code == 422


async def test_every_get_answers_if_none_match_with_304_until_it_changes(
    fake: FakeGitHub, client: httpx.AsyncClient
) -> None:
    issue = fake.add_issue(REPO, title="t")
    comment = fake.add_comment(REPO, issue.number, body="one")
    url = f"/repos/{REPO}/issues/comments/{comment.id}"
    first = await client.get(url)
    etag = first.headers["etag"]
    assert (await client.get(url, headers={"If-None-Match": etag})).status_code == 304
    for path in (f"/repos/{REPO}", f"/repos/{REPO}/issues/{issue.number}"):
        tag = (await client.get(path)).headers["etag"]
        assert (await client.get(path, headers={"If-None-Match": tag})).status_code == 304
    await client.patch(url, json={"body": "two"})
    changed = await client.get(url, headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed.json()["body"] == "two"


async def test_unknown_routes_are_404(client: httpx.AsyncClient) -> None:
    resp = await client.post(f"/repos/{REPO}/no-such-thing", json={})
    assert resp.status_code == 404 and resp.json()["message"] == "Not Found"


async def test_comment_edit_history_through_graphql(fake: FakeGitHub, client: httpx.AsyncClient) -> None:
    issue = fake.add_issue(REPO, title="t")
    comment = fake.add_comment(REPO, issue.number, body="plan", user="plan-cascade[bot]")
    query = "query($id: ID!) { node(id: $id) { ... on IssueComment { userContentEdits(first: 100) { nodes { editor { login } } } } } }"  # noqa: E501
    body = {"query": query, "variables": {"id": f"IC_{comment.id}"}}
    node = (await client.post("/graphql", json=body)).json()["data"]["node"]
    assert node["userContentEdits"]["nodes"] == [] and node["editor"] is None
    fake.edit_comment(REPO, comment.id, body="tampered", editor="mallory")
    node = (await client.post("/graphql", json=body)).json()["data"]["node"]
    assert [n["editor"]["login"] for n in node["userContentEdits"]["nodes"]] == ["mallory"]
    assert node["editor"] == {"login": "mallory"}


def test_merging_a_pull_request_moves_its_base_branch_like_the_merge_button(
    fake: FakeGitHub, remote: Path, tmp_path: Path
) -> None:
    head = push_branch(tmp_path, remote, "feature", {"feature.txt": "new\n"}, "dev@example.com")
    before = git("rev-parse", "main", cwd=remote).strip()
    pull = fake.add_pull(REPO, head="feature", base="main")
    fake.merge_pull(REPO, pull.number)
    after = git("rev-parse", "main", cwd=remote).strip()
    assert git("rev-parse", "main^1", "main^2", cwd=remote).split() == [before, head]
    assert fake.branch_head(REPO, "main") == after
    assert "feature.txt" in git("ls-tree", "--name-only", "main", cwd=remote)
    assert fake.repo(REPO).pulls[pull.number].merged


def test_a_conflicting_pull_request_cannot_be_merged(fake: FakeGitHub, remote: Path, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    push_branch(tmp_path / "a", remote, "left", {"README.md": "left\n"}, "dev@example.com")
    push_branch(tmp_path / "b", remote, "right", {"README.md": "right\n"}, "dev@example.com")
    first = fake.add_pull(REPO, head="left", base="main")
    fake.merge_pull(REPO, first.number)
    second = fake.add_pull(REPO, head="right", base="main")
    with pytest.raises(ValueError, match="not mergeable"):
        fake.merge_pull(REPO, second.number)
    assert not fake.repo(REPO).pulls[second.number].merged
