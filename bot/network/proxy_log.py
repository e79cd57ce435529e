"""What one egress proxy refused: each destination and how often, bounded, for the story's report.

The proxy's clients are hostile code, and the names they ask for end up in check runs and pull
requests: a name that is not shaped like a host or an address is recorded as `(malformed)`,
never as written, and past `MAX_DESTINATIONS` distinct destinations the rest are counted together
under `*` (a flood of invented names costs a counter, not memory).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass

from bot.network.rules import Reason

MAX_DESTINATIONS = 100
"""Distinct destinations one proxy remembers; the rest are counted under `*`."""
OTHERS = "*"
MALFORMED = "(malformed)"
_NAME = re.compile(
    r"(?=.{1,253}$)(?:[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?\.)*[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
)


@dataclass(frozen=True)
class Refused:
    """Requests to one destination the proxy refused."""

    host: str
    port: int
    reason: Reason
    count: int


def shown_host(host: str) -> str:
    """`host` when it is shaped like a DNS name or an IP address, else `(malformed)`."""
    if _NAME.fullmatch(host):
        return host
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return MALFORMED


class BlockedLog:
    """The refusals of one proxy; `on_blocked` (a metrics counter) hears of each as it happens."""

    def __init__(
        self, *, on_blocked: Callable[[], None] | None = None, limit: int = MAX_DESTINATIONS
    ) -> None:
        self.on_blocked = on_blocked
        self.limit = limit
        self._counts: dict[tuple[str, int, Reason], int] = {}
        self._others = 0

    def record(self, host: str, port: int, reason: Reason) -> None:
        key = (shown_host(host), port if 0 < port < 65536 else 0, reason)
        if key in self._counts or len(self._counts) < self.limit:
            self._counts[key] = self._counts.get(key, 0) + 1
        else:
            self._others += 1
        if self.on_blocked is not None:
            self.on_blocked()

    def entries(self) -> list[Refused]:
        """Every destination refused, with its count (the rest under `*`, port 0)."""
        found = [Refused(host, port, reason, n) for (host, port, reason), n in self._counts.items()]
        return found + ([Refused(OTHERS, 0, "unlisted", self._others)] if self._others else [])

    @property
    def total(self) -> int:
        return sum(self._counts.values()) + self._others
