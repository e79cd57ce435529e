"""The set-up page in-process (issue #46): the token, the manifest and where it is posted, the
state's rules, the callback storing and serving the new App at once, `/setup` gone afterwards;
the credential store; `setup --import`; the fake GitHub's manifest conversions."""

from __future__ import annotations

import asyncio
import html
import re
import stat
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import jwt
import orjson
import pytest

from bot.app.server import build_runtime, create_app
from bot.app.setup_flow import Refused, SetupGate, url_problem
from bot.app.setup_import import import_app
from bot.cli import main
from bot.errors import ConfigurationError
from bot.redaction import redact
from bot.runtime.app_manifest import events, manifest, permissions
from bot.runtime.credentials import (
    AppCredentials,
    CredentialStore,
    adopt,
    configured,
    wait_for_credentials,
)
from bot.runtime.services import Services
from bot.runtime.settings import Settings
from bot.testing.deliveries import encode, signed_headers
from bot.testing.fake_github import FakeGitHub
from tests.support import WEBHOOK_SECRET, rsa_private_key_pem

PUBLIC = "https://bot.example.com"


def bare_settings(tmp_path: Path, **extra: str) -> Settings:
    values = {
        "PLAN_CASCADE_DATA_DIR": str(tmp_path / "data"),
        "GITHUB_API_URL": "https://api.github.com",
        "ANTHROPIC_API_KEY": "sk-ant-test-key-000000000001",
        **extra,
    }
    return Settings(**values)  # type: ignore[arg-type]


@pytest.fixture
async def setup_server(tmp_path: Path):
    settings = bare_settings(tmp_path)
    fake = FakeGitHub(api_url="https://api.github.com", html_url="https://github.com")
    runtime = build_runtime(
        settings, services=Services(settings=settings, extras={"github_transport": fake.transport()})
    )
    await runtime.db.migrate()
    app = create_app(settings, runtime=runtime, start_workers=False, migrate=False)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PUBLIC)
    async with client:
        yield client, app, fake, settings
    await runtime.db.dispose()


async def review(client: httpx.AsyncClient, token: str, **form: str) -> tuple[str, dict]:
    """Fill in the form and open the review page; its button's target and the manifest it posts."""
    answer = await client.post(
        "/setup", data={"token": token, "public_url": PUBLIC, "name": "My Cascade", **form}
    )
    assert answer.status_code == 303, answer.text
    page = await client.get(answer.headers["location"])
    assert page.status_code == 200
    assert "form-action 'self' https://github.com;" in page.headers["Content-Security-Policy"]
    action = html.unescape(re.search(r'<form method="post" action="([^"]+)"', page.text).group(1))
    value = re.search(r'name="manifest" value="([^"]*)"', page.text).group(1)
    return action, orjson.loads(html.unescape(value))


async def test_setup_flow_stores_and_serves_the_new_app_at_once(setup_server) -> None:
    client, app, fake, settings = setup_server
    gate = app.app.state.setup
    assert (await client.get("/setup")).status_code == 403
    assert (await client.get("/")).headers["location"] == "/setup"
    body = encode({"zen": "hi", "hook_id": 1})
    # Nothing can be verified before set-up: every delivery is refused, even one signed with "".
    unsigned = signed_headers(body, secret="", event="ping")
    assert (await client.post("/webhook", content=body, headers=unsigned)).status_code == 503
    page = await client.get(f"/setup?token={gate.token}")
    assert page.status_code == 200 and "Public URL of this server" in page.text
    assert (
        "form-action 'self' https: http:" in page.headers["Content-Security-Policy"]
    )  # on to the public URL

    action, posted = await review(client, gate.token, org="acme")
    assert action.startswith("https://github.com/organizations/acme/settings/apps/new?state=")
    assert posted == manifest(public_url=PUBLIC, name="My Cascade")
    state = parse_qs(urlsplit(action).query)["state"][0]

    code = fake.apps.register(posted, org="acme")
    done = await client.get("/setup/callback", params={"code": code, "state": state})
    assert done.status_code == 303
    assert done.headers["location"] == "https://github.com/apps/my-cascade/installations/new"
    store = CredentialStore(settings.data_dir)
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert store.load().app_id == fake.app_id and configured(settings)
    assert settings.app_id == str(fake.app_id)  # the process's settings: every part sees them
    # The same process verifies deliveries with the new secret at once.
    signed = signed_headers(body, secret=fake.hooks.secret, event="ping")
    assert (await client.post("/webhook", content=body, headers=signed)).status_code == 202
    stale = signed_headers(body, secret=WEBHOOK_SECRET, event="ping")
    assert (await client.post("/webhook", content=body, headers=stale)).status_code == 401
    # /setup is gone, except for the browser that set it up (the self-test).
    assert (await client.get("/setup")).status_code == 200
    for path in (f"/setup?token={gate.token}", "/setup/callback", "/"):
        assert (
            await httpx.AsyncClient(transport=client._transport, base_url=PUBLIC).get(path)
        ).status_code == 404
    assert (await client.get("/setup/review", params={"token": gate.token})).status_code == 404


