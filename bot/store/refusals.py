"""How often someone without write access is told no: once per person and issue, then silence.

Anyone who can comment on a public repository can send `/plan-cascade <anything>`. Each answer
is a content-creating request, and an installation may make 500 of those an hour (GitHub's
limit): answering every refused command would let an outsider spend that budget, and with it
every write of the installation. So a refusal is posted once per (repository, issue, person),
then not again; and at most `per_hour` refusals an hour per installation, whoever asks (many
accounts, many issues). What is kept is this process's memory (the newest `remembered` pairs):
a restart, or another worker process, may answer once more. Clock injected; pure otherwise.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

REFUSALS_PER_HOUR = 20
"""Refusals posted in any hour, per installation, at most (the rest are silent)."""
HOUR = 3600.0


@dataclass
class RefusalLimiter:
    """Decides whether a refusal is posted; one per process (see the module docstring)."""

    per_hour: int = REFUSALS_PER_HOUR
    remembered: int = 10_000
    clock: Callable[[], float] = time.monotonic
    _told: OrderedDict[tuple[str, int, str], None] = field(default_factory=OrderedDict)
    _posted: dict[object, deque[float]] = field(default_factory=dict)

    def allow(self, *, repo: str, issue: int, login: str, installation: object) -> bool:
        """Whether to post a refusal to `login` on `repo#issue` now (counted as posted when True)."""
        key = (repo.lower(), issue, login.lower())
        if key in self._told:
            self._told.move_to_end(key)
            return False
        now = self.clock()
        recent = self._posted.setdefault(installation, deque())
        while recent and recent[0] <= now - HOUR:
            recent.popleft()
        if len(recent) >= self.per_hour:
            return False
        recent.append(now)
        self._told[key] = None
        while len(self._told) > self.remembered:
            self._told.popitem(last=False)
        return True
