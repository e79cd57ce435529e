"""`schedules:` in `.github/plan-cascade.yml`: recurring work, each entry planned on time. Pure.

`cron` is a 5-field expression or a phrase: `hourly`, `daily`, `weekdays`, `weekly` or `monthly`,
optionally `on <weekday>` (weekly) and `at HH:MM` (not hourly). What a phrase leaves open (the
minute, the hour, the weekday, the day of the month) is fixed by a hash of the repository and the
schedule's name: thousands of repositories saying `daily` do not all fire at midnight, and one
schedule fires at the same time every day.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from bot.config.cron import WEEKDAYS, CronError, next_after, parse_cron, shortest_gap, zone_named
from bot.config.errors import Expect

PHRASES = ("hourly", "daily", "weekdays", "weekly", "monthly")
_PHRASE = re.compile(
    r"^(?P<every>[a-z]+)(?:\s+on\s+(?P<on>[a-z]+))?(?:\s+at\s+(?P<hour>\d{1,2}):(?P<minute>\d{2}))?$"
)
_DAY_NAMES = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")
_GAP_FROM = datetime(2026, 1, 1, tzinfo=UTC)
"""Where the operator's minimum interval is measured from (any fixed instant: the result is the same)."""

ScheduleName = Annotated[
    str,
    Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$"),
    Expect('a name of lowercase letters, digits, "-" and "_", starting with a letter or digit'),
]


class Schedule(BaseModel):
    """One recurring piece of work: an issue opened and planned on time, approved like any plan."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: ScheduleName = Field(description="Unique among the schedules; names the schedule in its issues.")
    cron: str = Field(
        min_length=1,
        max_length=100,
        description='When: 5-field cron, or "daily", "weekly on monday at 06:00"… (spread by a hash).',
    )
    timezone: str = Field("UTC", description="IANA time zone the times are in (DST handled).")
    title: str = Field(
        min_length=1, max_length=200, description="Title of each run's issue (the date is added)."
    )
    task: str = Field(min_length=1, max_length=20_000, description="The issue's text: the task to plan.")
    labels: list[Annotated[str, Field(min_length=1, max_length=50)]] = Field(
        [], max_length=10, description="Labels added to each run's issue (besides trigger_label)."
    )
    enabled: bool = Field(True, description="false = keep the entry, run nothing.")
    close_older: bool = Field(
        False, description="When the last run's issue still waits: close it and open a new one (else skip)."
    )


def _phrase_problem(text: str) -> ValueError:
    return ValueError(
        f'{text!r} is neither a 5-field cron expression nor a phrase: use e.g. "0 6 * * 1", '
        '"daily", "weekdays at 09:30", "weekly on monday at 06:00" or "monthly" '
        f"(phrases: {', '.join(PHRASES)})"
    )


def expand(text: str, *, key: str) -> str:
    """The 5-field expression for `text`: itself, or a phrase with its open parts fixed by `key`'s
    hash. ValueError (with the fix) when it is neither."""
    words = " ".join(text.lower().split())
    if not words or not words[0].isalpha():
        try:
            return parse_cron(text).text
        except CronError as exc:
            raise ValueError(exc.message) from exc
    found = _PHRASE.match(words)
    if found is None or found["every"] not in PHRASES:
        raise _phrase_problem(text)
    every, on, hour_text = found["every"], found["on"], found["hour"]
    if on is not None and every != "weekly":
        raise ValueError(f'{text!r}: only "weekly" takes "on <weekday>" (like "weekly on friday")')
    if hour_text is not None and every == "hourly":
        raise ValueError(f'{text!r}: "hourly" takes no "at" (its minute is spread; use cron for one)')
    number = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")
    minute, hour = number % 60, (number // 60) % 24
    if hour_text is not None:
        hour, minute = int(hour_text), int(found["minute"])
        if hour > 23 or minute > 59:
            raise ValueError(f'{text!r}: "at" takes a time from 00:00 to 23:59')
    if every == "hourly":
        return f"{minute} * * * *"
    if every == "daily":
        return f"{minute} {hour} * * *"
    if every == "weekdays":
        return f"{minute} {hour} * * 1-5"
    if every == "monthly":
        return f"{minute} {hour} {1 + (number // 1440) % 28} * *"
    if on is None:
        weekday = (number // 1440) % 7
    elif on in _DAY_NAMES or on in WEEKDAYS:
        weekday = _DAY_NAMES.index(on) if on in _DAY_NAMES else WEEKDAYS.index(on)
    else:
        raise ValueError(f"{text!r}: {on!r} is not a weekday (monday … sunday)")
    return f"{minute} {hour} * * {weekday}"


@dataclass(frozen=True)
class Resolved:
    """A schedule as the server runs it: its fixed 5-field expression in its zone."""

    schedule: Schedule
    cron: str

    @property
    def name(self) -> str:
        """The schedule's name."""
        return self.schedule.name

    def next_after(self, after: datetime) -> datetime:
        """The first run after `after` (UTC)."""
        return next_after(parse_cron(self.cron), after, zone_named(self.schedule.timezone))


