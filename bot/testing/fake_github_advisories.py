"""`GET /advisories` in the fake GitHub: the global Advisory Database as GitHub serves it.

- `type` is `reviewed` (the default: malware is left out unless asked for), `malware` or
  `unreviewed`; `ecosystem` one of GitHub's; `severity` one of `unknown`, `low`, `medium`,
  `high`, `critical`; anything else is refused (422), as is `affects` naming over 1,000 packages;
- `affects` is comma-separated `name` or `name@version`: an advisory matches when one of its
  vulnerabilities is that package (in `ecosystem`, if given) and, with a version, the version is
  in its vulnerable range (compared with `packaging`, independently of the bot's own code);
- newest first, `per_page` at most 100, pages by cursor: the `Link` header's `rel="next"` URL
  carries `after` (and `before` goes back); a cursor the fake did not make is refused.

`fixture_advisories()` is the fake's database: a few advisories shaped after real ones of the
database (ids, packages, ranges), and one invented malware entry.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from packaging.version import InvalidVersion, Version
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bot.testing.fake_github_model import HttpError

if TYPE_CHECKING:
    from bot.testing.fake_github import FakeGitHub

ECOSYSTEMS = {"rubygems", "npm", "pip", "maven", "nuget", "composer", "go", "rust", "erlang", "actions"}
ECOSYSTEMS |= {"pub", "other", "swift"}
TYPES = {"reviewed", "malware", "unreviewed"}
SEVERITIES = {"unknown", "low", "medium", "high", "critical"}
MAX_AFFECTS = 1000


def advisory(
    ghsa_id: str,
    *,
    summary: str,
    severity: str,
    packages: list[tuple[str, str, str, str | None]],
    cve_id: str | None = None,
    type: str = "reviewed",
    published: str = "2021-01-01T00:00:00Z",
) -> dict[str, Any]:
    """An advisory as `GET /advisories` shows it; `packages` are (ecosystem, name, range, fixed)."""
    return {
        "ghsa_id": ghsa_id,
        "cve_id": cve_id,
        "url": f"https://api.github.com/advisories/{ghsa_id}",
        "html_url": f"https://github.com/advisories/{ghsa_id}",
        "repository_advisory_url": None,
        "summary": summary,
        "description": summary,
        "type": type,
        "severity": severity,
        "source_code_location": None,
        "identifiers": [{"type": "GHSA", "value": ghsa_id}]
        + ([{"type": "CVE", "value": cve_id}] if cve_id else []),
        "references": [],
        "published_at": published,
        "updated_at": published,
        "github_reviewed_at": published if type == "reviewed" else None,
        "nvd_published_at": None,
        "withdrawn_at": None,
        "vulnerabilities": [
            {
                "package": {"ecosystem": eco, "name": name},
                "vulnerable_version_range": vulnerable,
                "first_patched_version": fixed,
                "vulnerable_functions": [],
            }
            for eco, name, vulnerable, fixed in packages
        ],
        "cvss": None,
        "cwes": [],
        "credits": [],
    }


def fixture_advisories() -> list[dict[str, Any]]:
    """The fake's Advisory Database."""
    return [
        advisory(
            "GHSA-x84v-xcm2-53pg",
            cve_id="CVE-2018-18074",
            summary="Insufficiently Protected Credentials in Requests",
            severity="high",
            packages=[("pip", "requests", "<= 2.19.1", "2.20.0")],
            published="2018-10-29T19:06:30Z",
        ),
        advisory(
            "GHSA-8q59-q68h-6hv4",
            cve_id="CVE-2020-14343",
            summary="Improper Input Validation in PyYAML",
            severity="critical",
            packages=[("pip", "pyyaml", "< 5.4", "5.4")],
            published="2021-03-25T21:26:30Z",
        ),
        advisory(
            "GHSA-jf85-cpcp-j695",
            cve_id="CVE-2019-10744",
            summary="Prototype Pollution in lodash",
            severity="critical",
            packages=[("npm", "lodash", "< 4.17.12", "4.17.12")],
            published="2019-07-10T19:45:23Z",
        ),
        advisory(
            "GHSA-p6mc-m468-83gw",
            cve_id="CVE-2020-8203",
            summary="Prototype Pollution in lodash",
            severity="high",
            packages=[("npm", "lodash", ">= 3.7.0, < 4.17.19", "4.17.19")],
            published="2020-07-15T19:15:48Z",
        ),
        advisory(
            "GHSA-29mw-wpgm-hmr9",
            cve_id="CVE-2020-28500",
            summary="Regular Expression Denial of Service (ReDoS) in lodash",
            severity="medium",
            packages=[("npm", "lodash", "< 4.17.21", "4.17.21")],
            published="2022-01-06T20:30:46Z",
        ),
        advisory(
            "GHSA-c9xq-mvwr-9qq2",
            summary="Malware in crossenv (an invented fixture of the fake)",
            severity="critical",
            type="malware",
            packages=[("npm", "crossenv", ">= 0", None)],
            published="2022-05-24T17:11:11Z",
        ),
    ]


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _in(version: str, vulnerable: str) -> bool:
    have = _version(version)
    if have is None:
        return False
    for part in vulnerable.split(","):
        part = part.strip()
        op = next((o for o in (">=", "<=", ">", "<", "=") if part.startswith(o)), "=")
        bound = _version(part[len(op) :].strip())
        if bound is None:
            return False
        holds = {">=": have >= bound, "<=": have <= bound, ">": have > bound, "<": have < bound}.get(
            op, have == bound
        )
        if not holds:
            return False
    return True


