"""The REST endpoints FakeGitHub serves: `(path, methods, handler)` rows over its state.

Handlers are synchronous functions of (request, parsed JSON body) that read and change
the fake's records and answer like GitHub does, including its 404/422 error shapes.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bot.testing import fake_github_git as g
from bot.testing import fake_github_json as j
from bot.testing.fake_github_model import (
    LEGACY_PERMISSION,
    MAX_BODY,
    REACTIONS,
    FakeCheckRun,
    FakeComment,
    FakeIssue,
    FakePull,
    FakeReaction,
    FakeRepo,
    HttpError,
    encode_content,
    now_iso,
    sha_of,
)

if TYPE_CHECKING:
    from bot.testing.fake_github import FakeGitHub

Handler = Callable[[Request, Any], Response]
REPO = "/repos/{owner}/{repo}"


def _invalid(resource: str, field: str, code: str = "invalid") -> HttpError:
    return HttpError(422, "Validation Failed", [{"resource": resource, "field": field, "code": code}])


def _require_text(data: Any, key: str, resource: str, *, required: bool = True) -> str | None:
    value = (data or {}).get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise _invalid(resource, key, "missing_field")
    if len(value) > MAX_BODY:
        raise _invalid(resource, key, "custom")
    return value


def _etag(payload: list[dict[str, Any]]) -> str:
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    return f'W/"{digest[:32]}"'


def route_table(fake: FakeGitHub) -> list[tuple[str, list[str], Handler]]:
    """Every endpoint of `fake`, as (Starlette path, methods, handler)."""
    urls = fake.urls

    def repo_data(repo: FakeRepo) -> dict[str, Any]:
        return j.repo_json(urls, repo, fake._user(repo.owner))

    def issue_of(request: Request) -> tuple[FakeRepo, FakeIssue]:
        repo = fake._repo(request)
        issue = repo.issues.get(request.path_params["number"])
        if issue is None:
            raise HttpError(404, "Not Found")
        return repo, issue

    def pull_of(request: Request) -> tuple[FakeRepo, FakePull]:
        repo = fake._repo(request)
        pull = repo.pulls.get(request.path_params["number"])
        if pull is None:
            raise HttpError(404, "Not Found")
        return repo, pull

    def comment_of(request: Request) -> tuple[FakeRepo, FakeComment]:
        repo = fake._repo(request)
        comment = repo.comments.get(request.path_params["comment_id"])
        if comment is None:
            raise HttpError(404, "Not Found")
        return repo, comment

    def pull_body(repo: FakeRepo, pull: FakePull) -> dict[str, Any]:
        users = {login: fake._user(login) for login in {repo.owner, repo.issues[pull.number].user}}
        users.update({login: fake._user(login) for login in pull.requested_reviewers})
        issue = repo.issues[pull.number]
        if pull.head_repo is None and issue.state == "open":
            pull.head_sha = fake.branch_head(repo.full_name, pull.head_ref) or pull.head_sha
        head_data = repo_data(repo)
        if pull.head_repo is not None:
            owner, name = pull.head_repo.split("/")
            fork = fake.repos.get(pull.head_repo) or FakeRepo(repo.id + 7, owner, name)
            head_data = {**repo_data(fork), "fork": True}
            users.setdefault(owner, fake._user(owner))
        return j.pull_json(
            urls,
            repo,
            pull,
            issue=issue,
            users=users,
            repo_data=repo_data(repo),
            head_repo_data=head_data,
            base_sha=fake.branch_head(repo.full_name, pull.base_ref) or "0" * 40,
        )

    def reaction(reactions: list[FakeReaction], data: Any) -> Response:
        content = (data or {}).get("content")
        if content not in REACTIONS:
            raise _invalid("Reaction", "content")
        for existing in reactions:  # GitHub answers 200 with the existing reaction
            if existing.user == fake.actor and existing.content == content:
                return JSONResponse(j.reaction_json(existing, fake._user(existing.user)))
        new = FakeReaction(next(fake._ids), content, fake.actor)
        reactions.append(new)
        return JSONResponse(j.reaction_json(new, fake._user(new.user)), 201)

    # ----- App -------------------------------------------------------------------------
    def get_app(request: Request, data: Any) -> Response:
        return JSONResponse(fake._app())

    def access_token(request: Request, data: Any) -> Response:
        token = f"ghs_{secrets.token_hex(18)}"
        fake.issued_tokens[token] = request.path_params["installation_id"]
        fake.valid_tokens.add(token)
        expires = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {"token": token, "expires_at": expires, "permissions": {}, "repository_selection": "all"}
        return JSONResponse(body, 201)

    # ----- repository, permission, contents -----------------------------------------------
    def get_repo(request: Request, data: Any) -> Response:
        return JSONResponse(repo_data(fake._repo(request)))

    def get_permission(request: Request, data: Any) -> Response:
        repo = fake._repo(request)
        login = request.path_params["username"]
        if login not in repo.permissions:
            raise HttpError(404, f"{login} is not a user")
        role = repo.permissions[login]
        body = {
            "permission": LEGACY_PERMISSION[role],
            "role_name": role,
            "user": {**fake._user(login), "role_name": role},
        }
        return JSONResponse(body)

    def get_contents(request: Request, data: Any) -> Response:
        repo = fake._repo(request)
        path = request.path_params["path"]
        ref = request.query_params.get("ref") or repo.default_branch
        text = repo.files.get(ref, {}).get(path)
        if text is None and repo.git_dir is not None:
            text = g.show_file(repo.git_dir, ref, path)
        if text is None:
            raise HttpError(404, "Not Found")
        raw = text.encode()
        return JSONResponse(j.content_file_json(urls, repo, path, encode_content(text), len(raw)))

    def get_tree(request: Request, data: Any) -> Response:
        repo = fake._repo(request)
        ref = request.path_params["ref"]
        if ref in repo.files or repo.git_dir is None:
            files = repo.files.get(ref if ref in repo.files else repo.default_branch, {})
        else:
            files = g.list_files(repo.git_dir, ref)
        base = f"{urls.api}/repos/{repo.owner}/{repo.name}/git"
        items = [
            {
                "path": path,
                "mode": "100644",
                "type": "blob",
                "sha": sha_of(path + text),
                "size": len(text),
                "url": f"{base}/blobs/{sha_of(path + text)}",
            }
            for path, text in sorted(files.items())
        ]
        sha = sha_of(ref)
        return JSONResponse({"sha": sha, "url": f"{base}/trees/{sha}", "tree": items, "truncated": False})

    # ----- issues, comments, labels, reactions -------------------------------------------
    def list_issues(request: Request, data: Any) -> Response:
        repo = fake._repo(request)
        state = request.query_params.get("state", "open")
        wanted = {name for name in request.query_params.get("labels", "").split(",") if name}
        chosen = [
            issue
            for issue in sorted(repo.issues.values(), key=lambda i: -i.number)
            if state in ("all", issue.state) and wanted <= set(issue.labels)
        ]
        return fake._page(request, [j.issue_json(urls, repo, i, fake._user(i.user)) for i in chosen])

    def create_issue(request: Request, data: Any) -> Response:
        repo = fake._repo(request)
        title = _require_text(data, "title", "Issue")
        body = _require_text(data, "body", "Issue", required=False)
        labels = [str(name) for name in (data or {}).get("labels") or []]
        issue = fake.add_issue(
            repo.full_name, title=title or "", body=body or "", user=fake.actor, labels=labels
        )
        repo.labels.update(labels)
        issue.body = body
        return JSONResponse(j.issue_json(urls, repo, issue, fake._user(issue.user)), 201)

    def get_issue(request: Request, data: Any) -> Response:
        repo, issue = issue_of(request)
        return JSONResponse(j.issue_json(urls, repo, issue, fake._user(issue.user)))

    def add_labels(request: Request, data: Any) -> Response:
        repo, issue = issue_of(request)
        names = data.get("labels") if isinstance(data, dict) else data
        for name in names or []:
            if name not in issue.labels:
                issue.labels.append(str(name))
        repo.labels.update(issue.labels)
        return JSONResponse([j.label_json(urls, repo, name) for name in issue.labels])

    def list_comments(request: Request, data: Any) -> Response:
        repo, issue = issue_of(request)
        found = [c for c in repo.comments.values() if c.issue_number == issue.number]
        return fake._page(request, [j.comment_json(urls, repo, c, fake._user(c.user)) for c in found])

    def create_comment(request: Request, data: Any) -> Response:
        repo, issue = issue_of(request)
        body = _require_text(data, "body", "IssueComment") or ""
        comment = fake.add_comment(repo.full_name, issue.number, body=body, user=fake.actor)
        return JSONResponse(j.comment_json(urls, repo, comment, fake._user(comment.user)), 201)

    def comment(request: Request, data: Any) -> Response:
        repo, found = comment_of(request)
        if request.method == "PATCH":
            found.body = _require_text(data, "body", "IssueComment") or ""
            found.updated_at = now_iso()
            found.edits.append((fake.actor, found.updated_at))
        return JSONResponse(j.comment_json(urls, repo, found, fake._user(found.user)))

    def issue_reactions(request: Request, data: Any) -> Response:
        repo, issue = issue_of(request)
        reactions = repo.issue_reactions.setdefault(issue.number, [])
        if request.method == "POST":
            return reaction(reactions, data)
        return fake._page(request, [j.reaction_json(r, fake._user(r.user)) for r in reactions])

    def comment_reactions(request: Request, data: Any) -> Response:
        repo, found = comment_of(request)
        reactions = repo.comment_reactions.setdefault(found.id, [])
        if request.method == "POST":
            return reaction(reactions, data)
        content = request.query_params.get("content")
        payload = [j.reaction_json(r, fake._user(r.user)) for r in reactions if content in (None, r.content)]
        etag = _etag(payload)
        if request.headers.get("if-none-match") == etag:
            return Response(status_code=304, headers={"etag": etag})
        return fake._page(request, payload, etag=etag)

    # ----- checks --------------------------------------------------------------------------
    def apply_check_fields(run: FakeCheckRun, data: dict[str, Any]) -> None:
        for key in ("name", "status", "conclusion", "external_id", "details_url", "actions"):
            if key in data:
                setattr(run, key, data[key])
        if "output" in data:
            output = data["output"] or {}
            for key in ("summary", "text"):
                if len(output.get(key) or "") > MAX_BODY - 1:
                    raise _invalid("CheckRun", f"output.{key}", "custom")
            if len(output.get("annotations") or []) > 50:
                raise _invalid("CheckRun", "output.annotations", "custom")
            run.output = dict(output)
        if run.conclusion is not None:
            run.status = "completed"
            run.completed_at = run.completed_at or now_iso()

    def create_check_run(request: Request, data: Any) -> Response:
        repo = fake._repo(request)
        name = _require_text(data, "name", "CheckRun") or ""
        head_sha = _require_text(data, "head_sha", "CheckRun") or ""
        if not fake.has_commit(repo.full_name, head_sha):
            raise HttpError(422, f"No commit found for SHA: {head_sha}")
        run = FakeCheckRun(next(fake._ids), name, head_sha)
        apply_check_fields(run, data)
        repo.check_runs[run.id] = run
        return JSONResponse(j.check_run_json(urls, repo, run, fake._app()), 201)

    def check_run(request: Request, data: Any) -> Response:
        repo = fake._repo(request)
        run = repo.check_runs.get(request.path_params["check_run_id"])
        if run is None:
            raise HttpError(404, "Not Found")
        if request.method == "PATCH":
            apply_check_fields(run, data or {})
        return JSONResponse(j.check_run_json(urls, repo, run, fake._app()))

    def list_check_runs(request: Request, data: Any) -> Response:
        repo = fake._repo(request)
        ref = request.path_params["ref"]
        shas = {ref, fake.branch_head(repo.full_name, ref) or ref}
        name = request.query_params.get("check_name")
        runs = [r for r in repo.check_runs.values() if r.head_sha in shas and name in (None, r.name)]
        runs.sort(key=lambda r: -r.id)
        chunk, headers = fake._paginate(request, runs)
        body = {
            "total_count": len(runs),
            "check_runs": [j.check_run_json(urls, repo, r, fake._app_of(r)) for r in chunk],
        }
        return JSONResponse(body, headers=headers)

    # ----- pull requests ---------------------------------------------------------------------
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
            and (not branch or (pull.head_ref == branch and owner in ("", repo.owner)))
        ]
        return fake._page(request, [pull_body(repo, pull) for pull in chosen])

    def create_pull(repo: FakeRepo, data: dict[str, Any]) -> Response:
        title = _require_text(data, "title", "PullRequest") or ""
        body = _require_text(data, "body", "PullRequest", required=False)
        head = (_require_text(data, "head", "PullRequest") or "").rpartition(":")[2]
        base = _require_text(data, "base", "PullRequest") or ""
        if head == base:
            raise _invalid("PullRequest", "base")
        head_sha = fake.branch_head(repo.full_name, head)
        base_sha = fake.branch_head(repo.full_name, base)
        if head_sha is None:
            raise _invalid("PullRequest", "head")
        if base_sha is None:
            raise _invalid("PullRequest", "base")
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
            issue = repo.issues[found.number]
            data = data or {}
            if "title" in data:
                issue.title = _require_text(data, "title", "PullRequest") or ""
            if "body" in data:
                issue.body = _require_text(data, "body", "PullRequest", required=False)
            if "base" in data:
                found.base_ref = str(data["base"])
            if data.get("state") in ("open", "closed"):
                issue.state = data["state"]
                issue.closed_at = now_iso() if issue.state == "closed" else None
            issue.updated_at = now_iso()
        return JSONResponse(pull_body(repo, found))

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
        return fake._page(request, [j.review_comment_json(urls, repo, c, fake._user(c.user)) for c in chosen])

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
        head = fake.branch_head(repo.full_name, found.head_ref) or found.head_sha
        base = fake.branch_head(repo.full_name, found.base_ref) or found.base_ref
        commits = [commit_json(repo, c) for c in g.commits_between(git_dir, base, head)]
        return fake._page(request, commits)

    def graphql(request: Request, data: Any) -> Response:
        query = str((data or {}).get("query") or "")
        variables = (data or {}).get("variables") or {}
        if "convertPullRequestToDraft" in query or "markPullRequestReadyForReview" in query:
            from bot.testing.fake_github_actions import set_draft

            return set_draft(fake, variables, draft="convertPullRequestToDraft" in query)
        if "userContentEdits" not in query:
            return JSONResponse({"errors": [{"message": "FakeGitHub serves only the comment-edits query"}]})
        node_id = str(variables.get("id") or "")
        for repo in fake.repos.values():
            for comment in repo.comments.values():
                if f"IC_{comment.id}" == node_id:
                    edits = [
                        {"editor": {"login": who}, "editedAt": at} for who, at in reversed(comment.edits)
                    ]
                    node = {
                        "author": {"login": comment.user},
                        "editor": {"login": comment.edits[-1][0]} if comment.edits else None,
                        "lastEditedAt": comment.edits[-1][1] if comment.edits else None,
                        "userContentEdits": {"totalCount": len(edits), "nodes": edits[:100]},
                    }
                    return JSONResponse({"data": {"node": node}})
        message = f"Could not resolve to a node with the global id of '{node_id}'"
        return JSONResponse({"data": {"node": None}, "errors": [{"type": "NOT_FOUND", "message": message}]})

    def dispatch(request: Request, data: Any) -> Response:
        repo = fake._repo(request)
        ref = _require_text(data, "ref", "Workflow") or ""
        inputs = (data or {}).get("inputs") or {}
        repo.dispatches.append(
            {"workflow_id": request.path_params["workflow_id"], "ref": ref, "inputs": inputs}
        )
        return Response(status_code=204)

    return [
        ("/app", ["GET"], get_app),
        ("/graphql", ["POST"], graphql),
        ("/app/installations/{installation_id:int}/access_tokens", ["POST"], access_token),
        (REPO, ["GET"], get_repo),
        (f"{REPO}/collaborators/{{username}}/permission", ["GET"], get_permission),
        (f"{REPO}/contents/{{path:path}}", ["GET"], get_contents),
        (f"{REPO}/git/trees/{{ref:path}}", ["GET"], get_tree),
        (f"{REPO}/issues", ["GET"], list_issues),
        (f"{REPO}/issues", ["POST"], create_issue),
        (f"{REPO}/issues/{{number:int}}", ["GET"], get_issue),
        (f"{REPO}/issues/{{number:int}}/labels", ["POST"], add_labels),
        (f"{REPO}/issues/{{number:int}}/comments", ["GET"], list_comments),
        (f"{REPO}/issues/{{number:int}}/comments", ["POST"], create_comment),
        (f"{REPO}/issues/{{number:int}}/reactions", ["GET", "POST"], issue_reactions),
        (f"{REPO}/issues/comments/{{comment_id:int}}", ["GET", "PATCH"], comment),
        (f"{REPO}/issues/comments/{{comment_id:int}}/reactions", ["GET", "POST"], comment_reactions),
        (f"{REPO}/check-runs", ["POST"], create_check_run),
        (f"{REPO}/check-runs/{{check_run_id:int}}", ["GET", "PATCH"], check_run),
        (f"{REPO}/commits/{{ref:path}}/check-runs", ["GET"], list_check_runs),
        (f"{REPO}/pulls", ["GET", "POST"], pulls),
        (f"{REPO}/pulls/{{number:int}}", ["GET", "PATCH"], pull),
        (f"{REPO}/pulls/{{number:int}}/requested_reviewers", ["POST"], request_reviewers),
        (f"{REPO}/pulls/{{number:int}}/commits", ["GET"], pull_commits),
        (f"{REPO}/pulls/{{number:int}}/reviews/{{review_id:int}}/comments", ["GET"], review_comments),
        (f"{REPO}/actions/workflows/{{workflow_id}}/dispatches", ["POST"], dispatch),
    ]
