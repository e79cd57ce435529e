"""Where a GitHub lives, said from its own URLs: github.com or a GitHub Enterprise Server.

github.com serves REST at `https://api.github.com`, GraphQL at `https://api.github.com/graphql`
and its pages at `https://github.com`. A GitHub Enterprise Server (GHES) serves all three on one
host: REST under `https://HOST/api/v3`, GraphQL at `https://HOST/api/graphql`, pages at
`https://HOST`. Nothing here names github.com unless the URL it is given does: every link the
bot writes comes from an API answer (`html_url`) or from the web root these functions derive.
Pure functions, no I/O.
"""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit

PUBLIC_API = "https://api.github.com"


def web_url(api_url: str) -> str:
    """The web root behind an API root: `https://api.github.com` → `https://github.com`,
    `https://HOST/api/v3` → `https://HOST`."""
    parts = urlsplit(api_url.rstrip("/"))
    host, path = parts.netloc, parts.path
    if host.startswith("api.") and path in ("", "/"):
        host = host[4:]
    for suffix in ("/api/v3", "/api"):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    return f"{parts.scheme}://{host}{path}"


def graphql_url(api_url: str) -> str:
    """Where GraphQL answers for this REST root (what githubkit sends GraphQL to, too):
    `https://HOST/api/v3` → `https://HOST/api/graphql`, otherwise `<root>/graphql`."""
    root = api_url.rstrip("/")
    replaced, count = re.subn(r"/api/v3$", "/api/graphql", root)
    return replaced if count else f"{root}/graphql"


def is_enterprise_server(api_url: str) -> bool:
    """Whether the REST root is a GitHub Enterprise Server's (`…/api/v3`)."""
    return urlsplit(api_url.rstrip("/")).path.endswith("/api/v3")


def api_url_problem(api_url: str) -> str | None:
    """What is wrong with a REST root's shape, or None: a GHES host must be given with `/api/v3`."""
    parts = urlsplit(api_url.rstrip("/"))
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return f"{api_url!r} is not an http(s) URL"
    if parts.netloc == "github.com":
        return f"{api_url} is github.com's web address: its API is {PUBLIC_API}"
    if parts.netloc.startswith("api.") or parts.path.endswith("/api/v3"):
        return None
    if parts.path in ("", "/"):
        root = api_url.rstrip("/")
        return f"{root} looks like a GitHub Enterprise Server host: its REST API is {root}/api/v3"
    return None


def noreply_domain(web: str) -> str:
    """The domain of the server's noreply commit addresses: `users.noreply.<web host>`
    (`users.noreply.github.com` on github.com; on GHES the server's host name)."""
    host = urlsplit(web).hostname or "github.com"
    return f"users.noreply.{host}"


def noreply_email(user_id: int, login: str, web: str) -> str:
    """The address GitHub links commits to the account `login` (id `user_id`) by:
    `<id>+<login>@users.noreply.<host>` (a bot's login ends in `[bot]`)."""
    return f"{user_id}+{login}@{noreply_domain(web)}"


def app_page(web: str, slug: str) -> str:
    """An App's public page on the server (`GET /app`'s `html_url` when it is known says the same)."""
    return f"{web.rstrip('/')}/apps/{quote(slug, safe='')}"


def co_author(name: str, email: str) -> str:
    """A `Co-authored-by:` trailer's value (name and address without line breaks or brackets)."""
    address = re.sub(r"[\r\n<> ]", "", email)
    clean = " ".join(re.sub(r"[<>]", "", name).split()) or address
    return f"{clean} <{address}>"
