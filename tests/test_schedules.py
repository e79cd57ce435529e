"""Scheduled plans against the fake GitHub, with a clock the test moves: each slot fires once,
opens an issue planned like a labelled one, never approved by the schedule."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.config.repo import CONFIG_PATH
from bot.db import schedules as table
from bot.handlers.approval import POLL_JOB
from bot.plan.state import PlanStatus
from bot.plan.state_block import decode_state
from bot.rendering.schedules import parse_schedule_marker
from bot.schedules.runs import LOOK_GROUP, LOOK_JOB
from bot.testing.deliveries import load_fixture
from tests.harness import INSTALLATION, REPO, Harness, _repo_fields, labeled
from tests.test_github_flow import PRD

TASK = PRD  # a `prd` block: planned without a model


class Clock:
    """The time the test says it is."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def config(*entries: dict[str, Any]) -> str:
    return yaml.safe_dump({"schedules": list(entries)})


def entry(
    name: str = "deps", when: str = "daily at 06:00", zone: str = "Europe/Berlin", **more: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "cron": when,
        "timezone": zone,
        "title": "Refresh dependencies",
        "task": TASK,
        **more,
    }


def push(*paths: str) -> dict[str, Any]:
    payload = copy.deepcopy(load_fixture("push.event.1"))
    _repo_fields(payload, REPO, "")
    payload["ref"] = "refs/heads/main"
    payload["commits"] = [{"id": "a" * 40, "added": [], "modified": list(paths), "removed": []}]
    return payload


async def start(h: Harness, clock: Clock, text: str) -> None:
    """The config on the default branch, a push that touches it, the clock in place."""
    h.services.clock = clock
    h.runtime.queue.clock = clock
    h.fake.set_file(REPO, CONFIG_PATH, text)
    assert await h.deliver("push", push(CONFIG_PATH)) == 202
    await h.drain()


async def tick(h: Harness, clock: Clock, when: datetime) -> list[int]:
    """Move the clock, let the poll queue a look, run everything; the issues opened meanwhile."""
    before = set(h.fake.repo(REPO).issues)
    clock.now = when
    await h.runtime.queue.enqueue(kind=LOOK_JOB, group_key=LOOK_GROUP, payload={}, unique=True)
    await h.drain()
    return sorted(set(h.fake.repo(REPO).issues) - before)


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


async def row(h: Harness, name: str = "deps") -> Any:
    found = [r for r in await table.rows(h.runtime.db, repo=REPO) if r.name == name]
    return found[0] if found else None


def close(h: Harness, number: int) -> None:
    h.fake.repo(REPO).issues[number].state = "closed"


async def test_daily_at_six_in_berlin_fires_once_at_the_right_instant_across_dst(tmp_path: Path) -> None:
    # Clocks in Berlin go forward on 28 March 2027: 06:00 is 05:00 UTC before, 04:00 UTC after.
    clock = Clock(utc("2027-03-26 12:00"))
    async with Harness(tmp_path) as h:
        await start(h, clock, config(entry()))
        assert table.aware((await row(h)).next_at) == utc("2027-03-27 05:00")
        assert await tick(h, clock, utc("2027-03-27 04:59")) == []
        first = await tick(h, clock, utc("2027-03-27 05:00"))
        assert len(first) == 1
        assert await tick(h, clock, utc("2027-03-27 05:01")) == [], "a slot fires once"
        issue = h.fake.repo(REPO).issues[first[0]]
        assert issue.title == "Refresh dependencies (2027-03-27)" and issue.user == "plan-cascade[bot]"
        assert "plan-cascade" in issue.labels and "Rate limiting" in issue.body
        assert parse_schedule_marker(issue.body) == ("deps", "2027-03-27T05:00:00+00:00")
        close(h, first[0])  # a person closed it: the next run opens a new issue
        assert await tick(h, clock, utc("2027-03-28 03:59")) == []
        second = await tick(h, clock, utc("2027-03-28 04:00"))  # 06:00 CEST
        assert len(second) == 1
        assert h.fake.repo(REPO).issues[second[0]].title == "Refresh dependencies (2027-03-28)"
        assert await tick(h, clock, utc("2027-03-28 05:00")) == [], "not again at the old offset"
        assert table.aware((await row(h)).next_at) == utc("2027-03-29 04:00")
        record = await row(h)
        assert (record.runs, record.skips, record.last_issue, record.last_outcome) == (
            2,
            0,
            second[0],
            "opened",
        )


