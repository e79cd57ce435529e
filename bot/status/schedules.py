"""The repositories' schedules as the status page, `/status.json` and `plan-cascade schedules`
show them: each one's time, its last run (and that run's issue), its next. Rows from the
`schedules` table; the text table is pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot.db import schedules as table
from bot.db.engine import Database


@dataclass(frozen=True)
class ScheduleLine:
    """One schedule of one repository."""

    repo: str
    name: str
    cron: str
    timezone: str
    enabled: bool
    next_at: datetime | None
    last_slot: datetime | None
    last_issue: int | None
    last_issue_url: str | None
    last_outcome: str | None
    last_error: str | None
    runs: int
    skips: int


async def read_schedules(db: Database, *, web_url: str) -> tuple[ScheduleLine, ...]:
    """Every schedule, by repository and name; `web_url` makes the issues' links."""
    return tuple(
        ScheduleLine(
            repo=row.repo,
            name=row.name,
            cron=row.cron,
            timezone=row.timezone,
            enabled=bool(row.enabled),
            next_at=table.aware(row.next_at),
            last_slot=table.aware(row.last_slot),
            last_issue=row.last_issue,
            last_issue_url=f"{web_url.rstrip('/')}/{row.repo}/issues/{row.last_issue}"
            if row.last_issue
            else None,
            last_outcome=row.last_outcome,
            last_error=row.last_error,
            runs=row.runs,
            skips=row.skips,
        )
        for row in await table.rows(db)
    )


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC") if moment is not None else "—"


def as_text(lines: tuple[ScheduleLine, ...]) -> str:
    """A plain table for the terminal: schedule, when, last run (its issue), next run."""
    if not lines:
        return "No schedules (`schedules:` in .github/plan-cascade.yml: see docs/schedules.md)."
    rows = [("SCHEDULE", "WHEN", "LAST RUN", "NEXT RUN", "RUNS/SKIPS")]
    for line in lines:
        last = "—"
        if line.last_slot is not None:
            issue = f" #{line.last_issue}" if line.last_issue else ""
            last = f"{_when(line.last_slot)} {line.last_outcome or ''}{issue}".strip()
        when = f"{line.cron} ({line.timezone})"
        following = _when(line.next_at) if line.enabled else "disabled"
        rows.append((f"{line.repo} {line.name}", when, last, following, f"{line.runs}/{line.skips}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows
    )
