"""`plan-cascade serve` keeps what startup loaded out of the garbage collector before it answers
anything: a full collection over those objects stalled every delivery for ~60 ms (the intake's p99)."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

from bot import cli
from tests.support import WEBHOOK_SECRET, rsa_private_key_pem


def test_serve_freezes_the_startup_heap_before_the_server_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    for key, value in {
        "PLAN_CASCADE_APP_ID": "12345",
        "PLAN_CASCADE_PRIVATE_KEY": rsa_private_key_pem(),
        "PLAN_CASCADE_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "PLAN_CASCADE_DATA_DIR": str(tmp_path / "data"),
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(cli, "make_undumpable", lambda: True)  # the test process stays dumpable
    monkeypatch.setattr("bot.log.configure_logging", lambda level: None)  # and keeps pytest's logging
    seen: dict[str, Any] = {}

    def run(server: uvicorn.Server) -> None:  # instead of serving: what the heap looks like now
        seen["frozen"] = gc.get_freeze_count()
        seen["app"] = server.config.app

    monkeypatch.setattr(uvicorn.Server, "run", run)
    gc.unfreeze()
    try:
        assert cli.main(["--env-file", str(tmp_path / "none.env"), "serve", "--no-workers"]) == 0
    finally:
        gc.unfreeze()  # give this test process's objects back to the collector
    assert seen["app"] is not None
    assert seen["frozen"] > 10_000, "the modules and the app were frozen before serving"
