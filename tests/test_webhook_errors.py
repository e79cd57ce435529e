"""`POST /webhook` answers what it cannot handle: other methods, a database that fails."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select

from bot.db.intake import DeliveryWriter
from bot.db.models import Delivery
from bot.server import build_runtime, create_app
from bot.services import Services
from bot.testing.deliveries import encode, load_fixture, signed_headers
from tests.support import WEBHOOK_SECRET, asgi_client, make_settings


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


async def test_a_database_failure_is_a_500_and_records_nothing(
    server, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    client, runtime = server

    async def broken(self, records):  # type: ignore[no-untyped-def]
        raise OSError("disk I/O error")

    monkeypatch.setattr(DeliveryWriter, "_write", broken)
    body = encode(load_fixture("ping.event.1"))
    headers = signed_headers(body, secret=WEBHOOK_SECRET, event="ping", delivery_id="db-down")
    resp = await client.post("/webhook", content=body, headers=headers)
    assert resp.status_code == 500
    assert "could not be recorded" in resp.json()["message"]
    async with runtime.db.read() as session:
        assert (await session.execute(select(func.count()).select_from(Delivery))).scalar_one() == 0
