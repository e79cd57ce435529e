"""The Action runs the repository's due schedules on `schedule` and `workflow_dispatch`, with the
server's code and GitHub as its only memory: a slot runs once however often the workflow runs."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import yaml

from bot.action.runner import run_action
from bot.action.schedules import latest_slot
from bot.config.load import load_repo_config
from bot.config.schedules import resolve
from bot.plan.state import PlanStatus
from bot.plan.state_block import decode_state
from bot.rendering.schedules import parse_schedule_marker
from tests.action.action_support import PRD, ActionWorld, repo_config
from tests.harness import REPO


def hourly_world(tmp_path: Path) -> ActionWorld:
    world = ActionWorld(tmp_path)
    world.fake.repo(REPO).issues.clear()  # the only issues are the schedule's
    entry = {"name": "hourly-chores", "cron": "0 * * * *", "title": "Chores", "task": PRD}
    text = repo_config(world.script) + yaml.safe_dump({"schedules": [entry]})
    world.fake.set_file(REPO, ".github/plan-cascade.yml", text)
    return world


def test_a_scheduled_workflow_run_opens_the_due_slot_once_and_plans_it(tmp_path: Path) -> None:
    world = hourly_world(tmp_path)
    run = lambda event: run_action(world.env(event, {}), transport=world.fake.transport())  # noqa: E731
    assert run("schedule") == 0  # the last top of the hour is never more than an hour ago
    [issue] = world.fake.repo(REPO).issues.values()
    assert parse_schedule_marker(issue.body)[0] == "hourly-chores" and issue.user == "github-actions[bot]"
    [comment] = world.plan_comments(issue.number)
    state = decode_state(comment.body)
    assert state.status == PlanStatus.AWAITING_APPROVAL and state.scheduled is not None
    assert "Opened by the schedule `hourly-chores`" in comment.body
    for event in ("schedule", "workflow_dispatch", "schedule"):
        assert run(event) == 0
    issues = world.fake.repo(REPO).issues
    # A new hour between the runs adds one still-waiting line for its slot; never a second issue.
    assert list(issues) == [issue.number]
    skips = [c.body for c in world.fake.comments(REPO, issue.number) if "skipped: still waiting" in c.body]
    assert len(skips) == len(set(skips)) <= 1
    assert decode_state(world.plan_comments(issue.number)[0].body).status == PlanStatus.AWAITING_APPROVAL


def test_a_closed_run_of_the_slot_is_not_opened_again(tmp_path: Path) -> None:
    world = hourly_world(tmp_path)
    assert run_action(world.env("schedule", {}), transport=world.fake.transport()) == 0
    [issue] = world.fake.repo(REPO).issues.values()
    issue.state = "closed"  # a person dropped this run
    slot = datetime.fromisoformat(parse_schedule_marker(issue.body)[1])
    assert run_action(world.env("schedule", {}), transport=world.fake.transport()) == 0
    opened = [i for i in world.fake.repo(REPO).issues.values() if i.number != issue.number]
    assert all(parse_schedule_marker(i.body)[1] != slot.isoformat() for i in opened)


def test_the_latest_slot_is_within_the_look_back() -> None:
    config = load_repo_config("schedules:\n  - {name: a, cron: '0 6 * * *', title: t, task: t}\n")
    daily = resolve("o/r", config.schedules[0])
    assert latest_slot(daily, datetime(2027, 1, 4, 6, 59, tzinfo=UTC)) == datetime(2027, 1, 4, 6, tzinfo=UTC)
    assert latest_slot(daily, datetime(2027, 1, 4, 7, 1, tzinfo=UTC)) is None, "too late: the next slot"
    assert latest_slot(daily, datetime(2027, 1, 4, 5, 59, tzinfo=UTC)) is None
