"""The fake GitHub fails the way GitHub does: 502 before or after the work, rate limits."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from bot.testing.fake_github import FakeGitHub
from bot.testing.fake_github_faults import Faults

REPO = "octo/widgets"
COMMENTS = rf"/repos/{REPO}/issues/\d+/comments"


@pytest.fixture
def client(fake: FakeGitHub) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=fake.transport(), base_url=fake.api_url)


async def _comment(client: httpx.AsyncClient, number: int, body: str) -> httpx.Response:
    return await client.post(f"/repos/{REPO}/issues/{number}/comments", json={"body": body})


async def test_502_before_the_work_makes_nothing(fake: FakeGitHub, client: httpx.AsyncClient) -> None:
    issue = fake.add_issue(REPO, title="T")
    fake.faults.fail("POST", COMMENTS, when="before")
    first = await _comment(client, issue.number, "one")
    assert first.status_code == 502 and fake.comments(REPO, issue.number) == []
    assert (await _comment(client, issue.number, "two")).status_code == 201
    assert [c.body for c in fake.comments(REPO, issue.number)] == ["two"]
    assert [r.fault for r in fake.requests] == ["before", ""]


async def test_502_after_the_work_keeps_the_work(fake: FakeGitHub, client: httpx.AsyncClient) -> None:
    issue = fake.add_issue(REPO, title="T")
    fake.faults.fail("POST", COMMENTS, when="after", times=2)
    assert (await _comment(client, issue.number, "one")).status_code == 502
    assert (await _comment(client, issue.number, "one")).status_code == 502
    assert (await _comment(client, issue.number, "one")).status_code == 201
    assert [c.body for c in fake.comments(REPO, issue.number)] == ["one", "one", "one"]


async def test_a_refused_request_is_not_turned_into_an_after_fault(
    fake: FakeGitHub, client: httpx.AsyncClient
) -> None:
    fake.faults.fail("POST", COMMENTS, when="after")
    assert (await _comment(client, 999, "one")).status_code == 404  # no such issue: no work, no 502
    issue = fake.add_issue(REPO, title="T")
    assert (await _comment(client, issue.number, "one")).status_code == 502


def test_a_ratio_is_drawn_from_a_seeded_rng() -> None:
    def draws(seed: int) -> list[bool]:
        faults = Faults(seed=seed)
        faults.fail("POST", "/x", when="after", ratio=0.3, times=None)
        return [faults.pick("POST", "/x", after=True) is not None for _ in range(200)]

    assert draws(7) == draws(7)
    assert draws(7) != draws(8)
    assert 30 <= sum(draws(7)) <= 90


async def test_secondary_limit_with_retry_after(fake: FakeGitHub, client: httpx.AsyncClient) -> None:
    fake.faults.secondary_limit("GET", rf"/repos/{REPO}", retry_after=2, status=429)
    limited = await client.get(f"/repos/{REPO}")
    assert limited.status_code == 429 and limited.headers["retry-after"] == "2"
    assert "secondary rate limit" in limited.json()["message"]
    assert (await client.get(f"/repos/{REPO}")).status_code == 200


async def test_secondary_limit_with_a_reset_time(fake: FakeGitHub, client: httpx.AsyncClient) -> None:
    fake.faults.wall = lambda: 1_700_000_000.0
    fake.faults.secondary_limit("*", ".*", retry_after=None, reset_in=5)
    limited = await client.get(f"/repos/{REPO}")
    assert limited.status_code == 403 and "retry-after" not in limited.headers
    assert limited.headers["x-ratelimit-remaining"] == "0"
    assert limited.headers["x-ratelimit-reset"] == "1700000005"


async def test_primary_limit(fake: FakeGitHub, client: httpx.AsyncClient) -> None:
    fake.faults.primary_limit("GET", rf"/repos/{REPO}", reset_in=30)
    limited = await client.get(f"/repos/{REPO}")
    body: dict[str, Any] = limited.json()
    assert limited.status_code == 403 and body["message"].startswith("API rate limit exceeded")
    assert limited.headers["x-ratelimit-remaining"] == "0" and "x-ratelimit-reset" in limited.headers
