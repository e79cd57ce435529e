"""Building authenticated GitHub ports: as an App installation, or from a plain token.

Two githubkit defaults are unsafe for us and are overridden here:

* githubkit's default cache strategy is one process-wide object, so installation tokens
  and JWTs would be shared by every `GitHub` built in the process (tests included).
  Each factory call gets its own `MemCacheStrategy` unless one is passed.
* githubkit HTTP-caches GETs (hishel). We make our own conditional requests where they
  matter (reaction polling), so `http_cache` defaults to False.

githubkit's retry on rate limits is kept, but a retry never sleeps longer than
`max_retry_wait` seconds: a longer wait raises `GitHubError`, and the job queue retries later.
A 5xx is retried by githubkit only for requests that are safe to send twice: a creating POST
answered 5xx may have been done, and :mod:`bot.github.idempotent` looks before sending again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, TypeVar

import httpx
from githubkit import GitHub
from githubkit.auth import AppAuthStrategy, AppInstallationAuthStrategy, TokenAuthStrategy
from githubkit.cache import BaseCacheStrategy, MemCacheStrategy
from githubkit.exception import GitHubException, RateLimitExceeded, RequestFailed
from githubkit.retry import RetryServerError
from githubkit.typing import RetryDecisionFunc, RetryOption

from bot.github.client import GitHubKitPort
from bot.github.idempotent import RETRY_DELAYS, replays_safely
from bot.github.identity import IdentitySource
from bot.github.pause import GateRegistry, PausingTransport, RateLimitGate
from bot.github.throttle import PATIENCE, Throttle, ThrottleRegistry
from bot.github.transport import SharedTransport

if TYPE_CHECKING:
    from bot.metrics import Metrics

AS = TypeVar("AS", bound=AppInstallationAuthStrategy)
DEFAULT_API_URL = "https://api.github.com"
USER_AGENT = "plan-cascade"


def normalize_api_url(url: str | None) -> str:
    """The REST base URL, verbatim but without a trailing slash (GHES needs `https://HOST/api/v3`)."""
    return (url or DEFAULT_API_URL).strip().rstrip("/")


class BoundedRetry:
    """githubkit retry policy: rate limits once, 5xx up to 3 times (requests safe to send twice
    only), never sleeping past a bound."""

    def __init__(
        self,
        *,
        max_wait: float = 60.0,
        rate_limit_retries: int = 1,
        server_retries: int = 3,
        metrics: Metrics | None = None,
    ) -> None:
        self.max_wait = timedelta(seconds=max_wait)
        self.rate_limit_retries = rate_limit_retries
        self._server = RetryServerError(server_retries)
        self._metrics = metrics

    def __call__(self, exc: GitHubException, retry_count: int) -> RetryOption:
        if isinstance(exc, RateLimitExceeded):
            patience = PATIENCE.get()
            bound = self.max_wait if patience is None else min(self.max_wait, timedelta(seconds=patience))
            if retry_count < self.rate_limit_retries and exc.retry_after <= bound:
                return RetryOption(True, _sleepable(exc.retry_after))
            return RetryOption(False)
        if isinstance(exc, RequestFailed) and not replays_safely(exc.request.method, exc.request.url.path):
            return RetryOption(False)
        option = self._server(exc, retry_count)
        if option.do_retry:
            if self._metrics is not None:
                self._metrics.github_server_retries.labels("request").inc()
            return RetryOption(True, _sleepable(min(option.retry_after or self.max_wait, self.max_wait)))
        return option


def _sleepable(wait: timedelta) -> timedelta:
    # githubkit sleeps 60 s when handed a zero timedelta (it is falsy): never hand it one.
    return max(wait, timedelta(milliseconds=1))


def _github(
    auth: AppAuthStrategy | TokenAuthStrategy,
    *,
    base_url: str | None,
    transport: httpx.AsyncBaseTransport | None,
    cache_strategy: BaseCacheStrategy | None,
    http_cache: bool,
    auto_retry: bool | RetryDecisionFunc,
) -> GitHub[AppAuthStrategy] | GitHub[TokenAuthStrategy]:
    return GitHub(
        auth,
        base_url=normalize_api_url(base_url),
        user_agent=USER_AGENT,
        async_transport=transport,
        cache_strategy=cache_strategy or MemCacheStrategy(),
        http_cache=http_cache,
        auto_retry=auto_retry,
        timeout=30.0,
    )


def make_app_github(
    *,
    app_id: int | str,
    private_key: str,
    base_url: str | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    cache_strategy: BaseCacheStrategy | None = None,
    http_cache: bool = False,
    auto_retry: bool | RetryDecisionFunc | None = None,
    metrics: Metrics | None = None,
) -> GitHub[AppAuthStrategy]:
    """A githubkit client authenticated as the App (JWT); derive installations from it."""
    github = _github(
        AppAuthStrategy(app_id, private_key),
        base_url=base_url,
        transport=transport,
        cache_strategy=cache_strategy,
        http_cache=http_cache,
        auto_retry=BoundedRetry(metrics=metrics) if auto_retry is None else auto_retry,
    )
    return github  # type: ignore[return-value]


def installation_port(
    app_github: GitHub[AppAuthStrategy],
    installation_id: int,
    *,
    throttle_registry: ThrottleRegistry | None = None,
    gates: GateRegistry | None = None,
    metrics: Metrics | None = None,
    identity: IdentitySource | None = None,
) -> GitHubKitPort:
    """The port acting as one installation; shares the App's token cache and config, and the
    installation's rate-limit gate (from `gates`) with every other port of that installation.
    `identity`: this App's id and bot (what a create may adopt after a 5xx)."""
    gates = gates or GateRegistry()
    gate = gates.get(installation_id)
    installation: GitHub[AppInstallationAuthStrategy] = paused(
        app_github.with_auth(app_github.auth.as_installation(installation_id)), gate
    )
    throttle = throttle_registry.get(installation_id) if throttle_registry is not None else None
    return GitHubKitPort(installation, throttle=throttle, metrics=metrics, identity=identity, gate=gate)


def token_port(
    token: str,
    *,
    base_url: str | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    throttle: Throttle | None = None,
    cache_strategy: BaseCacheStrategy | None = None,
    http_cache: bool = False,
    auto_retry: bool | RetryDecisionFunc | None = None,
    metrics: Metrics | None = None,
    create_delays: Sequence[float] = RETRY_DELAYS,
    gate: RateLimitGate | None = None,
    identity: IdentitySource | None = None,
) -> GitHubKitPort:
    """The port acting with a plain token (`GITHUB_TOKEN` in Actions, a PAT in development);
    a rate limit pauses every request sent through `gate` (by default, this port's own).
    `identity`: who the token writes as (what a create may adopt after a 5xx)."""
    gate = gate or RateLimitGate("the token", metrics=metrics)
    github = _github(
        TokenAuthStrategy(token),
        base_url=base_url,
        transport=PausingTransport(transport or SharedTransport(), gate),
        cache_strategy=cache_strategy,
        http_cache=http_cache,
        auto_retry=BoundedRetry(metrics=metrics) if auto_retry is None else auto_retry,
    )
    return GitHubKitPort(
        github, throttle=throttle, metrics=metrics, create_delays=create_delays, identity=identity, gate=gate
    )


def paused(github: GitHub[AS], gate: RateLimitGate) -> GitHub[AS]:
    """The same client, sending every request through `gate` (see :mod:`bot.github.pause`)."""
    inner = github.config.async_transport or SharedTransport()
    config = replace(github.config, async_transport=PausingTransport(inner, gate))
    return GitHub(github.auth, config=config)
