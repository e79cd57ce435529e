"""Shared test helpers: settings, keys, databases, a server runtime. Written once (STYLE §5)."""

from __future__ import annotations

import asyncio
import functools
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx

from bot.runtime.settings import Settings

WEBHOOK_SECRET = "test-webhook-secret-1234"


@functools.cache
def rsa_private_key_pem() -> str:
    """A real RSA key, generated once per test session."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()


def make_settings(tmp_path: Path, **overrides: Any) -> Settings:
    """Settings for a test server: a SQLite file under tmp_path, test secrets."""
    values: dict[str, Any] = {
        "PLAN_CASCADE_APP_ID": "12345",
        "PLAN_CASCADE_PRIVATE_KEY": rsa_private_key_pem(),
        "PLAN_CASCADE_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "PLAN_CASCADE_DATA_DIR": str(tmp_path / "data"),
        "GITHUB_API_URL": "http://127.0.0.1:9/api",
    }
    values.update(overrides)
    return Settings(**values)


@asynccontextmanager
async def postgres_database() -> AsyncIterator[str]:
    """A fresh, empty PostgreSQL database on the session's server (`tests.pgserver`: the local one,
    else a throwaway one; the test must be marked `postgres`); dropped afterwards."""
    import asyncpg

    from tests.pgserver import admin_url

    admin_dsn = admin_url()
    assert admin_dsn is not None, "mark the test `postgres`: it is skipped where PostgreSQL is not installed"
    name = f"pc_test_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(admin_dsn)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    try:
        yield admin_dsn.replace("postgresql://", "postgresql+asyncpg://").rsplit("/", 1)[0] + f"/{name}"
    finally:
        admin = await asyncpg.connect(admin_dsn)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


def asgi_client(app: Any) -> httpx.AsyncClient:
    """An httpx client that calls the ASGI app in-process."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver")


async def wait_for(predicate: Any, *, timeout: float = 10.0, interval: float = 0.02) -> None:
    """Poll an (async or plain) predicate until it is true."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result = predicate()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(interval)


def rewrite_state_block(body: str, change: Any) -> str:
    """What anyone with write access can do to the bot's plan comment: decode the hidden state,
    change it, and put it back in the same format, keeping whatever signature was there."""
    import base64
    import json
    import re
    import zlib

    from bot.plan.state import PlanState

    block = r"(<!--\s*plan-cascade:state v\d+\s+(?:c=\d+\s+)?(?:sig=\S+\s+)?)([A-Za-z0-9+/=\s]+?)(\s*-->)"
    match = re.search(block, body)
    assert match is not None, "no state block to tamper with"
    raw = zlib.decompress(base64.b64decode("".join(match.group(2).split())))
    state = change(PlanState.model_validate_json(raw))
    data = json.dumps(state.model_dump(mode="json"), separators=(",", ":")).encode()
    payload = base64.b64encode(zlib.compress(data, 9)).decode()
    return body[: match.start(2)] + payload + body[match.end(2) :]


def bwrap_marker() -> Any:
    """Skip a sandbox test where bubblewrap cannot run, except in CI, where it must (and fails loudly)."""
    import os

    import pytest

    from bot.sandbox.confinement import bwrap_problem

    problem = bwrap_problem("bwrap")
    return pytest.mark.skipif(
        problem is not None and not os.environ.get("CI"), reason=f"bubblewrap is not usable here: {problem}"
    )


def confined(worktree: Path, home: Path, **kwargs: Any) -> Any:
    """A confinement in the default (required) sandbox, for tests that start processes."""
    from bot.sandbox.confinement import Sandbox

    return Sandbox().confinement(worktree=worktree, home=home, **kwargs)


_audit_listeners: list[tuple[str, Callable[[tuple[Any, ...]], bool], list[int]]] = []


def _on_audit(event: str, args: tuple[Any, ...]) -> None:
    for wanted, matches, threads in _audit_listeners:
        if event == wanted and matches(args):
            threads.append(threading.get_ident())


@contextmanager
def audit_threads(event: str, matches: Callable[[tuple[Any, ...]], bool]) -> Iterator[list[int]]:
    """The thread of each Python audit `event` (`open`, `os.scandir`, …) whose arguments `matches`,
    while inside: where the code under test did some file work, without patching it. An audit hook
    stays for the process, so one is added once, and it listens only inside such a block."""
    if not getattr(sys, "_plan_cascade_audit_hook", False):
        sys.addaudithook(_on_audit)
        sys._plan_cascade_audit_hook = True  # type: ignore[attr-defined]
    listener: tuple[str, Callable[[tuple[Any, ...]], bool], list[int]] = (event, matches, [])
    _audit_listeners.append(listener)
    try:
        yield listener[2]
    finally:
        _audit_listeners.remove(listener)


class CountingExecutor(ThreadPoolExecutor):
    """The loop's default executor, counting the calls handed to it (what `asyncio.to_thread` runs):
    `asyncio.get_running_loop().set_default_executor(CountingExecutor())`."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.handed = 0

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.handed += 1
        return super().submit(fn, *args, **kwargs)


NOBODY = 65534


def run_as_server(args: list[str], *, cwd: Path) -> Any:
    """`args` run as a server that is not root would run them: as uid 65534 when the tests run as
    root (`setpriv`), as they are otherwise; the package importable, nothing else in the env."""
    import os
    import subprocess

    drop = (
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if os.geteuid() == 0 else []
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "HOME": str(cwd)}
    return subprocess.run([*drop, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)


def own_as_server(*paths: Path) -> None:
    """Make `paths` belong to the user `run_as_server` runs as."""
    import os

    if os.geteuid() == 0:
        for path in paths:
            os.chown(path, NOBODY, NOBODY)


@contextmanager
def server_folder(prefix: str) -> Iterator[Path]:
    """A folder owned by the user `run_as_server` runs as (pytest's own are root's alone); the test
    is skipped where this Python cannot run as that user. Removed afterwards, whatever is in it."""
    import os
    import shutil
    import subprocess
    import tempfile

    import pytest

    top = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        if os.geteuid() == 0:
            if shutil.which("setpriv") is None:
                pytest.skip("setpriv (util-linux) is needed to run as another user")
            own_as_server(top)
            probe = run_as_server([sys.executable, "-c", "import bot.workspace.worktree"], cwd=top)
            if probe.returncode != 0:
                pytest.skip(f"this Python cannot run as uid {NOBODY}: {probe.stderr.strip()[-200:]}")
        yield top
    finally:  # whatever is left (before a fix: all of it, made unreadable)
        subprocess.run(["chmod", "-R", "u+rwx", str(top)], check=False, capture_output=True)
        subprocess.run(["rm", "-rf", str(top)], check=True)


class SleepClock:
    """A monotonic clock that moves only when something sleeps on it (or the test moves `now`):
    a throttle's hour of waiting passes in no time, and `sleeps` shows it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)
