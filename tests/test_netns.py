"""The egress proxy's socket made in the sandbox's own network namespace (`bot.network.netns`).

A server that may enter its sandboxes' network namespaces (root) makes the proxy's listening
socket there itself, while the sandbox's first process is held at its gate: what the sandbox
sends to `127.0.0.1:<port>` reaches the bot, nothing on the host's loopback does, and no process
of ours runs in the sandbox for it. Here in the real sandbox (bubblewrap), through the
production `run_process`.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from bot.errors import WorkspaceError
from bot.network import netns
from bot.network.route import agent_route
from bot.sandbox.process import run_process, scrubbed_env
from tests.support import bwrap_marker, confined

pytestmark = bwrap_marker()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def refused_on_the_host(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def jail(tmp_path: Path):  # type: ignore[no-untyped-def]
    worktree, home = tmp_path / "wt", tmp_path / "home"
    worktree.mkdir(exist_ok=True)
    home.mkdir(exist_ok=True)
    made = confined(worktree, home)
    assert made.confined
    return made, worktree, home


def test_a_root_server_may_enter_its_sandboxes_namespaces() -> None:
    if os.geteuid() != 0:
        pytest.skip("not root: the server keeps the forwarder (tested in test_forwarder.py)")
    assert netns.available()


async def test_the_socket_listens_in_the_sandbox_and_nowhere_else(tmp_path: Path) -> None:
    if not netns.available():
        pytest.skip("this server may not enter its sandboxes' network namespaces")
    port = free_port()
    listening: list[socket.socket] = []
    heard: list[bytes] = []

    async def on_start(pid: int) -> None:
        sock = netns.listen_in(pid, port)
        listening.append(sock)
        assert refused_on_the_host(port), "the host's loopback does not reach it"

        async def answer() -> None:
            conn, _ = await asyncio.get_running_loop().sock_accept(sock)
            with conn:
                heard.append(await asyncio.get_running_loop().sock_recv(conn, 100))
                await asyncio.get_running_loop().sock_sendall(conn, b"world\n")

        asyncio.get_running_loop().create_task(answer())

    made, worktree, home = jail(tmp_path)
    talk = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo hello >&3 && read -r line <&3 && echo got $line"
    result = await run_process(
        talk,
        cwd=worktree,
        env=scrubbed_env(home=home),
        timeout=60,
        confinement=replace(made, on_start=on_start),
    )
    assert result.exit_code == 0 and "got world" in result.output, result.output
    assert heard == [b"hello\n"]
    listening[0].close()


def test_a_process_sharing_the_servers_namespace_is_refused() -> None:
    """A sandbox always has a namespace of its own: a process that shares the server's (its pid
    taken by another) gets no socket, and nothing listens on the host for it."""
    if not netns.available():
        pytest.skip("this server may not enter its sandboxes' network namespaces")
    port = free_port()
    with pytest.raises(OSError, match="shares the server's network namespace"):
        netns.listen_in(os.getpid(), port)
    assert refused_on_the_host(port)


async def test_a_sandbox_that_cannot_be_made_ready_never_runs(tmp_path: Path) -> None:
    made, worktree, home = jail(tmp_path)

    async def fails(pid: int) -> None:
        raise OSError("no way in")

    with pytest.raises(WorkspaceError, match=r"could not be made ready \(no way in\)"):
        await run_process(
            "echo ran > ran.txt",
            cwd=worktree,
            env=scrubbed_env(home=home),
            timeout=60,
            confinement=replace(made, on_start=fails),
        )
    assert not (worktree / "ran.txt").exists()


async def test_a_root_route_needs_no_forwarder_nor_folder(tmp_path: Path) -> None:
    """As root the route adds nothing to the command nor to the sandbox's mounts: its proxy's
    socket is made at the start, and the proxy variables point at it."""
    if not netns.available():
        pytest.skip("this server may not enter its sandboxes' network namespaces")
    made, _, _ = jail(tmp_path)
    async with agent_route(["api.example.com"]) as route:
        assert route.folder is None and route.prelude == "" and route.command("agent") == "agent"
        routed = made.going_out(route)
        assert routed.readonly == made.readonly and routed.on_start is not None
        assert route.env["HTTPS_PROXY"] == "http://127.0.0.1:3128"


def test_a_server_that_could_not_leave_a_sandboxs_namespace_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    """Going back to the server's own namespace cannot fail short of losing `CAP_SYS_ADMIN` in
    between; if it did, nothing of the server may go on in the sandbox's network: it stops."""
    if not netns.available():
        pytest.skip("this server may not enter its sandboxes' network namespaces")
    apart = subprocess.Popen(["unshare", "--net", "sleep", "30"])
    entered: list[int] = []

    def enter(fd: int) -> None:
        entered.append(fd)
        if len(entered) > 1:  # the way back
            raise OSError(1, "setns: Operation not permitted")

    class Stopped(Exception):
        pass

    def stop(status: int) -> None:
        raise Stopped(status)

    monkeypatch.setattr(netns, "_enter", enter)
    monkeypatch.setattr(netns.os, "_exit", stop)
    try:
        for _ in range(50):  # until `unshare` has made its namespace
            if os.stat(f"/proc/{apart.pid}/ns/net").st_ino != os.stat("/proc/self/ns/net").st_ino:
                break
            time.sleep(0.01)
        with pytest.raises(Stopped) as stopped:
            netns.listen_in(apart.pid, free_port())
    finally:
        apart.kill()
        apart.wait()
    assert stopped.value.args == (netns.EXIT_STUCK,) and len(entered) == 2
