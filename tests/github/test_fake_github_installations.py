"""The fake GitHub refuses what GitHub refuses an installation token: other repositories (404),
writes its installation was not granted (403), and unknown installations."""

from __future__ import annotations

import httpx

from bot.testing.fake_github import FakeGitHub
from bot.testing.fake_github_installations import FULL_PERMISSIONS

JWT = {"authorization": "Bearer app.jwt.token"}


def client(fake: FakeGitHub) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=fake.transport(), base_url=fake.api_url)


async def token(http: httpx.AsyncClient, installation: int, **body: object) -> httpx.Response:
    return await http.post(f"/app/installations/{installation}/access_tokens", headers=JWT, json=body or None)


async def test_a_token_reaches_only_its_installations_repositories() -> None:
    fake = FakeGitHub()
    for repo in ("acme/service", "acme/client", "acme/other"):
        fake.add_repo(repo)
    fake.install(1, ["acme/service", "acme/client"])
    async with client(fake) as http:
        issued = (await token(http, 1)).json()
        assert issued["repository_selection"] == "selected" and issued["permissions"]["issues"] == "write"
        auth = {"authorization": f"token {issued['token']}"}
        assert (await http.get("/repos/acme/client", headers=auth)).status_code == 200
        other = await http.get("/repos/acme/other", headers=auth)
        assert other.status_code == 404 and other.json()["message"] == "Not Found"
        made = await http.post("/repos/acme/other/issues", headers=auth, json={"title": "x"})
        assert made.status_code == 404 and fake.repo("acme/other").issues == {}
        # Narrowed to one repository: the other one of the installation is out of reach too.
        narrowed = (await token(http, 1, repositories=["service"])).json()
        auth = {"authorization": f"token {narrowed['token']}"}
        assert (await http.get("/repos/acme/client", headers=auth)).status_code == 404
        assert (await http.get("/repos/acme/service", headers=auth)).status_code == 200
        refused = await token(http, 1, repositories=["other"])
        assert refused.status_code == 422
        assert (await token(http, 99)).status_code == 404


async def test_the_installation_of_a_repository_needs_the_apps_jwt_and_404s_where_it_is_not_installed() -> (
    None
):
    fake = FakeGitHub()
    fake.add_repo("acme/service")
    fake.add_repo("acme/other")
    fake.install(7, ["acme/service"], permissions={**FULL_PERMISSIONS, "contents": "read"})
    async with client(fake) as http:
        found = (await http.get("/repos/acme/service/installation", headers=JWT)).json()
        assert found["id"] == 7 and found["permissions"]["contents"] == "read"
        assert (await http.get("/repos/acme/other/installation", headers=JWT)).status_code == 404
        issued = (await token(http, 7)).json()
        as_token = await http.get(
            "/repos/acme/service/installation", headers={"authorization": f"token {issued['token']}"}
        )
        assert as_token.status_code == 401


async def test_a_write_needs_the_installations_permission() -> None:
    fake = FakeGitHub()
    fake.add_repo("acme/web")
    fake.install(3, ["acme/web"], permissions={**FULL_PERMISSIONS, "issues": "read"})
    async with client(fake) as http:
        auth = {"authorization": f"token {(await token(http, 3)).json()['token']}"}
        made = await http.post("/repos/acme/web/issues", headers=auth, json={"title": "x"})
        assert made.status_code == 403 and made.json()["message"] == "Resource not accessible by integration"
        assert (await http.get("/repos/acme/web/issues", headers=auth)).status_code == 200


async def test_a_fake_without_installations_serves_every_repository_as_before() -> None:
    fake = FakeGitHub()
    fake.add_repo("acme/any")
    async with client(fake) as http:
        auth = {"authorization": f"token {(await token(http, 5)).json()['token']}"}
        assert (
            await http.post("/repos/acme/any/issues", headers=auth, json={"title": "x"})
        ).status_code == 201


async def test_an_installations_repositories_need_its_token_and_come_in_pages_with_their_count() -> None:
    fake = FakeGitHub()
    for repo in ("acme/a", "acme/b", "acme/c", "other/x"):
        fake.add_repo(repo)
    fake.install(1, ["acme/a", "acme/b", "acme/c"])
    fake.install(2, ["other/x"])
    async with client(fake) as http:
        auth = {"authorization": f"token {(await token(http, 1)).json()['token']}"}
        first = await http.get("/installation/repositories", headers=auth, params={"per_page": 2})
        assert first.status_code == 200 and first.json()["total_count"] == 3
        assert [r["full_name"] for r in first.json()["repositories"]] == ["acme/a", "acme/b"]
        assert 'rel="next"' in first.headers["link"]
        second = await http.get("/installation/repositories", headers=auth, params={"per_page": 2, "page": 2})
        assert [r["full_name"] for r in second.json()["repositories"]] == ["acme/c"]
        assert "link" not in second.headers
        narrowed = {"authorization": f"token {(await token(http, 1, repositories=['b'])).json()['token']}"}
        only = (await http.get("/installation/repositories", headers=narrowed)).json()
        assert (only["total_count"], [r["full_name"] for r in only["repositories"]]) == (1, ["acme/b"])
        assert (await http.get("/installation/repositories", headers=JWT)).status_code == 403
        fake.valid_tokens.add("ghp_user")  # a token no installation was issued
        user = {"authorization": "token ghp_user"}
        assert (await http.get("/installation/repositories", headers=user)).status_code == 403
        listed = (await http.get("/app/installations", headers=JWT)).json()
        assert sorted(i["id"] for i in listed) == [1, 2]
