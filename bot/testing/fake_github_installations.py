"""The App's installations in the fake GitHub: which repositories each covers, what it may do.

GitHub's rules, enforced once any installation is declared (`FakeGitHub.install`); a fake with
none keeps serving every repository to every token, as before:
- `GET /repos/{owner}/{repo}/installation` (App JWT) names the installation that covers a
  repository, with its granted permissions; 404 where the App is not installed.
- `POST /app/installations/{id}/access_tokens`: 404 for an unknown installation; `repositories`
  narrows the token (422 for one the installation does not cover).
- `GET /installation/repositories` answers only an installation token: its installation's
  repositories (those it was narrowed to), paged, with `total_count`; anything else is 403.
- `GET /app/installations` (App JWT) lists these installations too.
- An installation token reaches only its repositories: any other answers 404 Not Found; a write
  needs the installation's `write` permission for what it writes (403 "Resource not accessible by
  integration" without it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bot.testing.fake_github_model import HttpError

if TYPE_CHECKING:
    from bot.testing.fake_github import FakeGitHub

FULL_PERMISSIONS = {
    "metadata": "read",
    "issues": "write",
    "pull_requests": "write",
    "contents": "write",
    "checks": "write",
    "actions": "read",
}
"""What Plan Cascade's App asks for (the manifest's default permissions)."""
_REPO_ROUTE = re.compile(r"^/repos/([^/]+)/([^/]+)(/.*)?$")
_WRITES = {"POST", "PATCH", "PUT", "DELETE"}


def app_only_route(route: str) -> bool:
    """Routes GitHub serves to the App's JWT only (besides `/app/...`)."""
    match = _REPO_ROUTE.match(route)
    return match is not None and match.group(3) == "/installation"


def permission_for(rest: str) -> str | None:
    """The permission a write to `/repos/{o}/{r}{rest}` needs (None: one we do not police)."""
    if rest.startswith(("/issues", "/labels")):
        return "issues"
    if rest.startswith("/pulls"):
        return "pull_requests"
    if rest.startswith(("/check-runs", "/check-suites")):
        return "checks"
    if rest.startswith(("/git/", "/contents", "/merges")):
        return "contents"
    if rest.startswith("/actions"):
        return "actions"
    return None


@dataclass
class FakeInstallation:
    """One installation of the App on an account."""

    id: int
    account: str
    repositories: set[str] = field(default_factory=set)
    permissions: dict[str, str] = field(default_factory=lambda: dict(FULL_PERMISSIONS))


