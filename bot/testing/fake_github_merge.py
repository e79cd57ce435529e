"""Merging pull requests in the fake GitHub as the merge button and `PUT …/pulls/{n}/merge` do.

Methods, on a repository with a git directory (GitHub commits each as `GitHub <noreply@github.com>`):
- `merge`: a merge commit of the head on the base tip (parents: base, head), by the merger;
- `squash`: one new commit on the base tip with the merge's tree, authored by the pull
  request's author; its message, as GitHub's default: for one (non-merge) commit, that
  commit's subject with ` (#n)` and its body; for several, `<title> (#n)` and `* <message>`
  for each, oldest first;
- `rebase`: the head's non-merge commits replayed one by one as new commits on the base tip
  (new shas even when a fast-forward was possible), refused ("This branch can't be rebased")
  when one conflicts or when the result differs from what a merge would give.
The base branch moves to the new commit; the pull request is `merged`, `closed`, keeps its
`head.sha` and records `merge_commit_sha` (the merge or squash commit, the last rebased one).

Refused like GitHub: an unknown `merge_method` (422), a closed or merged pull request and a
conflicting one (405 "Pull Request is not mergeable"), a draft (405 "Pull Request is still a
draft"), a method the repository does not allow (405), a `sha` that is not the head any more
(409 "Head branch was modified. Review and try the merge again.").

Afterwards GitHub sends `push` (base branch) and `pull_request.closed` (`merged: true`),
closes the issues the pull request references with closing keywords when it was merged
into the default branch, and deletes the head branch when the repository's
`delete_branch_on_merge` is on (see `fake_github_branches`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bot.testing import fake_github_events as events
from bot.testing import fake_github_git as g
from bot.testing import fake_github_gitwrite as gw
from bot.testing import fake_github_pulls as p
from bot.testing import fake_github_rules as gd
from bot.testing.fake_github_branches import close_referenced, delete_branch
from bot.testing.fake_github_model import FakeIssue, FakePull, FakeRepo, HttpError, found, now_iso, sha_of

if TYPE_CHECKING:
    from pathlib import Path

    from bot.testing.fake_github import FakeGitHub

REPO = "/repos/{owner}/{repo}"
METHODS = ("merge", "squash", "rebase")
NOT_MERGEABLE = "Pull Request is not mergeable"
CANNOT_REBASE = "This branch can't be rebased"
_NOT_ALLOWED = {
    "merge": "Merge commits are not allowed on this repository.",
    "squash": "Squash merges are not allowed on this repository.",
    "rebase": "Rebase merges are not allowed on this repository.",
}


def merge_pull(
    fake: FakeGitHub,
    repo: FakeRepo,
    number: int,
    *,
    method: str = "merge",
    sha: str | None = None,
    title: str | None = None,
    message: str | None = None,
    by: str,
) -> str:
    """`by` merges pull request `number` with `method`; returns the commit now on the base."""
    if method not in METHODS:
        allowed = ", ".join(f'"{name}"' for name in METHODS)
        raise HttpError(
            422, f"Invalid request.\n\nFor 'properties/merge_method', \"{method}\" is not one of [{allowed}]."
        )
    pull = found(repo.pulls, number)
    issue = repo.issues[number]
    if pull.merged or issue.state != "open":
        raise HttpError(405, NOT_MERGEABLE)
    if pull.draft:
        raise HttpError(405, "Pull Request is still a draft")
    if not getattr(repo, {"merge": "allow_merge_commit"}.get(method, f"allow_{method}_merge")):
        raise HttpError(405, _NOT_ALLOWED[method])
    head = p.current_key(fake, repo, pull)[2]
    if sha is not None and sha != head:
        raise HttpError(409, "Head branch was modified. Review and try the merge again.")
    git_dir = repo.git_dir
    before = fake.branch_head(repo.full_name, pull.base_ref)
    if git_dir is not None and pull.base_ref not in repo.branches:
        if before is None or g.resolve(git_dir, head) is None:
            raise HttpError(405, NOT_MERGEABLE)
        text = (title, message)
        gd.check_merge(repo, pull.base_ref, base=before, head=head, method=method)
        new = _merge_in_git(
            fake, repo, git_dir, pull, base=before, head=head, method=method, by=by, text=text
        )
        if method != "rebase":  # GitHub signs the merge and squash commits it makes
            gd.sign(repo, new)
        gw.move_branch(git_dir, pull.base_ref, new, before)
    else:  # a repository without git: the commit is made up, the branch moves if registered
        new = sha_of(f"{method}:{repo.full_name}#{number}:{before}:{head}")
        repo.known_commits.add(new)
        if pull.base_ref in repo.branches:
            repo.branches[pull.base_ref] = new
    pull.head_sha, pull.merged, pull.merged_at = head, True, now_iso()
    pull.merge_commit_sha, pull.merged_by, pull.merged_base = new, by, before
    issue.state, issue.closed_at = "closed", pull.merged_at
    issue.updated_at = pull.merged_at
    _afterwards(fake, repo, pull, issue, before=before, by=by)
    return new


def _afterwards(
    fake: FakeGitHub, repo: FakeRepo, pull: FakePull, issue: FakeIssue, *, before: str | None, by: str
) -> None:
    """What GitHub does once a pull request is merged: deliveries, closed issues, head deletion."""
    new = pull.merge_commit_sha or ""
    if before is not None:  # (a repository without git whose base branch no test registered: no push)
        events.push(fake, repo, branch=pull.base_ref, before=before, after=new, sender=by)
    events.pull_request(fake, repo, p.pull_data(fake, repo, pull), action="closed", sender=by)
    if pull.base_ref == repo.default_branch:
        git_dir = repo.git_dir
        landed = g.commits_between(git_dir, before, new) if git_dir is not None and before else []
        close_referenced(fake, repo, [issue.body or "", *(c.message for c in landed)], sender=by)
    head_branch = pull.head_ref if pull.head_repo is None else None
    if (
        repo.delete_branch_on_merge
        and head_branch is not None
        and head_branch != repo.default_branch
        and fake.branch_head(repo.full_name, head_branch) is not None
    ):
        delete_branch(fake, repo, head_branch, sender=by)


def _merge_in_git(
    fake: FakeGitHub,
    repo: FakeRepo,
    git_dir: Path,
    pull: FakePull,
    *,
    base: str,
    head: str,
    method: str,
    by: str,
    text: tuple[str | None, str | None],
) -> str:
    """The new commit for the base branch; `text`: the requested commit title and message."""
    issue, (title, message) = repo.issues[pull.number], text
    tree = gw.merge_tree(git_dir, base, head)
    if method == "rebase":
        tip = gw.replay(git_dir, base, gw.rebase_todo(git_dir, base, head)) if tree is not None else None
        if tip is None or tip == base or gw.tree_of(git_dir, tip) != tree:
            raise HttpError(405, CANNOT_REBASE)
        return tip
    if tree is None:
        raise HttpError(405, NOT_MERGEABLE)
    number = pull.number
    if method == "merge":
        owner = pull.head_repo.split("/")[0] if pull.head_repo else repo.owner
        default_title = f"Merge pull request #{number} from {owner}/{pull.head_ref}"
        merger = gw.Person(by, events.noreply(fake, by))
        full = _message(title or default_title, issue.title if message is None else message)
        return gw.commit(git_dir, tree=tree, parents=[base, head], message=full, author=merger)
    squashed = [c for c in g.commits_between(git_dir, base, head) if len(c.parents) < 2]
    if len(squashed) == 1:
        subject, _, body = squashed[0].message.partition("\n")
        default_title, default_body = f"{subject} (#{number})", body.strip()
    else:
        default_title = f"{issue.title} (#{number})"
        default_body = "\n\n".join(f"* {c.message}" for c in squashed)
    full = _message(title or default_title, default_body if message is None else message)
    author = gw.Person(issue.user, events.noreply(fake, issue.user))
    return gw.commit(git_dir, tree=tree, parents=[base], message=full, author=author)


def _message(title: str, body: str) -> str:
    return f"{title}\n\n{body}\n" if body else f"{title}\n"


def merge_routes(fake: FakeGitHub) -> list[tuple[str, list[str], Callable[[Request, Any], Response]]]:
    def merge(request: Request, data: Any) -> Response:
        repo = fake._repo(request)
        number = request.path_params["number"]
        if request.method == "GET":  # "Check if a pull request has been merged"
            if not found(repo.pulls, number).merged:
                raise HttpError(404, "Not Found")
            return Response(status_code=204)
        data = data if isinstance(data, dict) else {}
        for key in ("merge_method", "sha", "commit_title", "commit_message"):
            if data.get(key) is not None and not isinstance(data[key], str):
                raise HttpError(
                    422, f"Invalid request.\n\nFor 'properties/{key}', {data[key]!r} is not a string."
                )
        sha = merge_pull(
            fake,
            repo,
            number,
            method=data.get("merge_method") or "merge",
            sha=data.get("sha"),
            title=data.get("commit_title"),
            message=data.get("commit_message"),
            by=fake.actor,
        )
        return JSONResponse({"sha": sha, "merged": True, "message": "Pull Request successfully merged"})

    return [(f"{REPO}/pulls/{{number:int}}/merge", ["GET", "PUT"], merge)]
