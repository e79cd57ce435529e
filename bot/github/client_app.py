"""The port's calls made as the App itself (JWT): its webhook's deliveries and its installations (a
part of `GitHubKitPort`), and the one made as an installation about itself (its repositories); and
the one call made as nobody, turning a manifest's code into an App.

A port over an installation or a token cannot make them: GitHub answers 401.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from githubkit import GitHub
from githubkit.auth import UnauthAuthStrategy

from bot.errors import NotFound
from bot.github.client_base import drop_none, github_errors, json_list, json_object, split_repo
from bot.github.models import AppInstallation, HookDelivery, ManifestApp
from bot.redaction import register_secret


def next_cursor(link: str) -> str | None:
    """The `cursor` of the `rel="next"` URL of a Link header, if any."""
    for part in link.split(","):
        url, _, rel = part.partition(";")
        if 'rel="next"' in rel:
            cursors = parse_qs(urlsplit(url.strip().strip("<>")).query).get("cursor")
            return cursors[0] if cursors else None
    return None


@dataclass(frozen=True)
class RepoInstallation:
    """The App's installation that covers a repository, and what it was granted."""

    id: int
    permissions: dict[str, str] = field(default_factory=dict)


class AppCalls:
    """The App's webhook deliveries, over a githubkit client authenticated as the App."""

    _github: GitHub[Any]
    _headers: dict[str, str]

    async def list_hook_deliveries(
        self, *, per_page: int = 100, cursor: str | None = None
    ) -> tuple[list[HookDelivery], str | None]:
        """One page of the App's deliveries, newest first, and the cursor of the next page."""
        with github_errors("list the App's webhook deliveries"):
            resp = await self._github.rest.apps.async_list_webhook_deliveries(
                headers=self._headers, **drop_none(per_page=per_page, cursor=cursor)
            )
        items = [HookDelivery.from_api(item) for item in json_list(resp)]
        return items, next_cursor(resp.headers.get("link", ""))

    async def redeliver(self, delivery_id: int) -> None:
        """Ask GitHub to send a delivery again (it keeps its GUID)."""
        with github_errors(f"ask for webhook delivery {delivery_id} again"):
            await self._github.rest.apps.async_redeliver_webhook_delivery(delivery_id, headers=self._headers)

    async def list_installations(self, *, limit: int = 100) -> list[AppInstallation]:
        """The App's installations (at most `limit`), with what each owner granted."""
        with github_errors("list the App's installations"):
            resp = await self._github.rest.apps.async_list_installations(
                headers=self._headers, per_page=min(limit, 100)
            )
        return [AppInstallation.from_api(item) for item in json_list(resp)[:limit]]

    async def list_installation_repositories(
        self, *, page: int = 1, per_page: int = 100
    ) -> tuple[list[str], bool]:
        """One page of the repositories this port's installation reaches (`GET /installation/repositories`,
        made with the installation's token, not the App's JWT), by full name, and whether more follow."""
        with github_errors("list the installation's repositories"):
            resp = await self._github.rest.apps.async_list_repos_accessible_to_installation(
                headers=self._headers, page=page, per_page=per_page
            )
        data = json_object(resp)
        found = [r.get("full_name") for r in data.get("repositories") or [] if isinstance(r, dict)]
        names = [name for name in found if isinstance(name, str)]
        total = data.get("total_count")
        more = isinstance(total, int) and page * per_page < total and bool(names)
        return names, more

    async def get_app_owner(self) -> tuple[str, str]:
        """Who owns the App: (login, `User` or `Organization`)."""
        with github_errors("read the GitHub App"):
            resp = await self._github.rest.apps.async_get_authenticated(headers=self._headers)
        owner = json_object(resp).get("owner") or {}
        return str(owner.get("login") or ""), str(owner.get("type") or "User")

    async def get_repo_installation(self, repo: str) -> RepoInstallation | None:
        """The App's installation on `repo` (`GET /repos/{owner}/{repo}/installation`); None where
        the App is not installed (GitHub answers 404)."""
        owner, name = split_repo(repo)
        try:
            with github_errors(f"find the App's installation on {repo}"):
                resp = await self._github.rest.apps.async_get_repo_installation(
                    owner, name, headers=self._headers
                )
        except NotFound:
            return None
        data = json_object(resp)
        permissions = data.get("permissions") or {}
        granted = {str(k): str(v) for k, v in permissions.items() if isinstance(v, str)}
        return RepoInstallation(id=int(data["id"]), permissions=granted)


async def convert_manifest(
    code: str, *, base_url: str, transport: httpx.AsyncBaseTransport | None = None
) -> ManifestApp:
    """`POST /app-manifests/{code}/conversions` (no token): the App GitHub made from a manifest,
    with its key and webhook secret (registered for redaction before anything else sees them).
    The code works once, within an hour; anything else is a GitHubError (404 for a used one)."""
    github: GitHub[Any] = GitHub(
        UnauthAuthStrategy(),
        base_url=base_url.strip().rstrip("/"),
        async_transport=transport,
        auto_retry=False,
        http_cache=False,
        timeout=30.0,
        user_agent="plan-cascade",
    )
    with github_errors("turn the manifest's code into an App"):
        resp = await github.rest.apps.async_create_from_manifest(code)
    app = ManifestApp.from_api(json_object(resp))
    register_secret(app.pem)
    register_secret(app.webhook_secret)
    return app
