"""Fork pull requests and workflow runs in the fake GitHub, shaped as GitHub shows them, and
refused where GitHub refuses."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from bot.github import GitHubKitPort
from bot.github.models_actions import WorkflowJob, WorkflowRun
from bot.testing.fake_github import FakeGitHub
from bot.testing.fake_github_actions import add_workflow_run
from bot.testing.fake_github_forks import open_fork_pull, pull_request_event, workflow_run_event
from tests.execution_support import git
from tests.github.remote.gitpush import push_branch

REPO = "octo/widgets"
FORK = "mallory/widgets"


def _fork_commit(tmp: Path, remote: Path) -> tuple[Path, str]:
    work = tmp / "fork"
    git("clone", "-q", str(remote), str(work), cwd=tmp)
    (work / "evil.txt").write_text("mine\n")
    git("add", "-A", cwd=work)
    git("commit", "-qm", "mine", cwd=work, email="mallory@example.com")
    return work, git("rev-parse", "HEAD", cwd=work)


async def test_a_fork_pull_request_looks_like_githubs(
    fake: FakeGitHub, client: httpx.AsyncClient, remote: Path, tmp_path: Path
) -> None:
    work, sha = _fork_commit(tmp_path, remote)
    pull = open_fork_pull(fake, REPO, fork=FORK, head_ref="plan-cascade/1/batch-1", head_sha=sha, source=work)
    # GitHub keeps the fork's head in the base repository; no branch of ours moved.
    assert git("rev-parse", f"refs/pull/{pull.number}/head", cwd=remote) == sha
    assert fake.branch_head(REPO, "plan-cascade/1/batch-1") is None
    data = (await client.get(f"/repos/{REPO}/pulls/{pull.number}")).json()
    assert data["head"]["repo"]["full_name"] == FORK and data["head"]["repo"]["fork"] is True
    assert data["head"]["label"] == "mallory:plan-cascade/1/batch-1" and data["head"]["sha"] == sha
    assert data["base"]["repo"]["full_name"] == REPO
    # `head=owner:branch` is the head's owner: our owner finds no pull request from that branch.
    ours = await client.get(f"/repos/{REPO}/pulls", params={"head": "octo:plan-cascade/1/batch-1"})
    theirs = await client.get(f"/repos/{REPO}/pulls", params={"head": "mallory:plan-cascade/1/batch-1"})
    assert ours.json() == [] and [p["number"] for p in theirs.json()] == [pull.number]
    # The merge button merges refs/pull/{n}/head; the delivery says who the head belongs to.
    fake.merge_pull(REPO, pull.number)
    assert git("show", "main:evil.txt", cwd=remote) == "mine"
    event = pull_request_event(fake, REPO, pull.number, installation=5)
    assert event["action"] == "closed" and event["pull_request"]["merged_at"] is not None
    assert event["pull_request"]["head"]["repo"]["fork"] is True
    assert event["installation"]["id"] == 5 and event["repository"]["full_name"] == REPO


def test_a_fork_pull_request_needs_a_commit_the_base_can_have(fake: FakeGitHub) -> None:
    with pytest.raises(ValueError, match="does not have"):
        open_fork_pull(fake, REPO, fork=FORK, head_ref="x", head_sha="c" * 40)
    with pytest.raises(ValueError, match="another repository"):
        open_fork_pull(fake, REPO, fork=REPO, head_ref="x", head_sha="c" * 40)


async def test_creating_a_pull_request_from_another_owners_branch_is_422(
    client: httpx.AsyncClient, remote: Path, tmp_path: Path
) -> None:
    push_branch(tmp_path, remote, "feature", {"f.txt": "f\n"}, "dev@example.com")
    body = {"title": "t", "head": "mallory:feature", "base": "main"}
    assert (await client.post(f"/repos/{REPO}/pulls", json=body)).status_code == 422
    body["head"] = "octo:feature"
    assert (await client.post(f"/repos/{REPO}/pulls", json=body)).status_code == 201


async def test_workflow_runs_say_where_their_commit_came_from(
    fake: FakeGitHub, client: httpx.AsyncClient, remote: Path
) -> None:
    head = git("rev-parse", "main", cwd=remote)
    branch = "plan-cascade/1/batch-1"
    own = add_workflow_run(
        fake, REPO, head_sha=head, head_branch=branch, name="CI", jobs=[("t", "success", "")]
    )
    fork = add_workflow_run(
        fake,
        REPO,
        head_sha=head,
        head_branch=branch,
        name="CI",
        jobs=[("t", "failure", "x")],
        event="pull_request",
        head_repo=FORK,
    )
    listed = (await client.get(f"/repos/{REPO}/actions/runs", params={"head_sha": head})).json()
    runs = [WorkflowRun.from_api(r) for r in listed["workflow_runs"]]
    assert listed["total_count"] == 2
    assert {(r.id, r.head_repo, r.event, r.conclusion) for r in runs} == {
        (own.id, REPO, "push", "success"),
        (fork.id, FORK, "pull_request", "failure"),
    }
    by_event = (await client.get(f"/repos/{REPO}/actions/runs", params={"event": "push"})).json()
    assert [r["id"] for r in by_event["workflow_runs"]] == [own.id]
    listed_jobs = (await client.get(f"/repos/{REPO}/actions/runs/{fork.id}/jobs")).json()["jobs"]
    (job,) = [WorkflowJob.from_api(j) for j in listed_jobs]
    assert job.run_id == fork.id and job.check_run_id == fork.jobs[0] == job.id
    assert (await client.get(f"/repos/{REPO}/actions/runs/999/jobs")).status_code == 404
    # A fork's run lists no pull requests, even with one open from a branch of that name.
    open_fork_pull(fake, REPO, fork=FORK, head_ref=branch, head_sha=head)
    event = workflow_run_event(fake, REPO, fork)
    assert event["workflow_run"]["pull_requests"] == [] and event["sender"]["login"] == "mallory"
    assert event["workflow_run"]["head_repository"]["fork"] is True


async def test_the_port_lists_a_commits_runs_and_a_runs_jobs(port: GitHubKitPort, fake: FakeGitHub) -> None:
    head, other = "a" * 40, "b" * 40
    for sha in (head, other):
        fake.add_commit(REPO, sha)
    ok = [("j", "success", "")]
    runs = [add_workflow_run(fake, REPO, head_sha=head, head_branch="b", name=n, jobs=ok) for n in "ABC"]
    add_workflow_run(fake, REPO, head_sha=other, head_branch="b", name="X", jobs=[("j", "failure", "")])
    fork = add_workflow_run(
        fake, REPO, head_sha=head, head_branch="b", name="F", jobs=[], event="pull_request", head_repo=FORK
    )
    listed = await port.list_workflow_runs(REPO, head_sha=head, branch="b")
    assert sorted(r.id for r in listed) == sorted([*(r.id for r in runs), fork.id])
    assert {r.head_repo for r in listed} == {REPO, FORK}
    (job,) = await port.list_run_jobs(REPO, runs[0].id)
    assert (job.id, job.run_id, job.name) == (runs[0].jobs[0], runs[0].id, "j")
