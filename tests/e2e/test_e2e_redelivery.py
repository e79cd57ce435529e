"""A label delivered while the server was down is planned once the real server starts:
GitHub never resends it by itself, and the test resends nothing either."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.testing.fake_github import FakeGitHub
from tests.e2e.world import PRD, REPO, World, make_world, payload

pytestmark = pytest.mark.e2e
LABELED = payload(
    "issues.labeled.1", number=1, label={"name": "plan-cascade"}, sender={"login": "maint", "type": "User"}
)


def _label_while_down(fake: FakeGitHub) -> None:
    fake.add_issue(REPO, title="Greetings", body=PRD)
    attempt = asyncio.run(fake.hooks.deliver("issues", LABELED))
    assert attempt.status == "failed to connect to host"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from make_world(tmp_path, before_start=_label_while_down)


def test_a_label_sent_while_the_server_was_down_gets_its_plan(world: World) -> None:
    comment, state = world.wait(lambda: world.plan()[1] and world.plan())
    assert state is not None and comment is not None
    (guid,) = {d.guid for d in world.fake.hooks.deliveries}
    assert [(d.redelivery, d.status) for d in world.fake.hooks.attempts_of(guid)] == [
        (False, "failed to connect to host"),
        (True, "OK"),
    ]
    assert len(world.fake.requests_to("POST", r".*/app/hook/deliveries/\d+/attempts")) == 1
