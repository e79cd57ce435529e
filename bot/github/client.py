"""`GitHubKitPort`: the GitHub port over githubkit's async REST calls.

Responses are read as plain JSON into our lenient models (githubkit's strict models
reject some real payloads). githubkit's exceptions are caught here and only here, and
come out as :class:`bot.errors.GitHubError` / :class:`bot.errors.NotFound`.
Content-creating calls (POST/PATCH/PUT/DELETE) wait on the installation's write queue (its
throttle): comments first (people wait for them), 👀 next (`acknowledge`, sent from a task of its
own and dropped when the answer goes first), edits nobody awaits last (`update_issue_comment_later`).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, cast

from githubkit import GitHub
from githubkit.auth import AppInstallationAuthStrategy, TokenAuthStrategy
from githubkit.exception import GitHubException

from bot.errors import GitHubError, NotFound, PlanCascadeError
from bot.github.client_actions import ActionsCalls
from bot.github.client_advisories import AdvisoryCalls
from bot.github.client_app import AppCalls
from bot.github.client_base import drop_none, github_errors, json_list, json_object, split_repo, translate
from bot.github.client_git import GitDataCalls
from bot.github.client_pulls import PullsAndChecks
from bot.github.client_writes import QueuedWrites, issue_key
from bot.github.idempotent import RETRY_DELAYS, create_once, matching_comment, matching_issue, since
from bot.github.identity import Identity, IdentitySource
from bot.github.models import (
    Comment,
    Issue,
    Reaction,
    ReactionsPage,
    Repository,
)
from bot.github.pause import RateLimitGate
from bot.github.port import PERMISSIONS, Permission
from bot.github.throttle import Priority, Throttle
from bot.redaction import redact, register_secret

if TYPE_CHECKING:
    from bot.metrics import Metrics

__all__ = ["API_VERSION", "GitHubKitPort", "split_repo", "translate"]

API_VERSION = "2022-11-28"
"""REST API version we send: served by github.com and by GitHub Enterprise Server."""

log = logging.getLogger(__name__)
TOKEN_REUSE_MARGIN = timedelta(minutes=30)
"""A cached installation token is handed to git only while it has this long left."""


EDITS_QUERY = """
query($id: ID!) {
  node(id: $id) {
    ... on IssueComment {
      editor { login }
      lastEditedAt
      userContentEdits(first: 100) { totalCount nodes { editor { login } editedAt } }
    }
  }
}
"""


class GitHubKitPort(QueuedWrites, PullsAndChecks, ActionsCalls, AppCalls, AdvisoryCalls, GitDataCalls):
    """The GitHub port over one authenticated `githubkit.GitHub` (one installation or token)."""

    def __init__(
        self,
        github: GitHub[Any],
        *,
        throttle: Throttle | None = None,
        api_version: str = API_VERSION,
        metrics: Metrics | None = None,
        create_delays: Sequence[float] = RETRY_DELAYS,
        identity: IdentitySource | None = None,
        gate: RateLimitGate | None = None,
    ) -> None:
        self._github = github
        self._throttle = throttle
        self._gate = gate
        self._metrics = metrics
        self._create_delays = create_delays
        self._identity = identity
        self._headers = {"X-GitHub-Api-Version": api_version}
        self._app_slug: str | None = None
        self._app_page: str | None = None
        self._token: tuple[str, datetime] | None = None

    @property
    def github(self) -> GitHub[Any]:
        """The underlying githubkit client (for this package's factories and tests)."""
        return self._github

    async def _own(self) -> Identity | None:
        """Who this port writes as (what a create may adopt after a 5xx); None: nothing is adopted."""
        if self._identity is None:
            log.warning("this GitHub client does not know its App: nothing it made can be adopted")
            return None
        try:
            return await self._identity()
        except PlanCascadeError as exc:
            log.warning("the App's identity is unknown (%s): nothing it made can be adopted", exc.message)
            return None

    async def _all(self, request: Any, map_func: Any = json_list, **kwargs: Any) -> list[dict[str, Any]]:
        paginator = self._github.rest.paginate(
            request, map_func, per_page=100, headers=self._headers, **kwargs
        )
        return [item async for item in paginator]

    async def get_repository(self, repo: str) -> Repository:
        owner, name = split_repo(repo)
        with github_errors(f"read repository {repo}"):
            resp = await self._github.rest.repos.async_get(owner, name, headers=self._headers)
        return Repository.from_api(json_object(resp))

    async def get_issue(self, repo: str, number: int) -> Issue:
        owner, name = split_repo(repo)
        with github_errors(f"read issue {repo}#{number}"):
            resp = await self._github.rest.issues.async_get(owner, name, number, headers=self._headers)
        return Issue.from_api(json_object(resp))

    async def list_issues(self, repo: str, *, labels: Sequence[str] = (), state: str = "open") -> list[Issue]:
        owner, name = split_repo(repo)
        filters = drop_none(labels=",".join(labels) or None, state=state)
        with github_errors(f"list issues of {repo}"):
            items = await self._all(
                self._github.rest.issues.async_list_for_repo, owner=owner, repo=name, **filters
            )
        return [Issue.from_api(item) for item in items]

    async def create_issue(self, repo: str, *, title: str, body: str, labels: Sequence[str] = ()) -> Issue:
        owner, name = split_repo(repo)
        title, body = redact(title), redact(body)

        async def send() -> Issue:
            await self._pace()
            with github_errors(f"open an issue in {repo}"):
                resp = await self._github.rest.issues.async_create(
                    owner, name, title=title, body=body, labels=list(labels), headers=self._headers
                )
            return Issue.from_api(json_object(resp))

        async def find() -> Issue | None:
            own = await self._own()
            if own is None:
                return None
            return matching_issue(await self.list_issues(repo), title=title, body=body, own=own)

        doing = f"open an issue in {repo}"
        return await create_once(
            send, find, kind="issue", doing=doing, metrics=self._metrics, delays=self._create_delays
        )

    async def close_issue(
        self, repo: str, number: int, *, reason: Literal["completed", "not_planned"] = "not_planned"
    ) -> None:
        owner, name = split_repo(repo)
        await self._pace()
        with github_errors(f"close {repo}#{number}"):
            await self._github.rest.issues.async_update(
                owner,
                name,
                number,
                state="closed",
                state_reason=reason,
                headers=self._headers,  # type: ignore[arg-type]
            )

    async def add_labels(self, repo: str, number: int, labels: Sequence[str]) -> None:
        owner, name = split_repo(repo)
        await self._pace()
        with github_errors(f"label {repo}#{number}"):
            await self._github.rest.issues.async_add_labels(
                owner, name, number, labels=list(labels), headers=self._headers
            )

    async def list_issue_comments(self, repo: str, number: int) -> list[Comment]:
        owner, name = split_repo(repo)
        with github_errors(f"list comments of {repo}#{number}"):
            items = await self._all(
                self._github.rest.issues.async_list_comments, owner=owner, repo=name, issue_number=number
            )
        return [Comment.from_api(item) for item in items]

    async def get_issue_comment(self, repo: str, comment_id: int) -> Comment:
        owner, name = split_repo(repo)
        with github_errors(f"read comment {comment_id} in {repo}"):
            resp = await self._github.rest.issues.async_get_comment(
                owner, name, comment_id, headers=self._headers
            )
        return Comment.from_api(json_object(resp))

    async def create_issue_comment(self, repo: str, number: int, *, body: str) -> Comment:
        owner, name = split_repo(repo)
        body, after = redact(body), since()

        async def send() -> Comment:
            await self._pace(priority=Priority.ANSWER, answers=issue_key(repo, number))
            with github_errors(f"comment on {repo}#{number}"):
                resp = await self._github.rest.issues.async_create_comment(
                    owner, name, number, body=body, headers=self._headers
                )
            return Comment.from_api(json_object(resp))

        async def find() -> Comment | None:
            own = await self._own()
            if own is None:
                return None
            comments = await self.list_issue_comments(repo, number)
            return matching_comment(comments, body=body, after=after, own=own)

        doing = f"comment on {repo}#{number}"
        return await create_once(
            send, find, kind="comment", doing=doing, metrics=self._metrics, delays=self._create_delays
        )

    async def list_comment_reactions(
        self, repo: str, comment_id: int, *, etag: str | None = None
    ) -> ReactionsPage:
        """All reactions on a comment; `reactions` is None when unchanged since `etag` (304)."""
        owner, name = split_repo(repo)
        list_reactions = self._github.rest.reactions.async_list_for_issue_comment
        headers = {**self._headers, **({"If-None-Match": etag} if etag else {})}
        with github_errors(f"read reactions on comment {comment_id} in {repo}"):
            first = await list_reactions(owner, name, comment_id, per_page=100, headers=headers)
            if first.status_code == 304:
                return ReactionsPage(reactions=None, etag=first.headers.get("etag", etag))
            items = json_list(first)
            if 'rel="next"' in first.headers.get("link", ""):
                items = await self._all(list_reactions, owner=owner, repo=name, comment_id=comment_id)
        reactions = [Reaction.from_api(item) for item in items]
        return ReactionsPage(reactions=reactions, etag=first.headers.get("etag"))

    async def get_permission(self, repo: str, username: str) -> Permission:
        """The user's role: `role_name` when it is a standard role, else the base `permission`."""
        owner, name = split_repo(repo)
        try:
            with github_errors(f"read {username}'s permission on {repo}"):
                resp = await self._github.rest.repos.async_get_collaborator_permission_level(
                    owner, name, username, headers=self._headers
                )
        except NotFound:
            return "none"
        data: Any = resp.json()
        for candidate in (data.get("role_name"), data.get("permission")):
            role = str(candidate or "").lower()
            if role in PERMISSIONS:
                return cast(Permission, role)
        return "none"

    async def get_file_text(self, repo: str, path: str, *, ref: str | None = None) -> str | None:
        """The file's text, or None when there is no file at `path` (or it is a directory)."""
        owner, name = split_repo(repo)
        extra = drop_none(ref=ref)
        try:
            with github_errors(f"read {path} in {repo}"):
                resp = await self._github.rest.repos.async_get_content(
                    owner, name, path, headers=self._headers, **extra
                )
        except NotFound:
            return None
        data: Any = resp.json()
        if not isinstance(data, dict) or data.get("type") != "file":
            return None
        if data.get("encoding") != "base64":
            raise GitHubError(f"{path} in {repo} is too large to read through the contents API")
        return base64.b64decode(data.get("content") or "").decode("utf-8", errors="replace")

    async def list_tree(self, repo: str, ref: str) -> list[str]:
        """Paths of the files at `ref` (recursive; GitHub caps very large trees)."""
        owner, name = split_repo(repo)
        with github_errors(f"list the files of {repo} at {ref}"):
            resp = await self._github.rest.git.async_get_tree(
                owner, name, ref, recursive="1", headers=self._headers
            )
        data: Any = resp.json()
        items = data.get("tree") if isinstance(data, dict) else None
        return [
            i["path"]
            for i in items or []
            if isinstance(i, dict) and i.get("type") == "blob" and i.get("path")
        ]

    async def comment_editors(self, comment: Comment) -> list[str] | None:
        """Logins of everyone who edited `comment` (GraphQL `userContentEdits`); None when unknown.

        Used to trust a plan comment without a state key: it is believed only if the bot
        alone ever edited it. Any failure answers None, which the caller treats as "altered".
        """
        if not comment.node_id:
            return None
        try:
            data = await self._github.async_graphql(EDITS_QUERY, {"id": comment.node_id})
        except GitHubException as exc:
            log.warning("could not read the edit history of comment %s: %r", comment.id, exc)
            return None
        node = (data or {}).get("node") or {}
        edits = node.get("userContentEdits") or {}
        nodes = edits.get("nodes") or []
        if int(edits.get("totalCount") or 0) > len(nodes):
            return None  # more edits than one page shows: not worth trusting
        logins = [str(((n or {}).get("editor") or {}).get("login") or "") for n in nodes]
        if node.get("editor"):
            logins.append(str(node["editor"].get("login") or ""))
        return logins

    async def get_app_slug(self) -> str | None:
        """The App's slug (its bot is `<slug>[bot]`); None when not authenticated as an App."""
        if self._app_slug is None:
            try:
                with github_errors("read the GitHub App"):
                    resp = await self._github.rest.apps.async_get_authenticated(headers=self._headers)
            except GitHubError as exc:
                if exc.status in (401, 403, 404):
                    return None
                raise
            data: Any = resp.json()
            if isinstance(data, dict):
                self._app_slug = data.get("slug") or None
                self._app_page = data.get("html_url") or None
        return self._app_slug

    async def get_app_page(self) -> str | None:
        """The App's own page as GitHub names it (`GET /app` → `html_url`: on an Enterprise Server
        under its host); None when not authenticated as an App."""
        if self._app_slug is None:
            await self.get_app_slug()
        return self._app_page

    async def git_token(self) -> str | None:
        """A token for git over https (user `x-access-token`); None when auth has no token."""
        auth = self._github.auth
        if isinstance(auth, TokenAuthStrategy):
            return auth.token
        if not isinstance(auth, AppInstallationAuthStrategy):
            return None
        now = datetime.now(UTC)
        if self._token is not None and self._token[1] - now > TOKEN_REUSE_MARGIN:
            return self._token[0]
        app = self._github.with_auth(auth.as_app())
        with github_errors(f"create a token for installation {auth.installation_id}"):
            resp = await app.rest.apps.async_create_installation_access_token(
                auth.installation_id, headers=self._headers
            )
        data: Any = resp.json()
        expires = datetime.fromisoformat(str(data["expires_at"]).replace("Z", "+00:00"))
        self._token = (str(data["token"]), expires)
        register_secret(self._token[0])
        return self._token[0]
