"""Pacing of content-creating GitHub requests (GitHub's secondary rate limits).

GitHub allows at most 80 content-creating requests a minute and 500 an hour per installation,
and asks for about one a second sustained. :class:`Throttle` is a token bucket: a short burst
(`burst` calls, 3 by default: a plan's 👀, its comment and the edit that signs it) goes at
once, then one call per `min_interval`; never more than `per_minute` in any 60 s; and never
more than `per_hour` creations (POSTs: comments, reactions, check runs, pull requests…) in
any hour, edits of what exists not counted there. It is pure logic over an injected clock and
sleep, so tests run it on a fake clock.
:class:`ThrottleRegistry` keeps one throttle per installation.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable

log = logging.getLogger(__name__)
WINDOW_SECONDS = 60.0
HOUR_SECONDS = 3600.0


class Throttle:
    """Admit at most `per_minute` calls in any 60 s window and `per_hour` creations in any hour;
    after a burst of `burst`, one per `min_interval` seconds (a token bucket of `burst` tokens,
    one back every `min_interval`)."""

    def __init__(
        self,
        *,
        per_minute: int = 80,
        per_hour: int = 500,
        min_interval: float = 1.0,
        burst: int = 3,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        if per_minute < 1:
            raise ValueError("per_minute must be at least 1")
        if per_hour < 1:
            raise ValueError("per_hour must be at least 1")
        if burst < 1:
            raise ValueError("burst must be at least 1")
        self.per_minute = per_minute
        self.per_hour = per_hour
        self.min_interval = min_interval
        self.burst = min(burst, per_minute)
        self._clock = clock
        self._sleep = sleep
        self._admitted: deque[float] = deque()
        self._created: deque[float] = deque()
        self._tokens = float(self.burst)
        self._filled_at = float("-inf")
        self._lock = asyncio.Lock()

    def _tokens_at(self, now: float) -> float:
        if self.min_interval <= 0 or self._filled_at == float("-inf"):
            return float(self.burst)
        return min(float(self.burst), self._tokens + (now - self._filled_at) / self.min_interval)

    def delay(self, now: float, *, creates: bool = True) -> float:
        """Seconds to wait at `now` before the next call may go (0 when it may go now)."""
        while self._admitted and self._admitted[0] <= now - WINDOW_SECONDS:
            self._admitted.popleft()
        tokens = self._tokens_at(now)
        wait = 0.0 if tokens >= 1 else (1 - tokens) * self.min_interval
        if len(self._admitted) >= self.per_minute:
            wait = max(wait, self._admitted[0] + WINDOW_SECONDS - now)
        return max(wait, self._hour_wait(now) if creates else 0.0, 0.0)

    def _hour_wait(self, now: float) -> float:
        while self._created and self._created[0] <= now - HOUR_SECONDS:
            self._created.popleft()
        return self._created[0] + HOUR_SECONDS - now if len(self._created) >= self.per_hour else 0.0

    def created_last_hour(self) -> int:
        """Creations admitted in the last hour (what the hourly limit counts)."""
        self._hour_wait(self._clock())
        return len(self._created)

    async def wait(self, *, creates: bool = True) -> None:
        """Wait until a content-creating call may go, and count it as gone. `creates`: it makes
        something new (a POST), which GitHub also counts against the hourly limit."""
        async with self._lock:
            while (pause := self.delay(self._clock(), creates=creates)) > 0:
                if creates and (hourly := self._hour_wait(self._clock())) > 0:
                    log.warning(
                        "%d content-creating GitHub requests in the last hour (GitHub's limit "
                        "for an installation): the next one waits %.0f s",
                        self.per_hour,
                        hourly,
                    )
                await self._sleep(pause)
            now = self._clock()
            self._tokens, self._filled_at = self._tokens_at(now) - 1, now
            self._admitted.append(now)
            if creates:
                self._created.append(now)


class ThrottleRegistry:
    """One :class:`Throttle` per key (an installation id), created on first use."""

    def __init__(self, factory: Callable[[], Throttle] = Throttle) -> None:
        self._factory = factory
        self._throttles: dict[Hashable, Throttle] = {}

    def get(self, key: Hashable) -> Throttle:
        """The throttle for `key`, the same object every time."""
        if key not in self._throttles:
            self._throttles[key] = self._factory()
        return self._throttles[key]

    def known(self) -> dict[Hashable, Throttle]:
        """Every throttle made so far (one per installation this process wrote for)."""
        return dict(self._throttles)
