"""The first answer in few GitHub round trips: the 👀 first once the config is known, then every
read the job needs at once. GitHub is given 50 ms a request so that overlapping requests show.

The counts are structural (which request waited for which), not timings.
"""

from __future__ import annotations

import copy
import functools
import time
from pathlib import Path
from typing import Any

import pytest

from bot.github.throttle import Throttle
from bot.testing.deliveries import load_fixture
from tests.harness import INSTALLATION, REPO, Harness, commented, labeled

PRD = """```prd
version: 1
title: Two
summary: Two stories.
stories:
  - id: STORY-001
    title: One
    acceptance_criteria: ["one.txt holds 1 line"]
  - id: STORY-002
    title: Two
    depends_on: [STORY-001]
    acceptance_criteria: ["two.txt holds 2 lines"]
```
"""


@pytest.fixture
async def h(tmp_path: Path):
    async with Harness(tmp_path) as harness:
        for number in (1, 2, 3):
            harness.fake.add_issue(REPO, title=f"Issue {number}", body=PRD)
        harness.fake.set_permission(REPO, "maint", "maintain")
        harness.fake.set_permission(REPO, "other", "write")
        yield harness


def _since(h: Harness) -> float:
    return h.fake.clock()


async def _label(h: Harness, number: int, sender: str) -> float:
    since = _since(h)
    await h.deliver("issues", labeled(number=number, sender=sender, clone_url="https://github.example/x.git"))
    await h.drain()
    return since


def _answered(h: Harness, since: float, method: str, path: str) -> Any:
    return next(r for r in h.fake.requests if r.at >= since and r.method == method and r.path == path)


async def test_every_read_goes_first_then_the_eyes_and_the_plan_comment_two_round_trips(h: Harness) -> None:
    await _label(h, 1, "maint")  # learns the config (and the token)
    h.fake.latency = 0.05
    since = await _label(h, 2, "other")  # a user whose permission is not cached
    permission = _answered(h, since, "GET", f"/repos/{REPO}/collaborators/other/permission")
    eyes = _answered(h, since, "POST", f"/repos/{REPO}/issues/2/reactions")
    assert eyes.at >= permission.done, "no write before the sender's write access is known"
    assert h.fake.round_trips(eyes, since=since) == 2
    made = _answered(h, since, "POST", f"/repos/{REPO}/issues/2/comments")
    assert h.fake.round_trips(made, since=since) == 2, "the comment waits for the reads, not the 👀"
    reads = [r for r in h.fake.requests if r.at >= since and r.method == "GET"]
    assert {r.path for r in reads} >= {
        f"/repos/{REPO}/collaborators/other/permission",
        f"/repos/{REPO}/contents/.github/plan-cascade.yml",
        f"/repos/{REPO}/issues/2",
        f"/repos/{REPO}/contents/pyproject.toml",
    }
    assert all(h.fake.round_trips(r, since=since) == 1 for r in reads), "every read in the first round trip"


async def test_a_writer_whose_permission_is_cached_gets_the_eyes_in_the_first_round_trip(h: Harness) -> None:
    await _label(h, 1, "maint")  # learns the config, the token and maint's permission
    h.fake.latency = 0.05
    since = await _label(h, 2, "maint")
    eyes = _answered(h, since, "POST", f"/repos/{REPO}/issues/2/reactions")
    assert h.fake.round_trips(eyes, since=since) == 1, "with the reads"


