"""Rate limits pause the installation, not one request.

When GitHub answers 403/429 with `Retry-After` (a secondary limit), or with
`x-ratelimit-remaining: 0` and `x-ratelimit-reset` (the primary limit, or a secondary one
without `Retry-After`), it asks the integration to send **nothing** until then; continuing
may get it banned. A :class:`RateLimitGate` holds that moment for one installation (or
token), shared by every coroutine of the process through :class:`GateRegistry`;
:class:`PausingTransport` makes every request of that installation wait on it, and tells it
about each answer. Waits are bounded (`max_pause`), logged, and counted in /metrics. A task whose
PATIENCE (see :mod:`bot.github.throttle`) is shorter than the pause is not held: Throttled says
when to come back, and the worker puts its job back until then.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import TYPE_CHECKING

import httpx

from bot.errors import Throttled
from bot.github.throttle import PATIENCE

if TYPE_CHECKING:
    from bot.metrics import Metrics

log = logging.getLogger(__name__)

MAX_PAUSE = 3600.0
"""The longest pause honoured (the primary limit resets within the hour)."""
NO_HINT_PAUSE = 60.0
"""GitHub's advice when a limited answer says nothing of when to retry: at least a minute."""


def limit_pause(status: int, headers: Mapping[str, str], *, now: float) -> tuple[str, float] | None:
    """(which limit, seconds to pause) for a rate-limited answer; None for any other answer.

    `now` is epoch seconds (to read `x-ratelimit-reset`). A 403 without rate-limit headers is
    a permission refusal, not a limit.
    """
    if status not in (403, 429):
        return None
    retry_after = headers.get("retry-after")
    if retry_after is not None:
        try:
            return "secondary", max(float(retry_after), 0.0)
        except ValueError:
            return "secondary", NO_HINT_PAUSE
    if headers.get("x-ratelimit-remaining") == "0":
        try:
            reset = float(headers.get("x-ratelimit-reset") or "")
        except ValueError:
            return "primary", NO_HINT_PAUSE
        return "primary", max(reset - now, 0.0) + 1.0  # GitHub's reset is a whole second
    return ("secondary", NO_HINT_PAUSE) if status == 429 else None


class RateLimitGate:
    """Until when one installation must send nothing; requests wait here first."""

    def __init__(
        self,
        name: str = "",
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        max_pause: float = MAX_PAUSE,
        metrics: Metrics | None = None,
    ) -> None:
        self.name = name
        self._clock, self._wall, self._sleep = clock, wall, sleep
        self.max_pause = max_pause
        self.metrics = metrics
        self.paused_until = float("-inf")
        self.pauses = 0
        self.paused_seconds = 0.0
        self.quota: tuple[int, int, float] | None = None
        """(remaining, limit, when) of the primary rate limit, as GitHub's last answer said."""

    def remaining(self) -> float:
        """Seconds left in the current pause (0 when none)."""
        return max(self.paused_until - self._clock(), 0.0)

    def note(self, status: int, headers: Mapping[str, str]) -> float:
        """Read an answer; when it is a rate limit, pause every request until it lifts. The new
        pause in seconds (0 when the answer was no limit or an existing pause already covers it)."""
        self._read_quota(headers)
        limit = limit_pause(status, headers, now=self._wall())
        if limit is None:
            return 0.0
        kind, seconds = limit
        if seconds > self.max_pause:
            log.warning("GitHub asks %s to wait %.0f s: pausing %.0f s", self.name, seconds, self.max_pause)
            seconds = self.max_pause
        now = self._clock()
        added = now + seconds - max(self.paused_until, now)
        if added <= 0:
            return 0.0
        self.paused_until = now + seconds
        self.pauses += 1
        self.paused_seconds += added
        who = self.name or "this token"
        log.warning("GitHub's %s rate limit: every request of %s waits %.1f s", kind, who, seconds)
        if self.metrics is not None:
            self.metrics.github_pause_seconds.labels(kind).inc(added)
        return seconds

    def _read_quota(self, headers: Mapping[str, str]) -> None:
        try:
            remaining, limit = int(headers["x-ratelimit-remaining"]), int(headers["x-ratelimit-limit"])
        except (KeyError, ValueError):
            return
        self.quota = (remaining, limit, self._wall())

    async def wait(self) -> None:
        """Return when no pause holds (a pause extended meanwhile is waited for too); raise
        Throttled when the pause is longer than the task's PATIENCE."""
        bound = PATIENCE.get()
        if bound is not None and (left := self.remaining()) > bound:
            raise Throttled(f"GitHub asked {self.name or 'this token'} to wait {left:.0f} s", seconds=left)
        while (left := self.remaining()) > 0:
            await self._sleep(left)


class GateRegistry:
    """One :class:`RateLimitGate` per installation id (or token), created on first use."""

    def __init__(self, factory: Callable[[Hashable], RateLimitGate] | None = None) -> None:
        self._factory = factory or (lambda key: RateLimitGate(f"installation {key}"))
        self._gates: dict[Hashable, RateLimitGate] = {}

    def get(self, key: Hashable) -> RateLimitGate:
        """The gate for `key`, the same object every time."""
        if key not in self._gates:
            self._gates[key] = self._factory(key)
        return self._gates[key]

    def known(self) -> dict[Hashable, RateLimitGate]:
        """Every gate made so far (what this process knows of each installation's limits)."""
        return dict(self._gates)


class PausingTransport(httpx.AsyncBaseTransport):
    """Sends through `inner` once `gate` allows, and shows `gate` every answer."""

    def __init__(self, inner: httpx.AsyncBaseTransport, gate: RateLimitGate) -> None:
        self._inner = inner
        self.gate = gate

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Wait out a pause, send, and pause the installation if this answer is a limit."""
        await self.gate.wait()
        response = await self._inner.handle_async_request(request)
        self.gate.note(response.status_code, response.headers)
        return response

    async def aclose(self) -> None:
        """Closed as the wrapped transport would be (githubkit closes after each request)."""
        await self._inner.aclose()
