"""Missed webhook deliveries are asked of GitHub again: never a recorded one, once per look."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from bot.app.redelivery import look, missed, recorded_guids, redelivery_loop
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


def _app_port(fake: FakeGitHub, *, auto_retry: bool | None = None) -> GitHubKitPort:
    github = make_app_github(
        app_id=1,
        private_key=rsa_private_key_pem(),
        base_url=fake.api_url,
        transport=fake.transport(),
        auto_retry=auto_retry,
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
    assert [(m.attempt.id, m.attempt.guid) for m in missed(attempts, {"c"})] == [(2, "a")]


def test_what_is_missed_comes_oldest_first() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)

    def attempt(i: int, guid: str, minute: int) -> HookDelivery:
        when = at + timedelta(minutes=minute)
        return HookDelivery(id=i, guid=guid, delivered_at=when, status="timed out", event="issue_comment")

    # Listed newest first, as GitHub lists them; "b" was made first and failed again when asked.
    attempts = [attempt(4, "b", 9), attempt(3, "c", 5), attempt(2, "a", 3), attempt(1, "b", 1)]
    assert [(m.attempt.guid, m.attempt.id, m.first) for m in missed(attempts, set())] == [
        ("b", 4, at + timedelta(minutes=1)),
        ("a", 2, at + timedelta(minutes=3)),
        ("c", 3, at + timedelta(minutes=5)),
    ]


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


async def _outage(h: Harness, count: int, *, every: timedelta = timedelta(seconds=20)) -> list[str]:
    """`count` events GitHub could not deliver (the server was down), `every` apart, ending a
    minute ago; then the server is back. Their GUIDs, oldest first."""
    start = datetime.now(UTC) - every * count - timedelta(minutes=1)
    clock = {"at": start}
    h.fake.hooks.now = lambda: clock["at"]
    guids = []
    for n in range(count):
        clock["at"] = start + every * n
        guids.append((await h.fake.hooks.deliver("star", {"action": "created", "n": n})).guid)
    clock["at"] = datetime.now(UTC)
    h.fake.hooks.target = httpx.ASGITransport(app=h.app)
    return guids


async def test_an_outage_longer_than_a_look_asks_loses_no_delivery(h: Harness) -> None:
    guids = await _outage(h, 250)
    app, now = h.services.extras["app_port"](), datetime.now(UTC)
    asked = []
    for minute in range(4):
        done = await look(h.runtime.db, app, holder="me", now=now + timedelta(minutes=minute), ttl=TTL)
        await h.fake.hooks.settle()
        assert done is not None
        asked.append(done.asked)
    # A hundred a look, the oldest first (commands are replayed in the order they were made).
    assert asked == [guids[:100], guids[100:200], guids[200:], []]
    assert _asked(h.fake) == Counter(dict.fromkeys(guids, 1))
    assert await recorded_guids(h.runtime.db, guids) == set(guids)


async def test_a_request_to_redeliver_that_github_fails_is_made_again_next_look(h: Harness) -> None:
    guids = await _outage(h, 3, every=timedelta(minutes=10))
    app, now = _app_port(h.fake, auto_retry=False), datetime.now(UTC)
    middle = next(d.id for d in h.fake.hooks.deliveries if d.guid == guids[1])
    h.fake.faults.fail("POST", rf"/app/hook/deliveries/{middle}/attempts", status=502)
    first = await look(h.runtime.db, app, holder="me", now=now, ttl=TTL)
    await h.fake.hooks.settle()
    assert first is not None and first.asked == guids[:1] and first.left == 2
    second = await look(h.runtime.db, app, holder="me", now=now + timedelta(minutes=1), ttl=TTL)
    await h.fake.hooks.settle()
    assert second is not None and second.asked == guids[1:]
    assert await recorded_guids(h.runtime.db, guids) == set(guids)


async def test_a_delivery_github_will_not_send_again_holds_up_nothing(h: Harness) -> None:
    guids = await _outage(h, 3, every=timedelta(minutes=10))
    app, now = _app_port(h.fake, auto_retry=False), datetime.now(UTC)
    middle = next(d.id for d in h.fake.hooks.deliveries if d.guid == guids[1])
    h.fake.faults.fail("POST", rf"/app/hook/deliveries/{middle}/attempts", status=404, times=None)
    first = await look(h.runtime.db, app, holder="me", now=now, ttl=TTL)
    await h.fake.hooks.settle()
    assert first is not None and first.asked == [guids[0], guids[2]] and not first.behind
    second = await look(h.runtime.db, app, holder="me", now=now + timedelta(minutes=1), ttl=TTL)
    assert second is not None and second.asked == []


async def test_a_window_longer_than_a_look_reads_is_walked_over_several_looks(h: Harness) -> None:
    guids = await _outage(h, 130)
    app, now = h.services.extras["app_port"](), datetime.now(UTC)
    first = await look(h.runtime.db, app, holder="me", now=now, ttl=TTL, page_budget=1)
    # One page of the newest hundred: the oldest end is not known yet, so nothing is asked.
    assert first is not None and (first.pages, first.asked, first.walking) == (1, [], True)
    asked = []
    for minute in range(1, 20):
        done = await look(
            h.runtime.db, app, holder="me", now=now + timedelta(minutes=minute), ttl=TTL, page_budget=1
        )
        await h.fake.hooks.settle()
        assert done is not None and done.pages == 1
        asked += done.asked
        if not done.behind:
            break
    assert asked == guids
    assert await recorded_guids(h.runtime.db, guids) == set(guids)


async def test_a_cursor_github_refuses_starts_the_read_again_from_the_newest(h: Harness) -> None:
    guids = await _outage(h, 130)
    app, now = h.services.extras["app_port"](), datetime.now(UTC)
    await look(h.runtime.db, app, holder="me", now=now, ttl=TTL, page_budget=1)
    h.fake.faults.fail("GET", "/app/hook/deliveries", status=422, message="Invalid cursor")
    done = await look(h.runtime.db, app, holder="me", now=now + timedelta(minutes=1), ttl=TTL, page_budget=2)
    assert done is not None and (done.pages, done.asked, done.left) == (2, guids[:100], 30)


async def test_the_fakes_status_filter_goes_by_the_answer_code(fake: FakeGitHub) -> None:
    down = await fake.hooks.deliver("star", {"action": "created"})
    fake.hooks.target = httpx.MockTransport(lambda request: httpx.Response(502))
    refused = await fake.hooks.deliver("star", {"action": "created"})
    fake.hooks.target = httpx.MockTransport(lambda request: httpx.Response(202))
    taken = await fake.hooks.deliver("star", {"action": "created"})
    assert (down.status_code, refused.status, taken.status) == (0, "Invalid HTTP Response: 502", "OK")
    headers = {"authorization": "Bearer jwt"}
    async with httpx.AsyncClient(
        transport=fake.transport(), base_url=fake.api_url, headers=headers
    ) as client:
        for status, wanted in [("failure", [refused.id]), ("success", [taken.id]), (None, None)]:
            params = {"status": status} if status else {}
            listed = (await client.get("/app/hook/deliveries", params=params)).json()
            assert [d["id"] for d in listed] == (wanted or [taken.id, refused.id, down.id])
        assert (await client.get("/app/hook/deliveries", params={"cursor": "x"})).status_code == 422


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
