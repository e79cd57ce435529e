"""Run the real `plan-cascade serve` process for end-to-end tests and benchmarks."""

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
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Start `plan-cascade serve [serve_args]` on `port` (a free one by default); yield its URL and
    process; stop it after."""
    key = tmp / "app.pem"
    key.write_text(private_key_pem)
    env = {
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
    port = port or free_port()
    log_path = tmp / "server.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bot.cli",
                "--env-file",
                str(tmp / "none.env"),
                "serve",
                *serve_args,
                "--port",
                str(port),
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
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
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