async def test_the_run_is_planned_and_never_approved_by_the_schedule(tmp_path: Path) -> None:
    clock = Clock(utc("2027-01-04 05:30"))
    async with Harness(tmp_path) as h:
        await start(h, clock, config(entry(when="0 6 * * *", zone="UTC")))
        [number] = await tick(h, clock, utc("2027-01-04 06:00"))
        [comment] = h.plan_comments(number)
        state = decode_state(comment.body)
        assert state.status == PlanStatus.AWAITING_APPROVAL and state.approvals == []
        assert state.scheduled is not None and state.scheduled.name == "deps"
        assert "Opened by the schedule `deps` for 2027-01-04 06:00 UTC" in comment.body
        assert "It runs next 2027-01-05 06:00 UTC" in comment.body
        assert "A schedule never approves" in comment.body
        # The approval poll runs; nobody approved: nothing starts.
        await h.runtime.queue.enqueue(
            kind=POLL_JOB,
            group_key=f"{REPO}#{number}",
            payload={"repo": REPO, "issue": number, "installation_id": INSTALLATION},
        )
        await h.drain()
        assert h.started == [] and not h.intercepted
        assert decode_state(h.plan_comments(number)[0].body).status == PlanStatus.AWAITING_APPROVAL


async def test_a_run_while_the_last_issue_still_waits_adds_a_line_instead_of_an_issue(tmp_path: Path) -> None:
    clock = Clock(utc("2027-01-04 05:30"))
    async with Harness(tmp_path) as h:
        await start(h, clock, config(entry(when="0 6 * * *", zone="UTC")))
        [number] = await tick(h, clock, utc("2027-01-04 06:00"))
        assert await tick(h, clock, utc("2027-01-05 06:00")) == []
        assert await tick(h, clock, utc("2027-01-06 06:00")) == []
        skipped = [c for c in h.comments(number) if c.startswith("⏭️ skipped: still waiting")]
        assert len(skipped) == 2 and "due 2027-01-05 06:00 UTC" in skipped[0]
        assert "runs next 2027-01-07 06:00 UTC" in skipped[1]
        record = await row(h)
        assert (record.runs, record.skips, record.last_issue, record.last_outcome) == (
            1,
            2,
            number,
            "skipped",
        )
        # Approved (by a person), the issue no longer waits: the next run opens a new one.
        from tests.harness import commented

        await h.deliver(
            "issue_comment",
            commented(number=number, body="/plan-cascade approve", created_at="2027-01-06T07:00:00Z"),
        )
        await h.drain()
        assert len(await tick(h, clock, utc("2027-01-07 06:00"))) == 1


async def test_a_server_down_over_three_slots_fires_once_on_return(tmp_path: Path) -> None:
    clock = Clock(utc("2027-01-04 10:30"))
    async with Harness(tmp_path) as h:
        await start(h, clock, config(entry(when="0 * * * *", zone="UTC")))
        # Down from 10:30 to 14:10: 11:00, 12:00, 13:00 and 14:00 were missed.
        assert len(await tick(h, clock, utc("2027-01-04 14:10"))) == 1
        assert table.aware((await row(h)).next_at) == utc("2027-01-04 15:00")
        assert await tick(h, clock, utc("2027-01-04 14:50")) == []
        assert (await row(h)).runs == 1


async def test_removing_the_schedule_stops_it(tmp_path: Path) -> None:
    clock = Clock(utc("2027-01-04 05:30"))
    async with Harness(tmp_path) as h:
        await start(
            h,
            clock,
            config(entry(when="0 6 * * *", zone="UTC"), entry(name="notes", when="0 7 * * *", zone="UTC")),
        )
        assert {r.name for r in await table.rows(h.runtime.db)} == {"deps", "notes"}
        h.fake.set_file(REPO, CONFIG_PATH, config(entry(name="notes", when="0 7 * * *", zone="UTC")))
        assert await h.deliver("push", push(CONFIG_PATH)) == 202  # the push that removes it
        await h.drain()
        assert {r.name for r in await table.rows(h.runtime.db)} == {"notes"}
        assert await tick(h, clock, utc("2027-01-04 06:30")) == []
        # Removed without a push seen (the poll's read comes later): the run reads the config first.
        h.fake.set_file(REPO, CONFIG_PATH, "trigger_label: plan-cascade\n")
        assert await tick(h, clock, utc("2027-01-04 07:00")) == []
        assert await table.rows(h.runtime.db) == []


async def test_a_changed_time_reschedules_and_other_pushes_do_nothing(tmp_path: Path) -> None:
    clock = Clock(utc("2027-01-04 05:30"))
    async with Harness(tmp_path) as h:
        await start(h, clock, config(entry(when="0 6 * * *", zone="UTC")))
        h.fake.set_file(REPO, CONFIG_PATH, config(entry(when="0 9 * * *", zone="UTC")))
        assert await h.deliver("push", push("README.md")) == 202
        await h.drain()
        assert table.aware((await row(h)).next_at) == utc("2027-01-04 06:00"), "the config was not touched"
        assert await h.deliver("push", push(CONFIG_PATH)) == 202
        await h.drain()
        assert table.aware((await row(h)).next_at) == utc("2027-01-04 09:00")
        assert await tick(h, clock, utc("2027-01-04 06:00")) == []


