"""Missed webhook deliveries are asked of GitHub again: never a recorded one, once per look."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from bot.app.redelivery import look, missed, redelivery_loop
from bot.db.engine import Database
from bot.github import GitHubKitPort, make_app_github
from bot.github.models import HookDelivery
from bot.metrics import Metrics
from bot.testing.fake_github import FakeGitHub
from tests.harness import REPO, Harness, labeled
from tests.support import WEBHOOK_SECRET, postgres_database, rsa_private_key_pem

PRD = """Please add a greeting.

```prd
version: 1
title: Greeting
summary: Say hello.
stories:
  - id: STORY-001
    title: Hello
    acceptance_criteria: ["hello.txt says hello"]
```
"""
ATTEMPTS = r"/app/hook/deliveries/\d+/attempts"
TTL = timedelta(minutes=10)


@pytest.fixture
def fake() -> FakeGitHub:
    return FakeGitHub(strict=True)


def _app_port(fake: FakeGitHub) -> GitHubKitPort:
    github = make_app_github(
        app_id=1, private_key=rsa_private_key_pem(), base_url=fake.api_url, transport=fake.transport()
    )
    return GitHubKitPort(github)


def _asked(fake: FakeGitHub) -> Counter[str]:
    """GUIDs asked for again, from the fake's request log."""
    by_id = {d.id: d.guid for d in fake.hooks.deliveries}
    return Counter(by_id[int(r.path.split("/")[-2])] for r in fake.requests_to("POST", ATTEMPTS))


async def test_the_fake_lists_deliveries_like_github(fake: FakeGitHub) -> None:
    sent = [await fake.hooks.deliver("issues", {"action": "labeled", "n": n}) for n in range(5)]
    assert all(d.status == "failed to connect to host" for d in sent)
    port = _app_port(fake)
    first, cursor = await port.list_hook_deliveries(per_page=2)
    assert [d.id for d in first] == [sent[4].id, sent[3].id] and cursor is not None
    second, cursor = await port.list_hook_deliveries(per_page=2, cursor=cursor)
    third, cursor = await port.list_hook_deliveries(per_page=2, cursor=cursor)
    assert [d.id for d in second + third] == [sent[2].id, sent[1].id, sent[0].id] and cursor is None
    await port.redeliver(sent[0].id)
    await fake.hooks.settle()
    again = fake.hooks.attempts_of(sent[0].guid)
    assert [a.redelivery for a in again] == [False, True]
    assert again[1].id > sent[4].id and again[1].status == "failed to connect to host"


def test_what_is_missed() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)

    def attempt(i: int, guid: str, status: str, code: int = 0) -> HookDelivery:
        return HookDelivery(id=i, guid=guid, delivered_at=at, status=status, status_code=code, event="issues")

    attempts = [
        attempt(1, "a", "failed to connect"),
        attempt(2, "a", "Invalid HTTP Response: 502"),  # a failed redelivery: asked by its newest attempt
        attempt(3, "b", "timed out"),
        attempt(4, "b", "OK"),  # delivered at last
        attempt(5, "c", "timed out"),  # recorded by the server, though GitHub gave up waiting
        attempt(6, "d", "OK"),
        attempt(7, "e", "Invalid HTTP Response: 413", 413),  # too large: sending it again cannot help
    ]
    assert [(a.id, a.guid) for a in missed(attempts, {"c"})] == [(2, "a")]


@pytest.fixture
async def h(tmp_path: Path):
    async with Harness(tmp_path) as harness:
        harness.fake.set_permission(REPO, "maint", "maintain")
        harness.fake.add_issue(REPO, title="Greeting", body=PRD)
        harness.fake.hooks.secret = WEBHOOK_SECRET
        yield harness


async def _start_server(h: Harness) -> None:
    """The server comes up: GitHub can reach it, and its start-up look for missed deliveries runs."""
    h.fake.hooks.target = httpx.ASGITransport(app=h.app)
    stop = asyncio.Event()
    loop = asyncio.create_task(redelivery_loop(h.services, stop))
    async with asyncio.timeout(30):
        while not h.fake.requests_to("GET", "/app/hook/deliveries"):
            await asyncio.sleep(0.01)
        stop.set()
        await loop
    await h.fake.hooks.settle()


async def test_a_label_sent_while_the_server_was_down_is_planned_after_it_starts(h: Harness) -> None:
    failed = await h.fake.hooks.deliver("issues", labeled(number=1, sender="maint"))
    assert failed.status == "failed to connect to host" and h.plan_comments(1) == []
    await _start_server(h)
    await h.drain()
    assert len(h.plan_comments(1)) == 1
    attempts = h.fake.hooks.attempts_of(failed.guid)
    assert [(a.redelivery, a.status) for a in attempts] == [(False, failed.status), (True, "OK")]
    assert h.runtime.metrics.registry.get_sample_value("plan_cascade_redeliveries_requested_total") == 1


