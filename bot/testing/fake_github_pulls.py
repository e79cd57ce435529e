"""The pull request endpoints FakeGitHub serves: list, create (refusing what GitHub refuses:
a missing branch, no new commits, a duplicate), get, edit, reviewers, commits and review comments.

`mergeable` is computed from the git content (a conflicting pull request is `false`,
`mergeable_state: "dirty"`). GitHub computes it in the background: after the base branch
or the head moved, or the base was changed, the next `GET /pulls/{n}` answers `null`
("unknown") and starts the computation; the read after it has the value.

Editing refuses what GitHub refuses: a new base on a closed pull request, a base that does
not exist or is the head, reopening a merged one or one whose branch was deleted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bot.testing import fake_github_events as events
from bot.testing import fake_github_git as g
from bot.testing import fake_github_json as j
from bot.testing.fake_github_gitwrite import merge_tree
from bot.testing.fake_github_model import (
    FakePull,
    FakeRepo,
    FakeReviewComment,
    HttpError,
    Urls,
    found,
    invalid,
    now_iso,
    require_text,
)

if TYPE_CHECKING:
    from bot.testing.fake_github import FakeGitHub

REPO = "/repos/{owner}/{repo}"


def head_ref_of(pull: FakePull) -> str:
    """Where GitHub keeps the head: the branch, or `refs/pull/{n}/head` for a fork's."""
    return pull.head_ref if pull.head_repo is None else f"refs/pull/{pull.number}/head"


def current_key(fake: FakeGitHub, repo: FakeRepo, pull: FakePull) -> tuple[str, str, str]:
    """(base branch, base sha, head sha) now: what `mergeable` depends on."""
    base_sha = fake.branch_head(repo.full_name, pull.base_ref) or ""
    head_sha = pull.head_sha
    if pull.head_repo is None:
        head_sha = fake.branch_head(repo.full_name, pull.head_ref) or head_sha
    return (pull.base_ref, base_sha, head_sha)


def mergeability(
    fake: FakeGitHub, repo: FakeRepo, pull: FakePull, *, settle: bool
) -> tuple[bool | None, str]:
    """(`mergeable`, `mergeable_state`). `settle`: this read starts GitHub's computation when
    what it depends on changed (a `GET /pulls/{n}`); other reads just see it unknown."""
    if pull.merged:
        return None, "unknown"
    key = current_key(fake, repo, pull)
    if key != pull.checked:
        if settle:
            pull.checked = key
        return None, "unknown"
    if key not in pull.mergeable_for:
        git_dir, (_, base_sha, head_sha) = repo.git_dir, key
        clean = True
        if git_dir is not None and g.is_sha(base_sha) and g.resolve(git_dir, base_sha):
            head = g.resolve(git_dir, head_sha) or g.resolve(git_dir, head_ref_of(pull))
            clean = head is not None and merge_tree(git_dir, base_sha, head) is not None
        pull.mergeable_for = {key: clean}
    if not pull.mergeable_for[key]:
        return False, "dirty"
    return True, "draft" if pull.draft else "clean"


def pull_data(fake: FakeGitHub, repo: FakeRepo, pull: FakePull, *, settle: bool = False) -> dict[str, Any]:
    """A pull request as the REST API (and a `pull_request` delivery) shows it; a fork's
    head is the fork (`head.repo.fork: true`)."""
    users = {login: fake._user(login) for login in {repo.owner, repo.issues[pull.number].user}}
    users.update({login: fake._user(login) for login in pull.requested_reviewers})
    if pull.merged_by:
        users.setdefault(pull.merged_by, fake._user(pull.merged_by))
    issue = repo.issues[pull.number]
    if pull.head_repo is None and issue.state == "open":
        pull.head_sha = fake.branch_head(repo.full_name, pull.head_ref) or pull.head_sha
    head_data = fake._repo_data(repo)
    if pull.head_repo is not None:
        owner, name = pull.head_repo.split("/")
        fork = fake.repos.get(pull.head_repo) or FakeRepo(repo.id + 7, owner, name)
        head_data = {**fake._repo_data(fork), "fork": True}
        users.setdefault(owner, fake._user(owner))
    mergeable, state = mergeability(fake, repo, pull, settle=settle)
    return j.pull_json(
        fake.urls,
        repo,
        pull,
        issue=issue,
        users=users,
        repo_data=fake._repo_data(repo),
        head_repo_data=head_data,
        base_sha=fake.branch_head(repo.full_name, pull.base_ref) or "0" * 40,
        mergeable=mergeable,
        mergeable_state=state,
    )


