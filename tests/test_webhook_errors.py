"""`POST /webhook` answers what it cannot handle: other methods (a failing database: test_intake)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.server import build_runtime, create_app
from bot.services import Services
from tests.support import asgi_client, make_settings


@pytest.fixture
async def server(tmp_path: Path):
    settings = make_settings(tmp_path, GITHUB_API_URL="http://github.test")
    runtime = build_runtime(settings, services=Services(settings=settings))
    await runtime.db.migrate()
    app = create_app(settings, runtime=runtime, start_workers=False, migrate=False)
    async with asgi_client(app) as client:
        yield client, runtime
    await runtime.db.dispose()


async def test_other_methods_get_405(server) -> None:  # type: ignore[no-untyped-def]
    client, _ = server
    resp = await client.get("/webhook")
    assert resp.status_code == 405
    assert resp.headers["allow"] == "POST"
