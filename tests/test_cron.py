"""Cron expressions, phrases and their times in a zone: the pure part of `schedules:`."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from bot.config.cron import CronError, next_after, parse_cron, zone_named
from bot.config.load import load_repo_config
from bot.config.schedules import expand, frequency_problems, resolve
from bot.errors import RepoConfigError

BERLIN = ZoneInfo("Europe/Berlin")


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def runs(expression: str, start: str, count: int, zone: ZoneInfo = BERLIN) -> list[str]:
    cron, moment, found = parse_cron(expression), at(start), []
    for _ in range(count):
        moment = next_after(cron, moment, zone)
        found.append(moment.strftime("%Y-%m-%d %H:%M"))
    return found


def test_daily_at_six_in_berlin_keeps_six_local_across_both_dst_changes() -> None:
    # Clocks go forward on 29 March 2026 and back on 25 October 2026.
    assert runs("0 6 * * *", "2026-03-27 12:00", 3) == [
        "2026-03-28 05:00",
        "2026-03-29 04:00",
        "2026-03-30 04:00",
    ]
    assert runs("0 6 * * *", "2026-10-24 12:00", 2) == ["2026-10-25 05:00", "2026-10-26 05:00"]


def test_a_skipped_local_time_runs_once_and_a_repeated_one_runs_once() -> None:
    # 02:30 does not exist on 29 March in Berlin: it runs when the clock reaches it (03:30 CEST).
    assert runs("30 2 * * *", "2026-03-28 12:00", 2) == ["2026-03-29 01:30", "2026-03-30 00:30"]
    # 02:30 happens twice on 25 October: once, the first time (CEST, 00:30 UTC).
    assert runs("30 2 * * *", "2026-10-24 12:00", 2) == ["2026-10-25 00:30", "2026-10-26 01:30"]
    # Every 30 minutes through the skipped hour: no instant twice, none backwards.
    seen = runs("*/30 * * * *", "2026-03-28 23:40", 6)
    assert seen == sorted(set(seen)) and len(seen) == 6


def test_fields_lists_ranges_steps_and_names() -> None:
    assert runs("15,45 9-10 * * mon-fri", "2026-11-27 09:20", 4, ZoneInfo("UTC")) == [
        "2026-11-27 09:45",
        "2026-11-27 10:15",
        "2026-11-27 10:45",
        "2026-11-30 09:15",  # Friday, then Monday
    ]
    assert parse_cron("0 0 * * 7").weekdays == frozenset({0})  # Sunday is 0 and 7
    assert runs("0 0 1 jan,jul *", "2026-02-01 00:00", 2, ZoneInfo("UTC")) == [
        "2026-07-01 00:00",
        "2027-01-01 00:00",
    ]


def test_both_day_fields_restricted_match_either_day() -> None:
    # The 13th, or any Friday (cron's rule when both are restricted).
    found = runs("0 12 13 * 5", "2026-11-01 00:00", 3, ZoneInfo("UTC"))
    assert found == ["2026-11-06 12:00", "2026-11-13 12:00", "2026-11-20 12:00"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("* * * *", "has 4 fields: a cron expression has 5"),
        ("60 * * * *", "the minute field has 60: it must be between 0 and 59"),
        ("0 24 * * *", "the hour field has 24"),
        ("0 0 * foo *", "the month field has 'foo'"),
        ("*/0 * * * *", "step '0'"),
        ("0 0 5-1 * *", "runs backwards"),
        ("0 0 ,1 * *", "empty part"),
    ],
)
def test_bad_expressions_say_which_field(text: str, message: str) -> None:
    with pytest.raises(CronError, match=message):
        parse_cron(text)


def test_an_expression_that_never_fires_is_refused() -> None:
    with pytest.raises(CronError, match="never fires"):
        next_after(parse_cron("0 0 30 2 *"), at("2026-01-01 00:00"), BERLIN)


def test_an_unknown_zone_is_named() -> None:
    with pytest.raises(CronError, match="'Mars/Olympus' is not an IANA time zone"):
        zone_named("Mars/Olympus")


def test_phrases_fix_what_they_leave_open_by_a_hash_of_repository_and_name() -> None:
    assert expand("weekly on monday at 06:00", key="o/r/x") == "0 6 * * 1"
    assert expand("weekdays at 9:30", key="o/r/x") == "30 9 * * 1-5"
    assert expand("0 6 * * 1", key="o/r/x") == "0 6 * * 1"
    daily = {expand("daily", key=f"o/r/{n}") for n in range(20)}
    assert len(daily) > 10, "twenty schedules saying daily do not all fire at one time"
    assert expand("daily", key="o/r/x") == expand("daily", key="o/r/x"), "the same every time"
    minute, hour, dom, *_ = expand("monthly", key="o/r/x").split()
    assert 0 <= int(minute) < 60 and 0 <= int(hour) < 24 and 1 <= int(dom) <= 28
    schedule = load_repo_config("schedules:\n  - {name: a, cron: hourly, title: t, task: t}\n").schedules[0]
    assert resolve("Octo/Repo", schedule).cron == resolve("octo/repo", schedule).cron


def config_problems(entries: str) -> list[str]:
    with pytest.raises(RepoConfigError) as caught:
        load_repo_config("schedules:\n" + entries)
    return caught.value.problems


def test_invalid_schedules_are_refused_with_the_key_and_the_fix() -> None:
    problems = config_problems(
        "  - {name: deps, cron: '61 * * * *', title: t, task: t}\n"
        "  - {name: notes, cron: 'every day', title: t, task: t}\n"
        "  - {name: docs, cron: daily, timezone: Europe/Nowhere, title: t, task: t}\n"
        "  - {name: deps, cron: 'weekly on funday', title: t, task: t}\n"
    )
    assert problems == [
        "schedules[0].cron: the minute field has 61: it must be between 0 and 59",
        "schedules[1].cron: 'every day' is neither a 5-field cron expression nor a phrase: use e.g. "
        '"0 6 * * 1", "daily", "weekdays at 09:30", "weekly on monday at 06:00" or "monthly" '
        "(phrases: hourly, daily, weekdays, weekly, monthly)",
        "schedules[2].timezone: 'Europe/Nowhere' is not an IANA time zone: use a name like "
        '"UTC", "Europe/Berlin" or "America/New_York"',
        "schedules[3].cron: 'weekly on funday': 'funday' is not a weekday (monday … sunday)",
        'schedules[3].name: "deps" is already the name of schedules[0] — give each schedule its own name',
    ]


def test_missing_keys_and_unknown_keys_are_reported_like_any_other() -> None:
    problems = config_problems("  - {name: deps, cron: daily, task: t, tittle: x}\n")
    assert any(p.startswith("schedules[0].title: required key is missing") for p in problems)
    assert any(p.startswith('schedules[0].tittle: unknown key — did you mean "title"?') for p in problems)


def test_a_schedule_more_often_than_the_operator_allows_is_refused() -> None:
    config = load_repo_config(
        "schedules:\n"
        "  - {name: often, cron: '*/5 * * * *', title: t, task: t}\n"
        "  - {name: twice, cron: '0,30 6 * * *', title: t, task: t}\n"
        "  - {name: fine, cron: hourly, title: t, task: t}\n"
        "  - {name: leap, cron: '0 0 29 2 *', title: t, task: t}\n"
    )
    problems = frequency_problems("o/r", config.schedules, min_minutes=60)
    assert problems == [
        'schedules[0].cron: "*/5 * * * *" runs every 5 minutes at times, more often than this server '
        "allows (every 60 minutes at most, PLAN_CASCADE_SCHEDULE_MIN_MINUTES) — run it less often",
        'schedules[1].cron: "0,30 6 * * *" runs every 30 minutes at times, more often than this server '
        "allows (every 60 minutes at most, PLAN_CASCADE_SCHEDULE_MIN_MINUTES) — run it less often",
    ]
    assert frequency_problems("o/r", config.schedules, min_minutes=1) == []
