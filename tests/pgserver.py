"""The PostgreSQL server the `postgres` tests use: the one on 127.0.0.1:5432 when it answers, else
a throwaway one started for the session from the installed binaries.

A newcomer's first `pytest` should be green: where no server runs but PostgreSQL is installed
(`initdb` and `pg_ctl` on PATH or in a distribution's usual folder), a cluster is made in a
temporary directory (trust auth, user `postgres`, a free loopback port, fsync off), started with
`pg_ctl` and removed when the session ends. PostgreSQL refuses to run as root, so as root the
cluster belongs to and runs as `nobody`. Where PostgreSQL is not installed at all, the tests skip
with the command that installs it; with `REQUIRE_POSTGRES=1` (CI sets it) that skip is a failure.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

LOCAL_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
REQUIRE = "REQUIRE_POSTGRES"
INSTALL = (
    "PostgreSQL is not installed (no initdb/pg_ctl found): install it (`sudo apt-get install postgresql`, "
    "`sudo dnf install postgresql-server`, `brew install postgresql`) and these tests start a throwaway "
    "server themselves, or leave them out with -m 'not postgres'"
)
UNPRIVILEGED = "nobody"
"""Who owns and runs the throwaway cluster when the tests run as root (PostgreSQL refuses root)."""
SEARCH = (
    "/usr/lib/postgresql/*/bin",  # Debian, Ubuntu
    "/usr/pgsql-*/bin",  # the PostgreSQL RPMs
    "/opt/homebrew/opt/postgresql*/bin",
    "/usr/local/opt/postgresql*/bin",
    "/opt/homebrew/bin",
    "/usr/local/pgsql/bin",  # built from source
)


def answers(url: str, *, timeout: float = 3.0) -> bool:
    """Whether a PostgreSQL server accepts `url` (as its user, with no password) right now."""

    async def probe() -> bool:
        import asyncpg

        try:
            conn = await asyncpg.connect(url, timeout=timeout)
        except Exception:  # refused, timed out, wrong password, not PostgreSQL: it does not answer
            return False
        await conn.close()
        return True

    found: list[bool] = []  # in a thread of its own: the caller may be inside an event loop
    thread = threading.Thread(target=lambda: found.append(asyncio.run(probe())))
    thread.start()
    thread.join()
    return bool(found and found[0])


def find_bindir(search: tuple[str, ...] = SEARCH, path: str | None = None) -> Path | None:
    """The folder holding `initdb` and `pg_ctl`: PATH first, then the newest version of the usual places."""
    on_path = shutil.which("pg_ctl", path=path)
    if on_path is not None:
        folder = Path(on_path).resolve().parent
        if (folder / "initdb").is_file():
            return folder
    candidates = [Path(p) for pattern in search for p in glob.glob(pattern)]
    usable = [p for p in candidates if (p / "pg_ctl").is_file() and (p / "initdb").is_file()]
    return max(usable, key=_version, default=None)


def _version(folder: Path) -> tuple[int, ...]:
    digits = "".join(c if c.isdigit() else " " for c in str(folder)).split()
    return tuple(int(d) for d in digits)


def free_port() -> int:
    """A loopback TCP port nobody listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Throwaway:
    """A cluster in a temporary directory, running until `stop`."""

    bindir: Path
    root: Path
    port: int
    user: str | None

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args,
            cwd=self.root,
            user=self.user,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C", "HOME": str(self.root)},
        )

    def start(self) -> None:
        """Make the cluster (`initdb`) and start its server."""
        data = self.root / "data"
        made = self._run(
            str(self.bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
            "-E", "UTF8", "--locale=C", "--no-sync",
        )  # fmt: skip
        if made.returncode != 0:
            raise RuntimeError(f"initdb failed ({made.returncode}): {made.stderr.strip()[-2000:]}")
        self.resume()

    def resume(self) -> None:
        """Start the (made) cluster's server again, on the same port."""
        data, log = self.root / "data", self.root / "server.log"
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        started = self._run(
            str(self.bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "-t", "60",
            "start",
        )  # fmt: skip
        if started.returncode != 0:
            tail = log.read_text(errors="replace")[-2000:] if log.is_file() else started.stderr
            raise RuntimeError(f"pg_ctl could not start the throwaway PostgreSQL: {tail.strip()}")

    def halt(self) -> None:
        """Stop the server as an operator would (`pg_ctl stop -m fast`), keeping the cluster."""
        halted = self._run(
            str(self.bindir / "pg_ctl"), "-D", str(self.root / "data"), "-m", "fast", "-w", "stop"
        )
        if halted.returncode != 0:
            raise RuntimeError(f"pg_ctl could not stop the throwaway PostgreSQL: {halted.stderr.strip()}")

    def stop(self) -> None:
        """Stop the server at once and remove its folder (again: nothing)."""
        atexit.unregister(self.stop)
        if not self.root.exists():
            return
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


def start_throwaway(bindir: Path) -> Throwaway:
    """Make and start a cluster with the binaries in `bindir`; stopped and removed at exit."""
    root = Path(tempfile.mkdtemp(prefix="plan-cascade-pg-"))
    user = None
    if os.geteuid() == 0:
        user = UNPRIVILEGED
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    server = Throwaway(bindir=bindir, root=root, port=free_port(), user=user)
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    atexit.register(server.stop)
    return server


@functools.cache
def admin_url() -> str | None:
    """The admin URL of the session's PostgreSQL (started when needed); None when it is not installed."""
    return resolve()


def resolve(local: str = LOCAL_URL, search: tuple[str, ...] = SEARCH, path: str | None = None) -> str | None:
    """`local` when it answers, else a throwaway server's URL, else None (nothing to start it with)."""
    if answers(local):
        return local
    bindir = find_bindir(search, path)
    if bindir is None:
        return None
    return start_throwaway(bindir).url


def session_url(url: str | None, environ: Mapping[str, str] = os.environ) -> str:
    """`url`, or skip the test with the install command; with REQUIRE_POSTGRES=1 (CI) fail it instead."""
    import pytest

    if url is not None:
        return url
    if environ.get(REQUIRE, "").strip() == "1":
        pytest.fail(f"{REQUIRE}=1, but {INSTALL}", pytrace=False)
    pytest.skip(INSTALL)