async def test_the_page_refuses_what_github_cannot_reach(setup_server) -> None:
    client, app, _, _ = setup_server
    token = app.app.state.setup.token
    answer = await client.post(
        "/setup", data={"token": token, "public_url": "http://localhost:8000", "name": "x"}
    )
    assert answer.status_code == 400 and "GitHub cannot reach it" in answer.text and "Action" in answer.text
    answer = await client.post("/setup", data={"token": "wrong", "public_url": PUBLIC, "name": "x"})
    assert answer.status_code == 403
    answer = await client.post(
        "/setup", data={"token": token, "public_url": PUBLIC, "name": "x", "org": "a/b"}
    )
    assert answer.status_code == 400 and "organization" in answer.text


async def test_callback_refuses_foreign_and_replayed_states(setup_server) -> None:
    client, app, fake, settings = setup_server
    action, posted = await review(client, app.app.state.setup.token)
    state = parse_qs(urlsplit(action).query)["state"][0]
    code = fake.apps.register(posted)
    stranger = httpx.AsyncClient(transport=client._transport, base_url=PUBLIC)
    assert (await stranger.get("/setup/callback", params={"code": code, "state": state})).status_code == 403
    assert (await client.get("/setup/callback", params={"code": code})).status_code == 403
    assert (
        await client.get("/setup/callback", params={"code": code, "state": "x" + state})
    ).status_code == 403
    assert (await client.get("/setup/callback", params={"code": code, "state": state})).status_code == 303
    assert (await client.get("/setup/callback", params={"code": code, "state": state})).status_code == 404
    assert fake.hooks.secret not in str(CredentialStore(settings.data_dir).load())


def test_state_rules() -> None:
    now = [1000.0]
    gate = SetupGate(clock=lambda: now[0])
    browser = gate.new_browser()
    state = gate.start(browser, PUBLIC)
    with pytest.raises(Refused, match="another browser"):
        gate.finish(state, gate.new_browser())
    with pytest.raises(Refused, match="another browser"):
        gate.finish(state, None)
    now[0] += 3601
    with pytest.raises(Refused, match="more than an hour"):
        gate.finish(state, browser)
    fresh = gate.start(browser, PUBLIC)
    assert gate.finish(fresh, browser).public_url == PUBLIC
    with pytest.raises(Refused, match="used already"):
        gate.finish(fresh, browser)
    gate.done(browser)
    assert not gate.token_ok(gate.token) and gate.owner(browser) and not gate.owner(gate.new_browser())


@pytest.mark.parametrize(
    ("url", "api", "refused"),
    [
        ("https://bot.example.com", "https://api.github.com", False),
        ("http://localhost:8000", "https://api.github.com", True),
        ("http://127.0.0.1:8000", "https://api.github.com", True),
        ("http://[::1]:8000", "https://ghe.corp/api/v3", True),
        ("http://10.1.2.3:8000", "https://api.github.com", True),
        ("http://10.1.2.3:8000", "https://ghe.corp/api/v3", False),
        ("http://127.0.0.1:8000", "http://127.0.0.1:9000/api/v3", False),
        ("bot.example.com", "https://api.github.com", True),
        ("https://bot.example.com/?x=1", "https://api.github.com", True),
    ],
)
def test_public_url_rules(url: str, api: str, refused: bool) -> None:
    assert (url_problem(url, github_api_url=api) is not None) is refused


def test_store_is_private_and_the_environment_wins(tmp_path: Path) -> None:
    pem = rsa_private_key_pem()
    store = CredentialStore(tmp_path)
    creds = AppCredentials(app_id=42, private_key=pem, webhook_secret="stored-secret-123456", slug="mine")
    store.save(creds, now=datetime(2026, 1, 1))
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert "stored-secret" not in repr(store.load()) and "PRIVATE" not in repr(store.load())
    assert redact("secret: stored-secret-123456") == "secret: ***"  # registered like the environment's
    settings = bare_settings(
        tmp_path, PLAN_CASCADE_APP_ID="7", PLAN_CASCADE_WEBHOOK_SECRET="env-secret-1234567"
    )
    assert adopt(settings, store.load()) == ["private key"]
    assert settings.app_id == "7" and settings.webhook_secret.get_secret_value() == "env-secret-1234567"
    assert settings.private_key_pem() == pem
    store.path.write_text('{"app_id": "x", "private_key": "SECRET-PEM-TEXT"}')
    with pytest.raises(ConfigurationError) as caught:
        store.load()
    assert "SECRET-PEM-TEXT" not in caught.value.message and str(store.path) in caught.value.message


async def test_a_waiting_worker_starts_when_the_credentials_arrive(tmp_path: Path) -> None:
    settings = bare_settings(tmp_path)
    stop = asyncio.Event()
    waiting = asyncio.create_task(wait_for_credentials(settings, stop, interval=0.01))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    creds = AppCredentials(app_id=9, private_key=rsa_private_key_pem(), webhook_secret="arrived-secret-1234")
    CredentialStore(settings.data_dir).save(creds, now=datetime(2026, 1, 1))
    assert await asyncio.wait_for(waiting, 5) is True
    assert configured(settings) and settings.app_id == "9"


