"""The egress forwarder itself (`bot.network.forwarder`): the shell line the sandbox runs, with
perl (when the PATH has it) and with python3 (when it has not): every test runs both.

Here it runs without the sandbox, as `/bin/bash` runs its line there, in front of a stand-in
for the proxy's Unix socket that says what it got. What setup and agents rely on: it listens
before the line returns, relays both ways with a half-close (a client that has sent its request
still gets the answer; a server that has answered ends the client's read), carries many tunnels
at once, closes a client it cannot take to the proxy and keeps serving, and a forwarder that
cannot start ends the line with exit 97 and says why.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.network import netns
from bot.network.route import egress_route, forwarder_command
from tests.processes import Server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Proxy(Server):
    """A stand-in for the proxy's socket: each connection reads until its client's half-close,
    then answers `got <n> bytes` and ends its own side."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, backlog=64)

    def answer(self, conn: socket.socket) -> None:
        with conn:
            got = b""
            while chunk := conn.recv(65536):
                got += chunk
            conn.sendall(b"got %d bytes" % len(got))
            conn.shutdown(socket.SHUT_WR)


@pytest.fixture(params=["perl", "python3"], autouse=True)
def language(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Which forwarder the line starts: perl's (this machine's PATH has perl), or Python's (a
    PATH with python3 alone)."""
    global PATH
    if request.param == "perl":
        assert shutil.which("perl"), "perl is on every Debian system (perl-base): the tests need it"
        PATH = os.environ.get("PATH", "/usr/bin:/bin")
    else:
        alone = tmp_path_factory.mktemp("python-only")
        (alone / "python3").symlink_to(os.path.realpath(sys.executable))  # a real binary, no shim
        PATH = str(alone)
    yield request.param


PATH = ""


def start(
    folder: Path,
    port: int,
    *,
    path: str | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the forwarder's line as the sandbox does (`cwd`: the worktree there)."""
    line = forwarder_command(folder, port) + "echo listening\n"
    return subprocess.run(
        ["/bin/bash", "-c", line],
        env={**(env or {}), "PATH": path or PATH},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    """The route's folder; the forwarder (detached, as in the sandbox, where it dies with the
    sandbox) is found afterwards by the socket path on its command line and stopped."""
    yield tmp_path
    mine = str(tmp_path / "proxy.sock").encode()
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError):
            if entry.name.isdigit() and mine in (entry / "cmdline").read_bytes().split(b"\0"):
                os.kill(int(entry.name), signal.SIGKILL)


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=20)


def read_all(conn: socket.socket) -> bytes:
    data = b""
    while chunk := conn.recv(65536):
        data += chunk
    return data


def exchange(port: int, request: bytes) -> bytes:
    """One tunnel through the forwarder: `request` sent and half-closed, the whole answer read."""
    with connect(port) as conn:
        conn.sendall(request)
        conn.shutdown(socket.SHUT_WR)
        return read_all(conn)


def test_it_relays_many_tunnels_at_once_each_with_a_half_close(folder: Path) -> None:
    proxy, port = Proxy(folder / "proxy.sock"), free_port()
    try:
        started = start(folder, port)
        assert started.returncode == 0 and started.stdout == "listening\n", started
        tunnels = [connect(port) for _ in range(20)]  # all open at once, none finished
        for n, conn in enumerate(tunnels):
            conn.sendall(b"x" * (n * 10_000))
        for n, conn in reversed(list(enumerate(tunnels))):
            conn.shutdown(socket.SHUT_WR)  # the request is sent: the answer still comes back
            assert read_all(conn) == b"got %d bytes" % (n * 10_000)  # and ends: the proxy's half-close
            conn.close()
    finally:
        proxy.close()


def test_a_client_is_closed_while_the_proxy_cannot_be_reached_and_served_once_it_can(
    folder: Path,
) -> None:
    port = free_port()
    started = start(folder, port)
    assert started.returncode == 0, started
    for _ in range(3):
        with connect(port) as conn:
            assert read_all(conn) == b"", "no proxy socket yet: the client is closed"
    proxy = Proxy(folder / "proxy.sock")
    try:
        assert exchange(port, b"hello") == b"got 5 bytes"
    finally:
        proxy.close()


def test_modules_in_the_worktree_do_not_shadow_the_forwarders(folder: Path, tmp_path: Path) -> None:
    """Its code comes with `-c` (`-e`), run in the worktree: isolated (`-I`), Python does not put
    the working directory on its path, so the repository's files cannot replace its modules;
    perl's loads none, and the variables that would make it are emptied for it."""
    worktree = tmp_path / "worktree"
    worktree.mkdir()
    for name in ("_socket", "_thread", "posix", "sys"):
        (worktree / f"{name}.py").write_text("raise SystemExit('a shadowing module ran')\n")
    (worktree / "Evil.pm").write_text("die 'a module of the repository ran';\n1;\n")
    hostile = {  # what setup's or the agent's environment may hold
        "PERL5OPT": "-MEvil",
        "PERL5LIB": str(worktree),
        "PERLLIB": str(worktree),
        "PERLIO": ":crlf",
        "PERL_UNICODE": "SDA",
        "PYTHONPATH": str(worktree),
        "PYTHONSTARTUP": str(worktree / "sys.py"),
    }
    proxy, port = Proxy(folder / "proxy.sock"), free_port()
    try:
        started = start(folder, port, cwd=worktree, env=hostile)
        assert started.returncode == 0 and started.stdout == "listening\n", started
        with connect(port) as conn:
            conn.sendall(b"\xff\n\r\nhello")  # bytes, whatever a layer would do to text
            conn.shutdown(socket.SHUT_WR)
            assert read_all(conn) == b"got 9 bytes"
    finally:
        proxy.close()


def test_a_forwarder_that_cannot_start_ends_the_line_with_97(folder: Path, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        busy = start(folder, taken.getsockname()[1])  # its port is someone else's
    no_python = start(folder, free_port(), path=str(tmp_path / "nothing"))
    for ended in (busy, no_python):
        assert ended.returncode == 97 and ended.stdout == "", ended
        assert (
            "Plan Cascade: cannot start the setup egress forwarder (perl or python3 on PATH?)" in ended.stderr
        )


async def test_a_route_writes_nothing_but_the_proxys_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    """The forwarder's code is on its command line: a run's folder holds the socket alone."""
    monkeypatch.setattr(netns, "available", lambda: False)  # a server that is not root
    async with egress_route(None) as route:
        assert route.folder is not None
        assert [p.name for p in route.folder.iterdir()] == ["proxy.sock"]
        assert "python3 -I -S -c " in route.prelude and "perl -C0 -e " in route.prelude


def test_a_perl_that_cannot_run_it_leaves_the_forwarder_to_python(folder: Path, tmp_path: Path) -> None:
    """A `perl` on the PATH that fails (one from a tool directory without its library, say) is
    not the end: Python's forwarder starts instead."""
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "perl").write_text("#!/bin/sh\necho 'Can't locate strict.pm' >&2\nexit 2\n")
    (tools / "perl").chmod(0o755)
    (tools / "python3").symlink_to(os.path.realpath(sys.executable))
    proxy, port = Proxy(folder / "proxy.sock"), free_port()
    try:
        started = start(folder, port, path=str(tools))
        assert started.returncode == 0 and started.stdout == "listening\n", started
        assert exchange(port, b"hello") == b"got 5 bytes"
    finally:
        proxy.close()
