"""The REST endpoints FakeGitHub serves: `(path, methods, handler)` rows over its state
(pull requests: `fake_github_pulls`, reviews: `fake_github_reviews`, Actions: `fake_github_actions`).

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
from starlette.routing import BaseRoute, Mount, Route

from bot.testing import fake_github_git as g
from bot.testing import fake_github_json as j
from bot.testing.fake_github_actions import set_draft
from bot.testing.fake_github_gitdata import update_refs
from bot.testing.fake_github_model import (
    LEGACY_PERMISSION,
    MAX_BODY,
    REACTIONS,
    FakeCheckRun,
    FakeComment,
    FakeIssue,
    FakeReaction,
    FakeRepo,
    HttpError,
    encode_content,
    found,
    invalid,
    now_iso,
    require_text,
    sha_of,
)

if TYPE_CHECKING:
    from bot.testing.fake_github import FakeGitHub

Handler = Callable[[Request, Any], Response]
REPO = "/repos/{owner}/{repo}"


def mounted(prefix: str, routes: list[BaseRoute], catch_all: Route, *, enterprise: bool) -> list[BaseRoute]:
    """The app's routes: the API's under `prefix` (the API URL's path), anything else unknown.
    An Enterprise Server serves REST under `/api/v3` and GraphQL only at `/api/graphql`."""
    top: list[BaseRoute] = []
    if enterprise:
        if prefix != "/api/v3":
            raise ValueError("an Enterprise Server's api_url ends in /api/v3")
        graphql = [r for r in routes if isinstance(r, Route) and r.path == "/graphql"]
        top = [Route("/api/graphql", r.endpoint, methods=["POST"]) for r in graphql]
        routes = [r for r in routes if r not in graphql]
    if not prefix:
        return [*routes, catch_all]
    return [*top, Mount(prefix, routes=[*routes, catch_all]), catch_all]


def _etag(payload: list[dict[str, Any]]) -> str:
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    return f'W/"{digest[:32]}"'


def route_table(fake: FakeGitHub) -> list[tuple[str, list[str], Handler]]:
    """Every endpoint of `fake`, as (Starlette path, methods, handler)."""
    urls = fake.urls

    def issue_of(request: Request) -> tuple[FakeRepo, FakeIssue]:
        repo = fake._repo(request)
        return repo, found(repo.issues, request.path_params["number"])

    def comment_of(request: Request) -> tuple[FakeRepo, FakeComment]:
        repo = fake._repo(request)
        return repo, found(repo.comments, request.path_params["comment_id"])

    def maker() -> str | None:
        """The App whose token the client uses (the actor `<slug>[bot]`); None: a person's token."""
        return fake.actor.removesuffix("[bot]") if fake.actor.endswith("[bot]") else None

    def comment_data(repo: FakeRepo, comment: FakeComment) -> dict[str, Any]:
        app = fake._app(comment.app_slug) if comment.app_slug else None
        return j.comment_json(urls, repo, comment, fake._user(comment.user), app)

    def reaction(reactions: list[FakeReaction], data: Any) -> Response:
        content = (data or {}).get("content")
        if content not in REACTIONS:
            raise invalid("Reaction", "content")
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
        granted = fake.installations.issue_token(token, request.path_params["installation_id"], data)
        fake.issued_tokens[token] = request.path_params["installation_id"]
        fake.valid_tokens.add(token)
        expires = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {"token": token, "expires_at": expires, **granted}
        return JSONResponse(body, 201)

    # ----- repository, permission, contents -----------------------------------------------
    def get_repo(request: Request, data: Any) -> Response:
        return JSONResponse(fake._repo_data(fake._repo(request)))

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
        if maker() is not None and repo.app_permissions.get("issues") != "write":
            raise HttpError(403, "Resource not accessible by integration")  # Issues: write is needed
        if not repo.has_issues:
            raise HttpError(410, "Issues are disabled for this repo")
        title = require_text(data, "title", "Issue")
        body = require_text(data, "body", "Issue", required=False)
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

    def update_issue(request: Request, data: Any) -> Response:
        repo, issue = issue_of(request)
        if maker() is not None and repo.app_permissions.get("issues") != "write":
            raise HttpError(403, "Resource not accessible by integration")
        state, reason = (data or {}).get("state"), (data or {}).get("state_reason")
        if state not in (None, "open", "closed") or reason not in (
            None,
            "completed",
            "not_planned",
            "reopened",
        ):
            raise invalid("Issue", "state" if state not in (None, "open", "closed") else "state_reason")
        if state is not None and state != issue.state:
            issue.state, issue.closed_at = state, now_iso() if state == "closed" else None
            issue.state_reason = reason or ("completed" if state == "closed" else "reopened")
        for key in ("title", "body"):
            if isinstance((data or {}).get(key), str):
                setattr(issue, key, data[key])
        issue.updated_at = now_iso()
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
        return fake._page(request, [comment_data(repo, c) for c in found])

    def create_comment(request: Request, data: Any) -> Response:
        repo, issue = issue_of(request)
        body = require_text(data, "body", "IssueComment") or ""
        comment = fake.add_comment(repo.full_name, issue.number, body=body, user=fake.actor)
        comment.app_slug = maker()
        return JSONResponse(comment_data(repo, comment), 201)

    def comment(request: Request, data: Any) -> Response:
        repo, found = comment_of(request)
        if request.method == "PATCH":
            found.body = require_text(data, "body", "IssueComment") or ""
            found.updated_at = now_iso()
            found.edits.append((fake.actor, found.updated_at))
        return JSONResponse(comment_data(repo, found))

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
                    raise invalid("CheckRun", f"output.{key}", "custom")
            if len(output.get("annotations") or []) > 50:
                raise invalid("CheckRun", "output.annotations", "custom")
            run.output = dict(output)
        if run.conclusion is not None:
            run.status = "completed"
            run.completed_at = run.completed_at or now_iso()

    def create_check_run(request: Request, data: Any) -> Response:
        repo = fake._repo(request)
        app = maker()
        if app is None:
            raise HttpError(403, "You must authenticate via a GitHub App.")
        name = require_text(data, "name", "CheckRun") or ""
        head_sha = require_text(data, "head_sha", "CheckRun") or ""
        if not fake.has_commit(repo.full_name, head_sha):
            raise HttpError(422, f"No commit found for SHA: {head_sha}")
        run = FakeCheckRun(next(fake._ids), name, head_sha, app_slug=None if app == fake.app_slug else app)
        apply_check_fields(run, data)
        repo.check_runs[run.id] = run
        return JSONResponse(j.check_run_json(urls, repo, run, fake._app_of(run)), 201)

    def check_run(request: Request, data: Any) -> Response:
        repo = fake._repo(request)
        run = found(repo.check_runs, request.path_params["check_run_id"])
        app = fake._app_of(run)
        if request.method == "PATCH":
            if app["slug"] != maker():  # only the App that made a run may change it
                raise HttpError(
                    403, f"Invalid app_id `{app['id']}` - only the App that made it may change it."
                )
            apply_check_fields(run, data or {})
        return JSONResponse(j.check_run_json(urls, repo, run, app))

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

    def graphql(request: Request, data: Any) -> Response:
        query = str((data or {}).get("query") or "")
        variables = (data or {}).get("variables") or {}
        if "convertPullRequestToDraft" in query or "markPullRequestReadyForReview" in query:
            return set_draft(fake, variables, draft="convertPullRequestToDraft" in query)
        if "updateRefs" in query:
            return update_refs(fake, variables)
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
        ref = require_text(data, "ref", "Workflow") or ""
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
        *fake.installations.routes(),
        (f"{REPO}/contents/{{path:path}}", ["GET"], get_contents),
        (f"{REPO}/git/trees/{{ref:path}}", ["GET"], get_tree),
        (f"{REPO}/issues", ["GET"], list_issues),
        (f"{REPO}/issues", ["POST"], create_issue),
        (f"{REPO}/issues/{{number:int}}", ["GET"], get_issue),
        (f"{REPO}/issues/{{number:int}}", ["PATCH"], update_issue),
        (f"{REPO}/issues/{{number:int}}/labels", ["POST"], add_labels),
        (f"{REPO}/issues/{{number:int}}/comments", ["GET"], list_comments),
        (f"{REPO}/issues/{{number:int}}/comments", ["POST"], create_comment),
        (f"{REPO}/issues/{{number:int}}/reactions", ["GET", "POST"], issue_reactions),
        (f"{REPO}/issues/comments/{{comment_id:int}}", ["GET", "PATCH"], comment),
        (f"{REPO}/issues/comments/{{comment_id:int}}/reactions", ["GET", "POST"], comment_reactions),
        (f"{REPO}/check-runs", ["POST"], create_check_run),
        (f"{REPO}/check-runs/{{check_run_id:int}}", ["GET", "PATCH"], check_run),
        (f"{REPO}/commits/{{ref:path}}/check-runs", ["GET"], list_check_runs),
        (f"{REPO}/actions/workflows/{{workflow_id}}/dispatches", ["POST"], dispatch),
    ]