async def test_disabled_schedules_do_not_run(tmp_path: Path) -> None:
    clock = Clock(utc("2027-01-04 05:30"))
    async with Harness(tmp_path) as h:
        await start(h, clock, config(entry(when="0 6 * * *", zone="UTC", enabled=False)))
        record = await row(h)
        assert record.next_at is None and not record.enabled
        assert await tick(h, clock, utc("2027-01-05 06:00")) == []


async def test_a_schedule_more_often_than_the_operator_allows_is_a_config_problem(tmp_path: Path) -> None:
    clock = Clock(utc("2027-01-04 05:30"))
    async with Harness(tmp_path) as h:  # PLAN_CASCADE_SCHEDULE_MIN_MINUTES defaults to 60
        await start(h, clock, config(entry(when="*/10 * * * *", zone="UTC")))
        assert await table.rows(h.runtime.db) == [], "nothing is scheduled"
        # And where config problems go today: on the issue that asked for a plan.
        h.fake.add_issue(REPO, title="x", body=PRD)
        await h.deliver("issues", labeled(number=1))
        await h.drain()
        [reply] = h.comments(1)
        assert '`schedules[0].cron`: "\\*/10 \\* \\* \\* \\*" runs every 10 minutes at times' in reply
        assert "every 60 minutes at most, PLAN\\_CASCADE\\_SCHEDULE\\_MIN\\_MINUTES" in reply


async def test_an_operator_may_allow_every_minute(tmp_path: Path) -> None:
    clock = Clock(utc("2027-01-04 05:30"))
    async with Harness(tmp_path, PLAN_CASCADE_SCHEDULE_MIN_MINUTES="1") as h:
        await start(h, clock, config(entry(when="* * * * *", zone="UTC")))
        assert table.aware((await row(h)).next_at) == utc("2027-01-04 05:31")


async def test_without_issues_write_github_refuses_the_issue_and_the_run_fails(tmp_path: Path) -> None:
    clock = Clock(utc("2027-01-04 05:30"))
    async with Harness(tmp_path) as h:
        await start(h, clock, config(entry(when="0 6 * * *", zone="UTC")))
        h.fake.repo(REPO).app_permissions["issues"] = "read"
        clock.now = utc("2027-01-04 06:00")
        await h.runtime.queue.enqueue(kind=LOOK_JOB, group_key=LOOK_GROUP, payload={}, unique=True)
        with pytest.raises(AssertionError, match="Resource not accessible by integration"):
            await h.drain()
        assert h.fake.repo(REPO).issues == {}


async def test_installing_the_app_reads_the_schedules(tmp_path: Path) -> None:
    clock = Clock(utc("2027-01-04 05:30"))
    async with Harness(tmp_path) as h:
        h.services.clock = clock
        h.runtime.queue.clock = clock
        h.fake.set_file(REPO, CONFIG_PATH, config(entry(when="0 6 * * *", zone="UTC")))
        payload = copy.deepcopy(load_fixture("installation_repositories.added.1"))
        payload["installation"] = {"id": INSTALLATION, "node_id": "MDIz"}
        payload["repositories_added"] = [{"full_name": REPO, "name": "hello-world", "id": 1}]
        assert await h.deliver("installation_repositories", payload) == 202
        await h.drain()
        assert table.aware((await row(h)).next_at) == utc("2027-01-04 06:00")


async def test_close_older_closes_the_waiting_issue_and_opens_the_new_run(tmp_path: Path) -> None:
    clock = Clock(utc("2027-01-04 05:30"))
    async with Harness(tmp_path) as h:
        await start(h, clock, config(entry(when="0 6 * * *", zone="UTC", close_older=True)))
        [first] = await tick(h, clock, utc("2027-01-04 06:00"))
        [second] = await tick(h, clock, utc("2027-01-05 06:00"))
        older = h.fake.repo(REPO).issues[first]
        assert (older.state, older.state_reason) == ("closed", "not_planned")
        assert h.comments(first)[-1].startswith(f"⏭️ closed: the schedule `deps` opened #{second}")
        assert h.fake.repo(REPO).issues[second].state == "open" and len(h.plan_comments(second)) == 1
        assert (await row(h)).runs == 2


