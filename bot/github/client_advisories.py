"""The port's read of the GitHub Advisory Database (a part of `GitHubKitPort`).

`GET /advisories` pages with cursors (`after`, from the `Link` header), not page numbers,
so githubkit's paginator cannot walk it; this does, for at most `MAX_PAGES` pages of 100.
It needs no permission: an installation token, or a GitHub Enterprise Server with GitHub
Connect, reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs, urlsplit

from githubkit import GitHub

from bot.github.client_base import github_errors, json_list
from bot.github.models_advisories import Advisory

MAX_PAGES = 10
"""Pages of 100 advisories read per query at most (packages are asked for 100 at a time)."""


def next_after(link: str) -> str | None:
    """The `after` cursor of the `rel="next"` URL of a Link header, if any."""
    for part in link.split(","):
        url, _, rel = part.partition(";")
        if 'rel="next"' in rel:
            cursors = parse_qs(urlsplit(url.strip().strip("<>")).query).get("after")
            return cursors[0] if cursors else None
    return None


class AdvisoryCalls:
    """Global security advisories, over the port's githubkit client."""

    _github: GitHub[Any]
    _headers: dict[str, str]

    async def list_global_advisories(
        self, *, ecosystem: str, affects: Sequence[str], type: str = "reviewed"
    ) -> list[Advisory]:
        """Advisories of `type` that affect any of `affects` (`name` or `name@version`) in `ecosystem`."""
        found: list[Advisory] = []
        query: dict[str, Any] = {
            "ecosystem": ecosystem,
            "affects": ",".join(affects),
            "type": type,
            "per_page": 100,
        }
        for _ in range(MAX_PAGES):
            with github_errors(f"list {type} advisories of {len(affects)} {ecosystem} package(s)"):
                resp = await self._github.rest.security_advisories.async_list_global_advisories(
                    headers=self._headers, **query
                )
            found += [Advisory.from_api(item) for item in json_list(resp)]
            after = next_after(resp.headers.get("link", ""))
            if after is None:
                break
            query["after"] = after
        return found
