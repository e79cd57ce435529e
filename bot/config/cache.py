"""What is stable about a repository, kept for a short time so the first answer is fast.

- a repository's default branch and clone URL (when a payload lacks them), and
- its parsed `.github/plan-cascade.yml`, used only to check the trigger label before the 👀;
  every decision (permission, approvals, limits) reads the file again, in the same round trip
  as the other reads of the job.

Entries live `ttl` seconds (300) in this process. `push` events that touch the config file on
the default branch and `repository` events drop a repository's entries at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bot.config.repo import RepoConfig

TTL_SECONDS = 300.0


@dataclass
class RepoCache:
    """(repo) → metadata and (repo, branch) → config, for `ttl` seconds."""

    ttl: float = TTL_SECONDS
    clock: Callable[[], float] = time.monotonic
    _info: dict[str, tuple[float, str, str]] = field(default_factory=dict)
    _configs: dict[tuple[str, str], tuple[float, RepoConfig]] = field(default_factory=dict)

    def info(self, repo: str) -> tuple[str, str] | None:
        """(default branch, clone URL), or None."""
        hit = self._info.get(repo.lower())
        if hit is None or self.clock() - hit[0] >= self.ttl:
            return None
        return hit[1], hit[2]

    def keep_info(self, repo: str, default_branch: str, clone_url: str) -> None:
        self._info[repo.lower()] = (self.clock(), default_branch, clone_url)

    def config(self, repo: str, branch: str) -> RepoConfig | None:
        """The config last read from `branch`, or None."""
        hit = self._configs.get((repo.lower(), branch))
        if hit is None or self.clock() - hit[0] >= self.ttl:
            return None
        return hit[1]

    def last_trigger_label(self, repo: str, branch: str) -> str | None:
        """The trigger label of the config last read from `branch`, however long ago (a guess)."""
        hit = self._configs.get((repo.lower(), branch))
        return hit[1].trigger_label if hit is not None else None

    def keep_config(self, repo: str, branch: str, config: RepoConfig | None) -> None:
        key = (repo.lower(), branch)
        if config is None:  # an invalid file: nothing to reuse
            self._configs.pop(key, None)
        else:
            self._configs[key] = (self.clock(), config)

    def forget(self, repo: str) -> None:
        """Drop everything about `repo` (its config changed, or the repository did)."""
        self._info.pop(repo.lower(), None)
        for key in [k for k in self._configs if k[0] == repo.lower()]:
            del self._configs[key]