def resolve(repo: str, schedule: Schedule) -> Resolved:
    """Fix a schedule's phrase for this repository (a cron expression stays as written)."""
    return Resolved(schedule=schedule, cron=expand(schedule.cron, key=spread_key(repo, schedule.name)))


def spread_key(repo: str, name: str) -> str:
    """What a phrase's open parts are hashed from: the same on every server and Action run."""
    return f"{repo.lower()}/{name}"


def schedule_problems(schedules: list[Schedule]) -> list[str]:
    """Problem lines for what `schedules` say wrong: a `cron` that is neither an expression nor a
    phrase, an unknown time zone, a name used twice."""
    problems = []
    seen: dict[str, int] = {}
    for index, schedule in enumerate(schedules):
        try:
            expand(schedule.cron, key="")  # the spread does not change what is valid
        except ValueError as exc:
            problems.append(f"schedules[{index}].cron: {exc}")
        try:
            zone_named(schedule.timezone)
        except CronError as exc:
            problems.append(f"schedules[{index}].timezone: {exc.message}")
        if schedule.name in seen:
            problems.append(
                f'schedules[{index}].name: "{schedule.name}" is already the name of '
                f"schedules[{seen[schedule.name]}] — give each schedule its own name"
            )
        seen.setdefault(schedule.name, index)
    return problems


def frequency_problems(repo: str, schedules: list[Schedule], *, min_minutes: int) -> list[str]:
    """Problem lines for schedules that run more often than the operator allows
    (`PLAN_CASCADE_SCHEDULE_MIN_MINUTES`)."""
    problems = []
    floor = timedelta(minutes=min_minutes)
    for index, schedule in enumerate(schedules):
        try:
            resolved = resolve(repo, schedule)
            gap = _shortest_gap(resolved.cron, schedule.timezone)
        except (CronError, ValueError) as exc:
            problems.append(f"schedules[{index}].cron: {exc}")
            continue
        if gap < floor:
            problems.append(
                f'schedules[{index}].cron: "{schedule.cron}" runs every {_minutes(gap)} at times, more often '
                f"than this server allows (every {min_minutes} minutes at most, "
                "PLAN_CASCADE_SCHEDULE_MIN_MINUTES) — run it less often"
            )
    return problems


@functools.lru_cache(maxsize=256)
def _shortest_gap(cron: str, zone: str) -> timedelta:
    """Remembered: the config is read (and checked) for every plan, the answer never changes."""
    return shortest_gap(parse_cron(cron), zone_named(zone), start=_GAP_FROM)


def _minutes(gap: timedelta) -> str:
    minutes = int(gap.total_seconds() // 60)
    return "minute" if minutes == 1 else f"{minutes} minutes"
