"""`/readyz` beside `/healthz` (issue 46, item 7): ready when the database answers, the App is
configured and GitHub's API answers; 503 naming what failed. The database here is a real
PostgreSQL server of the test's own, stopped and started again as an operator would."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from bot.app.readiness import GITHUB_FRESH_SECONDS, Readiness
from bot.app.server import build_runtime, create_app
from bot.runtime.services import Services
from bot.testing.fake_github import FakeGitHub
from tests import pgserver
from tests.support import asgi_client, make_settings


@pytest.mark.postgres
async def test_readyz_fails_while_the_database_is_down_and_passes_when_it_is_back(tmp_path: Path) -> None:
    bindir = pgserver.find_bindir()
    if bindir is None:  # skipped only where PostgreSQL is not installed (a failure with REQUIRE_POSTGRES=1)
        pgserver.session_url(None)
    server = pgserver.start_throwaway(bindir)
    fake = FakeGitHub()
    url = server.url.replace("postgresql://", "postgresql+asyncpg://")
    settings = make_settings(tmp_path, PLAN_CASCADE_DATABASE_URL=url, GITHUB_API_URL=fake.api_url)
    services = Services(settings=settings, extras={"github_transport": fake.transport()})
    runtime = build_runtime(settings, services=services)
    app = create_app(settings, runtime=runtime, start_workers=False, migrate=False)
    try:
        async with asgi_client(app) as client:
            ready = await client.get("/readyz")
            assert ready.status_code == 200, ready.text
            assert ready.json() == {
                "status": "ready",
                "checks": {"database": "ok", "app": "ok", "github": "ok"},
            }

            server.halt()  # the database goes down
            down = await client.get("/readyz")
            assert down.status_code == 503
            assert down.json() == {
                "status": "not ready",
                "checks": {"database": "does not answer", "app": "ok", "github": "ok"},
                "failed": ["database"],
            }
            assert (await client.get("/healthz")).status_code == 503

            server.resume()  # and comes back: the pool's dead connections are not held against it
            back = await client.get("/readyz")
            assert back.status_code == 200, back.text
    finally:
        await runtime.db.dispose()
        server.stop()


async def test_readyz_names_an_app_not_configured_and_github_not_answering(tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path, PLAN_CASCADE_APP_ID="<your-app-id>", GITHUB_API_URL="http://127.0.0.1:9/api"
    )
    runtime = build_runtime(settings)
    await runtime.db.migrate()
    now = [0.0]
    answers: list[int] = []

    def github(request: httpx.Request) -> httpx.Response:
        if not answers:
            raise httpx.ConnectError("refused")
        return httpx.Response(answers.pop(0))

    readiness = Readiness(
        db=runtime.db, settings=settings, transport=httpx.MockTransport(github), clock=lambda: now[0]
    )
    try:
        ready, body = await readiness.check()
        assert not ready and body["failed"] == ["app", "github"]
        assert body["checks"] == {
            "database": "ok",
            "app": "not configured: see `plan-cascade doctor`",
            "github": "GitHub's API does not answer",
        }
        assert "<your-app-id>" not in str(body)  # details go to the log, not to a public endpoint
        answers.append(503)
        assert (await readiness.check())[1]["failed"] == ["app", "github"]  # a 5xx is no answer either
        answers.append(404)  # any other answer is: GitHub is there
        assert (await readiness.check())[1]["failed"] == ["app"]
        now[0] += GITHUB_FRESH_SECONDS - 1  # a recent answer still counts, without asking again
        assert (await readiness.check())[1]["failed"] == ["app"] and answers == []
        now[0] += 2
        assert (await readiness.check())[1]["failed"] == ["app", "github"]  # asked again: refused
    finally:
        await runtime.db.dispose()
