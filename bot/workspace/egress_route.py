"""How a confined setup run goes out: the proxy's socket and a forwarder inside its sandbox.

The sandbox has its own network namespace with nothing but loopback. The bot's egress proxy
(`bot.workspace.egress`) listens on a Unix socket in a folder bind-mounted read-only into the
sandbox; a small forwarder (`FORWARDER`, python3 from the tool PATH), started before setup's
commands, relays the sandbox's `127.0.0.1:3128` to it, and the proxy variables point there.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bot.workspace.egress import EgressProxy
from bot.workspace.egress_rules import DEFAULT_SETUP_EGRESS, parse_egress

PROXY_PORT = 3128
"""Where the forwarder listens inside setup's own network namespace."""


def proxy_env(port: int = PROXY_PORT) -> dict[str, str]:
    """The variables that send setup's package managers through the forwarder."""
    url = f"http://127.0.0.1:{port}"
    names = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "npm_config_proxy", "npm_config_https_proxy")
    env = {name: url for name in names}
    env.update({name.lower(): url for name in names[:3]})
    env.update(CARGO_HTTP_PROXY=url, NO_PROXY="", no_proxy="")
    return env


FORWARDER = """\
import os, socket, sys, threading
path, port = sys.argv[1], int(sys.argv[2])
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", port))
server.listen(64)
if os.fork():
    os._exit(0)
os.setsid()
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)


def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def serve(client):
    upstream = socket.socket(socket.AF_UNIX)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        return
    other = threading.Thread(target=pipe, args=(client, upstream), daemon=True)
    other.start()
    pipe(upstream, client)
    other.join()
    client.close()
    upstream.close()


while True:
    client, _ = server.accept()
    threading.Thread(target=serve, args=(client,), daemon=True).start()
"""
"""Runs inside setup's sandbox (python3 from its PATH): listens on the sandbox's 127.0.0.1, relays
each connection to the proxy's socket; it returns once listening and serves in the background."""


def forwarder_command(folder: Path, port: int = PROXY_PORT) -> str:
    """The shell line that starts the forwarder (written into `folder`) before setup's commands."""
    script = folder / "forward.py"
    script.write_text(FORWARDER)
    return (
        f"python3 {script} {folder / 'proxy.sock'} {port} || "
        "{ echo 'Plan Cascade: cannot start the setup egress forwarder (python3 on PATH?)' >&2; exit 97; }\n"
    )


@dataclass
class EgressRoute:
    """What one confined setup run needs to go out through the proxy."""

    folder: Path
    """Holds the proxy's socket and the forwarder: bind it read-only into the sandbox."""
    prelude: str
    """The shell line to run before setup's commands (starts the forwarder)."""
    env: dict[str, str] = field(default_factory=proxy_env)
    proxy: EgressProxy | None = None


@contextlib.asynccontextmanager
async def egress_route(allowed: Sequence[str] | None) -> AsyncIterator[EgressRoute]:
    """A proxy for one setup run, to the hosts `allowed` (None: `DEFAULT_SETUP_EGRESS`)."""
    entries = parse_egress(DEFAULT_SETUP_EGRESS if allowed is None else allowed)
    folder = Path(tempfile.mkdtemp(prefix="plan-cascade-egress-"))
    try:
        async with EgressProxy(folder / "proxy.sock", entries) as proxy:
            yield EgressRoute(folder, forwarder_command(folder), proxy=proxy)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
