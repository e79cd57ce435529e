"""The advisory lookup (batched, cached, versions told apart) and the `dependencies` gate's verdicts."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from bot.environment.lockfiles import Change
from bot.errors import GitHubError
from bot.gates.dependencies import AdvisoryCache, AdvisoryLookup, dependency_result, records
from bot.gates.report import conclusion, failure_feedback
from bot.github import GitHubKitPort, token_port
from bot.github.models_advisories import Advisory
from bot.testing.fake_github import FakeGitHub


def fake_port() -> tuple[FakeGitHub, GitHubKitPort]:
    fake = FakeGitHub(strict=True)
    return fake, token_port("ghs_x", base_url=fake.api_url, transport=fake.transport(), auto_retry=False)


def npm(name: str, version: str, previous: str | None = None) -> Change:
    return Change("npm", name, version, "package-lock.json", previous=previous)


async def test_two_versions_of_one_package_get_their_own_advisories() -> None:
    fake, port = fake_port()
    found = await AdvisoryLookup(port).notes([npm("lodash", "4.17.11"), npm("lodash", "4.17.20")])
    old = {n.id for n in found[("npm", "lodash", "4.17.11")]}
    new = {n.id for n in found[("npm", "lodash", "4.17.20")]}
    assert old == {"GHSA-jf85-cpcp-j695", "GHSA-p6mc-m468-83gw", "GHSA-29mw-wpgm-hmr9"}
    assert new == {"GHSA-29mw-wpgm-hmr9"}
    assert len([r for r in fake.requests if r.path == "/advisories"]) == 2  # one chunk, two types


async def test_many_packages_go_a_hundred_to_a_request_and_are_cached() -> None:
    fake, port = fake_port()
    now = [0.0]
    lookup = AdvisoryLookup(port, AdvisoryCache(ttl=3600, clock=lambda: now[0]))
    many = [npm(f"pkg-{n}", "1.0.0") for n in range(250)]
    await lookup.notes(many)
    asked = [r for r in fake.requests if r.path == "/advisories"]
    assert len(asked) == 6 and max(len(r.query["affects"].split(",")) for r in asked) == 100
    await lookup.notes(many)
    assert len([r for r in fake.requests if r.path == "/advisories"]) == 6  # all from the cache
    now[0] = 3601.0
    await lookup.notes(many[:1])
    assert len([r for r in fake.requests if r.path == "/advisories"]) == 8  # expired: asked again


async def test_pip_names_are_compared_in_their_normal_form() -> None:
    _, port = fake_port()
    found = await AdvisoryLookup(port).notes([Change("pip", "PyYAML", "5.3", "requirements.txt")])
    assert [n.id for n in found[("pip", "pyyaml", "5.3")]] == ["GHSA-8q59-q68h-6hv4"]


async def test_malware_fails_whatever_fail_on_says() -> None:
    _, port = fake_port()
    changes = [npm("crossenv", "6.1.1")]
    found = records(changes, await AdvisoryLookup(port).notes(changes))
    result = dependency_result(found, fail_on="never", error=None, attempt=1, duration_s=0.1)
    assert conclusion(result) == "failure"
    assert (
        "GHSA-c9xq-mvwr-9qq2 (malware)" in result.output and "no version is safe: remove it" in result.output
    )


async def test_severity_threshold_and_what_the_agent_reads() -> None:
    _, port = fake_port()
    changes = [npm("lodash", "4.17.15", previous="4.17.21")]
    found = records(changes, await AdvisoryLookup(port).notes(changes))
    high = dependency_result(found, fail_on="high", error=None, attempt=2, duration_s=0.1)
    assert conclusion(high) == "failure"
    said = failure_feedback([high])
    assert "npm lodash 4.17.15 (was 4.17.21), in package-lock.json" in said
    assert "GHSA-p6mc-m468-83gw (high): Prototype Pollution in lodash; fixed in 4.17.19  <- fails" in said
    assert "GHSA-29mw-wpgm-hmr9 (medium)" in said
    assert (
        conclusion(dependency_result(found, fail_on="critical", error=None, attempt=1, duration_s=0))
        == "neutral"
    )
    assert (
        conclusion(dependency_result(found, fail_on="never", error=None, attempt=1, duration_s=0))
        == "neutral"
    )


class Down:
    """An Advisory Database that cannot be reached (GHES without GitHub Connect, a 5xx)."""

    async def list_global_advisories(
        self, *, ecosystem: str, affects: Sequence[str], type: str = "reviewed"
    ) -> list[Advisory]:
        raise GitHubError("GitHub refused to list advisories: 404 Not Found", status=404)


async def test_an_unreachable_database_is_neutral_and_says_so() -> None:
    changes = [npm("lodash", "4.17.15")]
    with pytest.raises(GitHubError) as caught:
        await AdvisoryLookup(Down()).notes(changes)
    error = caught.value.message
    found = records(changes, {})
    result = dependency_result(found, fail_on="high", error=error, attempt=1, duration_s=0)
    assert conclusion(result) == "neutral" and result.passed
    assert "lodash 4.17.15, in package-lock.json: not looked up" in result.output
    assert "Not checked: GitHub refused to list advisories: 404 Not Found" in result.output
