"""The installation's write queue: who goes first, what is dropped, who may wait (on a fake clock)."""

from __future__ import annotations

import asyncio

import pytest

from bot.errors import Throttled
from bot.github import token_port
from bot.github.pause import RateLimitGate
from bot.github.throttle import PATIENCE, Priority, Throttle
from bot.testing.fake_github import FakeGitHub
from tests.support import SleepClock

REPO = "octo/widgets"


def _paced(clock: SleepClock, **kwargs: object) -> Throttle:
    return Throttle(per_minute=80, min_interval=1.0, clock=clock, sleep=clock.sleep, **kwargs)  # type: ignore[arg-type]


async def _drain(throttle: Throttle) -> None:
    """Use up the bucket: the next calls wait their turn."""
    for _ in range(throttle.burst):
        await throttle.wait(priority=Priority.ANSWER)


async def test_answers_go_before_eyes_before_work_before_edits() -> None:
    clock = SleepClock()
    throttle = _paced(clock)
    await _drain(throttle)
    order: list[str] = []

    async def write(name: str, priority: Priority, creates: bool = True) -> None:
        await throttle.wait(priority=priority, creates=creates)
        order.append(name)

    arrivals = [
        ("edit", Priority.EDIT),
        ("work", Priority.WORK),
        ("eyes", Priority.ACK),
        ("answer", Priority.ANSWER),
    ]
    await asyncio.gather(*(write(name, priority) for name, priority in arrivals))
    assert order == ["answer", "eyes", "work", "edit"], "by priority, not by arrival"


async def test_the_eyes_still_queued_when_the_answer_goes_are_dropped() -> None:
    clock = SleepClock()
    throttle = _paced(clock)
    await _drain(throttle)
    issue = ("issue", REPO, 1)
    sent: list[str] = []

    async def eyes() -> None:
        sent.append("eyes")

    throttle.submit(eyes, what="react", creates=True, priority=Priority.ACK, acks=issue)
    await asyncio.sleep(0)
    await throttle.wait(priority=Priority.ANSWER, answers=issue)
    await throttle.settle()
    assert sent == [] and throttle.counts.dropped_acks == 1


async def test_a_queued_edit_is_replaced_by_a_newer_edit_of_the_same_comment() -> None:
    clock = SleepClock()
    throttle = _paced(clock)
    await _drain(throttle)
    key = ("comment", REPO, 7)
    sent: list[str] = []
    for body in ("v1", "v2", "v3"):

        async def edit(body: str = body) -> None:
            sent.append(body)

        throttle.submit(edit, what="edit", creates=False, priority=Priority.EDIT, key=key)
        await asyncio.sleep(0)
    await throttle.settle()
    assert sent == ["v3"] and throttle.counts.superseded_edits == 2


async def test_two_edits_of_one_comment_never_overlap() -> None:
    throttle = Throttle(per_minute=1000, min_interval=0.0)
    key = ("comment", REPO, 7)
    inside: list[str] = []
    overlaps: list[bool] = []

    async def edit(name: str) -> None:
        async with throttle.turn(creates=False, key=key):
            overlaps.append(bool(inside))
            inside.append(name)
            await asyncio.sleep(0.01)
            inside.remove(name)

    await asyncio.gather(*(edit(f"e{n}") for n in range(5)))
    assert overlaps == [False] * 5


async def test_a_eyes_or_a_quiet_edit_never_takes_the_last_write() -> None:
    clock = SleepClock()
    throttle = _paced(clock)
    await throttle.wait(priority=Priority.ANSWER)
    await throttle.wait(priority=Priority.ANSWER)  # one write left in the bucket
    await throttle.wait(priority=Priority.ACK)
    assert clock.sleeps == [1.0], "the 👀 waited until a second write was in the bucket"
    await throttle.wait(priority=Priority.ANSWER)
    assert clock.sleeps == [1.0], "the answer took the last one at once"


async def test_a_task_with_patience_is_throttled_instead_of_waiting_the_hour() -> None:
    clock = SleepClock()
    throttle = Throttle(per_minute=1000, per_hour=5, min_interval=0.0, clock=clock, sleep=clock.sleep)
    for _ in range(5):
        await throttle.wait()
    token = PATIENCE.set(5.0)
    try:
        with pytest.raises(Throttled) as caught:
            await throttle.wait(priority=Priority.ANSWER)
        await throttle.wait(creates=False)  # an edit does not count against the hour
    finally:
        PATIENCE.reset(token)
    assert caught.value.seconds == pytest.approx(3600.0)
    assert clock.sleeps == [], "nobody waited in place"
    await throttle.wait()  # without patience (a long job), the wait is in place
    assert clock.now == pytest.approx(3600.0)


async def test_the_estimate_counts_the_writes_queued_before() -> None:
    clock = SleepClock()
    throttle = _paced(clock)
    await _drain(throttle)
    assert throttle.estimate(priority=Priority.ANSWER) == pytest.approx(1.0)
    waiting = [asyncio.ensure_future(throttle.wait(priority=Priority.ANSWER)) for _ in range(3)]
    await asyncio.sleep(0)
    assert throttle.estimate(priority=Priority.ANSWER) >= 3.0
    assert throttle.estimate(priority=Priority.ACK) >= 3.0
    await asyncio.gather(*waiting)


async def test_a_rate_limit_pause_longer_than_the_patience_throttles() -> None:
    clock = SleepClock()
    gate = RateLimitGate("installation 1", clock=clock, sleep=clock.sleep, wall=lambda: 0.0)
    gate.note(403, {"retry-after": "120"})
    token = PATIENCE.set(5.0)
    try:
        with pytest.raises(Throttled) as caught:
            await gate.wait()
    finally:
        PATIENCE.reset(token)
    assert caught.value.seconds == pytest.approx(120.0) and clock.sleeps == []
    await gate.wait()
    assert clock.sleeps == [120.0]


async def test_through_the_port_the_comment_goes_first_and_its_eyes_are_dropped(fake: FakeGitHub) -> None:
    clock = SleepClock()
    fake.clock = clock
    throttle = _paced(clock)
    port = token_port(
        "t", base_url=fake.api_url, transport=fake.transport(), throttle=throttle, auto_retry=False
    )
    issue = fake.add_issue(REPO, title="T")
    await _drain(throttle)
    await port.acknowledge(REPO, issue.number)
    made = await port.create_issue_comment(REPO, issue.number, body="the plan")
    for n in range(3):
        await port.update_issue_comment_later(REPO, made.id, body=f"the plan, signed {n}")
    await throttle.settle()
    assert fake.requests_to("POST", rf"/repos/{REPO}/issues/1/reactions") == []
    edits = fake.requests_to("PATCH", rf"/repos/{REPO}/issues/comments/{made.id}")
    assert [r.json["body"] for r in edits] == ["the plan, signed 2"], "the edits coalesced into the last"
    assert fake.comments(REPO, 1)[0].body == "the plan, signed 2"
