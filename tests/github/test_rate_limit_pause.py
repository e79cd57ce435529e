"""A rate limit pauses every request of the installation until it lifts, not one request."""

from __future__ import annotations

import asyncio

import pytest

from bot.errors import GitHubError
from bot.github import token_port
from bot.github.pause import GateRegistry, RateLimitGate, limit_pause
from bot.metrics import Metrics
from bot.testing.fake_github import FakeGitHub

REPO = "octo/widgets"
EPOCH = 1_800_000_000.0


class FakeClock:
    """Monotonic time that moves only when someone sleeps."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.0)
        await asyncio.sleep(0)


@pytest.fixture
def clock(fake: FakeGitHub) -> FakeClock:
    clock = FakeClock()
    fake.clock = clock
    fake.faults.wall = lambda: EPOCH + clock()
    return clock


def _gate(clock: FakeClock, metrics: Metrics | None = None) -> RateLimitGate:
    return RateLimitGate(
        "installation 7", clock=clock, wall=lambda: EPOCH + clock(), sleep=clock.sleep, metrics=metrics
    )


async def test_after_retry_after_no_request_of_the_installation_leaves_before_it(
    fake: FakeGitHub, clock: FakeClock
) -> None:
    issue = fake.add_issue(REPO, title="T")
    metrics = Metrics()
    gate = _gate(clock, metrics)
    # Two ports of one installation (two jobs of the process), one gate.
    first, second = (
        token_port("t", base_url=fake.api_url, transport=fake.transport(), auto_retry=False, gate=gate)
        for _ in range(2)
    )
    fake.faults.secondary_limit("GET", rf"/repos/{REPO}", retry_after=2)
    with pytest.raises(GitHubError, match="secondary rate limit"):
        await first.get_repository(REPO)
    (limited,) = fake.requests
    await asyncio.gather(
        second.get_issue(REPO, issue.number),
        first.list_issue_comments(REPO, issue.number),
        second.create_issue_comment(REPO, issue.number, body="hi"),
    )
    later = fake.requests[1:]
    assert len(later) == 3 and all(r.at >= limited.at + 2 for r in later)
    assert metrics.registry.get_sample_value(
        "plan_cascade_github_rate_limit_pause_seconds_total", {"limit": "secondary"}
    ) == pytest.approx(2)


async def test_remaining_zero_pauses_until_the_reset(fake: FakeGitHub, clock: FakeClock) -> None:
    gate = _gate(clock)
    port = token_port("t", base_url=fake.api_url, transport=fake.transport(), auto_retry=False, gate=gate)
    fake.faults.primary_limit("GET", rf"/repos/{REPO}", reset_in=30)
    with pytest.raises(GitHubError):
        await port.get_repository(REPO)
    await port.get_repository(REPO)
    limited, after = fake.requests
    assert after.at >= limited.at + 30


async def test_other_installations_do_not_wait(fake: FakeGitHub, clock: FakeClock) -> None:
    gates = GateRegistry(lambda key: _gate(clock))
    limited = token_port(
        "a", base_url=fake.api_url, transport=fake.transport(), auto_retry=False, gate=gates.get(7)
    )
    other = token_port(
        "b", base_url=fake.api_url, transport=fake.transport(), auto_retry=False, gate=gates.get(8)
    )
    assert gates.get(7) is gates.get(7)
    fake.faults.secondary_limit("GET", rf"/repos/{REPO}", retry_after=60)
    with pytest.raises(GitHubError):
        await limited.get_repository(REPO)
    await other.get_repository(REPO)
    assert fake.requests[1].at == fake.requests[0].at


async def test_a_retry_of_githubkit_and_a_parallel_request_both_wait(fake: FakeGitHub) -> None:
    """Measured on the fake's log (real monotonic time): a lower bound, never flaky."""
    issue = fake.add_issue(REPO, title="T")
    port = token_port("t", base_url=fake.api_url, transport=fake.transport())  # githubkit retry on
    fake.faults.secondary_limit("GET", rf"/repos/{REPO}", retry_after=1)

    async def meanwhile() -> None:
        while not fake.requests:
            await asyncio.sleep(0.005)
        await port.get_issue(REPO, issue.number)

    await asyncio.gather(port.get_repository(REPO), meanwhile())
    limited = fake.requests[0]
    assert limited.fault == "secondary" and len(fake.requests) == 3
    assert all(r.at >= limited.at + 1 for r in fake.requests[1:])


def test_which_answers_are_limits() -> None:
    assert limit_pause(403, {"retry-after": "2"}, now=EPOCH) == ("secondary", 2.0)
    assert limit_pause(429, {}, now=EPOCH) == ("secondary", 60.0)
    reset = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(EPOCH) + 10)}
    assert limit_pause(403, reset, now=EPOCH) == ("primary", 11.0)
    assert limit_pause(403, {"x-ratelimit-remaining": "12"}, now=EPOCH) is None  # a permission refusal
    assert limit_pause(502, {"retry-after": "2"}, now=EPOCH) is None


def test_a_pause_is_bounded_and_only_ever_extended(clock: FakeClock) -> None:
    gate = RateLimitGate("i", clock=clock, wall=lambda: EPOCH, max_pause=100)
    assert gate.note(403, {"retry-after": "5000"}) == 100
    assert gate.note(403, {"retry-after": "5"}) == 0  # inside the current pause
    assert gate.remaining() == 100
