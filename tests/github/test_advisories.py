"""`GET /advisories` through the port against the fake GitHub: filters, cursor pages, refusals."""

from __future__ import annotations

import httpx
import pytest

from bot.errors import GitHubError
from bot.github import GitHubKitPort
from bot.testing.fake_github import FakeGitHub
from bot.testing.fake_github_advisories import advisory


async def test_affects_name_at_version_finds_the_advisories_of_that_version(port: GitHubKitPort) -> None:
    found = await port.list_global_advisories(ecosystem="npm", affects=["lodash@4.17.11"])
    assert [a.ghsa_id for a in found] == ["GHSA-29mw-wpgm-hmr9", "GHSA-p6mc-m468-83gw", "GHSA-jf85-cpcp-j695"]
    newer = await port.list_global_advisories(ecosystem="npm", affects=["lodash@4.17.15"])
    assert [a.ghsa_id for a in newer] == ["GHSA-29mw-wpgm-hmr9", "GHSA-p6mc-m468-83gw"]
    first = found[0].vulnerabilities[0]
    assert (first.ecosystem, first.name, first.first_patched_version) == ("npm", "lodash", "4.17.21")
    assert found[2].severity == "critical" and found[2].cve_id == "CVE-2019-10744"
    assert await port.list_global_advisories(ecosystem="npm", affects=["lodash@4.17.21"]) == []


async def test_several_packages_in_one_query_and_the_ecosystem_filter(port: GitHubKitPort) -> None:
    both = await port.list_global_advisories(ecosystem="pip", affects=["requests@2.19.0", "pyyaml@5.3"])
    assert {a.ghsa_id for a in both} == {"GHSA-x84v-xcm2-53pg", "GHSA-8q59-q68h-6hv4"}
    assert await port.list_global_advisories(ecosystem="npm", affects=["requests@2.19.0"]) == []


async def test_malware_only_when_asked_for(port: GitHubKitPort) -> None:
    assert await port.list_global_advisories(ecosystem="npm", affects=["crossenv@1.0.0"]) == []
    found = await port.list_global_advisories(ecosystem="npm", affects=["crossenv@1.0.0"], type="malware")
    assert [(a.type, a.severity) for a in found] == [("malware", "critical")]


async def test_cursor_pages_are_all_read(port: GitHubKitPort, fake: FakeGitHub) -> None:
    fake.advisories = [
        advisory(
            f"GHSA-0000-0000-{n:04d}",
            summary=f"issue {n}",
            severity="low",
            packages=[("pip", "many", f"< {n + 1}.0", f"{n + 1}.0")],
            published=f"2020-01-01T00:{n // 60:02d}:{n % 60:02d}Z",
        )
        for n in range(230)
    ]
    found = await port.list_global_advisories(ecosystem="pip", affects=["many@0.5"])
    assert len(found) == 230 and len({a.ghsa_id for a in found}) == 230
    pages = [r for r in fake.requests if r.path == "/advisories"]
    assert len(pages) == 3 and "after" not in pages[0].query and pages[1].query["after"]
    assert all(r.query["per_page"] == "100" and r.query["affects"] == "many@0.5" for r in pages)


async def test_what_github_refuses_the_fake_refuses(fake: FakeGitHub, port: GitHubKitPort) -> None:
    with pytest.raises(GitHubError) as caught:
        await port.list_global_advisories(ecosystem="cargo", affects=["serde@1.0.0"])
    assert caught.value.status == 422
    with pytest.raises(GitHubError):
        await port.list_global_advisories(ecosystem="pip", affects=["x"], type="everything")
    with pytest.raises(GitHubError):
        await port.list_global_advisories(ecosystem="pip", affects=[f"p{n}" for n in range(1001)])
    async with httpx.AsyncClient(transport=fake.transport(), base_url=fake.api_url) as client:
        bad = await client.get("/advisories", params={"after": "not-a-cursor"})
    assert bad.status_code == 422
