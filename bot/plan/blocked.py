"""Network requests the egress proxy refused for a story: what they were and what would allow them. Pure.

An external agent and setup go out only through the bot's egress proxy
(`bot.network.proxy`). What it refused is kept per story in the plan state (signed with it)
and shown where people look: the story's check runs, the batch's pull request and the status
page, each with the setting that would allow it (Copilot's "the firewall blocked these" note).
The hosts come from hostile code: they are checked for shape where they are recorded, and the
list is bounded, so a flood of names cannot grow the plan comment.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, Protocol

from pydantic import BaseModel, Field

Who = Literal["agent", "setup"]
Reason = Literal["unlisted", "narrowed", "inward", "unresolved"]
OTHERS = "*"
"""The host of the entry that counts the requests to hosts past `MAX_BLOCKED`."""
MAX_BLOCKED = 20
"""Distinct destinations kept per story; the rest are counted together."""

SETTINGS: dict[Who, str] = {"agent": "PLAN_CASCADE_AGENT_EGRESS", "setup": "PLAN_CASCADE_SETUP_EGRESS"}
"""The operator's setting that lists where each may connect."""
NARROWING = "agent.egress"
"""The repository's key that narrows the agents' list (`.github/plan-cascade.yml`)."""


class BlockedRequest(BaseModel):
    """Requests to one destination that the egress proxy refused, and how many."""

    host: str = Field(max_length=255, description="The host asked for (`*`: hosts past the kept ones).")
    port: int = Field(ge=0, le=65535, description="The port asked for (0 with `*`).")
    count: int = Field(default=1, ge=1, description="How many requests it refused.")
    by: Who = Field(description="Whose request it was: the story's agent or its setup.")
    reason: Reason = Field(
        description="unlisted: not on the operator's list; narrowed: not on the repository's "
        "`agent.egress`; inward: it resolves to a loopback, private or link-local address; "
        "unresolved: the name does not resolve."
    )

    @property
    def target(self) -> str:
        """`host:port` (`[v6]:port`), or "other hosts" for the entry that counts the rest."""
        if self.host == OTHERS:
            return "other hosts"
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def allow(self) -> str:
        """What would allow it, in a few words (Markdown)."""
        setting = SETTINGS[self.by]
        if self.host == OTHERS:
            return f"see the log; each host would be listed in `{setting}`"
        if self.reason == "narrowed":
            return f"`{NARROWING}` in `.github/plan-cascade.yml` (the operator's list has it)"
        if self.reason == "inward":
            return f"its address with the port in `{setting}` (it resolves to a non-public address)"
        if self.reason == "unresolved":
            return "nothing: the name does not resolve"
        return f"`{setting}` (the operator's setting)"


def _key(entry: BlockedRequest) -> tuple[str, int, str, str]:
    return entry.host, entry.port, entry.by, entry.reason


def merge_blocked(
    kept: Iterable[BlockedRequest], more: Iterable[BlockedRequest], *, limit: int = MAX_BLOCKED
) -> list[BlockedRequest]:
    """`kept` and `more` together: the same destination's counts added, at most `limit` distinct
    destinations (the rest counted in one `*` entry per `by`), most often refused first."""
    counts: dict[tuple[str, int, str, str], int] = {}
    for entry in [*kept, *more]:
        counts[_key(entry)] = counts.get(_key(entry), 0) + entry.count
    named = sorted(
        ((k, n) for k, n in counts.items() if k[0] != OTHERS), key=lambda item: (-item[1], item[0])
    )
    others: dict[str, int] = {}
    for key, n in counts.items():
        if key[0] == OTHERS:
            others[key[2]] = others.get(key[2], 0) + n
    for (_, _, by, _), n in named[limit:]:
        others[by] = others.get(by, 0) + n
    merged = [
        BlockedRequest(host=host, port=port, count=n, by=by, reason=reason)  # type: ignore[arg-type]
        for (host, port, by, reason), n in named[:limit]
    ]
    merged += [
        BlockedRequest(host=OTHERS, port=0, count=n, by=by, reason="unlisted")  # type: ignore[arg-type]
        for by, n in sorted(others.items())
    ]
    return merged


def blocked_total(entries: Iterable[BlockedRequest]) -> int:
    """How many requests were refused in all."""
    return sum(entry.count for entry in entries)


class Refusal(Protocol):
    """What a proxy's log says of one destination (`bot.network.proxy_log.Refused`)."""

    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def reason(self) -> str: ...
    @property
    def count(self) -> int: ...


def blocked_requests(refused: Iterable[Refusal], *, by: Who) -> list[BlockedRequest]:
    """A proxy's refusals as the story records them (bounded like every story's list)."""
    found = [
        BlockedRequest(host=r.host[:255], port=r.port, count=r.count, by=by, reason=r.reason)  # type: ignore[arg-type]
        for r in refused
        if r.count > 0
    ]
    return merge_blocked([], found)
