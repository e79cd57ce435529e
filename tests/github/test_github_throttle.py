"""The content-creation throttle, on a fake clock, alone and through the port."""

from __future__ import annotations

import itertools

import pytest

from bot.github import Throttle, ThrottleRegistry, token_port
from bot.testing.fake_github import FakeGitHub

REPO = "octo/widgets"


class FakeClock:
    """A clock that only moves when someone sleeps on it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def _max_in_any_minute(times: list[float]) -> int:
    return max(sum(1 for t in times if start <= t < start + 60) for start in times)


async def _admit(throttle: Throttle, clock: FakeClock, calls: int) -> list[float]:
    times = []
    for _ in range(calls):
        await throttle.wait()
        times.append(clock.now)
    return times


async def test_per_minute_limit_without_interval() -> None:
    clock = FakeClock()
    throttle = Throttle(per_minute=80, min_interval=0, clock=clock, sleep=clock.sleep)
    times = await _admit(throttle, clock, 100)
    assert times[:80] == [0.0] * 80
    assert times[80] == 60.0
    assert _max_in_any_minute(times) == 80


async def test_min_interval_spaces_calls() -> None:
    clock = FakeClock()
    throttle = Throttle(per_minute=80, min_interval=1.0, burst=1, clock=clock, sleep=clock.sleep)
    times = await _admit(throttle, clock, 5)
    assert times == [0.0, 1.0, 2.0, 3.0, 4.0]


async def test_a_short_burst_goes_at_once_then_one_call_a_second() -> None:
    clock = FakeClock()
    throttle = Throttle(per_minute=80, min_interval=1.0, clock=clock, sleep=clock.sleep)
    assert await _admit(throttle, clock, 6) == [0.0, 0.0, 0.0, 1.0, 2.0, 3.0]
    clock.now += 1.5  # a quiet moment gives back one and a half calls, not a new burst
    assert await _admit(throttle, clock, 3) == [4.5, 5.0, 6.0]


@pytest.mark.parametrize(("min_interval", "burst"), [(1.0, 3), (0.5, 10), (0.0, 500), (1.0, 80)])
async def test_the_burst_never_exceeds_githubs_per_minute_limit(min_interval: float, burst: int) -> None:
    clock = FakeClock()
    throttle = Throttle(per_minute=80, min_interval=min_interval, burst=burst, clock=clock, sleep=clock.sleep)
    times: list[float] = []
    for _ in range(20):  # bursts of 40 calls with idle minutes between them: the bucket refills
        times += await _admit(throttle, clock, 40)
        clock.now += 90.0
    times += await _admit(throttle, clock, 400)  # then ten minutes of nonstop calls
    assert _max_in_any_minute(times) <= 80
    if min_interval:  # sustained, one call per interval after the burst
        nonstop = times[-400:]
        assert nonstop[-1] - nonstop[0] >= (400 - min(burst, 80)) * min_interval


async def test_calls_spread_out_in_time_do_not_wait() -> None:
    clock = FakeClock()
    throttle = Throttle(per_minute=2, min_interval=1.0, clock=clock, sleep=clock.sleep)
    await throttle.wait()
    clock.now = 100.0
    assert throttle.delay(clock.now) == 0.0
    await throttle.wait()
    assert clock.now == 100.0


def test_delay_is_pure_arithmetic() -> None:
    throttle = Throttle(per_minute=2, min_interval=5.0)
    assert throttle.delay(0.0) == 0.0


def test_per_minute_must_be_positive() -> None:
    with pytest.raises(ValueError, match="per_minute"):
        Throttle(per_minute=0)


def test_registry_keeps_one_throttle_per_installation() -> None:
    registry = ThrottleRegistry(lambda: Throttle(per_minute=5))
    assert registry.get(1) is registry.get(1)
    assert registry.get(1) is not registry.get(2)
    assert registry.get(1).per_minute == 5


async def test_port_keeps_100_content_calls_under_80_per_minute(fake: FakeGitHub) -> None:
    clock = FakeClock()
    fake.clock = clock
    throttle = Throttle(per_minute=80, min_interval=0.5, clock=clock, sleep=clock.sleep)
    port = token_port(
        "t", base_url=fake.api_url, transport=fake.transport(), throttle=throttle, auto_retry=False
    )
    issue = fake.add_issue(REPO, title="T")
    for n in range(100):
        await port.create_issue_comment(REPO, issue.number, body=f"c{n}")
    await port.get_issue(REPO, issue.number)  # reads are not throttled
    posts = [r.at for r in fake.requests_to("POST", rf"/repos/{REPO}/issues/1/comments")]
    assert len(posts) == 100
    assert _max_in_any_minute(posts) <= 80
    assert posts[:3] == [posts[0]] * 3, "a burst of three goes at once"
    assert min(b - a for a, b in itertools.pairwise(posts[2:40])) >= 0.5, "then one per interval"
    assert fake.requests[-1].at == posts[-1]


async def test_no_more_than_500_creations_in_any_hour_and_edits_do_not_count_there(caplog) -> None:  # type: ignore[no-untyped-def]
    clock = FakeClock()
    throttle = Throttle(per_minute=80, min_interval=1.0, clock=clock, sleep=clock.sleep)
    created: list[float] = []
    for n in range(620):
        await throttle.wait()
        created.append(clock.now)
        if n % 2:
            await throttle.wait(creates=False)  # an edit between creations: paced, not counted here
    assert max(sum(1 for t in created if start <= t < start + 3600) for start in created) == 500
    assert created[500] == created[0] + 3600, "the 501st waits until the first is an hour old"
    assert any(
        "500 content-creating GitHub requests in the last hour" in r.getMessage() for r in caplog.records
    )
    edits = clock.now
    for _ in range(5):  # the hour is full of creations again, but an edit does not wait for it
        await throttle.wait(creates=False)
    assert clock.now - edits <= 5.0


async def test_edits_go_through_the_port_without_counting_against_the_hour(fake: FakeGitHub) -> None:
    clock = FakeClock()
    fake.clock = clock
    throttle = Throttle(per_minute=80, per_hour=2, min_interval=0.0, clock=clock, sleep=clock.sleep)
    port = token_port(
        "t", base_url=fake.api_url, transport=fake.transport(), throttle=throttle, auto_retry=False
    )
    issue = fake.add_issue(REPO, title="T")
    first = await port.create_issue_comment(REPO, issue.number, body="one")
    for n in range(5):
        await port.update_issue_comment(REPO, first.id, body=f"edit {n}")
    await port.create_issue_comment(REPO, issue.number, body="two")
    assert clock.now == 0.0
    await port.create_issue_comment(REPO, issue.number, body="three")  # the third creation in the hour
    assert clock.now == 3600.0
