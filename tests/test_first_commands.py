"""The first commands a newcomer types (issue 46, item 6), tried as a new user would: in a fresh
directory, with no App, no `.env` and no settings in the environment."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from bot.app.doctor import NO_APP, run_checks
from bot.runtime.settings import Settings
from tests.support import rsa_private_key_pem


def plan_cascade(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`plan-cascade ARGS` as a new user runs it: a clean environment, HOME in the temp directory."""
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(cwd), **(env or {})},
    )


@contextmanager
def listener() -> Iterator[tuple[str, list[object]]]:
    """A TCP port that counts who connects to it (the GitHub API URL of a doctor run)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    connected: list[object] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            connected.append(conn)
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/api/v3", connected
    finally:
        stop.set()
        thread.join()
        server.close()


def test_doctor_without_an_app_says_where_to_start_and_touches_nothing(tmp_path: Path) -> None:
    with listener() as (api_url, connected):
        proc = plan_cascade("doctor", cwd=tmp_path, env={"GITHUB_API_URL": api_url})
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr  # nothing is wrong: there is just no App yet
    assert "no App yet: run `plan-cascade serve` and open /setup, or try `plan-cascade demo`" in out
    for name in (
        "PLAN_CASCADE_APP_ID",
        "PLAN_CASCADE_WEBHOOK_SECRET",
        "PLAN_CASCADE_PRIVATE_KEY_PATH (a file)",
    ):
        assert f"{name} is not set" in out  # every one at once
    assert "FAIL" not in out
    assert connected == []  # GitHub was not asked
    assert "GitHub API: not checked" in out and "webhook deliveries: not checked" in out
    assert list(tmp_path.iterdir()) == []  # no ./.plan-cascade/plan-cascade.db, no directory
    assert f"{tmp_path / '.plan-cascade' / 'plan-cascade.db'} does not exist yet" in out


def test_doctor_calls_a_placeholder_a_placeholder(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(
        "PLAN_CASCADE_APP_ID=<your-app-id>\nPLAN_CASCADE_WEBHOOK_SECRET=changeme\n"
    )
    proc = plan_cascade("doctor", cwd=tmp_path)
    assert proc.returncode == 1  # a placeholder is a value to replace or remove
    assert "FAIL App: " + NO_APP in proc.stdout
    assert "PLAN_CASCADE_APP_ID is a placeholder ('<your-app-id>')" in proc.stdout
    assert "PLAN_CASCADE_WEBHOOK_SECRET is a placeholder" in proc.stdout
    assert "changeme" not in proc.stdout  # a secret's value, even a placeholder, is never printed
    assert "PLAN_CASCADE_PRIVATE_KEY_PATH (a file) is not set" in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == [".env"]


async def test_doctor_still_checks_the_status_pages_token(tmp_path: Path) -> None:
    short = Settings(PLAN_CASCADE_STATUS_TOKEN="too-short", PLAN_CASCADE_DATA_DIR=str(tmp_path / "d"))
    results = {name: (ok, detail) for ok, name, detail in await run_checks(short)}
    ok, detail = results["status page"]
    assert ok is False and "PLAN_CASCADE_STATUS_TOKEN must be at least 16 characters" in detail


async def test_doctor_names_every_missing_setting_and_asks_github_nothing_without_the_key(
    tmp_path: Path,
) -> None:
    def nowhere(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"doctor called {request.url} without the App's key")

    partial = Settings(PLAN_CASCADE_APP_ID="123", PLAN_CASCADE_DATA_DIR=str(tmp_path / "data"))
    results = {
        name: (ok, detail)
        for ok, name, detail in await run_checks(partial, transport=httpx.MockTransport(nowhere))
    }
    ok, detail = results["App"]
    assert ok is False and detail.startswith("2 of the App's settings missing or wrong")
    assert "PLAN_CASCADE_WEBHOOK_SECRET is not set" in detail and "PLAN_CASCADE_PRIVATE_KEY" in detail
    assert results["GitHub API"][0] is None and results["webhook deliveries"][0] is None
    assert not (tmp_path / "data").exists()

    # The App's id and key are enough to ask GitHub; the missing secret is still named.
    keyed = Settings(
        PLAN_CASCADE_APP_ID="123",
        PLAN_CASCADE_PRIVATE_KEY=rsa_private_key_pem(),
        PLAN_CASCADE_DATA_DIR=str(tmp_path / "data"),
        GITHUB_API_URL="https://api.github.com",
    )
    asked: list[str] = []

    def github(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        return httpx.Response(200, json=[] if request.url.path == "/app/hook/deliveries" else {})

    results = {
        name: (ok, detail)
        for ok, name, detail in await run_checks(keyed, transport=httpx.MockTransport(github))
    }
    assert results["App"] == (
        False,
        "1 of the App's settings missing or wrong, set them:\n"
        "  - PLAN_CASCADE_WEBHOOK_SECRET is not set: the webhook secret configured in your GitHub App",
    )
    assert asked == ["/meta", "/app/hook/deliveries"] and results["database"][0] is True


def test_plan_cascade_alone_prints_the_commands(tmp_path: Path) -> None:
    proc = plan_cascade(cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for name in ("serve", "worker", "doctor", "demo", "run", "action"):
        assert f"\n    {name} " in proc.stdout
    assert "usage: plan-cascade" in proc.stdout and proc.stderr == ""
