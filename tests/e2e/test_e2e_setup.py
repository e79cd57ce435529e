"""From nothing to a working App (issue #46): the real `plan-cascade serve`, started without any
App credentials against a fake GitHub Enterprise Server over HTTP, registers its App from a
manifest, serves webhooks with it at once, and so does a worker started afterwards; the
self-test passes, then names a permission an installation lacks; `/setup` is gone afterwards."""

from __future__ import annotations

import asyncio
import html
import os
import re
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import orjson
import pytest

from bot.runtime.app_manifest import events, permissions
from bot.testing.fake_github import FakeGitHub
from bot.testing.fake_github_serve import serve
from bot.testing.server_process import free_port, running_worker, start_cli, stop
from tests.e2e.world import REPO, payload
from tests.support import postgres_database

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


@pytest.fixture
async def database_url() -> AsyncIterator[str]:
    async with postgres_database() as url:
        yield url


@contextmanager
def bare_server(tmp: Path, env: dict[str, str], port: int) -> Iterator[tuple[str, str]]:
    """`serve --no-workers` with no App credentials; yields its URL and the set-up URL it logged."""
    log_path = tmp / "server.log"
    proc = start_cli(tmp, ["serve", "--no-workers", "--port", str(port)], env=env, log_path=log_path)
    try:
        deadline = time.monotonic() + 30
        while not (found := re.search(r"open (\S+/setup\?token=\S+) to create one", log_path.read_text())):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not start:\n" + log_path.read_text()[-3000:])
            time.sleep(0.1)
        url = f"http://127.0.0.1:{port}"
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()[-3000:]
            time.sleep(0.1)
        yield url, found.group(1)
    finally:
        stop(proc)


def hidden(page: str, name: str) -> str:
    match = re.search(rf'name="{name}" value="([^"]*)"', page)
    assert match, page
    return html.unescape(match.group(1))


