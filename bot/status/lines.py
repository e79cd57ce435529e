"""This process's plan lines: a plan's state is parsed again only when its row changed.

Parsing a plan's state is the page's one real cost (a thousand plans are ~15 MB of JSON); the
row's status, version, write time and installation say whether the line made last time still
holds, and are read without the state.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.db.engine import Database
from bot.status.plans import PlanSummary, plan_summary
from bot.status.reads import PlanHead, read_heads, read_states


@dataclass(frozen=True)
class PlanRows:
    """Every cached plan's line (default budget), the plans whose state does not parse, and
    each plan's (repository, installation)."""

    lines: list[PlanSummary]
    unreadable: list[str]
    installations: list[tuple[str, int | None]]


class PlanLines:
    """Lines of the plans table, kept between page loads and remade for changed rows only."""

    def __init__(self, *, web_url: str) -> None:
        self.web_url = web_url
        self._made: dict[tuple[str, int], tuple[object, PlanSummary | None]] = {}

    async def read(self, db: Database) -> PlanRows:
        """The lines of every cached plan as the database holds them now."""
        heads = await read_heads(db)
        stale = [h for h in heads if self._stamp(h) != h.stamp]
        if stale:
            states = await read_states(db, [h.key for h in stale])
            for head in stale:
                state = states.get(head.key)
                line = plan_summary(head, state, web_url=self.web_url) if state is not None else None
                self._made[head.key] = (head.stamp, line)
        present = {h.key for h in heads}
        for gone in [k for k in self._made if k not in present]:
            del self._made[gone]
        lines, unreadable = [], []
        for head in heads:
            line = self._made[head.key][1]
            if line is None:
                unreadable.append(f"{head.repo}#{head.issue_number}")
            else:
                lines.append(line)
        return PlanRows(lines, unreadable, [(h.repo, h.installation_id) for h in heads])

    def _stamp(self, head: PlanHead) -> object:
        made = self._made.get(head.key)
        return made[0] if made is not None else None