def close_pull(fake: FakeGitHub, repo: FakeRepo, pull: FakePull, *, sender: str) -> None:
    """GitHub closes an open pull request (without merging it) and says so."""
    issue = repo.issues[pull.number]
    pull.head_sha = current_key(fake, repo, pull)[2]
    issue.state, issue.closed_at = "closed", now_iso()
    issue.updated_at = issue.closed_at
    events.pull_request(fake, repo, pull_data(fake, repo, pull), action="closed", sender=sender)


def retarget(
    fake: FakeGitHub, repo: FakeRepo, pull: FakePull, base: str, *, old_sha: str, sender: str
) -> None:
    """The pull request's base becomes `base` (`pull_request.edited` with `changes.base`)."""
    old = pull.base_ref
    pull.base_ref = base
    repo.issues[pull.number].updated_at = now_iso()
    changes = {"base": {"ref": {"from": old}, "sha": {"from": old_sha}}}
    events.pull_request(
        fake, repo, pull_data(fake, repo, pull), action="edited", sender=sender, changes=changes
    )


def _refuse(field: str, message: str, code: str = "invalid") -> HttpError:
    error = {"resource": "PullRequest", "field": field, "code": code, "message": message}
    return HttpError(422, "Validation Failed", [error])


def check_edit(fake: FakeGitHub, repo: FakeRepo, pull: FakePull, data: dict[str, Any]) -> None:
    """Refuse an edit GitHub refuses, before any of it is applied."""
    issue = repo.issues[pull.number]
    if "base" in data:
        base = data["base"]
        if not isinstance(base, str) or not base:
            raise _refuse("base", "Ref must be a string")
        if issue.state != "open":
            raise _refuse("base", "Cannot change the base branch of a closed pull request.")
        if fake.branch_head(repo.full_name, base) is None:
            raise _refuse("base", f"Proposed base branch '{base}' was not found")
        if pull.head_repo is None and base == pull.head_ref:
            raise invalid("PullRequest", "base")
    if data.get("state") == "open" and issue.state == "closed":
        if pull.merged:
            raise _refuse("state", "state cannot be changed. The pull request has been merged.", "custom")
        branches = [pull.base_ref] + ([pull.head_ref] if pull.head_repo is None else [])
        for branch in branches:
            if fake.branch_head(repo.full_name, branch) is None:
                message = f"state cannot be changed. The {branch} branch has been deleted."
                raise _refuse("state", message, "custom")


def _head_owner(repo: FakeRepo, pull: FakePull) -> str:
    """Who owns the head branch: `head=owner:branch` filters on it (a fork's owner for a fork)."""
    return pull.head_repo.split("/")[0] if pull.head_repo else repo.owner


