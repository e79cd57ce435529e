"""Pacing of content-creating GitHub requests (GitHub's secondary rate limits).

GitHub allows at most 80 content-creating requests a minute per installation and asks
for at least a second between mutating requests. :class:`Throttle` makes callers wait
until both hold; it is pure logic over an injected clock and sleep, so tests run it on
a fake clock. :class:`ThrottleRegistry` keeps one throttle per installation.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable

WINDOW_SECONDS = 60.0


class Throttle:
    """Admit at most `per_minute` calls in any 60 s window, `min_interval` seconds apart."""

    def __init__(
        self,
        *,
        per_minute: int = 80,
        min_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        if per_minute < 1:
            raise ValueError("per_minute must be at least 1")
        self.per_minute = per_minute
        self.min_interval = min_interval
        self._clock = clock
        self._sleep = sleep
        self._admitted: deque[float] = deque()
        self._lock = asyncio.Lock()

    def delay(self, now: float) -> float:
        """Seconds to wait at `now` before the next call may go (0 when it may go now)."""
        while self._admitted and self._admitted[0] <= now - WINDOW_SECONDS:
            self._admitted.popleft()
        if not self._admitted:
            return 0.0
        wait = self._admitted[-1] + self.min_interval - now
        if len(self._admitted) >= self.per_minute:
            wait = max(wait, self._admitted[0] + WINDOW_SECONDS - now)
        return max(wait, 0.0)

    async def wait(self) -> None:
        """Wait until a content-creating call may go, and count it as gone."""
        async with self._lock:
            while (pause := self.delay(self._clock())) > 0:
                await self._sleep(pause)
            self._admitted.append(self._clock())


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
