"""Who may act: write access (admin, maintain, write), checked with GitHub and cached briefly.

`author_association` is only a cheap pre-filter: someone who is not an owner, member or
collaborator cannot hold write access, so no API call is spent on them. Any GitHub error
while deciding is a refusal (fail closed), logged with its reason.

`may_start` is THE approval rule: every way to start or resume work (approve, 👍, an
approving review of the plan PR, retry, skip, fix, a check run's Re-run) goes through it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bot.errors import GitHubError
from bot.github.port import GitHubPort, Permission

log = logging.getLogger(__name__)

WRITE_ROLES: frozenset[str] = frozenset({"admin", "maintain", "write"})
# Associations that can come with write access; everyone else is refused without a call.
MAY_HAVE_WRITE: frozenset[str] = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})


@dataclass(frozen=True)
class Verdict:
    """Whether a user may act, with their permission for the reply."""

    allowed: bool
    permission: str
    reason: str = ""


WRITER_MEMORY = 24 * 3600.0
"""How long a user seen with write access is remembered as one (for a 👀, never for a decision)."""


@dataclass
class PermissionCache:
    """(repo, login) → permission for `ttl` seconds. One per process; injectable clock."""

    ttl: float = 60.0
    memory: float = WRITER_MEMORY
    clock: Callable[[], float] = time.monotonic
    _entries: dict[tuple[str, str], tuple[float, Permission]] = field(default_factory=dict)

    async def permission(self, port: GitHubPort, repo: str, login: str) -> Permission:
        """The user's role, from the cache or GitHub's collaborator permission API."""
        key = (repo.lower(), login.lower())
        hit = self._entries.get(key)
        now = self.clock()
        if hit and now - hit[0] < self.ttl:
            return hit[1]
        value = await port.get_permission(repo, login)
        self._entries[key] = (now, value)
        return value

    def known_writer(self, repo: str, login: str) -> bool:
        """Whether `login` had write access on `repo` when GitHub was last asked, within `memory`
        seconds: their command's 👀 may go before a fresh read says so. Never a decision."""
        hit = self._entries.get((repo.lower(), login.lower()))
        return hit is not None and hit[1] in WRITE_ROLES and self.clock() - hit[0] < self.memory

    def forget(self, repo: str, login: str | None = None) -> None:
        """Drop the cached roles of `login` on `repo` (everyone's when None)."""
        for key in [k for k in self._entries if k[0] == repo.lower() and login in (None, k[1])]:
            del self._entries[key]


def is_bot(login: str, user_type: str | None) -> bool:
    """Bots and Apps (ourselves included) never command Plan Cascade."""
    return user_type == "Bot" or login.endswith("[bot]")


def known_refusal(login: str, association: str | None, user_type: str | None) -> Verdict | None:
    """The refusal that needs no call to GitHub (a bot, an association that cannot hold write
    access), or None when only GitHub can say."""
    if not login or is_bot(login, user_type):
        return Verdict(False, "bot", "bots and Apps never command Plan Cascade")
    if association is not None and association.upper() not in MAY_HAVE_WRITE:
        permission = "read" if association.upper() == "CONTRIBUTOR" else "none"
        return Verdict(False, permission, f"author association {association}")
    return None


async def may_act(
    port: GitHubPort,
    cache: PermissionCache,
    *,
    repo: str,
    login: str,
    association: str | None = None,
    user_type: str | None = None,
) -> Verdict:
    """Whether `login` may use the bot on `repo` (write access or better; never a bot)."""
    known = known_refusal(login, association, user_type)
    if known is not None:
        return _refused(repo, login, known)
    try:
        permission = await cache.permission(port, repo, login)
    except GitHubError as exc:
        return _refused(repo, login, Verdict(False, "unknown", f"GitHub could not say ({exc.message})"))
    verdict = Verdict(
        permission in WRITE_ROLES, permission, "" if permission in WRITE_ROLES else "no write access"
    )
    return verdict if verdict.allowed else _refused(repo, login, verdict)


async def may_start(
    port: GitHubPort,
    cache: PermissionCache,
    *,
    repo: str,
    login: str,
    approvers: Sequence[str],
    association: str | None = None,
    user_type: str | None = None,
) -> Verdict:
    """The approval rule: not a bot, write access, and on `approvers:` when that is configured."""
    verdict = await may_act(port, cache, repo=repo, login=login, association=association, user_type=user_type)
    if not verdict.allowed:
        return verdict
    if approvers and login.lower() not in {a.lower() for a in approvers}:
        return _refused(repo, login, Verdict(False, verdict.permission, "not in the approvers list"))
    return verdict


def _refused(repo: str, login: str, verdict: Verdict) -> Verdict:
    log.info("refused %s on %s: %s (permission %s)", login or "?", repo, verdict.reason, verdict.permission)
    return verdict
