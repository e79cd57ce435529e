"""How confined setup and external agents go out: the proxy's socket and a forwarder in the sandbox.

The sandbox has its own network namespace with nothing but loopback. The bot's egress proxy
(`bot.network.proxy`) listens on a Unix socket in a folder bind-mounted read-only into the
sandbox; a small forwarder (`FORWARDER`, python3 from the tool PATH), started before setup's
commands (or the agent's command), relays the sandbox's `127.0.0.1:3128` to it, and the proxy
variables point there.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bot.network.proxy import IDLE_TIMEOUT, EgressProxy
from bot.network.rules import DEFAULT_SETUP_EGRESS, Allowlist, mcp_allowlist, parse_egress

PROXY_PORT = 3128
"""Where the forwarder listens inside setup's (or the agent's) own network namespace."""
AGENT_IDLE_TIMEOUT = 600.0
"""Seconds an agent's tunnel may carry nothing either way: a model answering a long prompt
without streaming sends nothing until it is done (setup's downloads never pause that long)."""
AGENT_ENV = {"NODE_USE_ENV_PROXY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
"""More for agents: Node's own `fetch` honours the proxy variables (Node 24), and Claude Code
leaves out its telemetry and error reports, which the proxy would refuse (and report) each run."""


def proxy_env(port: int = PROXY_PORT) -> dict[str, str]:
    """The variables that send setup's package managers through the forwarder."""
    url = f"http://127.0.0.1:{port}"
    names = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "npm_config_proxy", "npm_config_https_proxy")
    # yarn 2+ reads none of those: only its own settings.
    env = {name: url for name in names}
    env.update({name.lower(): url for name in names[:3]})
    env.update(CARGO_HTTP_PROXY=url, YARN_HTTP_PROXY=url, YARN_HTTPS_PROXY=url, NO_PROXY="", no_proxy="")
    return env


FORWARDER = """\
import _socket, _thread, posix, sys
path, port = sys.argv[1], int(sys.argv[2])
server = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
server.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", port))
server.listen(64)
if posix.fork():
    posix._exit(0)
posix.setsid()
null = posix.open("/dev/null", posix.O_RDWR)
for fd in (0, 1, 2):
    posix.dup2(null, fd)


def pipe(src, dst, then):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(_socket.SHUT_WR)
    except OSError:
        pass
    then()


def serve(fd):
    client = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM, 0, fd)
    upstream = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    done = _thread.allocate_lock()
    done.acquire()
    _thread.start_new_thread(pipe, (client, upstream, done.release))
    pipe(upstream, client, done.acquire)  # then waits until the other way has ended too
    client.close()
    upstream.close()


while True:
    fd, _ = server._accept()
    _thread.start_new_thread(serve, (fd,))
"""
"""Runs inside setup's sandbox (python3 from its PATH, the code given with `-c`): listens on the
sandbox's 127.0.0.1, relays each connection to the proxy's socket (a thread per direction, each
ending its side with a half-close); it returns once listening and serves in the background.
What it costs is kept small: Python's start without `site` (`-I -S`: nor the sandbox's
`PYTHON*` variables, nor its site-packages), and the C modules alone (`_socket`, `_thread`,
`posix`: no `socket`, `threading`, `enum` or `selectors` to import, before or after the fork)."""
FORWARDER_PYTHON = "python3 -I -S"
"""How the forwarder's Python starts (`-I`: no `PYTHON*` variable, no user site, and with `-c`
not the working directory, the worktree, on its path; `-S`: no site-packages, whose `.pth`
files run code at start)."""


def forwarder_command(folder: Path, port: int = PROXY_PORT, *, who: str = "setup") -> str:
    """The shell line that starts the forwarder (to the proxy's socket in `folder`) before setup's
    commands. Its code goes on the command line: nothing is written for it."""
    sock = shlex.quote(str(folder / "proxy.sock"))
    return (
        f"{FORWARDER_PYTHON} -c {shlex.quote(FORWARDER)} {sock} {port} || "
        f"{{ echo 'Plan Cascade: cannot start the {who} egress forwarder (python3 on PATH?)' >&2; "
        "exit 97; }\n"
    )


@dataclass
class EgressRoute:
    """What one confined setup run (or agent run) needs to go out through the proxy."""

    folder: Path
    """Holds the proxy's socket: bind it read-only into the sandbox."""
    prelude: str
    """The shell line to run before setup's commands (starts the forwarder)."""
    env: dict[str, str] = field(default_factory=proxy_env)
    proxy: EgressProxy | None = None


@contextlib.asynccontextmanager
async def egress_route(
    allowed: Sequence[str] | None,
    *,
    on_blocked: Callable[[], None] | None = None,
) -> AsyncIterator[EgressRoute]:
    """A proxy for one setup run, to the hosts `allowed` (None: `DEFAULT_SETUP_EGRESS`)."""
    entries = parse_egress(DEFAULT_SETUP_EGRESS if allowed is None else allowed)
    async with _route(Allowlist(entries), idle=IDLE_TIMEOUT, on_blocked=on_blocked) as route:
        yield route


@contextlib.asynccontextmanager
async def agent_route(
    allowed: Sequence[str],
    *,
    narrowed: Sequence[str] | None = None,
    on_blocked: Callable[[], None] | None = None,
) -> AsyncIterator[EgressRoute]:
    """A proxy for one external agent's run, to the hosts of the operator's list `allowed`
    (`PLAN_CASCADE_AGENT_EGRESS`) that the repository's `narrowed` (`agent.egress`) has too."""
    rules = Allowlist(
        parse_egress(allowed),
        narrowed=None if narrowed is None else parse_egress(narrowed),
        who="agent",
        setting="PLAN_CASCADE_AGENT_EGRESS",
    )
    async with _route(rules, idle=AGENT_IDLE_TIMEOUT, bodies=True, on_blocked=on_blocked) as route:
        route.env.update(AGENT_ENV)
        yield route


@contextlib.asynccontextmanager
async def mcp_route(allowed: Sequence[str]) -> AsyncIterator[EgressRoute]:
    """A proxy for one local MCP server of a story, to the hosts `allowed` (the operator's
    `PLAN_CASCADE_MCP_EGRESS`, already narrowed by the repository's `egress`)."""
    async with _route(mcp_allowlist(parse_egress(allowed)), idle=IDLE_TIMEOUT, on_blocked=None) as route:
        yield route


@contextlib.asynccontextmanager
async def _route(
    rules: Allowlist, *, idle: float, bodies: bool = False, on_blocked: Callable[[], None] | None
) -> AsyncIterator[EgressRoute]:
    folder = Path(tempfile.mkdtemp(prefix="plan-cascade-egress-"))
    try:
        proxy = EgressProxy(
            folder / "proxy.sock", rules, idle_timeout=idle, bodies=bodies, on_blocked=on_blocked
        )
        async with proxy:
            yield EgressRoute(folder, forwarder_command(folder, who=rules.who), proxy=proxy)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
