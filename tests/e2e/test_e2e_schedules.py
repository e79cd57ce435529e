"""A schedule with the real server and the real clock: `* * * * *` (an operator allowed every
minute) opens its issue at the next minute and posts its plan comment, never approved."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bot.plan.state import PlanStatus
from bot.plan.state_block import decode_state
from bot.rendering.schedules import parse_schedule_marker
from bot.testing.deliveries import load_fixture
from bot.testing.fake_github import FakeGitHub
from tests.e2e.world import INSTALLATION, PRD, REPO, World, make_world

pytestmark = pytest.mark.e2e
CONFIG = ".github/plan-cascade.yml"


def _schedule(fake: FakeGitHub) -> None:
    entry = {"name": "greet", "cron": "* * * * *", "title": "Greetings", "task": PRD}
    fake.set_file(REPO, CONFIG, yaml.safe_dump({"schedules": [entry]}))


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    env = {"PLAN_CASCADE_SCHEDULE_MIN_MINUTES": "1", "PLAN_CASCADE_SCHEDULE_POLL_SECONDS": "1"}
    yield from make_world(tmp_path, extra_env=env, before_start=_schedule)


def push_touching_the_config() -> dict:
    data = copy.deepcopy(load_fixture("push.event.1"))
    data["repository"].update({"full_name": REPO, "name": "shop", "clone_url": "", "default_branch": "main"})
    data["repository"]["owner"]["login"] = "octo-org"
    data["installation"] = {"id": INSTALLATION}
    data["ref"] = "refs/heads/main"
    data["commits"] = [{"id": "b" * 40, "added": [], "modified": [CONFIG], "removed": []}]
    return data


def test_an_every_minute_schedule_opens_its_issue_and_posts_its_plan(world: World) -> None:
    assert world.post("push", push_touching_the_config()).status_code == 202
    # The slot is at most a minute away, the poll looks every second.
    issue = world.wait(lambda: world.fake.repo(REPO).issues.get(1), timeout=100)
    assert parse_schedule_marker(issue.body)[0] == "greet" and issue.user == "plan-cascade[bot]"
    comment, state = world.wait(lambda: world.plan()[1] and world.plan(), timeout=60)
    assert state.status == PlanStatus.AWAITING_APPROVAL and state.approvals == []
    assert "Opened by the schedule `greet`" in comment.body and "It runs next" in comment.body
    # The next minute's run finds the issue still waiting: one line, no second issue.
    world.wait(
        lambda: any("skipped: still waiting" in c.body for c in world.fake.comments(REPO, 1)), timeout=100
    )
    assert sorted(world.fake.repo(REPO).issues) == [1]
    assert decode_state(world.plan()[0].body).status == PlanStatus.AWAITING_APPROVAL