@dataclass
class FakeInstallations:
    """Every installation of the App, and which repositories each token was narrowed to."""

    fake: FakeGitHub
    installs: dict[int, FakeInstallation] = field(default_factory=dict)
    narrowed: dict[str, set[str]] = field(default_factory=dict)

    def install(
        self, installation_id: int, repos: list[str], *, permissions: dict[str, str] | None = None
    ) -> FakeInstallation:
        """Install the App (or add repositories to its installation) on `repos`' account."""
        account = repos[0].split("/")[0] if repos else "octo-org"
        found = self.installs.setdefault(installation_id, FakeInstallation(installation_id, account))
        found.repositories.update(r.lower() for r in repos)
        if permissions is not None:
            found.permissions = dict(permissions)
        return found

    def covering(self, repo: str) -> FakeInstallation | None:
        return next((i for i in self.installs.values() if repo.lower() in i.repositories), None)

    def issue_token(self, token: str, installation_id: int, data: Any) -> dict[str, Any]:
        """Check a token request; the fields of the answer that depend on the installation."""
        if not self.installs:
            return {"permissions": {}, "repository_selection": "all"}
        found = self.installs.get(installation_id)
        if found is None:
            raise HttpError(404, "Not Found")
        wanted = (data or {}).get("repositories") if isinstance(data, dict) else None
        if wanted:
            names = {f"{found.account}/{name}".lower() for name in wanted}
            if not names <= found.repositories:
                raise HttpError(
                    422,
                    "There is at least one repository that does not exist or is not accessible to the "
                    "parent installation.",
                )
            self.narrowed[token] = names
        return {"permissions": dict(found.permissions), "repository_selection": "selected"}

    def authorize(self, method: str, route: str, credential: str) -> None:
        """Refuse what GitHub refuses a token: unknown (with `require_auth`: 401), or outside its
        installation (see the module's rules)."""
        if self.fake.require_auth and credential not in self.fake.valid_tokens:
            raise HttpError(401, "Bad credentials")
        installation_id = self.fake.issued_tokens.get(credential)
        if not self.installs or installation_id is None:
            return
        match = _REPO_ROUTE.match(route)
        if match is None:
            return
        repo = f"{match.group(1)}/{match.group(2)}".lower()
        found = self.installs.get(int(installation_id))
        reach = self.narrowed.get(credential, found.repositories if found else set())
        if found is None or repo not in reach:
            raise HttpError(404, "Not Found")
        needed = permission_for(match.group(3) or "") if method in _WRITES else None
        if needed is not None and found.permissions.get(needed) != "write":
            raise HttpError(403, "Resource not accessible by integration")

    def routes(self) -> list[tuple[str, list[str], Any]]:
        fake = self.fake

        def repo_installation(request: Request, data: Any) -> Response:
            repo = f"{request.path_params['owner']}/{request.path_params['repo']}"
            found = self.covering(repo) if self.installs else None
            if found is None:
                if self.installs or fake.installation_id is None or repo not in fake.repos:
                    raise HttpError(404, "Not Found")
                found = FakeInstallation(fake.installation_id, repo.split("/")[0], {repo.lower()})
            return JSONResponse(installation_json(fake, found))

        def installation_repositories(request: Request, data: Any) -> Response:
            credential = request.headers.get("authorization", "").partition(" ")[2]
            installation_id = fake.issued_tokens.get(credential)
            if installation_id is None:  # the App's JWT, a user's or a workflow's token
                raise HttpError(403, "This endpoint can only be accessed with an installation access token")
            found = self.installs.get(int(installation_id))
            if found is not None:
                reach = self.narrowed.get(credential, found.repositories)
            elif self.installs:
                reach = set()
            else:  # no installation declared: every token reaches every repository
                reach = {name.lower() for name in fake.repos}
            repos = [r for name, r in sorted(fake.repos.items()) if name.lower() in reach]
            chunk, link = fake._paginate(request, repos)
            body = {
                "total_count": len(repos),
                "repository_selection": "selected",
                "repositories": [fake._repo_data(r) for r in chunk],
            }
            return JSONResponse(body, headers=link)

        return [
            ("/repos/{owner}/{repo}/installation", ["GET"], repo_installation),
            ("/installation/repositories", ["GET"], installation_repositories),
        ]


def installation_json(fake: FakeGitHub, found: FakeInstallation) -> dict[str, Any]:
    """An installation as `GET /repos/{owner}/{repo}/installation` shows it."""
    api = fake.urls.api
    return {
        "id": found.id,
        "account": fake._user(found.account),
        "repository_selection": "selected",
        "access_tokens_url": f"{api}/app/installations/{found.id}/access_tokens",
        "repositories_url": f"{api}/installation/repositories",
        "html_url": f"{fake.urls.html}/organizations/{found.account}/settings/installations/{found.id}",
        "app_id": fake.app_id,
        "app_slug": fake.app_slug,
        "target_id": 1,
        "target_type": "Organization",
        "permissions": dict(found.permissions),
        "events": ["issues", "issue_comment", "pull_request", "check_run"],
        "created_at": "2024-01-01T00:00:00Z",
        "updated_at": "2024-01-01T00:00:00Z",
        "single_file_name": None,
        "suspended_by": None,
        "suspended_at": None,
    }


class Installed:
    """The fake GitHub's installations (a part of `FakeGitHub`)."""

    @cached_property
    def installations(self) -> FakeInstallations:
        """The App's installations: the repositories and permissions each token reaches."""
        return FakeInstallations(self)  # type: ignore[arg-type]

    def install(
        self, installation_id: int, repos: list[str], *, permissions: dict[str, str] | None = None
    ) -> FakeInstallation:
        """Install the App on `repos`: from then on each token reaches only its installation's."""
        return self.installations.install(installation_id, repos, permissions=permissions)
