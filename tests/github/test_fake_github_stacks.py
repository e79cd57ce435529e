"""Stacked pull requests in the fake GitHub after a merge: branch deletion retargets or closes
the pull requests on it as GitHub does, base changes are refused like GitHub's, and every
delivery GitHub would send lands in the outbox in a shape the bot's envelope parsing reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.runtime.routing import Event
from bot.testing.fake_github import FakeGitHub
from tests.execution_support import git
from tests.github.merge_support import (
    BATCH_1,
    BATCH_2,
    INSTALLATION,
    REPO,
    build_stack,
    fake_with_remote,
    head,
)

Stack = tuple[FakeGitHub, Path, int, int]


@pytest.fixture
def stack(tmp_path: Path) -> Stack:
    """Batch 1 → main and batch 2 → batch 1, opened by the bot."""
    fake, remote = fake_with_remote(tmp_path)
    build_stack(tmp_path, remote)
    first = fake.add_pull(REPO, head=BATCH_1, base="main", title="Batch 1", body="Part of #1")
    second = fake.add_pull(REPO, head=BATCH_2, base=BATCH_1, title="Batch 2")
    return fake, remote, first.number, second.number


@pytest.fixture
async def client(stack: Stack):
    async with httpx.AsyncClient(transport=stack[0].transport(), base_url=stack[0].api_url) as http:
        yield http


async def _pull(client: httpx.AsyncClient, number: int) -> dict[str, Any]:
    return (await client.get(f"/repos/{REPO}/pulls/{number}")).json()


async def test_nothing_is_retargeted_while_the_merged_branch_exists(
    stack: Stack, client: httpx.AsyncClient
) -> None:
    fake, remote, first, second = stack
    await client.put(f"/repos/{REPO}/pulls/{first}/merge", json={"merge_method": "squash"})
    data = await _pull(client, second)
    assert data["base"]["ref"] == BATCH_1 and data["state"] == "open"
    assert [e for e, _ in fake.take_events()] == ["push", "pull_request"]
    # Its merge button still merges into the merged branch, not main.
    main = head(remote, "main")
    await client.put(f"/repos/{REPO}/pulls/{second}/merge", json={})
    assert head(remote, "main") == main and head(remote, f"{BATCH_1}^2") == head(remote, BATCH_2)


async def test_deleting_a_merged_head_retargets_the_stack(stack: Stack, client: httpx.AsyncClient) -> None:
    fake, remote, first, second = stack
    assert (await _pull(client, second))["mergeable"] is True
    await client.put(f"/repos/{REPO}/pulls/{first}/merge", json={})
    batch_1 = head(remote, BATCH_1)
    fake.take_events()
    deleted = await client.delete(f"/repos/{REPO}/git/refs/heads/{BATCH_1}")
    assert deleted.status_code == 204
    assert fake.branch_head(REPO, BATCH_1) is None
    first_read, second_read = await _pull(client, second), await _pull(client, second)
    assert first_read["base"]["ref"] == "main" and first_read["mergeable"] is None
    assert (second_read["mergeable"], second_read["mergeable_state"]) == (True, "clean")
    sent = fake.take_events()
    assert [(e, p.get("action") or p.get("ref_type") or p["ref"]) for e, p in sent] == [
        ("delete", "branch"),
        ("push", f"refs/heads/{BATCH_1}"),
        ("pull_request", "edited"),
    ]
    delete, push, edited = (p for _, p in sent)
    assert delete["ref"] == BATCH_1 and (push["deleted"], push["after"]) == (True, "0" * 40)
    assert edited["number"] == second and edited["pull_request"]["base"]["ref"] == "main"
    assert edited["changes"] == {"base": {"ref": {"from": BATCH_1}, "sha": {"from": batch_1}}}
    again = await client.delete(f"/repos/{REPO}/git/refs/heads/{BATCH_1}")
    assert (again.status_code, again.json()["message"]) == (422, "Reference does not exist")
    tags = await client.delete(f"/repos/{REPO}/git/refs/tags/v1")
    assert tags.status_code == 422
    main = await client.delete(f"/repos/{REPO}/git/refs/heads/main")
    assert main.status_code == 422 and fake.branch_head(REPO, "main") is not None


async def test_delete_branch_on_merge_deletes_the_head_and_retargets(
    stack: Stack, client: httpx.AsyncClient
) -> None:
    fake, remote, first, second = stack
    assert (await client.get(f"/repos/{REPO}")).json()["delete_branch_on_merge"] is False
    fake.repo(REPO).delete_branch_on_merge = True
    assert (await client.get(f"/repos/{REPO}")).json()["delete_branch_on_merge"] is True
    sha = (await client.put(f"/repos/{REPO}/pulls/{first}/merge", json={"merge_method": "rebase"})).json()[
        "sha"
    ]
    sent = fake.take_events()
    assert [(e, p.get("action")) for e, p in sent] == [
        ("push", None),
        ("pull_request", "closed"),
        ("delete", None),
        ("push", None),
        ("pull_request", "edited"),
    ]
    push, closed = sent[0][1], sent[1][1]
    assert (push["ref"], push["after"], push["forced"], push["head_commit"]["id"]) == (
        "refs/heads/main",
        sha,
        False,
        sha,
    )
    assert [c["added"] for c in push["commits"]] == [["a.txt"], ["b.txt"]]
    assert closed["pull_request"]["merged"] is True and closed["pull_request"]["merge_commit_sha"] == sha
    assert (await _pull(client, second))["base"]["ref"] == "main"
    assert fake.branch_head(REPO, BATCH_1) is None and fake.branch_head(REPO, BATCH_2) is not None
    assert (await _pull(client, first))["head"]["sha"] == head(remote, f"{BATCH_2}^1")


async def test_deleting_a_branch_no_merged_pull_request_had_closes_the_pull_requests_on_it(
    stack: Stack, client: httpx.AsyncClient
) -> None:
    fake, _, first, second = stack
    fake.delete_branch(REPO, BATCH_1, by="maint")
    assert (await _pull(client, first))["state"] == "closed"  # its head is gone
    based = await _pull(client, second)  # its base is gone, and no merged pull request had it
    assert based["state"] == "closed" and based["base"]["ref"] == BATCH_1 and based["merged"] is False
    sent = fake.take_events()
    assert [(e, p.get("number")) for e, p in sent if e == "pull_request"] == [
        ("pull_request", first),
        ("pull_request", second),
    ]
    assert all(p["sender"]["login"] == "maint" for _, p in sent)
    reopen = await client.patch(f"/repos/{REPO}/pulls/{second}", json={"state": "open"})
    assert reopen.status_code == 422
    assert (
        reopen.json()["errors"][0]["message"]
        == f"state cannot be changed. The {BATCH_1} branch has been deleted."
    )
    with pytest.raises(ValueError, match="Reference does not exist"):
        fake.delete_branch(REPO, BATCH_1)


async def test_changing_a_base_is_refused_like_github(stack: Stack, client: httpx.AsyncClient) -> None:
    fake, remote, first, second = stack
    url = f"/repos/{REPO}/pulls/{second}"
    missing = await client.patch(url, json={"base": "nope"})
    assert missing.status_code == 422 and missing.json()["message"] == "Validation Failed"
    assert missing.json()["errors"][0]["field"] == "base"
    assert "'nope' was not found" in missing.json()["errors"][0]["message"]
    same = await client.patch(url, json={"base": BATCH_2})
    assert same.status_code == 422 and same.json()["errors"][0]["field"] == "base"
    assert (await _pull(client, second))["mergeable"] is True
    fake.take_events()
    moved = await client.patch(url, json={"base": "main", "title": "Batch 2 (on main)"})
    assert moved.status_code == 200 and moved.json()["base"]["ref"] == "main"
    (edited,) = [p for e, p in fake.take_events() if e == "pull_request"]
    assert edited["action"] == "edited" and edited["changes"]["title"] == {"from": "Batch 2"}
    assert edited["changes"]["base"] == {"ref": {"from": BATCH_1}, "sha": {"from": head(remote, BATCH_1)}}
    assert (await _pull(client, second))["mergeable"] is None
    assert (await _pull(client, second))["mergeable"] is True
    await client.patch(f"/repos/{REPO}/pulls/{first}", json={"state": "closed"})
    closed = await client.patch(f"/repos/{REPO}/pulls/{first}", json={"base": BATCH_2})
    assert closed.status_code == 422
    assert closed.json()["errors"][0]["message"] == "Cannot change the base branch of a closed pull request."


async def test_commit_to_pushes_and_synchronizes_the_pull_requests_of_the_branch(
    stack: Stack, client: httpx.AsyncClient
) -> None:
    fake, remote, first, _ = stack
    fake.take_events()
    before = head(remote, BATCH_1)
    sha = fake.commit_to(
        REPO, BATCH_1, files={"a.txt": "A\n", "b.txt": None, "d.txt": "d\n"}, message="Edit", author="maint"
    )
    assert head(remote, BATCH_1) == sha and head(remote, f"{sha}^") == before
    assert (
        git("show", f"{sha}:a.txt", cwd=remote) == "A" and (await _pull(client, first))["head"]["sha"] == sha
    )
    (push, sync) = fake.take_events()
    assert push[0] == "push" and (push[1]["before"], push[1]["after"], push[1]["created"]) == (
        before,
        sha,
        False,
    )
    (commit,) = push[1]["commits"]
    assert (commit["added"], commit["modified"], commit["removed"]) == (["d.txt"], ["a.txt"], ["b.txt"])
    assert commit["author"]["username"] == "maint" and push[1]["pusher"]["name"] == "maint"
    assert sync[1]["action"] == "synchronize" and (sync[1]["before"], sync[1]["after"]) == (before, sha)
    new = fake.commit_to(REPO, "fresh", files={"n.txt": "n\n"}, author="dev", email="dev@example.com")
    (created,) = fake.take_events()
    assert (
        created[1]["created"]
        and head(remote, "fresh^") == head(remote, "main")
        and head(remote, "fresh") == new
    )


def test_every_delivery_reads_as_an_event_of_the_installation(stack: Stack) -> None:
    fake, _, first, _ = stack
    fake.add_issue(REPO, title="The plan")
    fake.repo(REPO).delete_branch_on_merge = True
    fake.repo(REPO).issues[first].body = "Closes #3"
    fake.merge_pull(REPO, first, "squash", by="maint")
    sent = fake.take_events()
    assert {e for e, _ in sent} == {"push", "pull_request", "issues", "delete"} and fake.outbox == []
    for name, payload in sent:
        event = Event.from_delivery(name=name, delivery_id="d-1", payload=payload)
        assert event.repo == REPO and event.envelope.repository is not None
        assert event.envelope.repository.default_branch == "main"
        assert event.envelope.installation is not None and event.envelope.installation.id == INSTALLATION
        assert event.envelope.sender.login == "maint"
    merged = next(
        Event.from_delivery(name=e, delivery_id="d", payload=p) for e, p in sent if e == "pull_request"
    )
    assert merged.action == "closed" and merged.envelope.pull_request is not None
    assert merged.envelope.pull_request.merged and merged.number == first
    issue = next(Event.from_delivery(name=e, delivery_id="d", payload=p) for e, p in sent if e == "issues")
    assert (
        issue.action == "closed"
        and issue.number == 3
        and issue.payload["issue"]["state_reason"] == "completed"
    )
