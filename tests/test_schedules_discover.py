"""Repositories the server never heard of (installed before schedules, no plan here, no push to
their config since) are found at start and hourly through the App's installations, a bounded
number a pass; one an installation lost is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config.repo import CONFIG_PATH
from bot.db import schedules as table
from bot.schedules import discover
from bot.schedules.runs import LOOK_GROUP, LOOK_JOB
from bot.schedules.sync import queue_syncs
from tests.harness import INSTALLATION, REPO, Harness
from tests.test_schedules import Clock, config, entry, utc

TOOLS = "octo-org/tools"
LOST = "elsewhere/lost"


def reads(h: Harness, repo: str) -> int:
    """How often the config of `repo` was asked for."""
    return sum(1 for r in h.fake.requests if r.path.endswith(f"/repos/{repo}/contents/{CONFIG_PATH}"))


def scheduled(h: Harness, repo: str) -> None:
    h.fake.add_repo(repo)
    h.fake.set_file(repo, CONFIG_PATH, config(entry(when="0 6 * * *", zone="UTC")))


async def test_an_installed_repository_with_schedules_is_found_at_start_and_fires(tmp_path: Path) -> None:
    clock = Clock(utc("2027-01-04 05:30"))
    async with Harness(tmp_path) as h:
        h.services.clock, h.runtime.queue.clock = clock, clock
        scheduled(h, TOOLS)
        scheduled(h, LOST)
        h.fake.install(INSTALLATION, [REPO, TOOLS])
        h.fake.install(77, [LOST])
        h.fake.installations.installs[77].repositories.discard(LOST)  # the owner took it away
        await queue_syncs(h.services, everywhere=False)
        await h.drain()
        assert await table.rows(h.runtime.db) == [], "between starts only repositories with schedules"
        await queue_syncs(h.services, everywhere=True)
        await h.drain()
        found = await table.rows(h.runtime.db)
        assert [(r.repo, r.name, r.installation_id) for r in found] == [(TOOLS, "deps", INSTALLATION)]
        assert table.aware(found[0].next_at) == utc("2027-01-04 06:00")
        assert reads(h, LOST) == 0, "a repository its installation lost is not read"
        assert reads(h, REPO) == 1 and reads(h, TOOLS) == 1
        # An hour on: the repository without schedules is not read again; the one with is, as before.
        await queue_syncs(h.services, everywhere=True)
        await h.drain()
        assert reads(h, REPO) == 1 and reads(h, TOOLS) == 2
        assert not any(r.path.endswith(f"/repos/{LOST}") for r in h.fake.requests)
        before = set(h.fake.repo(TOOLS).issues)
        clock.now = utc("2027-01-04 06:00")
        await h.runtime.queue.enqueue(kind=LOOK_JOB, group_key=LOOK_GROUP, payload={}, unique=True)
        await h.drain()
        opened = sorted(set(h.fake.repo(TOOLS).issues) - before)
        assert len(opened) == 1
        assert h.fake.repo(TOOLS).issues[opened[0]].title == "Refresh dependencies (2027-01-04)"


async def test_a_pass_queues_at_most_its_bound_and_the_next_pass_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(discover, "MAX_DISCOVERED", 1)
    monkeypatch.setattr(discover, "PER_PAGE", 1)
    clock = Clock(utc("2027-01-04 05:30"))
    async with Harness(tmp_path) as h:
        h.services.clock, h.runtime.queue.clock = clock, clock
        scheduled(h, TOOLS)
        scheduled(h, "octo-org/web")
        h.fake.install(INSTALLATION, [REPO, TOOLS, "octo-org/web"])
        seen: list[set[str]] = []
        for _ in range(3):
            await queue_syncs(h.services, everywhere=True)
            await h.drain()
            seen.append({r.repo for r in await table.rows(h.runtime.db)})
        # hello-world (no schedules) first, then tools, then web: one repository a pass.
        assert seen == [set(), {TOOLS}, {TOOLS, "octo-org/web"}]
        pages = [r for r in h.fake.requests if r.path.endswith("/installation/repositories")]
        assert [r.query.get("page") for r in pages] == ["1", "1", "2", "1", "2", "3"]
