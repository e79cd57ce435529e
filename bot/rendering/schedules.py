"""What a schedule writes on GitHub: its issue's title and body, the line of a skipped run, the
plan comment's line about it. Pure; the hidden marker names the schedule and the slot."""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo

from bot.plan.scheduled import ScheduledBy
from bot.rendering.jinja import md_code, md_inline

_MARKER = re.compile(r"<!-- plan-cascade:schedule name=([a-z0-9_-]+) slot=(\S+) -->")


def schedule_marker(name: str, slot: datetime) -> str:
    """The hidden line of a scheduled issue: which schedule opened it, for which slot."""
    return f"<!-- plan-cascade:schedule name={name} slot={slot.isoformat()} -->"


def skip_marker(name: str, slot: datetime) -> str:
    """The hidden end of a skipped run's line: which slot it stands for."""
    return f"<!-- plan-cascade:schedule-skip name={name} slot={slot.isoformat()} -->"


def parse_schedule_marker(body: str | None) -> tuple[str, str] | None:
    """(name, slot) of the last marker in a body, or None."""
    found = _MARKER.findall(body or "")
    return found[-1] if found else None


def local(at: datetime, zone: str) -> str:
    """`2026-03-30 06:00 CEST` (and the UTC time when the zone is not UTC)."""
    shown = at.astimezone(ZoneInfo(zone))
    text = shown.strftime("%Y-%m-%d %H:%M %Z")
    if shown.utcoffset():
        text += f" ({at.astimezone(ZoneInfo('UTC')).strftime('%H:%M')} UTC)"
    return text


def issue_title(title: str, slot: datetime, zone: str) -> str:
    """The run's title: the schedule's, with the slot's date where the schedule lives."""
    return f"{title} ({slot.astimezone(ZoneInfo(zone)).strftime('%Y-%m-%d')})"


def issue_body(*, task: str, name: str, slot: datetime, zone: str) -> str:
    """The run's issue: the task as the config says it, where it came from, the marker last."""
    return (
        f"{task.rstrip()}\n\n---\n_Opened by the schedule {md_code(name)} (`.github/plan-cascade.yml`) for "
        f"{md_inline(local(slot, zone))}. Plan Cascade plans it; nothing runs until someone with write "
        f"access approves the plan. Close the issue to drop this run._\n{schedule_marker(name, slot)}"
    )


def skipped_line(*, name: str, slot: datetime, next_at: datetime | None, zone: str) -> str:
    """The one line a run adds to the last run's issue, still waiting, instead of a new issue."""
    then = f"; it runs next {local(next_at, zone)}" if next_at is not None else ""
    return (
        f"⏭️ skipped: still waiting — the schedule {md_code(name)} was due {md_inline(local(slot, zone))} "
        f"and opened no new issue: this one's plan is not approved yet (approve it or close the issue){then}."
        f" {skip_marker(name, slot)}"
    )


def superseded_line(name: str, newer: int) -> str:
    """The comment on the last run's issue, still waiting, closed for a newer run (`close_older`)."""
    return (
        f"⏭️ closed: the schedule {md_code(name)} opened #{newer} for its next run, and this one was "
        "still waiting for approval (`close_older: true`)."
    )


def scheduled_line(scheduled: ScheduledBy) -> str:
    """The plan comment's line about the schedule that opened the issue."""
    then = f" It runs next {local(scheduled.next_at, scheduled.timezone)}." if scheduled.next_at else ""
    return (
        f"🗓️ Opened by the schedule {md_code(scheduled.name)} for {local(scheduled.slot, scheduled.timezone)}."
        f"{then} A schedule never approves: this plan waits for a person like any other."
    )
