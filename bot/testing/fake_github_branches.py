"""Branches in the fake GitHub: deleting one (and what GitHub does to the pull requests on it),
pushing a commit to one (a test helper), and the issues a push to the default branch closes.

Deleting a branch (`DELETE /repos/{o}/{r}/git/refs/heads/{branch}`, 204; 422 "Reference does
not exist" when there is none) makes GitHub, as its docs describe:
- retarget every open pull request whose base was that branch to the base of the merged pull
  request whose head it was (`pull_request.edited` with `changes.base`), or, when no merged
  pull request had it as head, close them;
- close the open pull requests whose head it was;
- send `delete` and a `push` with `deleted: true`.
Nothing is retargeted while the branch exists. (Real GitHub has been reported to close the
stacked pull requests instead when the branch is deleted through the API or the mobile app,
e.g. cli/cli#14223: a bot should retarget them itself before it deletes a branch.)

Closing keywords (close/closes/closed, fix/fixes/fixed, resolve/resolves/resolved, then
`#N` or `owner/repo#N`, case-insensitive) in a merged pull request's body or in the commit
messages that reach the default branch close those issues (`state_reason: completed`);
on any other branch they do nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from bot.testing import fake_github_events as events
from bot.testing import fake_github_git as g
from bot.testing import fake_github_gitwrite as gw
from bot.testing import fake_github_pulls as p
from bot.testing.fake_github_model import FakeRepo, HttpError, now_iso, sha_of

if TYPE_CHECKING:
    from bot.testing.fake_github import FakeGitHub

REPO = "/repos/{owner}/{repo}"
_CLOSING = re.compile(
    r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?):?\s+(?P<repo>[\w.-]+/[\w.-]+)?#(?P<number>\d+)\b",
    re.IGNORECASE,
)


def closing_references(text: str, repo: str) -> list[int]:
    """Issue numbers of `repo` that `text` closes with GitHub's keywords, in order, once each."""
    numbers: list[int] = []
    for match in _CLOSING.finditer(text or ""):
        named = match.group("repo")
        number = int(match.group("number"))
        if (named is None or named.lower() == repo.lower()) and number not in numbers:
            numbers.append(number)
    return numbers


def close_referenced(fake: FakeGitHub, repo: FakeRepo, texts: list[str], *, sender: str) -> list[int]:
    """Close the open issues (not pull requests) `texts` reference with closing keywords."""
    closed = []
    for number in closing_references("\n".join(texts), repo.full_name):
        issue = repo.issues.get(number)
        if issue is None or issue.is_pull or issue.state != "open":
            continue
        issue.state, issue.state_reason, issue.closed_at = "closed", "completed", now_iso()
        issue.updated_at = issue.closed_at
        events.issue_closed(fake, repo, issue, sender=sender)
        closed.append(number)
    return closed


def delete_branch(fake: FakeGitHub, repo: FakeRepo, branch: str, *, sender: str) -> None:
    """`sender` deletes `branch`; GitHub retargets or closes the pull requests on it."""
    old = fake.branch_head(repo.full_name, branch)
    if old is None:
        raise HttpError(422, "Reference does not exist")
    if branch == repo.default_branch:
        raise HttpError(422, "Cannot delete the default branch")
    if branch in repo.branches:
        del repo.branches[branch]
    elif repo.git_dir is not None:
        gw.delete_branch(repo.git_dir, branch, old)
    events.delete(fake, repo, branch=branch, sender=sender)
    events.push(fake, repo, branch=branch, before=old, after=gw.ZERO, sender=sender)
    merged = [
        pull
        for pull in repo.pulls.values()
        if pull.merged and pull.head_repo is None and pull.head_ref == branch
    ]
    merged.sort(key=lambda pull: pull.merged_at or "")
    for pull in sorted(repo.pulls.values(), key=lambda pull: pull.number):
        if repo.issues[pull.number].state != "open":
            continue
        if pull.base_ref == branch and merged:
            p.retarget(fake, repo, pull, merged[-1].base_ref, old_sha=old, sender=sender)
        elif pull.base_ref == branch or (pull.head_repo is None and pull.head_ref == branch):
            if pull.head_ref == branch:
                pull.head_sha = old
            p.close_pull(fake, repo, pull, sender=sender)


def commit_to(
    fake: FakeGitHub,
    repo: FakeRepo,
    branch: str,
    *,
    files: dict[str, str | None],
    message: str,
    author: str,
    email: str | None = None,
) -> str:
    """`author` pushes one commit to `branch` (made from the default branch when it is new)
    writing `files` (path → text; None removes the file). Returns the new commit."""
    old = fake.branch_head(repo.full_name, branch)
    parent = old or fake.branch_head(repo.full_name, repo.default_branch)
    git_dir = repo.git_dir
    if git_dir is not None and branch not in repo.branches:
        tree = gw.write_files(git_dir, parent, files)
        person = gw.Person(author, email or events.noreply(fake, author))
        new = gw.commit(
            git_dir,
            tree=tree,
            parents=[parent] if parent else [],
            message=message,
            author=person,
            committer=person,
        )
        gw.move_branch(git_dir, branch, new, old)
    else:
        new = sha_of(f"{repo.full_name}:{branch}:{parent}:{message}:{sorted(files.items(), key=str)}")
        kept = dict(repo.files.get(branch) or repo.files.get(repo.default_branch) or {})
        for path, text in files.items():
            if text is None:
                kept.pop(path, None)
            else:
                kept[path] = text
        repo.files[branch] = kept
        repo.branches[branch] = new
        repo.known_commits.add(new)
    pushed(fake, repo, branch, old=old, new=new, sender=author, messages=[message])
    return new


def pushed(
    fake: FakeGitHub,
    repo: FakeRepo,
    branch: str,
    *,
    old: str | None,
    new: str,
    sender: str,
    messages: list[str] | None = None,
) -> None:
    """What GitHub sends after `branch` moved from `old` to `new`: `push`, `synchronize` for its
    open pull requests, and the issues closed by the messages that reached the default branch
    (`messages`, else those of the commits between)."""
    events.push(fake, repo, branch=branch, before=old or gw.ZERO, after=new, sender=sender)
    for pull in sorted(repo.pulls.values(), key=lambda pull: pull.number):
        if pull.head_repo is None and pull.head_ref == branch and repo.issues[pull.number].state == "open":
            body = p.pull_data(fake, repo, pull)
            events.pull_request(
                fake, repo, body, action="synchronize", sender=sender, before=old or gw.ZERO, after=new
            )
    if branch != repo.default_branch:
        return
    git_dir = repo.git_dir
    if messages is None:
        landed = g.commits_between(git_dir, old, new) if git_dir is not None and old else []
        messages = [c.message for c in landed]
    close_referenced(fake, repo, messages, sender=sender)


def branch_routes(fake: FakeGitHub) -> list[tuple[str, list[str], Callable[[Request, Any], Response]]]:
    def delete_ref(request: Request, data: Any) -> Response:
        repo = fake._repo(request)
        ref = request.path_params["ref"]
        if not ref.startswith("heads/"):
            raise HttpError(422, "Reference does not exist")
        delete_branch(fake, repo, ref.removeprefix("heads/"), sender=fake.actor)
        return Response(status_code=204)

    return [(f"{REPO}/git/refs/{{ref:path}}", ["DELETE"], delete_ref)]
