"""Fork pull requests, and the deliveries GitHub sends about pull requests and workflow runs.

Anyone who can read a public repository can fork it and open a pull request from a branch of
any name (`plan-cascade/2/batch-1` included), with any body. GitHub then shows `head.repo` as
the fork (`fork: true`), keeps the head commit as `refs/pull/{n}/head` in the base repository
(the merge button merges that), and runs the base's `pull_request` workflows on it: runs whose
`head_repository` is the fork, `event` is `pull_request`, `head_branch` the fork's branch name
and `pull_requests` empty (see `fake_github_runs`). The head may be any public commit, the
commit of one of our batch branches too.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.testing import fake_github_git as g
from bot.testing.fake_github_model import FakePull, FakeWorkflowRun
from bot.testing.fake_github_pulls import pull_data
from bot.testing.fake_github_runs import workflow_run_json

if TYPE_CHECKING:
    from bot.testing.fake_github import FakeGitHub


def open_fork_pull(
    fake: FakeGitHub,
    repo: str,
    *,
    fork: str,
    head_ref: str,
    head_sha: str,
    source: Path | None = None,
    base: str = "main",
    title: str = "A small fix",
    body: str = "",
    user: str | None = None,
) -> FakePull:
    """`user` (the fork's owner by default) opens a pull request from `fork:head_ref` at `head_sha`.

    With a git directory behind `repo`, the head is kept as `refs/pull/{n}/head` there: pushed
    from `source` (a clone holding the fork's commit) or, without one, a commit `repo` has.
    """
    if fork.lower() == repo.lower():
        raise ValueError("a fork is another repository")
    record = fake.repos[repo]
    git_dir = record.git_dir
    pull = fake.add_pull(
        repo,
        head=head_ref,
        base=base,
        title=title,
        body=body,
        user=user or fork.split("/")[0],
        head_repo=fork,
        head_sha=head_sha,
    )
    ref = f"refs/pull/{pull.number}/head"
    if git_dir is not None:
        if source is not None:
            _git(["git", "-C", str(source), "push", "-q", str(git_dir), f"{head_sha}:{ref}"])
        elif g.resolve(git_dir, head_sha) != head_sha:
            raise ValueError(f"{repo} does not have {head_sha}: pass the fork's clone as source")
        else:
            _git(["git", "--git-dir", str(git_dir), "update-ref", ref, head_sha])
    record.issues[pull.number].body = body
    return pull


def _git(command: list[str]) -> None:
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(command, check=True, capture_output=True, text=True, env=env)


def _envelope(fake: FakeGitHub, repo: str, *, sender: str, installation: int | None) -> dict[str, Any]:
    record = fake.repos[repo]
    data: dict[str, Any] = {"repository": fake._repo_data(record), "sender": fake._user(sender)}
    if installation is not None:
        data["installation"] = {"id": installation, "node_id": f"MDIz{installation}"}
    return data


def pull_request_event(
    fake: FakeGitHub,
    repo: str,
    number: int,
    *,
    action: str = "closed",
    sender: str = "maint",
    installation: int | None = None,
) -> dict[str, Any]:
    """A `pull_request` delivery about pull request `number` as the fake holds it now."""
    record = fake.repos[repo]
    pull = pull_data(fake, record, record.pulls[number])
    if pull["merged_at"] is not None:
        pull["merged_by"] = fake._user(sender)
    data = {"action": action, "number": number, "pull_request": pull}
    return {**data, **_envelope(fake, repo, sender=sender, installation=installation)}


def workflow_run_event(
    fake: FakeGitHub,
    repo: str,
    run: FakeWorkflowRun,
    *,
    action: str = "completed",
    installation: int | None = None,
) -> dict[str, Any]:
    """A `workflow_run` delivery about `run`; its sender is whoever triggered the run."""
    record = fake.repos[repo]
    body = workflow_run_json(fake, record, run)
    workflow = {
        "id": body["workflow_id"],
        "name": run.name,
        "path": body["path"],
        "state": "active",
        "url": body["workflow_url"],
    }
    sender = run.head_repo.split("/")[0] if run.head_repo else fake.actor
    data = {"action": action, "workflow_run": body, "workflow": workflow}
    return {**data, **_envelope(fake, repo, sender=sender, installation=installation)}