async def test_an_invalid_config_keeps_the_schedules_and_says_why(tmp_path: Path) -> None:
    clock = Clock(utc("2027-01-04 05:30"))
    async with Harness(tmp_path) as h:
        await start(h, clock, config(entry(when="0 6 * * *", zone="UTC")))
        h.fake.set_file(REPO, CONFIG_PATH, config(entry(when="0 6 * * *", zone="Mars/Olympus")))
        assert await h.deliver("push", push(CONFIG_PATH)) == 202
        await h.drain()
        record = await row(h)
        assert table.aware(record.next_at) == utc("2027-01-04 06:00"), "nothing was lost"
        assert "schedules[0].timezone: 'Mars/Olympus' is not an IANA time zone" in record.last_error
        # The run reads the config too: nothing is opened, the failure is counted and shown.
        assert await tick(h, clock, utc("2027-01-04 06:00")) == []
        record = await row(h)
        assert record.last_outcome == "failed" and "is invalid" in record.last_error


async def test_a_repository_the_app_leaves_loses_its_schedules(tmp_path: Path) -> None:
    clock = Clock(utc("2027-01-04 05:30"))
    async with Harness(tmp_path) as h:
        await start(h, clock, config(entry(when="0 6 * * *", zone="UTC")))
        payload = copy.deepcopy(load_fixture("installation_repositories.removed.1"))
        payload["installation"] = {"id": INSTALLATION, "node_id": "MDIz"}
        payload["repositories_removed"] = [{"full_name": REPO, "name": "hello-world", "id": 1}]
        assert await h.deliver("installation_repositories", payload) == 202
        await h.drain()
        assert await table.rows(h.runtime.db) == []


async def test_at_start_the_repositories_with_plans_are_read_for_schedules(tmp_path: Path) -> None:
    from bot.schedules.sync import queue_syncs

    clock = Clock(utc("2027-01-04 05:30"))
    async with Harness(tmp_path) as h:
        h.fake.add_issue(REPO, title="x", body=PRD)  # a plan made before the file had schedules
        await h.deliver("issues", labeled(number=1))
        await h.drain()
        h.services.clock, h.runtime.queue.clock = clock, clock
        h.fake.set_file(REPO, CONFIG_PATH, config(entry(when="0 6 * * *", zone="UTC")))
        await queue_syncs(h.services, everywhere=False)
        await h.drain()
        assert await table.rows(h.runtime.db) == [], "only repositories with schedules, between starts"
        await queue_syncs(h.services, everywhere=True)
        await h.drain()
        assert table.aware((await row(h)).next_at) == utc("2027-01-04 06:00")


async def test_a_forced_push_rereads_and_a_failed_read_waits_for_the_next(tmp_path: Path) -> None:
    from bot.schedules.sync import SYNC_JOB

    clock = Clock(utc("2027-01-04 05:30"))
    async with Harness(tmp_path) as h:
        await start(h, clock, config(entry(when="0 6 * * *", zone="UTC")))
        h.fake.set_file(REPO, CONFIG_PATH, config(entry(when="0 9 * * *", zone="UTC")))
        h.fake.fail_next("GET", rf".*/contents/{CONFIG_PATH}", status=403, message="Resource not accessible")
        payload = {"repo": REPO, "installation_id": INSTALLATION}
        await h.runtime.queue.enqueue(kind=SYNC_JOB, group_key=f"{REPO}#schedules", payload=payload)
        assert await h.drain() == ["done"]  # not retried: the next push or poll reads it
        assert table.aware((await row(h)).next_at) == utc("2027-01-04 06:00")
        forced = push("README.md") | {"forced": True}  # a rewritten history lists no file reliably
        assert await h.deliver("push", forced) == 202
        await h.drain()
        assert table.aware((await row(h)).next_at) == utc("2027-01-04 09:00")


async def test_the_fake_github_refuses_what_github_refuses_for_issues(tmp_path: Path) -> None:
    from bot.errors import GitHubError
    from bot.handlers.session import open_session

    async with Harness(tmp_path) as h:
        session = await open_session(h.services, repo=REPO, issue=0, installation_id=INSTALLATION)
        issue = await session.port.create_issue(REPO, title="t", body="b")
        h.fake.repo(REPO).app_permissions["issues"] = "read"
        with pytest.raises(GitHubError, match="403"):
            await session.port.close_issue(REPO, issue.number)
        h.fake.repo(REPO).app_permissions["issues"] = "write"
        h.fake.repo(REPO).has_issues = False
        with pytest.raises(GitHubError, match="410"):
            await session.port.create_issue(REPO, title="t2", body="b")
        await session.port.close_issue(REPO, issue.number)
        assert h.fake.repo(REPO).issues[issue.number].state_reason == "not_planned"