async def test_import_checks_the_key_with_github(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    pem = rsa_private_key_pem()
    key = serialization.load_pem_private_key(pem.encode(), password=None)
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    fake = FakeGitHub(
        api_url="https://api.github.com", app_id=55, app_slug="by-hand", app_public_key=public.decode()
    )
    settings = bare_settings(tmp_path)
    creds, note = await import_app(
        settings, app_id=55, pem=pem, webhook_secret="hand-secret-123456", transport=fake.transport()
    )
    assert (creds.slug, note) == ("by-hand", None)
    assert CredentialStore(settings.data_dir).load().app_id == 55
    CredentialStore(settings.data_dir).path.unlink()
    with pytest.raises(ConfigurationError, match="refused this key for App 56"):
        await import_app(
            settings, app_id=56, pem=pem, webhook_secret="hand-secret-123456", transport=fake.transport()
        )
    assert not CredentialStore(settings.data_dir).path.exists()


async def test_fake_conversions_are_single_use_and_expire() -> None:
    fake = FakeGitHub(api_url="https://api.github.com")
    async with httpx.AsyncClient(transport=fake.transport(), base_url="https://api.github.com") as client:
        with pytest.raises(ValueError, match="url is required"):
            fake.apps.register({"name": "x"})
        assert (await client.post("/app-manifests/unknown/conversions")).status_code == 404
        code = fake.apps.register(manifest(public_url=PUBLIC, name="One"))
        first = await client.post(f"/app-manifests/{code}/conversions")
        assert first.status_code == 201 and first.json()["pem"].startswith("-----BEGIN RSA PRIVATE KEY-----")
        assert first.json()["permissions"] == permissions() and first.json()["events"] == events()
        assert (await client.post(f"/app-manifests/{code}/conversions")).status_code == 404
        late = fake.apps.register(manifest(public_url=PUBLIC, name="Two"))
        fake.apps.registrations[late].made_at -= timedelta(hours=1, seconds=1)
        assert (await client.post(f"/app-manifests/{late}/conversions")).status_code == 404
        # The JWTs of the first App's key are refused once another App is the fake's.

        token = jwt.encode(
            {"iss": str(fake.apps.registrations[code].app_id), "iat": 0, "exp": 2**31},
            first.json()["pem"],
            algorithm="RS256",
        )
        assert (await client.get("/app", headers={"Authorization": f"Bearer {token}"})).status_code == 401


async def test_status_page_shows_the_selftest(tmp_path: Path) -> None:
    from tests.support import make_settings

    token = "status-token-0123456789abcdef"
    settings = make_settings(
        tmp_path, GITHUB_API_URL="https://api.github.com", PLAN_CASCADE_STATUS_TOKEN=token
    )
    fake = FakeGitHub(api_url="https://api.github.com", html_url="https://github.com")
    fake.apps.register(manifest(public_url=PUBLIC, name="Shown"))
    fake.app_public_key = None  # the test's own key signs the JWTs
    fake.apps.install("acme", permissions={"issues": "write"})
    runtime = build_runtime(
        settings, services=Services(settings=settings, extras={"github_transport": fake.transport()})
    )
    await runtime.db.migrate()
    app = create_app(settings, runtime=runtime, start_workers=False, migrate=False)
    assert app.app.state.setup is None
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PUBLIC) as client:
        assert (await client.get("/setup")).status_code == 404
        assert (await client.get("/status/selftest.json")).status_code == 401
        lines = (
            await client.get("/status/selftest.json", headers={"Authorization": f"Bearer {token}"})
        ).json()
        page = await client.get("/status/selftest", headers={"Authorization": f"Bearer {token}"})
    await runtime.db.dispose()
    named = {line["name"]: line for line in lines}
    assert named["installation on acme"]["verdict"] == "fail"
    assert "Contents (write)" in named["installation on acme"]["detail"]
    assert "https://github.com/settings/apps/shown/permissions" in named["installation on acme"]["fix"]
    assert named["signed delivery"]["verdict"] == "fail"
    assert page.status_code == 200 and "installation on acme" in page.text


def test_setup_import_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    key = tmp_path / "app.pem"
    key.write_text(rsa_private_key_pem())
    secret = tmp_path / "secret"
    secret.write_text("hand-made-secret-9876\n")
    monkeypatch.setenv("PLAN_CASCADE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("GITHUB_API_URL", "http://127.0.0.1:9")  # nobody answers: stored, with a warning
    argv = [
        "--env-file",
        str(tmp_path / "none"),
        "setup",
        "--import",
        "--app-id",
        "77",
        "--private-key",
        str(key),
    ]
    assert main([*argv, "--webhook-secret-file", str(secret)]) == 0
    out = capsys.readouterr().out
    assert "stored App 77" in out and "warning: GitHub could not be asked" in out
    assert "hand-made-secret" not in out
    stored = CredentialStore(tmp_path / "data").load()
    assert (stored.app_id, stored.webhook_secret) == (77, "hand-made-secret-9876")
    assert stat.S_IMODE(CredentialStore(tmp_path / "data").path.stat().st_mode) == 0o600