async def test_a_recorded_delivery_is_never_redelivered(h: Harness) -> None:
    h.fake.hooks.target = httpx.ASGITransport(app=h.app)
    slow = await h.fake.hooks.deliver("issues", labeled(number=1, label="bug", sender="maint"))
    slow.status, slow.status_code = "timed out", 0  # GitHub gave up waiting; the server recorded it
    h.fake.hooks.target = None
    lost = await h.fake.hooks.deliver("issues", labeled(number=1, label="bug", sender="maint"))
    app = h.services.extras["app_port"]()
    now = datetime.now(UTC)
    first = await look(h.runtime.db, app, holder="me", now=now, ttl=TTL)
    assert first is not None and first.asked == [lost.guid]
    await h.fake.hooks.settle()  # the redelivery failed too (still down): asked again next look, once
    second = await look(h.runtime.db, app, holder="me", now=now + timedelta(minutes=5), ttl=TTL)
    assert second is not None and second.asked == [lost.guid]
    assert _asked(h.fake) == Counter({lost.guid: 2})


async def test_a_look_reads_back_to_the_last_look_and_never_past_retention(h: Harness) -> None:
    now = datetime.now(UTC)
    gone, old, new = [await h.fake.hooks.deliver("issues", {"action": "labeled", "n": n}) for n in range(3)]
    gone.delivered_at = now - timedelta(days=4)  # GitHub no longer keeps it
    old.delivered_at = now - timedelta(hours=1)
    app = h.services.extras["app_port"]()
    first = await look(h.runtime.db, app, holder="me", now=now, ttl=TTL)
    assert first is not None and first.attempts == 2 and set(first.asked) == {old.guid, new.guid}
    await h.fake.hooks.settle()  # both redeliveries failed again (the server is still down)
    second = await look(h.runtime.db, app, holder="me", now=now + timedelta(minutes=1), ttl=TTL)
    # Since the last look: the hour-old first attempt is not read again, its redelivery is.
    assert second is not None and second.attempts == 3 and set(second.asked) == {old.guid, new.guid}


async def test_a_look_reads_at_most_its_page_budget(h: Harness) -> None:
    for n in range(130):
        await h.fake.hooks.deliver("issues", {"action": "labeled", "n": n})
    app = h.services.extras["app_port"]()
    now = datetime.now(UTC)
    done = await look(h.runtime.db, app, holder="me", now=now, ttl=TTL, page_budget=1)
    assert done is not None and (done.pages, done.attempts, len(done.asked)) == (1, 100, 100)
    assert len(h.fake.requests_to("GET", "/app/hook/deliveries")) == 1


@pytest.mark.postgres
async def test_two_workers_on_postgres_ask_for_each_missed_guid_once(fake: FakeGitHub) -> None:
    lost = [await fake.hooks.deliver("issues", {"action": "labeled", "n": n}) for n in range(3)]
    async with postgres_database() as url:
        first, second = Database(url), Database(url)
        await first.migrate()
        now = datetime.now(UTC)
        try:
            looks = await asyncio.gather(
                *(
                    look(
                        db,
                        _app_port(fake),
                        holder=name,
                        now=now,
                        ttl=TTL,
                        metrics=Metrics(),
                    )
                    for db, name in [(first, "worker-a"), (second, "worker-b")]
                )
            )
            # The holder's time runs out; the other one takes over and asks again only what is still missed.
            later = now + timedelta(minutes=11)
            await fake.hooks.settle()
            again = await look(second, _app_port(fake), holder="worker-b", now=later, ttl=TTL)
        finally:
            await first.dispose()
            await second.dispose()
    assert sorted(x is None for x in looks) == [False, True], "one process looks at a time"
    assert again is not None
    assert _asked(fake) == Counter({d.guid: 2 for d in lost})


async def test_metrics_show_what_github_failures_cost(h: Harness) -> None:
    await h.fake.hooks.deliver("issues", labeled(number=1, label="bug", sender="maint"))
    await _start_server(h)
    text = (await h.client.get("/metrics")).text
    assert "plan_cascade_redeliveries_requested_total 1.0" in text
    for name in (
        "plan_cascade_github_server_retries_total",
        "plan_cascade_github_adopted_total",
        "plan_cascade_github_rate_limit_pause_seconds_total",
    ):
        assert f"# TYPE {name} counter" in text
