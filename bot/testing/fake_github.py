"""`FakeGitHub`: an in-memory GitHub REST API as an ASGI app, recording every request.

Use it in-process (``httpx.ASGITransport(app=fake.app)``, see :meth:`FakeGitHub.transport`)
or serve it over real HTTP on 127.0.0.1 with :func:`serve` (uvicorn). Unknown routes answer
404 with GitHub's error shape, or raise :class:`UnexpectedRequest` when ``strict=True``.
Responses carry every field githubkit's models require for the endpoints served. What GitHub
would send about merges, pushes and deleted branches waits in `outbox` (`fake_github_events`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import jwt
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from bot.testing import fake_github_branches as branches
from bot.testing import fake_github_git as g
from bot.testing import fake_github_json as j
from bot.testing import fake_github_merge as merge
from bot.testing import fake_github_model as m
from bot.testing.fake_github_actions import actions_routes
from bot.testing.fake_github_advisories import advisory_routes, fixture_advisories
from bot.testing.fake_github_apps import FakeApps
from bot.testing.fake_github_faults import Faults
from bot.testing.fake_github_gitdata import gitdata_routes
from bot.testing.fake_github_hooks import FakeHooks
from bot.testing.fake_github_installations import Installed, app_only_route
from bot.testing.fake_github_log import RequestLog, conditional
from bot.testing.fake_github_model import (
    LEGACY_PERMISSION,
    HttpError,
    RecordedRequest,
    UnexpectedRequest,
    error_body,
)
from bot.testing.fake_github_pages import Pages
from bot.testing.fake_github_pulls import current_key, pull_routes
from bot.testing.fake_github_reviews import review_routes
from bot.testing.fake_github_routes import mounted, route_table
from bot.testing.fake_github_rules import GitDataHelpers
from bot.testing.fake_github_runs import runs_routes

Handler = Callable[[Request, Any], Response]


@dataclass
class FakeGitHub(RequestLog, Pages, GitDataHelpers, Installed):
    """In-memory GitHub. Helpers below set state; `requests` records what clients sent."""

    api_url: str = "http://github.test"
    html_url: str = "http://github.test"
    strict: bool = False
    app_id: int = 1
    app_slug: str = "plan-cascade"
    app_public_key: str | None = None
    """PEM; when set, App endpoints demand a valid RS256 JWT issued by `app_id`."""
    require_auth: bool = False
    """When True, repository endpoints demand a token from `valid_tokens`."""
    valid_tokens: set[str] = field(default_factory=set)
    actor: str = ""
    """Login that authors what clients create; defaults to `<app_slug>[bot]`."""
    repos: dict[str, m.FakeRepo] = field(default_factory=dict)
    requests: list[RecordedRequest] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    issued_tokens: dict[str, int] = field(default_factory=dict)
    email_logins: dict[str, str] = field(default_factory=dict)
    """Commit email → GitHub login (GitHub links commits to accounts by verified email)."""
    clock: Callable[[], float] = time.monotonic
    """Stamps `RecordedRequest.at`; tests pass their fake clock."""
    latency: float = 0.0
    """Seconds added to every answer, as GitHub's 100–300 ms (benches); 0 in tests."""
    faults: Faults = field(default_factory=Faults)
    """GitHub's own failures to inject (502s before or after the work, rate limits)."""
    installation_id: int | None = None
    """The App's installation the deliveries in `outbox` name (none when None)."""
    outbox: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """(event, payload) GitHub sends about merges, pushes, deleted branches… (`fake_github_events`)."""
    enterprise: bool = False
    """A GitHub Enterprise Server: REST only under `/api/v3`, GraphQL only at `/api/graphql`, one
    host for the API and the web pages (`api_url` must end in `/api/v3`)."""
    made_commits: list[str] = field(default_factory=list)
    """Commits made through `POST /git/commits`, in order."""
    advisories: list[dict[str, Any]] = field(default_factory=fixture_advisories)
    """The global Advisory Database `GET /advisories` serves (`fake_github_advisories`)."""

    def __post_init__(self) -> None:
        self.actor = self.actor or f"{self.app_slug}[bot]"
        self.urls = m.Urls(api=self.api_url.rstrip("/"), html=self.html_url.rstrip("/"))
        self._ids = itertools.count(1001)
        self._user_ids: dict[str, int] = {}
        self.hooks = FakeHooks(self)  # the App's webhook: deliveries, their attempts, the endpoints
        self.apps = FakeApps(self)  # registering the App from a manifest; its installations
        prefix = httpx.URL(self.urls.api).path.rstrip("/")
        catch_all = Route("/{rest:path}", self._wrap(self._unknown), methods=_ALL_METHODS)
        self.app = Starlette(routes=mounted(prefix, self._routes(), catch_all, enterprise=self.enterprise))

    # ----- test helpers -------------------------------------------------------------------
    def take_events(self) -> list[tuple[str, dict[str, Any]]]:
        """The deliveries GitHub would have sent since the last call (the outbox, emptied)."""
        taken, self.outbox = self.outbox, []
        return taken

    def transport(self) -> httpx.ASGITransport:
        """An httpx async transport that serves requests from this fake, in-process."""
        return httpx.ASGITransport(app=self.app)

    def add_repo(
        self, full_name: str, *, default_branch: str = "main", clone_url: str = "", private: bool = False
    ) -> m.FakeRepo:
        owner, name = full_name.split("/")
        repo = m.FakeRepo(next(self._ids), owner, name, default_branch, clone_url, private)
        repo.permissions[owner] = "admin"
        self.repos[full_name] = repo
        return repo

    def repo(self, full_name: str) -> m.FakeRepo:
        return self.repos[full_name]

    def set_permission(self, repo: str, login: str, role: str) -> None:
        if role not in LEGACY_PERMISSION:
            raise ValueError(f"unknown role {role!r}")
        self.repos[repo].permissions[login] = role

    def set_file(self, repo: str, path: str, text: str, *, ref: str | None = None) -> None:
        fake = self.repos[repo]
        fake.files.setdefault(ref or fake.default_branch, {})[path] = text

    def add_issue(
        self, repo: str, *, title: str, body: str = "", user: str = "octocat", labels: list[str] | None = None
    ) -> m.FakeIssue:
        fake = self.repos[repo]
        issue = m.FakeIssue(self._next_number(fake), title, body, user, list(labels or []))
        fake.issues[issue.number] = issue
        return issue

    def add_comment(
        self, repo: str, number: int, *, body: str, user: str = "octocat", created_at: str | None = None
    ) -> m.FakeComment:
        """A comment by `user` (a bot's login `<slug>[bot]`: written with that App's token)."""
        fake = self.repos[repo]
        association = "OWNER" if user == fake.owner else "NONE"
        comment = m.FakeComment(next(self._ids), number, body, user, author_association=association)
        comment.app_slug = user.removesuffix("[bot]") if user.endswith("[bot]") else None
        if created_at is not None:
            comment.created_at = comment.updated_at = created_at
        fake.comments[comment.id] = comment
        return comment

    def edit_comment(self, repo: str, comment_id: int, *, body: str, editor: str) -> m.FakeComment:
        """`editor` edits a comment in the web UI (anyone with write access may edit anyone's)."""
        comment = self.repos[repo].comments[comment_id]
        comment.body = body
        comment.updated_at = m.now_iso()
        comment.edits.append((editor, comment.updated_at))
        return comment

    def add_reaction(
        self, repo: str, comment_id: int, login: str, content: str, *, created_at: str | None = None
    ) -> m.FakeReaction:
        """`login` reacts to a comment; like GitHub, a second identical reaction is the first one."""
        reactions = self.repos[repo].comment_reactions.setdefault(comment_id, [])
        for existing in reactions:
            if existing.user == login and existing.content == content:
                return existing
        reaction = m.FakeReaction(next(self._ids), content, login)
        if created_at is not None:
            reaction.created_at = created_at
        reactions.append(reaction)
        return reaction

    def add_commit(self, repo: str, sha: str) -> None:
        """Register a commit GitHub knows, for a repository without a git directory."""
        self.repos[repo].known_commits.add(sha)

    def add_branch(self, repo: str, name: str, sha: str | None = None) -> str:
        """Register a branch (and its head commit) for a repository without a git directory."""
        sha = sha or m.sha_of(f"{repo}:{name}")
        self.repos[repo].branches[name] = sha
        self.repos[repo].known_commits.add(sha)
        return sha

    def has_commit(self, repo: str, sha: str) -> bool:
        """Whether GitHub has commit `sha` in `repo` (its git directory, or registered by a test)."""
        fake = self.repos[repo]
        if sha in fake.known_commits or (g.is_sha(sha) and sha in fake.files):
            return True
        git_dir = fake.git_dir
        return git_dir is not None and g.is_sha(sha) and g.resolve(git_dir, sha) == sha

    def branch_head(self, repo: str, branch: str) -> str | None:
        """The sha a branch points at on GitHub, or None when it does not exist."""
        fake = self.repos[repo]
        if branch in fake.branches:
            return fake.branches[branch]
        git_dir = fake.git_dir
        return g.branch_sha(git_dir, branch) if git_dir is not None else None

    def add_pull(
        self,
        repo: str,
        *,
        head: str,
        base: str = "main",
        title: str = "A change",
        body: str = "",
        user: str = "",
        head_repo: str | None = None,
        head_sha: str | None = None,
    ) -> m.FakePull:
        """A pull request opened by `user` (a fork's when `head_repo` names another repository)."""
        fake = self.repos[repo]
        issue = m.FakeIssue(self._next_number(fake), title, body, user or self.actor, is_pull=True)
        fake.issues[issue.number] = issue
        sha = head_sha or (None if head_repo else self.branch_head(repo, head)) or m.sha_of(head)
        fake.known_commits.add(sha)
        pull = m.FakePull(issue.number, head, sha, base, head_repo=head_repo)
        fake.pulls[pull.number] = pull
        pull.checked = current_key(self, fake, pull)
        return pull

    def merge_pull(
        self,
        repo: str,
        number: int,
        method: str = "merge",
        *,
        sha: str | None = None,
        title: str | None = None,
        message: str | None = None,
        by: str | None = None,
    ) -> str:
        """`by` (default: the owner) merges like the button (`fake_github_merge`); ValueError if refused."""
        fake = self.repos[repo]
        try:
            return merge.merge_pull(
                self, fake, number, method=method, sha=sha, title=title, message=message, by=by or fake.owner
            )
        except HttpError as exc:
            raise ValueError(f"pull request #{number} cannot be merged: {exc.message}") from exc

    def delete_branch(self, repo: str, branch: str, *, by: str | None = None) -> None:
        """`by` deletes a branch; GitHub retargets or closes its pull requests (`fake_github_branches`)."""
        fake = self.repos[repo]
        try:
            branches.delete_branch(self, fake, branch, sender=by or fake.owner)
        except HttpError as exc:
            raise ValueError(f"{branch} cannot be deleted: {exc.message}") from exc

    def commit_to(
        self,
        repo: str,
        branch: str,
        *,
        files: dict[str, str | None],
        message: str = "A change",
        author: str | None = None,
        email: str | None = None,
    ) -> str:
        """`author` (default: the owner) pushes a commit writing `files` (None: delete); returns its sha."""
        fake = self.repos[repo]
        who = author or fake.owner
        return branches.commit_to(self, fake, branch, files=files, message=message, author=who, email=email)

    def add_review_comment(
        self, repo: str, number: int, *, review_id: int, path: str, line: int | None, body: str, user: str
    ) -> m.FakeReviewComment:
        comment = m.FakeReviewComment(next(self._ids), number, review_id, path, line, body, user)
        self.repos[repo].review_comments.append(comment)
        return comment

    def comments(self, repo: str, number: int) -> list[m.FakeComment]:
        return [c for c in self.repos[repo].comments.values() if c.issue_number == number]

    # ----- plumbing -----------------------------------------------------------------------
    def _next_number(self, repo: m.FakeRepo) -> int:
        return max(repo.issues, default=0) + 1

    def _user(self, login: str) -> dict[str, Any]:
        user_id = self._user_ids.setdefault(login, 5000 + len(self._user_ids))
        return j.user_json(self.urls, login, user_id)

    def _repo_data(self, repo: m.FakeRepo) -> dict[str, Any]:
        """A repository as the REST API shows it."""
        return j.repo_json(self.urls, repo, self._user(repo.owner))

    def _app(self, slug: str | None = None) -> dict[str, Any]:
        """An App as GitHub shows it: ours (`slug` None or ours), or another with its own id."""
        if slug is None or slug == self.app_slug:
            return j.app_json(self.urls, app_id=self.app_id, slug=self.app_slug, owner=self._user("octo-org"))
        return j.app_json(self.urls, app_id=j.other_app_id(slug), slug=slug, owner=self._user("github"))

    def _app_of(self, run: m.FakeCheckRun) -> dict[str, Any]:  # ours, or another (Actions' for a workflow)
        return self._app(run.app_slug)

    def _wrap(self, handler: Handler) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            raw = await request.body()
            try:
                data = json.loads(raw) if raw else None
            except ValueError:
                data = None
            path = request.url.path
            record = RecordedRequest(
                request.method, path, dict(request.query_params), dict(request.headers), data, self.clock()
            )
            self.requests.append(record)
            response: Response
            fault = self.faults.pick(request.method, path, after=False)
            if fault is None:
                try:
                    self._authorize(request)
                    response = conditional(request, handler(request, data))
                except HttpError as exc:
                    response = JSONResponse(error_body(exc.status, exc.message, exc.errors), exc.status)
                if response.status_code < 400:  # the work is done: GitHub may still answer 502
                    fault = self.faults.pick(request.method, path, after=True)
            if fault is not None:
                response, record.fault = self.faults.response(fault), fault.when
            record.status = response.status_code
            if self.latency:
                await asyncio.sleep(self.latency)
            record.done = self.clock()
            return response

        return endpoint

    def _authorize(self, request: Request) -> None:
        scheme, _, credential = request.headers.get("authorization", "").partition(" ")
        route = request.url.path.removeprefix(httpx.URL(self.urls.api).path.rstrip("/"))
        if route == "/app" or route.startswith("/app/") or app_only_route(route):  # not `/app-manifests/…`
            if scheme.lower() != "bearer":
                raise HttpError(401, "A JSON web token could not be decoded")
            if self.app_public_key is None:
                return
            try:
                claims = jwt.decode(credential, self.app_public_key, algorithms=["RS256"])
            except jwt.PyJWTError as exc:
                raise HttpError(401, f"A JSON web token could not be decoded: {exc}") from exc
            if str(claims.get("iss")) != str(self.app_id):
                raise HttpError(401, "'Issuer' claim ('iss') must be the App's id")
        else:  # a token: known (`require_auth`), and reaching only its installation's repositories
            self.installations.authorize(request.method, route, credential)

    def _repo(self, request: Request) -> m.FakeRepo:
        full = f"{request.path_params['owner']}/{request.path_params['repo']}"
        if full not in self.repos:
            raise HttpError(404, "Not Found")
        return self.repos[full]

    def _unknown(self, request: Request, data: Any) -> Response:
        self.unexpected.append(f"{request.method} {request.url.path}")
        if self.strict:
            raise UnexpectedRequest(f"FakeGitHub does not serve {request.method} {request.url.path}")
        raise HttpError(404, "Not Found")

    def _routes(self) -> list[BaseRoute]:
        return [
            Route(path, self._wrap(handler), methods=methods)
            for path, methods, handler in [
                *route_table(self),
                *pull_routes(self),
                *merge.merge_routes(self),
                *branches.branch_routes(self),
                *review_routes(self),
                *actions_routes(self),
                *runs_routes(self),
                *gitdata_routes(self),
                *advisory_routes(self),
                *self.hooks.routes(),
                *self.apps.routes(),
            ]
        ]


_ALL_METHODS = ["GET", "POST", "PATCH", "PUT", "DELETE", "HEAD", "OPTIONS"]
