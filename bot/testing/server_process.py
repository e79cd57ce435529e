"""Run the real `plan-cascade serve` (and `plan-cascade worker`) processes for end-to-end tests
and benchmarks."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(
    tmp: Path,
    *,
    api_url: str,
    webhook_secret: str,
    private_key_pem: str,
    extra_env: dict[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a bot process whose data dir is `tmp/data` (its key written to `tmp/app.pem`)."""
    key = tmp / "app.pem"
    key.write_text(private_key_pem)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp),
        "PLAN_CASCADE_APP_ID": "1",
        "PLAN_CASCADE_PRIVATE_KEY_PATH": str(key),
        "PLAN_CASCADE_WEBHOOK_SECRET": webhook_secret,
        "GITHUB_API_URL": api_url,
        "PLAN_CASCADE_DATA_DIR": str(tmp / "data"),
        "PLAN_CASCADE_APPROVAL_POLL_SECONDS": "1",
        "PLAN_CASCADE_GITHUB_WRITE_INTERVAL": "0",
        **(extra_env or {}),
    }


def start_cli(
    tmp: Path, args: Sequence[str], *, env: dict[str, str], log_path: Path, root: Path = ROOT
) -> subprocess.Popen[bytes]:
    """`plan-cascade ARGS` (no `.env` read) with `env`; its output goes to `log_path`. `root`: the
    checkout whose code runs (another revision's, for a bench's baseline)."""
    with log_path.open("w") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "--env-file", str(tmp / "none.env"), *args],
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Ask the process to stop (SIGTERM); kill it when it has not within 30 s."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def running_worker(
    tmp: Path, *, env: dict[str, str], name: str = "worker"
) -> Iterator[subprocess.Popen[bytes]]:
    """Start `plan-cascade worker` (its log `tmp/<name>.log`) and wait until it says it is ready:
    its start-up (the reaper included) is over and it claims jobs. Stop it after."""
    log_path = tmp / f"{name}.log"
    proc = start_cli(tmp, ["worker"], env=env, log_path=log_path)
    try:
        deadline = time.monotonic() + 30
        while WORKER_READY not in log_path.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start:\n" + log_path.read_text()[-3000:])
            time.sleep(0.05)
        yield proc
    finally:
        stop(proc)


WORKER_READY = "plan-cascade worker ready"
"""What `plan-cascade worker` logs once it has started (see `bot.cli`)."""


@contextmanager
def running_server(
    tmp: Path,
    *,
    api_url: str,
    webhook_secret: str,
    private_key_pem: str,
    extra_env: dict[str, str] | None = None,
    serve_args: Sequence[str] = (),
    port: int | None = None,
    root: Path = ROOT,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Start `plan-cascade serve [serve_args]` on `port` (a free one by default); yield its URL and
    process; stop it after. `root`: the checkout whose code runs (see `start_cli`)."""
    env = server_env(
        tmp,
        api_url=api_url,
        webhook_secret=webhook_secret,
        private_key_pem=private_key_pem,
        extra_env=extra_env,
    )
    port = port or free_port()
    log_path = tmp / "server.log"
    proc = start_cli(tmp, ["serve", *serve_args, "--port", str(port)], env=env, log_path=log_path, root=root)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not start:\n" + log_path.read_text()[-3000:])
            time.sleep(0.1)
        yield url, proc
    finally:
        stop(proc)
