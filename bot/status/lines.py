"""This process's plan lines: a plan's state is parsed again only when its row changed.

Parsing a plan's state is the page's one real cost (a thousand plans are ~15 MB of JSON); the
row's status, version, write time and installation say whether the line made last time still
holds, and are read without the state.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from bot.db.engine import Database
from bot.status.plans import PlanSummary, plan_summary
from bot.status.reads import PlanHead, parse_state, read_heads, read_states


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
        self.parsed = 0
        self._reading = asyncio.Lock()
        """Plan states parsed by this process so far (each row once per change)."""

    async def read(self, db: Database) -> PlanRows:
        """The lines of every cached plan as the database holds them now.

        One read at a time: a page load during the start-up warm-up waits for its parsing
        instead of parsing the same plans again.
        """
        async with self._reading:
            return await self._read(db)

    async def _read(self, db: Database) -> PlanRows:
        heads = await read_heads(db)
        stale = [h for h in heads if self._stamp(h) != h.stamp]
        if stale:
            raw = await read_states(db, [h.key for h in stale])
            # Parsing is CPU work (~0.5 ms a plan): in a thread, the event loop keeps answering
            # webhooks between the GIL's switches instead of waiting for the whole batch.
            made = await asyncio.to_thread(self._make, stale, raw)
            self._made.update(made)
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

    def _make(
        self, heads: list[PlanHead], raw: dict[tuple[str, int], object]
    ) -> dict[tuple[str, int], tuple[object, PlanSummary | None]]:
        made: dict[tuple[str, int], tuple[object, PlanSummary | None]] = {}
        for head in heads:
            state = parse_state(raw[head.key], key=head.key) if head.key in raw else None
            line = plan_summary(head, state, web_url=self.web_url) if state is not None else None
            made[head.key] = (head.stamp, line)
        self.parsed += len(heads)
        return made

    def _stamp(self, head: PlanHead) -> object:
        made = self._made.get(head.key)
        return made[0] if made is not None else None