async def test_a_writer_seen_lately_gets_the_eyes_at_once_while_the_permission_is_read_again(
    h: Harness,
) -> None:
    now = [0.0]
    h.services.permissions.clock = lambda: now[0]
    await _label(h, 1, "maint")
    now[0] += 600  # ten minutes later: the permission is read again before anything is decided
    h.fake.latency = 0.05
    since = await _label(h, 2, "maint")
    permission = _answered(h, since, "GET", f"/repos/{REPO}/collaborators/maint/permission")
    eyes = _answered(h, since, "POST", f"/repos/{REPO}/issues/2/reactions")
    assert h.fake.round_trips(permission, since=since) == 1
    assert h.fake.round_trips(eyes, since=since) == 1, "a writer GitHub named lately: the 👀 needs no wait"
    h.fake.set_permission(REPO, "maint", "read")  # demoted meanwhile
    now[0] += 600
    await _label(h, 3, "maint")
    assert not h.plan_comments(3), "the decision is the fresh read's"
    assert "has read access" in h.comments(3)[-1]


class ThrottleClock:
    """The throttle's clock: it moves only when the throttle sleeps (or the test says so)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.slept_at: list[float] = []
        """When (on the fake GitHub's clock, the real one) each sleep began."""

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.slept_at.append(time.monotonic())
        self.now += seconds


async def test_a_repository_with_manifests_and_a_cold_config_gets_its_plan_in_three_round_trips(
    tmp_path: Path,
) -> None:
    clock = ThrottleClock()
    # GitHub's pacing as served: 80 a minute, one a second sustained, a burst of three.
    pacing = functools.partial(Throttle, per_minute=80, min_interval=1.0, clock=clock, sleep=clock.sleep)
    async with Harness(tmp_path, throttle=pacing) as h:
        for number in (1, 2):
            h.fake.add_issue(REPO, title=f"Issue {number}", body=PRD)
        h.fake.set_permission(REPO, "maint", "maintain")
        h.fake.set_file(REPO, "pyproject.toml", '[project]\nname = "app"\nversion = "1"\n')
        await _label(h, 1, "maint")  # the installation token
        clock.now += 60.0  # a minute later
        h.services.repo_cache.forget(REPO)  # the config is cold again
        h.fake.latency = 0.05
        paused = len(clock.sleeps)
        since = await _label(h, 2, "maint")
        first = next(r for r in h.fake.requests if r.at >= since)
        assert first.path == f"/repos/{REPO}/contents/.github/plan-cascade.yml"
        eyes = _answered(h, since, "POST", f"/repos/{REPO}/issues/2/reactions")
        assert h.fake.round_trips(eyes, since=since) == 2
        manifest = _answered(h, since, "GET", f"/repos/{REPO}/contents/pyproject.toml")
        assert h.fake.round_trips(manifest, since=since) == 2, "read with the tree, not after it"
        made = _answered(h, since, "POST", f"/repos/{REPO}/issues/2/comments")
        assert h.fake.round_trips(made, since=since) == 3
        early = [at for at in clock.slept_at[paused:] if at < made.at]
        assert early == [], "no throttle wait before the first plan comment"
        plan = h.plan_comments(2)[-1].body
        assert "pyproject.toml" in plan, "setup was detected from the manifest read in the prefetch"


async def test_a_plan_command_reads_everything_with_its_eyes_in_one_round_trip(h: Harness) -> None:
    await _label(h, 1, "maint")
    h.fake.latency = 0.05
    since = _since(h)
    command = commented(
        number=3,
        body="/plan-cascade plan",
        user="maint",
        association="MEMBER",
        clone_url="https://x.test/y.git",
    )
    await h.deliver("issue_comment", command)
    await h.drain()
    made = _answered(h, since, "POST", f"/repos/{REPO}/issues/3/comments")
    assert h.fake.round_trips(made, since=since) == 2  # 👀 on the comment with the reads, the plan


REQUIREMENTS = {
    "pyproject.toml": '[project]\nname = "app"\nversion = "1"\n',
    "requirements/dev.txt": "-r base.txt\npytest\n",
    "requirements/base.txt": "httpx\n",
}


async def test_requirement_files_anywhere_cost_no_extra_round_trip_on_a_cold_config(tmp_path: Path) -> None:
    clock = ThrottleClock()
    pacing = functools.partial(Throttle, per_minute=80, min_interval=1.0, clock=clock, sleep=clock.sleep)
    async with Harness(tmp_path, throttle=pacing) as h:
        for number in (1, 2):
            h.fake.add_issue(REPO, title=f"Issue {number}", body=PRD)
        h.fake.set_permission(REPO, "maint", "maintain")
        for path, text in REQUIREMENTS.items():
            h.fake.set_file(REPO, path, text)
        await _label(h, 1, "maint")  # the installation token
        clock.now += 60.0
        h.services.repo_cache.forget(REPO)  # the config is cold again
        h.fake.latency = 0.05
        since = await _label(h, 2, "maint")
        tree = next(r for r in h.fake.requests if r.at >= since and "/git/trees/" in r.path)
        assert h.fake.round_trips(tree, since=since) == 1, "the tree is read with the config"
        for path in REQUIREMENTS:
            read = _answered(h, since, "GET", f"/repos/{REPO}/contents/{path}")
            assert h.fake.round_trips(read, since=since) == 2, f"{path} is read with the other reads"
        made = _answered(h, since, "POST", f"/repos/{REPO}/issues/2/comments")
        assert h.fake.round_trips(made, since=since) == 3
        misses = [
            r.path for r in h.fake.requests if r.at >= since and r.status == 404 and "/contents/" in r.path
        ]
        assert misses == [f"/repos/{REPO}/contents/.github/plan-cascade.yml"], (
            "no manifest read on speculation"
        )
        assert "requirements/dev.txt" in h.plan_comments(2)[-1].body


async def test_a_label_that_is_not_the_trigger_reads_no_tree(h: Harness) -> None:
    h.services.repo_cache.forget(REPO)
    since = _since(h)
    other = labeled(number=1, sender="maint", clone_url="https://github.example/x.git")
    other["label"]["name"] = "bug"
    await h.deliver("issues", other)
    await h.drain()
    assert [r for r in h.fake.requests if r.at >= since and "/git/trees/" in r.path] == []


async def test_a_permission_error_still_fails_closed(h: Harness) -> None:
    await _label(h, 1, "maint")
    h.fake.fail_next("GET", rf"/repos/{REPO}/collaborators/other/permission", status=502, times=10)
    await _label(h, 2, "other")
    assert not [c for c in h.fake.comments(REPO, 2) if "plan-cascade:plan" in c.body]
    assert "could not confirm your permission" in h.comments(2)[-1]


async def test_push_member_and_repository_events_forget_what_they_change(h: Harness) -> None:
    await _label(h, 1, "maint")
    cache, permissions = h.services.repo_cache, h.services.permissions
    assert cache.config(REPO, "main") is not None
    push: dict[str, Any] = copy.deepcopy(load_fixture("push.event.1"))
    push["repository"].update({"full_name": REPO, "default_branch": "main"})
    push["installation"] = {"id": INSTALLATION}
    push.update({"ref": "refs/heads/main", "forced": False})
    push["commits"] = [{"added": [], "removed": [], "modified": ["README.md"]}]
    await h.deliver("push", push)
    await h.drain()
    assert cache.config(REPO, "main") is not None, "a push that does not touch the config keeps it"
    push["commits"] = [{"added": [], "removed": [], "modified": [".github/plan-cascade.yml"]}]
    await h.deliver("push", push, delivery="push-2")
    await h.drain()
    assert cache.config(REPO, "main") is None
    # The next label reads the config again before the 👀.
    since = await _label(h, 2, "maint")
    first = next(r for r in h.fake.requests if r.at >= since)
    assert first.path == f"/repos/{REPO}/contents/.github/plan-cascade.yml"
    assert ("octo-org/hello-world", "maint") in permissions._entries
    member = {
        "action": "edited",
        "member": {"login": "maint", "type": "User"},
        "repository": push["repository"],
        "sender": push["sender"],
        "installation": {"id": INSTALLATION},
    }
    await h.deliver("member", member)
    await h.drain()
    assert ("octo-org/hello-world", "maint") not in permissions._entries
