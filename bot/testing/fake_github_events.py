"""The webhook deliveries GitHub sends about what happens in the fake GitHub, kept in its outbox.

Merges, pushes, branch deletions, retargets and the issues a merge closes each make GitHub
send deliveries to the App. The fake records them, in the order they happen, as
`(event, payload)` in `FakeGitHub.outbox`; tests take them with `take_events()` and deliver
the ones they want (GitHub's delivery order is not guaranteed either). Payloads have the
shape of GitHub's: `repository` (with `default_branch`), `sender`, and `installation` when
`FakeGitHub.installation_id` is set.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.testing import fake_github_git as g
from bot.testing import fake_github_json as j
from bot.testing.fake_github_gitwrite import ZERO, changed_paths, tree_of
from bot.testing.fake_github_model import FakeIssue, FakeRepo

if TYPE_CHECKING:
    from bot.testing.fake_github import FakeGitHub


def noreply(fake: FakeGitHub, login: str) -> str:
    """The commit email GitHub gives an account (`<id>+<login>@users.noreply.<its host>`)."""
    return fake.noreply(login)


def _record(fake: FakeGitHub, event: str, repo: FakeRepo, sender: str, data: dict[str, Any]) -> None:
    payload = {**data, "repository": fake._repo_data(repo), "sender": fake._user(sender)}
    if fake.installation_id is not None:
        payload["installation"] = {"id": fake.installation_id, "node_id": f"MDIz{fake.installation_id}"}
    fake.outbox.append((event, payload))


def pull_request(
    fake: FakeGitHub, repo: FakeRepo, pull: dict[str, Any], *, action: str, sender: str, **extra: Any
) -> None:
    """`pull_request` with `action` about the rendered pull request `pull` (`extra`: `changes`,
    `before`/`after` for `synchronize`)."""
    _record(
        fake,
        "pull_request",
        repo,
        sender,
        {"action": action, "number": pull["number"], **extra, "pull_request": pull},
    )


def issue_closed(fake: FakeGitHub, repo: FakeRepo, issue: FakeIssue, *, sender: str) -> None:
    data = j.issue_json(fake.urls, repo, issue, fake._user(issue.user))
    _record(fake, "issues", repo, sender, {"action": "closed", "issue": data})


def _commit(fake: FakeGitHub, repo: FakeRepo, commit: g.GitCommit) -> dict[str, Any]:
    """A commit as a `push` delivery lists it."""

    def person(name: str, email: str) -> dict[str, Any]:
        login = fake.email_logins.get(email.lower()) or g.noreply_login(email)
        return {"name": name, "email": email, **({"username": login} if login else {})}

    git_dir = repo.git_dir
    changes = changed_paths(git_dir, commit.sha) if git_dir is not None else {}
    tree = tree_of(git_dir, commit.sha) if git_dir is not None else ZERO
    return {
        "id": commit.sha,
        "tree_id": tree,
        "distinct": True,
        "message": commit.message,
        "timestamp": commit.committer_date,
        "url": f"{fake.urls.html}/{repo.full_name}/commit/{commit.sha}",
        "author": person(commit.author_name, commit.author_email),
        "committer": person(commit.committer_name, commit.committer_email),
        "added": changes.get("added", []),
        "removed": changes.get("removed", []),
        "modified": changes.get("modified", []),
    }


def push(fake: FakeGitHub, repo: FakeRepo, *, branch: str, before: str, after: str, sender: str) -> None:
    """`push` to `branch`: created when `before` is all zeros, deleted when `after` is."""
    git_dir = repo.git_dir
    commits: list[g.GitCommit] = []
    if git_dir is not None and after != ZERO:
        if before == ZERO:
            found = g.read_commit(git_dir, after)
            commits = [found] if found is not None else []
        else:
            commits = g.commits_between(git_dir, before, after)
    head = g.read_commit(git_dir, after) if git_dir is not None else None
    if head is None and after != ZERO:  # a repository without git: a commit registered by hand
        email = noreply(fake, sender)
        head = g.GitCommit(after, (before,), sender, email, "", "GitHub", "noreply@github.com", "", "")
    data = {
        "ref": f"refs/heads/{branch}",
        "before": before,
        "after": after,
        "created": before == ZERO,
        "deleted": after == ZERO,
        "forced": False,
        "base_ref": None,
        "compare": f"{fake.urls.html}/{repo.full_name}/compare/{before[:12]}...{after[:12]}",
        "commits": [_commit(fake, repo, c) for c in commits],
        "head_commit": _commit(fake, repo, head) if head is not None else None,
        "pusher": {"name": sender, "email": noreply(fake, sender)},
    }
    _record(fake, "push", repo, sender, data)


def delete(fake: FakeGitHub, repo: FakeRepo, *, branch: str, sender: str) -> None:
    _record(fake, "delete", repo, sender, {"ref": branch, "ref_type": "branch", "pusher_type": "user"})
