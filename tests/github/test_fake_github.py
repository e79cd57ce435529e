"""The fake GitHub itself: githubkit's strict models accept its answers; unknown routes; serving."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from githubkit import GitHub
from githubkit.cache import MemCacheStrategy
from githubkit_schemas.latest.models import Integration

from bot.github import token_port
from bot.testing.fake_github import FakeGitHub, UnexpectedRequest
from bot.testing.fake_github_serve import serve

REPO = "octo/widgets"


@pytest.fixture
def kit(fake: FakeGitHub) -> GitHub[Any]:
    return GitHub(
        "ghp_test",
        base_url=fake.api_url,
        async_transport=fake.transport(),
        cache_strategy=MemCacheStrategy(),
        http_cache=False,
        auto_retry=False,
    )


async def test_githubkit_models_accept_every_answer(kit: GitHub[Any], fake: FakeGitHub) -> None:
    rest = kit.rest
    issue = fake.add_issue(REPO, title="T", labels=["plan"])
    comment = fake.add_comment(REPO, issue.number, body="hi")
    fake.add_reaction(REPO, comment.id, "alice", "+1")
    fake.set_permission(REPO, "alice", "maintain")
    fake.set_file(REPO, "README.md", "hello")
    pull = fake.add_pull(REPO, head="cascade/1", base="trunk")
    fake.add_commit(REPO, "a" * 40)
    fake.add_branch(REPO, "trunk")
    fake.add_branch(REPO, "cascade/2")
    fake.add_review_comment(REPO, pull.number, review_id=5, path="a.py", line=1, body="b", user="bob")

    calls: list[Callable[[], Awaitable[Any]]] = [
        lambda: rest.repos.async_get("octo", "widgets"),
        lambda: rest.repos.async_get_collaborator_permission_level("octo", "widgets", "alice"),
        lambda: rest.repos.async_get_content("octo", "widgets", "README.md"),
        lambda: rest.issues.async_get("octo", "widgets", issue.number),
        lambda: rest.issues.async_get("octo", "widgets", pull.number),
        lambda: rest.issues.async_list_for_repo("octo", "widgets"),
        lambda: rest.issues.async_create("octo", "widgets", title="New", labels=["x"]),
        lambda: rest.issues.async_add_labels("octo", "widgets", issue.number, labels=["y"]),
        lambda: rest.issues.async_list_comments("octo", "widgets", issue.number),
        lambda: rest.issues.async_get_comment("octo", "widgets", comment.id),
        lambda: rest.issues.async_create_comment("octo", "widgets", issue.number, body="c"),
        lambda: rest.issues.async_update_comment("octo", "widgets", comment.id, body="d"),
        lambda: rest.reactions.async_create_for_issue("octo", "widgets", issue.number, content="eyes"),
        lambda: rest.reactions.async_create_for_issue_comment("octo", "widgets", comment.id, content="heart"),
        lambda: rest.reactions.async_list_for_issue_comment("octo", "widgets", comment.id),
        lambda: rest.checks.async_create("octo", "widgets", name="c", head_sha="a" * 40, status="queued"),
        lambda: rest.checks.async_list_for_ref("octo", "widgets", "a" * 40),
        lambda: rest.pulls.async_list("octo", "widgets", state="all"),
        lambda: rest.pulls.async_get("octo", "widgets", pull.number),
        lambda: rest.pulls.async_create("octo", "widgets", title="P", head="cascade/2", base="trunk"),
        lambda: rest.pulls.async_update("octo", "widgets", pull.number, title="P2"),
        lambda: rest.pulls.async_request_reviewers("octo", "widgets", pull.number, reviewers=["bob"]),
        lambda: rest.pulls.async_list_comments_for_review("octo", "widgets", pull.number, 5),
        lambda: rest.pulls.async_list_commits("octo", "widgets", pull.number),
    ]
    for call in calls:
        response = await call()
        assert response.parsed_data is not None, response
    run = fake.repo(REPO).check_runs.popitem()[1]
    fake.repo(REPO).check_runs[run.id] = run
    updated = await rest.checks.async_update("octo", "widgets", run.id, status="in_progress")
    assert updated.parsed_data.status == "in_progress"


async def test_get_app_shape_with_a_jwt(fake: FakeGitHub) -> None:
    async with httpx.AsyncClient(transport=fake.transport(), base_url=fake.api_url) as client:
        response = await client.get("/app", headers={"Authorization": "Bearer not-checked-without-a-key"})
    assert Integration.model_validate(response.json()).slug == "plan-cascade"


async def test_unknown_route_is_github_404_when_lenient() -> None:
    fake = FakeGitHub()
    async with httpx.AsyncClient(transport=fake.transport(), base_url=fake.api_url) as client:
        response = await client.delete("/repos/octo/widgets/hooks/1")
    assert response.status_code == 404
    assert response.json() == {
        "message": "Not Found",
        "documentation_url": "https://docs.github.com/rest",
        "status": "404",
    }
    assert fake.unexpected == ["DELETE /repos/octo/widgets/hooks/1"]


async def test_unknown_route_fails_the_test_when_strict(fake: FakeGitHub) -> None:
    async with httpx.AsyncClient(transport=fake.transport(), base_url=fake.api_url) as client:
        with pytest.raises(UnexpectedRequest, match="PUT /repos/octo/widgets/issues/1/lock"):
            await client.put("/repos/octo/widgets/issues/1/lock")


async def test_strict_failure_is_not_swallowed_by_the_port(fake: FakeGitHub) -> None:
    # A base URL the fake does not serve: every request hits an unknown route.
    port = token_port("t", base_url=f"{fake.api_url}/api/v3", transport=fake.transport(), auto_retry=False)
    with pytest.raises(UnexpectedRequest):
        await port.get_repository(REPO)
    assert fake.unexpected == [f"GET /api/v3/repos/{REPO}"]


async def test_missing_resources_are_404_even_when_strict(fake: FakeGitHub) -> None:
    port = token_port("t", base_url=fake.api_url, transport=fake.transport(), auto_retry=False)
    assert await port.get_file_text("octo/other", "x") is None
    assert await port.get_permission(REPO, "nobody") == "none"
    assert fake.unexpected == []


async def test_records_requests(fake: FakeGitHub) -> None:
    issue = fake.add_issue(REPO, title="T")
    async with httpx.AsyncClient(transport=fake.transport(), base_url=fake.api_url) as client:
        await client.post(f"/repos/{REPO}/issues/{issue.number}/comments?x=1", json={"body": "hey"})
    (request,) = fake.requests
    assert (request.method, request.path, request.query, request.json) == (
        "POST",
        f"/repos/{REPO}/issues/1/comments",
        {"x": "1"},
        {"body": "hey"},
    )


def test_served_over_real_http(fake: FakeGitHub) -> None:
    fake.add_issue(REPO, title="Served")
    with serve(fake) as url:
        assert url.startswith("http://127.0.0.1:")
        response = httpx.get(f"{url}/repos/{REPO}/issues/1")
        assert response.status_code == 200
        assert response.json()["url"] == f"{url}/repos/{REPO}/issues/1"
    assert fake.urls.api == "http://github.test"


async def test_port_over_real_http(fake: FakeGitHub) -> None:
    fake.add_issue(REPO, title="Served")
    with serve(fake) as url:
        port = token_port("t", base_url=url, auto_retry=False)
        assert (await port.get_issue(REPO, 1)).title == "Served"
        created = await port.create_issue_comment(REPO, 1, body="over the wire")
    assert fake.comments(REPO, 1)[0].id == created.id