def _affects(item: dict[str, Any], wanted: list[str], ecosystem: str | None) -> bool:
    for entry in wanted:
        at = entry.find("@", 1)
        name, version = (entry[:at], entry[at + 1 :]) if at > 0 else (entry, None)
        for vuln in item["vulnerabilities"]:
            package = vuln["package"]
            if ecosystem and package["ecosystem"] != ecosystem:
                continue
            if package["name"].lower() != name.lower():
                continue
            if version is None or _in(version, vuln["vulnerable_version_range"] or ""):
                return True
    return False


def _ecosystems(item: dict[str, Any]) -> set[str]:
    return {v["package"]["ecosystem"] for v in item["vulnerabilities"]}


def _cursor(index: int) -> str:
    return base64.urlsafe_b64encode(f"fake-cursor:{index}".encode()).decode()


def _index(cursor: str) -> int:
    try:
        kind, _, number = base64.urlsafe_b64decode(cursor.encode()).decode().partition(":")
        if kind == "fake-cursor":
            return int(number)
    except ValueError:
        pass
    raise HttpError(422, "Validation Failed", [f"cursor {cursor!r} is not valid"])


def _choice(query: Any, key: str, allowed: set[str], default: str | None = None) -> str | None:
    value = query.get(key, default)
    if value is not None and value not in allowed:
        raise HttpError(422, "Validation Failed", [f"{value!r} is not a valid value for {key}"])
    return value  # type: ignore[no-any-return]


def advisory_routes(fake: FakeGitHub) -> list[tuple[str, list[str], Callable[[Request, Any], Response]]]:
    """GET `/advisories`."""

    def list_advisories(request: Request, data: Any) -> Response:
        query = request.query_params
        kind = _choice(query, "type", TYPES, "reviewed")
        ecosystem = _choice(query, "ecosystem", ECOSYSTEMS)
        severity = _choice(query, "severity", SEVERITIES)
        affects = [a.strip() for a in query.get("affects", "").split(",") if a.strip()]
        affects += [a for a in query.getlist("affects[]") if a.strip()]
        if len(affects) > MAX_AFFECTS:
            raise HttpError(422, "Validation Failed", [f"affects may name at most {MAX_AFFECTS} packages"])
        try:
            per_page = min(int(query.get("per_page", 30)), 100)
        except ValueError:
            raise HttpError(422, "Validation Failed", ["per_page must be an integer"]) from None
        items = [
            item
            for item in sorted(fake.advisories, key=lambda a: a["published_at"], reverse=True)
            if item["type"] == kind
            and (severity is None or item["severity"] == severity)
            and (ecosystem is None or ecosystem in _ecosystems(item))
            and (not affects or _affects(item, affects, ecosystem))
        ]
        start = _index(query["after"]) if "after" in query else 0
        if "before" in query:
            start = max(0, _index(query["before"]) - per_page)
        page = items[start : start + per_page]
        headers = {}
        if start + per_page < len(items):
            rest = {k: v for k, v in query.items() if k not in ("after", "before")}
            url = request.url.replace(query=urlencode({**rest, "after": _cursor(start + per_page)}))
            headers["link"] = f'<{url}>; rel="next"'
        return JSONResponse(page, headers=headers)

    return [("/advisories", ["GET"], list_advisories)]
