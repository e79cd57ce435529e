"""GitHub's own failures, injected into the fake GitHub.

Real GitHub answers some requests 502/503 — sometimes *after* doing the work (the gateway
gave up while the comment, check run or pull request was being made) — and bursts with
secondary rate limits. :class:`Faults` picks the requests to fail by method and path
pattern, by count (`times`) or by ratio (a seeded RNG, so a run is reproducible), and says
how to fail them:

- ``"before"``: answer `status` (502 by default) without doing the work;
- ``"after"``: do the work, then answer `status` instead of the result;
- ``"secondary"``: 403 (or 429) "You have exceeded a secondary rate limit" with `Retry-After`,
  or, when `retry_after` is None, `x-ratelimit-remaining: 0` and `x-ratelimit-reset`;
- ``"primary"``: 403 "API rate limit exceeded" with remaining 0 and the reset time.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from starlette.responses import JSONResponse, Response

from bot.testing.fake_github_model import error_body

When = Literal["before", "after", "secondary", "primary"]
SECONDARY_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
)
PRIMARY_MESSAGE = "API rate limit exceeded for installation."


@dataclass
class Fault:
    """One rule: which requests fail, how, and how many more times."""

    method: str
    path: re.Pattern[str]
    when: When
    status: int
    message: str
    headers: dict[str, str] = field(default_factory=dict)
    times: int | None = 1
    """How many more requests this rule fails; None: no limit (with `ratio`, each is a draw)."""
    ratio: float = 1.0
    """The chance that a matching request fails."""
    retry_after: int | None = None
    reset_in: float | None = None
    fired: int = 0

    def matches(self, method: str, path: str) -> bool:
        return (
            (self.times is None or self.times > 0)
            and self.method in (method, "*")
            and bool(self.path.fullmatch(path))
        )


@dataclass
class Faults:
    """The fake's fault rules; `wall` (epoch seconds) stamps `x-ratelimit-reset`."""

    seed: int = 0
    wall: Callable[[], float] = time.time
    rules: list[Fault] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)

    def fail(
        self,
        method: str,
        path: str,
        *,
        when: Literal["before", "after"] = "before",
        status: int = 502,
        message: str = "Server Error",
        headers: dict[str, str] | None = None,
        times: int | None = 1,
        ratio: float = 1.0,
    ) -> Fault:
        """Answer matching requests (`path` a regex matched in full) with `status`, before or
        after doing their work."""
        rule = Fault(method.upper(), re.compile(path), when, status, message, dict(headers or {}))
        rule.times, rule.ratio = times, ratio
        return self._add(rule)

    def secondary_limit(
        self,
        method: str,
        path: str,
        *,
        retry_after: int | None = 2,
        reset_in: float = 60.0,
        status: int = 403,
        times: int | None = 1,
        ratio: float = 1.0,
    ) -> Fault:
        """A secondary rate limit: `Retry-After`, or (when None) remaining 0 and a reset `reset_in` s away."""
        rule = Fault(method.upper(), re.compile(path), "secondary", status, SECONDARY_MESSAGE)
        rule.times, rule.ratio, rule.retry_after, rule.reset_in = times, ratio, retry_after, reset_in
        return self._add(rule)

    def primary_limit(
        self, method: str, path: str, *, reset_in: float = 60.0, times: int | None = 1
    ) -> Fault:
        """The primary rate limit: 403 with `x-ratelimit-remaining: 0` until `reset_in` s from now."""
        rule = Fault(method.upper(), re.compile(path), "primary", 403, PRIMARY_MESSAGE)
        rule.times, rule.reset_in = times, reset_in
        return self._add(rule)

    def clear(self) -> None:
        self.rules.clear()

    def _add(self, rule: Fault) -> Fault:
        self.rules.append(rule)
        return rule

    def pick(self, method: str, path: str, *, after: bool) -> Fault | None:
        """The rule that fails this request at this stage (before or after the work), counted as fired."""
        for rule in self.rules:
            if (rule.when == "after") != after or not rule.matches(method, path):
                continue
            if rule.ratio < 1.0 and self._random.random() >= rule.ratio:
                continue
            if rule.times is not None:
                rule.times -= 1
            rule.fired += 1
            return rule
        return None

    def response(self, rule: Fault) -> Response:
        """GitHub's answer for a fired rule."""
        headers = dict(rule.headers)
        if rule.when in ("secondary", "primary"):
            if rule.retry_after is not None:
                headers["retry-after"] = str(rule.retry_after)
            else:
                reset = int(self.wall() + (rule.reset_in or 0.0) + 0.999)
                headers.update({"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)})
            headers.setdefault("x-ratelimit-limit", "5000")
        return JSONResponse(error_body(rule.status, rule.message), rule.status, headers=headers)
