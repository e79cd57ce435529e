"""Who may register this server's App: the one-time set-up token, the manifest's `state` and the
browser it is bound to (pure, with an injected clock).

- The token is made at start-up and printed in the server's log with the set-up URL (as Jupyter
  does): only someone who can read that log can open the page. It works until the App exists.
- Each press of "Create" makes a `state` bound to the browser (a random value in an `HttpOnly`
  cookie; the server keeps only its hash). GitHub sends the state back with the code; the callback
  takes it once, within `STATE_SECONDS`, from that browser only.
- The browser that finished set-up may see the self-test at `/setup` for `OWNER_SECONDS`; to
  everyone else a configured server's `/setup` does not exist.
Every comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

COOKIE = "plan_cascade_setup"
STATE_SECONDS = 3600
OWNER_SECONDS = 24 * 3600
MAX_STATES = 100
APP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,33}$")
ORG = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")


def _hash(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def same(offered: str, expected: str) -> bool:
    return hmac.compare_digest(offered.encode(), expected.encode())


@dataclass(frozen=True)
class Started:
    """A pressed "Create": where it points and when it started."""

    browser: str
    """sha256 of the browser's cookie."""
    started: float
    public_url: str


class Refused(Exception):
    """The callback cannot be trusted; the message says why (shown on the page)."""


@dataclass
class SetupGate:
    """The token, the states under way and the browser that finished set-up."""

    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    clock: Callable[[], float] = time.time
    _states: dict[str, Started] = field(default_factory=dict)
    _owners: dict[str, float] = field(default_factory=dict)
    configured: bool = False

    def token_ok(self, offered: str | None) -> bool:
        """Whether `offered` is the set-up token (never once the App exists)."""
        return not self.configured and offered is not None and same(offered, self.token)

    @staticmethod
    def new_browser() -> str:
        """A value for a browser's cookie."""
        return secrets.token_urlsafe(32)

    def start(self, browser: str, public_url: str) -> str:
        """A fresh `state` bound to `browser` (its cookie's value)."""
        now = self.clock()
        self._states = {s: v for s, v in self._states.items() if now - v.started <= STATE_SECONDS}
        if len(self._states) >= MAX_STATES:  # an old one goes: a flood of presses cannot grow this
            self._states.pop(next(iter(self._states)))
        state = secrets.token_urlsafe(32)
        self._states[state] = Started(_hash(browser), now, public_url)
        return state

    def finish(self, state: str | None, browser: str | None) -> Started:
        """Take `state` (once) for the browser that sent the callback; Refused when it cannot be trusted."""
        if not state:
            raise Refused("the request has no state: start again from the set-up page")
        started = self._states.get(state)
        if started is None:
            raise Refused("this state is unknown or was used already: start again from the set-up page")
        if not browser or not same(_hash(browser), started.browser):  # kept: its own browser may still come
            raise Refused("this set-up was started in another browser: finish it there, or start again here")
        del self._states[state]
        if self.clock() - started.started > STATE_SECONDS:
            raise Refused("this state is more than an hour old: start again from the set-up page")
        return started

    def done(self, browser: str) -> None:
        """The App exists: the token stops working, `browser` may see the self-test."""
        self.configured = True
        self._states.clear()
        self._owners[_hash(browser)] = self.clock()

    def owner(self, browser: str | None) -> bool:
        """Whether `browser` finished set-up (within `OWNER_SECONDS`)."""
        if not browser:
            return False
        at = self._owners.get(_hash(browser))
        return at is not None and self.clock() - at <= OWNER_SECONDS


def url_problem(url: str, *, github_api_url: str) -> str | None:
    """Why GitHub could not deliver to `url` (None when it looks reachable): a loopback address
    unless GitHub runs on this machine too (as in tests), a private one when GitHub is github.com."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return "enter the full URL, e.g. https://plan-cascade.example.com"
    if parts.query or parts.fragment:
        return "the URL cannot have a query or a fragment"
    github_host = urlsplit(github_api_url).hostname or ""
    loopback = _loopback(parts.hostname) and not _loopback(github_host)
    private = _private(parts.hostname) and "github.com" in github_host  # a GHES may well reach it
    if loopback or private:
        return (
            f"{parts.hostname} is this machine: GitHub cannot reach it. Give the address GitHub "
            "reaches this server at (a public host name, or a tunnel of your choice in front of it), "
            "or use the GitHub Action instead of a server"
        )
    return None


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _loopback(host: str) -> bool:
    address = _address(host)
    if address is None:
        return host == "localhost" or host.endswith(".localhost")
    return address.is_loopback or address.is_unspecified


def _private(host: str) -> bool:
    address = _address(host)
    return address is not None and (address.is_private or address.is_link_local)


def name_problem(name: str) -> str | None:
    if not APP_NAME.match(name):
        return "the App's name: 1 to 34 letters, digits, spaces, dots, dashes or underscores"
    return None


def org_problem(org: str) -> str | None:
    if org and not ORG.match(org):
        return "the organization: its login (letters, digits and dashes)"
    return None


def cookie_header(value: str, *, secure: bool, max_age: int = OWNER_SECONDS) -> str:
    """The browser binding: `SameSite=Lax` so it comes back with GitHub's redirect (a top-level GET)."""
    parts = [f"{COOKIE}={value}", "Path=/setup", f"Max-Age={max_age}", "HttpOnly", "SameSite=Lax"]
    if secure:
        parts.append("Secure")
    return "; ".join(parts)


def app_settings_url(web: str, slug: str, owner: str, owner_type: str) -> str:
    """The App's permissions page: under the organization when an organization owns it."""
    base = web.rstrip("/")
    if owner_type == "Organization" and owner:
        return f"{base}/organizations/{owner}/settings/apps/{slug}/permissions"
    return f"{base}/settings/apps/{slug}/permissions"


def new_app_url(web: str, org: str | None, state: str) -> str:
    """Where the browser POSTs the manifest (an organization's App: under the organization)."""
    base = web.rstrip("/")
    path = f"/organizations/{org}/settings/apps/new" if org else "/settings/apps/new"
    return f"{base}{path}?state={state}"
