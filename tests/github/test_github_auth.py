"""App and token authentication, error translation and retry bounds, against the fake GitHub."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from githubkit import Response as KitResponse
from githubkit.exception import RequestFailed, SecondaryRateLimitExceeded

from bot.errors import GitHubError, NotFound
from bot.github import BoundedRetry, installation_port, make_app_github, normalize_api_url, token_port
from bot.github.client import translate
from bot.testing.fake_github import FakeGitHub, UnexpectedRequest

REPO = "octo/widgets"


def _key_pair() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public


@pytest.fixture(scope="module")
def key_pair() -> tuple[str, str]:
    return _key_pair()


def _app_fake(public_key: str) -> FakeGitHub:
    fake = FakeGitHub(strict=True, app_id=42, app_public_key=public_key, require_auth=True)
    fake.add_repo(REPO)
    return fake


async def test_app_installation_flow(key_pair: tuple[str, str]) -> None:
    private, public = key_pair
    fake = _app_fake(public)
    app = make_app_github(app_id=42, private_key=private, base_url=fake.api_url, transport=fake.transport())
    port = installation_port(app, 7)

    assert (await port.get_repository(REPO)).full_name == REPO
    mint, read = fake.requests
    assert (mint.method, mint.path) == ("POST", "/app/installations/7/access_tokens")
    assert mint.headers["authorization"].startswith("Bearer ")
    token = read.headers["authorization"].removeprefix("token ")
    assert fake.issued_tokens[token] == 7

    await port.get_repository(REPO)
    assert len(fake.requests_to("POST", "/app/installations/7/access_tokens")) == 1  # token cached

    assert await port.get_app_slug() == "plan-cascade"
    assert fake.requests[-1].headers["authorization"].startswith("Bearer ")


async def test_git_token_is_minted_once_and_reused(key_pair: tuple[str, str]) -> None:
    private, public = key_pair
    fake = _app_fake(public)
    port = installation_port(
        make_app_github(app_id=42, private_key=private, base_url=fake.api_url, transport=fake.transport()), 9
    )
    token = await port.git_token()
    assert token is not None and fake.issued_tokens[token] == 9
    assert await port.git_token() == token
    assert len(fake.requests_to("POST", "/app/installations/9/access_tokens")) == 1


async def test_each_app_client_has_its_own_token_cache(key_pair: tuple[str, str]) -> None:
    private, public = key_pair
    first, second = _app_fake(public), _app_fake(public)
    for fake in (first, second):
        app = make_app_github(
            app_id=42, private_key=private, base_url=fake.api_url, transport=fake.transport()
        )
        await installation_port(app, 7).get_repository(REPO)
    # A process-wide cache would have reused the first fake's token, which the second refuses.
    assert len(second.requests_to("POST", "/app/installations/7/access_tokens")) == 1


async def test_wrong_app_key_is_a_github_error(key_pair: tuple[str, str]) -> None:
    _, public = key_pair
    other_private, _ = _key_pair()
    fake = _app_fake(public)
    app = make_app_github(
        app_id=42, private_key=other_private, base_url=fake.api_url, transport=fake.transport()
    )
    with pytest.raises(GitHubError) as caught:
        await installation_port(app, 7).get_repository(REPO)
    assert caught.value.status == 401


async def test_token_auth_cannot_read_the_app(fake: FakeGitHub) -> None:
    port = token_port("ghp_x", base_url=fake.api_url, transport=fake.transport())
    assert await port.get_app_slug() is None
    assert fake.requests[-1].headers["authorization"] == "token ghp_x"


async def test_bad_credentials(fake: FakeGitHub) -> None:
    fake.require_auth = True
    port = token_port("ghp_wrong", base_url=fake.api_url, transport=fake.transport())
    with pytest.raises(GitHubError, match="Bad credentials") as caught:
        await port.get_repository(REPO)
    assert caught.value.status == 401 and not isinstance(caught.value, NotFound)


async def test_secondary_rate_limit_becomes_github_error_after_retry(fake: FakeGitHub) -> None:
    fake.fail_next(
        "POST",
        rf"/repos/{REPO}/issues",
        status=403,
        message="You have exceeded a secondary rate limit.",
        headers={"retry-after": "0"},
        times=5,
    )
    port = token_port("t", base_url=fake.api_url, transport=fake.transport())  # default BoundedRetry
    with pytest.raises(GitHubError, match="secondary rate limit") as caught:
        await port.create_issue(REPO, title="x", body="y")
    assert caught.value.status == 403
    assert len(fake.requests_to("POST", rf"/repos/{REPO}/issues")) == 2  # the call and one retry


async def test_long_rate_limit_wait_is_not_slept(fake: FakeGitHub) -> None:
    fake.fail_next("GET", rf"/repos/{REPO}", status=429, headers={"retry-after": "3600"})
    port = token_port("t", base_url=fake.api_url, transport=fake.transport())
    with pytest.raises(GitHubError) as caught:
        await port.get_repository(REPO)
    assert caught.value.status == 429 and len(fake.requests) == 1


async def test_server_errors_are_retried_then_raised(fake: FakeGitHub) -> None:
    fake.fail_next("GET", rf"/repos/{REPO}", status=502, times=10)
    port = token_port(
        "t", base_url=fake.api_url, transport=fake.transport(), auto_retry=BoundedRetry(max_wait=0)
    )
    with pytest.raises(GitHubError) as caught:
        await port.get_repository(REPO)
    assert caught.value.status == 502 and len(fake.requests) == 4


async def test_server_error_then_success(fake: FakeGitHub) -> None:
    fake.fail_next("GET", rf"/repos/{REPO}", status=503)
    port = token_port(
        "t", base_url=fake.api_url, transport=fake.transport(), auto_retry=BoundedRetry(max_wait=0)
    )
    assert (await port.get_repository(REPO)).full_name == REPO


async def test_connection_failure_is_a_github_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    port = token_port(
        "t", base_url="http://github.test", transport=httpx.MockTransport(refuse), auto_retry=False
    )
    with pytest.raises(GitHubError, match="Could not reach GitHub") as caught:
        await port.get_repository(REPO)
    assert caught.value.status is None


def test_translate_keeps_not_found_distinct() -> None:
    request = httpx.Request("GET", "http://github.test/x")
    response = httpx.Response(404, json={"message": "Not Found"}, request=request)
    error = translate(RequestFailed(KitResponse(response, object)), "read x")
    assert isinstance(error, NotFound) and error.message == "GitHub refused to read x: 404 Not Found"


def test_bounded_retry_policy() -> None:
    request = httpx.Request("GET", "http://github.test/x")

    def limited(seconds: int) -> SecondaryRateLimitExceeded:
        response = KitResponse(httpx.Response(403, request=request), object)
        return SecondaryRateLimitExceeded(response, timedelta(seconds=seconds))

    policy = BoundedRetry(max_wait=60)
    assert policy(limited(30), 0) == (True, timedelta(seconds=30))
    assert policy(limited(30), 1).do_retry is False
    assert policy(limited(61), 0).do_retry is False
    assert policy(limited(0), 0).retry_after == timedelta(milliseconds=1)  # never githubkit's 60 s default


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, "https://api.github.com"),
        ("https://api.github.com/", "https://api.github.com"),
        ("https://ghe.example.com/api/v3/", "https://ghe.example.com/api/v3"),
        (" https://ghe.example.com/api/v3 ", "https://ghe.example.com/api/v3"),
    ],
)
def test_normalize_api_url(given: str | None, expected: str) -> None:
    assert normalize_api_url(given) == expected


async def test_enterprise_style_base_url() -> None:
    fake = FakeGitHub(strict=True, api_url="http://ghes.test/api/v3", html_url="http://ghes.test")
    fake.add_repo(REPO)
    port = token_port("t", base_url="http://ghes.test/api/v3/", transport=fake.transport())
    repo = await port.get_repository(REPO)
    assert repo.html_url == "http://ghes.test/octo/widgets"
    assert fake.requests[-1].path == "/api/v3/repos/octo/widgets"
    async with httpx.AsyncClient(transport=fake.transport(), base_url="http://ghes.test") as client:
        with pytest.raises(UnexpectedRequest, match="GET /api/v3/gists"):
            await client.get("/api/v3/gists")
        with pytest.raises(UnexpectedRequest, match="GET /elsewhere"):
            await client.get("/elsewhere")
