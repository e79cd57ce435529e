"""Cron expressions and the times they name, in a time zone: pure, no I/O.

Five fields, `minute hour day-of-month month day-of-week`, each `*`, a number, a range `a-b`, a
step `*/n` or `a-b/n`, or a list of those; months and weekdays may be named (`jan`, `mon`), Sunday
is 0 or 7. When both day fields are restricted a day matches either (as every cron does).

Times are wall-clock times in the schedule's zone (`zoneinfo`): a time that does not exist on the
day clocks go forward (02:30 in Europe/Berlin in March) runs when the clock reaches it (03:30,
the instant 02:30 would have been), and a time that happens twice when they go back runs once,
the first time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from bot.errors import PlanCascadeError

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, MONTHS),
    ("day of week", 0, 7, WEEKDAYS),
)
_HORIZON_DAYS = 366 * 8
"""How far `next_after` looks before it calls an expression one that never fires (`0 0 30 2 *`)."""


class CronError(PlanCascadeError):
    """An expression that is not a 5-field cron expression; the message says which field and why."""


def _number(text: str, *, low: int, high: int, names: tuple[str, ...], what: str) -> int:
    lowered = text.lower()
    if names and lowered in names:
        return names.index(lowered) + (1 if what == "month" else 0)
    if not text.isdigit():
        hint = f" or a name like {names[0]}" if names else ""
        raise CronError(f"the {what} field has {text!r}: expected a number {low}-{high}{hint}")
    value = int(text)
    if not low <= value <= high:
        raise CronError(f"the {what} field has {value}: it must be between {low} and {high}")
    return value


def _field(text: str, *, low: int, high: int, names: tuple[str, ...], what: str) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        spec, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronError(f"the {what} field has step {step_text!r}: expected a number above 0")
            step = int(step_text)
        if spec == "*":
            start, end = low, high
        elif "-" in spec:
            first, _, last = spec.partition("-")
            start = _number(first, low=low, high=high, names=names, what=what)
            end = _number(last, low=low, high=high, names=names, what=what)
            if end < start:
                raise CronError(f"the {what} field has the range {spec!r}, which runs backwards")
        elif spec:
            start = _number(spec, low=low, high=high, names=names, what=what)
            end = high if step_text else start
        else:
            raise CronError(f"the {what} field has an empty part in {text!r}")
        values.update(range(start, end + 1, step))
    return frozenset(values)


@dataclass(frozen=True)
class Cron:
    """A parsed expression: the allowed values of each field."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    """0 = Sunday … 6 = Saturday (7 is folded into 0)."""
    any_day: bool
    any_weekday: bool

    def matches_day(self, day: date) -> bool:
        """Whether the expression fires on `day` (at its hours and minutes)."""
        if day.month not in self.months:
            return False
        in_month, in_week = day.day in self.days, (day.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return in_month and in_week
        return in_month or in_week


def parse_cron(text: str) -> Cron:
    """Parse a 5-field expression; CronError names the field that is wrong."""
    parts = text.split()
    if len(parts) != 5:
        raise CronError(
            f"{text!r} has {len(parts)} field{'s' if len(parts) != 1 else ''}: a cron expression has 5 "
            '(minute hour day-of-month month day-of-week), like "0 6 * * 1"'
        )
    sets = [
        _field(part, low=low, high=high, names=names, what=what)
        for part, (what, low, high, names) in zip(parts, _FIELDS, strict=True)
    ]
    weekdays = frozenset(d % 7 for d in sets[4])
    return Cron(
        text=" ".join(parts),
        minutes=sets[0],
        hours=sets[1],
        days=sets[2],
        months=sets[3],
        weekdays=weekdays,
        any_day=parts[2].startswith("*"),
        any_weekday=parts[4].startswith("*"),
    )


def _instant(day: date, hour: int, minute: int, zone: ZoneInfo) -> datetime:
    """The UTC instant of a wall-clock time in `zone`: the first of two, or where a skipped one lands."""
    local = datetime.combine(day, time(hour, minute), tzinfo=zone)  # fold=0: the first, or before the gap
    return local.astimezone(UTC)


def next_after(cron: Cron, after: datetime, zone: ZoneInfo) -> datetime:
    """The first instant strictly after `after` (aware) when `cron` fires in `zone`, in UTC.

    CronError when the expression never fires (a day that does not exist, like 30 February)."""
    after = after.astimezone(UTC)
    day = after.astimezone(zone).date() - timedelta(days=1)  # a skipped hour may land on the day before
    for _ in range(_HORIZON_DAYS):
        if cron.matches_day(day):
            # Sorted as instants: around a skipped hour, wall-clock order and time order differ.
            instants = sorted({_instant(day, h, m, zone) for h in cron.hours for m in cron.minutes})
            later = next((at for at in instants if at > after), None)
            if later is not None:
                return later
        day += timedelta(days=1)
    raise CronError(f"{cron.text!r} never fires (no such day in {_HORIZON_DAYS // 366} years)")


def shortest_gap(cron: Cron, zone: ZoneInfo, *, start: datetime, runs: int = 400) -> timedelta:
    """The shortest time between two runs among the `runs` runs after `start` (the first burst of a
    rare expression is among them: each run is the next one the expression names)."""
    first = at = next_after(cron, start, zone)
    shortest = timedelta.max
    for _ in range(runs):
        later = next_after(cron, at, zone)
        shortest = min(shortest, later - at)
        if shortest <= timedelta(minutes=1) or later - first > timedelta(days=400):
            break  # nothing is shorter than a minute; a year holds every pattern of months and weekdays
        at = later
    return shortest


def zone_named(name: str) -> ZoneInfo:
    """The IANA time zone `name`; CronError when there is none."""
    try:
        return ZoneInfo(name)
    except (ValueError, KeyError) as exc:  # ZoneInfoNotFoundError is a KeyError
        raise CronError(
            f'{name!r} is not an IANA time zone: use a name like "UTC", "Europe/Berlin" or "America/New_York"'
        ) from exc