def test_setup_page_to_working_app(tmp_path: Path, database_url: str) -> None:
    fake = FakeGitHub(api_url="http://127.0.0.1/api/v3", enterprise=True)
    fake.add_repo(REPO)
    fake.set_permission(REPO, "maint", "maintain")
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    fake.hooks.target = "network"
    with serve(fake) as api:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp_path),
            "GITHUB_API_URL": api,
            "GITHUB_SERVER_URL": fake.urls.html,
            "PLAN_CASCADE_DATA_DIR": str(tmp_path / "data"),
            "PLAN_CASCADE_DATABASE_URL": database_url,
            "PLAN_CASCADE_GITHUB_WRITE_INTERVAL": "0",
            "ANTHROPIC_API_KEY": "sk-ant-test-key-for-the-self-test-0001",
        }
        with bare_server(tmp_path, env, port) as (url, setup_url):
            token = parse_qs(urlsplit(setup_url).query)["token"][0]
            # Without the token it printed (or with another), the page is refused.
            assert httpx.get(f"{url}/setup").status_code == 403
            assert httpx.get(f"{url}/setup?token=not-the-token").status_code == 403
            assert httpx.get(f"{url}/", follow_redirects=True).status_code == 403
            browser = httpx.Client(base_url=url, timeout=30)
            form = browser.get(f"/setup?token={token}")
            assert form.status_code == 200 and 'name="public_url"' in form.text
            # (a URL GitHub cannot reach is explained, not taken: tests/test_setup_page.py)
            answer = browser.post(
                "/setup", data={"token": token, "public_url": public, "name": "Cascade Test"}
            )
            assert answer.status_code == 303 and answer.headers["location"].startswith(
                f"{public}/setup/review?"
            )

            def press_create() -> tuple[str, dict]:
                review = browser.get(answer.headers["location"])
                assert review.status_code == 200
                action = html.unescape(
                    re.search(r'<form method="post" action="([^"]+)"', review.text).group(1)
                )
                return action, orjson.loads(hidden(review.text, "manifest"))

            action, manifest = press_create()
            assert action.startswith(f"{fake.urls.html}/settings/apps/new?state=")
            assert manifest["default_permissions"] == permissions()
            assert manifest["default_events"] == events()
            assert manifest["hook_attributes"]["url"] == f"{public}/webhook"
            assert manifest["redirect_url"] == f"{public}/setup/callback"
            assert manifest["public"] is False
            state = parse_qs(urlsplit(action).query)["state"][0]

            # Wrong state, and the right one from another browser: refused, nothing stored.
            assert browser.get("/setup/callback", params={"code": "x", "state": "forged"}).status_code == 403
            other = httpx.get(f"{url}/setup/callback", params={"code": "x", "state": state})
            assert other.status_code == 403
            # A code GitHub does not know: the state is spent; replayed, it is refused.
            assert browser.get("/setup/callback", params={"code": "nope", "state": state}).status_code == 502
            replay = browser.get("/setup/callback", params={"code": "nope", "state": state})
            assert replay.status_code == 403 and "used already" in replay.text
            store = tmp_path / "data" / "github-app.json"
            assert not store.exists()

            # A worker started before set-up waits for the credentials.
            early = start_cli(tmp_path, ["worker"], env=env, log_path=tmp_path / "early.log")
            deadline = time.monotonic() + 30
            while "waiting for its credentials" not in (tmp_path / "early.log").read_text():
                assert early.poll() is None and time.monotonic() < deadline, (
                    tmp_path / "early.log"
                ).read_text()
                time.sleep(0.1)
            # GitHub makes the App (its first ping finds no secret yet), then the browser comes back.
            action, manifest = press_create()
            state = parse_qs(urlsplit(action).query)["state"][0]
            code = fake.apps.register(manifest)
            first_ping = asyncio.run(fake.apps.ping())
            assert first_ping.status_code == 503
            done = browser.get("/setup/callback", params={"code": code, "state": state})
            assert done.status_code == 303
            assert done.headers["location"] == f"{fake.urls.html}/apps/cascade-test/installations/new"
            assert stat.S_IMODE(store.stat().st_mode) == 0o600
            stored = orjson.loads(store.read_bytes())
            reg = fake.apps.current
            assert (stored["app_id"], stored["private_key"]) == (reg.app_id, reg.pem)
            assert stored["webhook_secret"] == reg.webhook_secret
            # The code is single-use at GitHub too.
            assert httpx.post(f"{api}/app-manifests/{code}/conversions").status_code == 404

            # ...and starts once they are stored; the web process needs no restart either.
            deadline = time.monotonic() + 30
            while "plan-cascade worker ready" not in (tmp_path / "early.log").read_text():
                assert early.poll() is None and time.monotonic() < deadline, (
                    tmp_path / "early.log"
                ).read_text()
                time.sleep(0.1)
            stop(early)
            # No restart: the same process takes deliveries signed with the new secret.
            inst = fake.apps.install("octo-org", account_type="Organization")
            assert asyncio.run(fake.apps.notify_installed(inst)).status_code == 202
            # A worker started now reads the stored credentials and acts as the new App.
            with running_worker(tmp_path, env=env):
                comment = payload(
                    "issue_comment.created.1", number=1, sender={"login": "maint", "type": "User"}
                )
                fake.add_issue(REPO, title="Hello")
                said = fake.add_comment(REPO, 1, body="/plan-cascade help", user="maint")
                comment["comment"].update(id=said.id, body=said.body, user={"login": "maint", "type": "User"})
                comment["installation"] = {"id": inst.id}
                assert asyncio.run(fake.hooks.deliver("issue_comment", comment)).status_code == 202
                deadline = time.monotonic() + 60
                while not any("help" in c.body.lower() for c in fake.comments(REPO, 1) if c.user != "maint"):
                    assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()[-3000:]
                    time.sleep(0.2)
            tokens = [
                r for r in fake.requests if r.path.endswith(f"/app/installations/{inst.id}/access_tokens")
            ]
            assert tokens and all(r.status == 201 for r in tokens)

            # The self-test, on the page GitHub sends the installer back to.
            selftest = browser.get("/setup", params={"installation_id": inst.id, "setup_action": "install"})
            assert selftest.status_code == 200
            assert 'class="fail"' not in selftest.text, selftest.text
            assert "every permission and event the bot needs is granted" in selftest.text

            # An installation without Checks is named, with where to fix it, here and by doctor.
            fake.apps.install(
                "octocat", permissions={k: v for k, v in permissions().items() if k != "checks"}
            )
            again = browser.get("/setup").text
            assert "missing permissions: Checks (write)" in again
            assert (
                f"{fake.urls.html}/organizations/octocat/settings/apps/cascade-test/permissions" not in again
            )
            assert f"{fake.urls.html}/settings/apps/cascade-test/permissions" in again
            doctor = subprocess.run(
                [sys.executable, "-m", "bot.cli", "--env-file", str(tmp_path / "none.env"), "doctor"],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert "installation on octocat: missing permissions: Checks (write)" in doctor.stdout, (
                doctor.stdout
            )

            # Configured: /setup is gone for everyone else, the token included.
            assert httpx.get(f"{url}/setup").status_code == 404
            assert httpx.get(f"{url}/setup?token={token}").status_code == 404
            assert (
                httpx.get(f"{url}/setup/callback", params={"code": code, "state": state}).status_code == 404
            )
        server_log = "".join((tmp_path / f"{name}.log").read_text() for name in ("server", "worker", "early"))
        for secret in (reg.webhook_secret, reg.pem.splitlines()[1]):
            assert secret not in server_log and secret not in doctor.stdout