def pull_routes(fake: FakeGitHub) -> list[tuple[str, list[str], Callable[[Request, Any], Response]]]:
    """The pull request endpoints of `fake`, as (Starlette path, methods, handler)."""
    urls = fake.urls

    def pull_of(request: Request) -> tuple[FakeRepo, FakePull]:
        repo = fake._repo(request)
        return repo, found(repo.pulls, request.path_params["number"])

    def pull_body(repo: FakeRepo, pull: FakePull) -> dict[str, Any]:
        return pull_data(fake, repo, pull)

    def pulls(request: Request, data: Any) -> Response:
        repo = fake._repo(request)
        if request.method == "POST":
            return create_pull(repo, data or {})
        state = request.query_params.get("state", "open")
        owner, _, branch = request.query_params.get("head", "").rpartition(":")
        chosen = [
            pull
            for pull in sorted(repo.pulls.values(), key=lambda p: -p.number)
            if state in ("all", repo.issues[pull.number].state)
            and (not branch or (pull.head_ref == branch and owner in ("", _head_owner(repo, pull))))
        ]
        return fake._page(request, [pull_body(repo, pull) for pull in chosen])

    def create_pull(repo: FakeRepo, data: dict[str, Any]) -> Response:
        title = require_text(data, "title", "PullRequest") or ""
        body = require_text(data, "body", "PullRequest", required=False)
        head_owner, _, head = (require_text(data, "head", "PullRequest") or "").rpartition(":")
        if head_owner and head_owner != repo.owner:
            raise invalid("PullRequest", "head")  # the fake knows no forks' branches
        base = require_text(data, "base", "PullRequest") or ""
        if head == base:
            raise invalid("PullRequest", "base")
        head_sha = fake.branch_head(repo.full_name, head)
        base_sha = fake.branch_head(repo.full_name, base)
        if head_sha is None:
            raise invalid("PullRequest", "head")
        if base_sha is None:
            raise invalid("PullRequest", "base")
        git_dir = repo.git_dir
        ahead = (
            g.commits_between(git_dir, base_sha, head_sha) if git_dir is not None else head_sha != base_sha
        )
        if not ahead:
            raise HttpError(
                422,
                "Validation Failed",
                [
                    {
                        "resource": "PullRequest",
                        "code": "custom",
                        "message": f"No commits between {base} and {head}",
                    }
                ],
            )
        for pull in repo.pulls.values():
            if pull.head_ref == head and pull.base_ref == base and repo.issues[pull.number].state == "open":
                message = f"A pull request already exists for {repo.owner}:{head}."
                raise HttpError(
                    422,
                    "Validation Failed",
                    [{"resource": "PullRequest", "code": "custom", "message": message}],
                )
        pull = fake.add_pull(
            repo.full_name, head=head, base=base, title=title, body=body or "", head_sha=head_sha
        )
        repo.issues[pull.number].body = body
        pull.draft = bool(data.get("draft"))
        return JSONResponse(pull_body(repo, pull), 201)

    def pull(request: Request, data: Any) -> Response:
        repo, found = pull_of(request)
        if request.method == "PATCH":
            edit_pull(repo, found, data if isinstance(data, dict) else {})
        return JSONResponse(pull_data(fake, repo, found, settle=request.method == "GET"))

    def edit_pull(repo: FakeRepo, found: FakePull, data: dict[str, Any]) -> None:
        check_edit(fake, repo, found, data)
        issue = repo.issues[found.number]
        changes: dict[str, Any] = {}
        if "title" in data:
            title = require_text(data, "title", "PullRequest") or ""
            if title != issue.title:
                changes["title"] = {"from": issue.title}
            issue.title = title
        if "body" in data:
            body = require_text(data, "body", "PullRequest", required=False)
            if body != issue.body:
                changes["body"] = {"from": issue.body or ""}
            issue.body = body
        if "base" in data and data["base"] != found.base_ref:
            old_sha = fake.branch_head(repo.full_name, found.base_ref) or "0" * 40
            changes["base"] = {"ref": {"from": found.base_ref}, "sha": {"from": old_sha}}
            found.base_ref = data["base"]
        issue.updated_at = now_iso()
        if changes:
            shown = pull_data(fake, repo, found)
            events.pull_request(fake, repo, shown, action="edited", sender=fake.actor, changes=changes)
        if data.get("state") == "closed" and issue.state == "open":
            close_pull(fake, repo, found, sender=fake.actor)
        elif data.get("state") == "open" and issue.state == "closed":
            issue.state, issue.closed_at, issue.state_reason = "open", None, None
            events.pull_request(
                fake, repo, pull_data(fake, repo, found), action="reopened", sender=fake.actor
            )

    def request_reviewers(request: Request, data: Any) -> Response:
        repo, found = pull_of(request)
        data = data or {}
        found.requested_reviewers += [
            r for r in data.get("reviewers", []) if r not in found.requested_reviewers
        ]
        found.requested_teams += [t for t in data.get("team_reviewers", []) if t not in found.requested_teams]
        return JSONResponse(pull_body(repo, found), 201)

    def review_comments(request: Request, data: Any) -> Response:
        repo, found = pull_of(request)
        review_id = request.path_params["review_id"]
        chosen = [
            c for c in repo.review_comments if c.pull_number == found.number and c.review_id == review_id
        ]
        return fake._page(request, [review_comment_json(urls, repo, c, fake._user(c.user)) for c in chosen])

    def commit_json(repo: FakeRepo, commit: g.GitCommit) -> dict[str, Any]:
        def person(email: str) -> dict[str, Any] | None:
            login = fake.email_logins.get(email.lower()) or g.noreply_login(email)
            return fake._user(login) if login else None

        api = f"{urls.api}/repos/{repo.full_name}"
        return {
            "sha": commit.sha,
            "node_id": f"C_{commit.sha[:12]}",
            "url": f"{api}/commits/{commit.sha}",
            "html_url": f"{urls.html}/{repo.full_name}/commit/{commit.sha}",
            "commit": {
                "author": {
                    "name": commit.author_name,
                    "email": commit.author_email,
                    "date": commit.author_date,
                },
                "committer": {
                    "name": commit.committer_name,
                    "email": commit.committer_email,
                    "date": commit.committer_date,
                },
                "message": commit.message,
            },
            "author": person(commit.author_email),
            "committer": person(commit.committer_email),
            "parents": [{"sha": p, "url": f"{api}/commits/{p}"} for p in commit.parents],
        }

    def pull_commits(request: Request, data: Any) -> Response:
        repo, found = pull_of(request)
        git_dir = repo.git_dir
        if git_dir is None or found.head_repo is not None:
            return fake._page(request, list(found.commits))
        if found.merged and found.merged_base:  # as at its merge: GitHub keeps a PR's commits
            head, base = found.head_sha, found.merged_base
        else:
            head = fake.branch_head(repo.full_name, found.head_ref) or found.head_sha
            base = fake.branch_head(repo.full_name, found.base_ref) or found.base_ref
        commits = [commit_json(repo, c) for c in g.commits_between(git_dir, base, head)]
        return fake._page(request, commits)

    return [
        (f"{REPO}/pulls", ["GET", "POST"], pulls),
        (f"{REPO}/pulls/{{number:int}}", ["GET", "PATCH"], pull),
        (f"{REPO}/pulls/{{number:int}}/requested_reviewers", ["POST"], request_reviewers),
        (f"{REPO}/pulls/{{number:int}}/commits", ["GET"], pull_commits),
        (f"{REPO}/pulls/{{number:int}}/reviews/{{review_id:int}}/comments", ["GET"], review_comments),
    ]


def review_comment_json(
    urls: Urls, repo: FakeRepo, comment: FakeReviewComment, user: dict[str, Any]
) -> dict[str, Any]:
    api = f"{urls.api}/repos/{repo.full_name}/pulls"
    html = f"{urls.html}/{repo.full_name}/pull/{comment.pull_number}#discussion_r{comment.id}"
    return {
        "url": f"{api}/comments/{comment.id}",
        "pull_request_review_id": comment.review_id,
        "id": comment.id,
        "node_id": f"PRRC_{comment.id}",
        "diff_hunk": "@@ -1 +1 @@",
        "path": comment.path,
        "position": comment.line,
        "original_position": comment.line or 1,
        "commit_id": "0" * 40,
        "original_commit_id": "0" * 40,
        "user": user,
        "body": comment.body,
        "created_at": comment.created_at,
        "updated_at": comment.created_at,
        "html_url": html,
        "pull_request_url": f"{api}/{comment.pull_number}",
        "author_association": "NONE",
        "_links": {
            "self": {"href": f"{api}/comments/{comment.id}"},
            "html": {"href": html},
            "pull_request": {"href": f"{api}/{comment.pull_number}"},
        },
        "line": comment.line,
        "side": "RIGHT",
    }
