"""How confined setup, external agents and local MCP servers go out: through the bot's egress proxy.

The sandbox has its own network namespace with nothing but loopback, and the proxy variables
point at its `127.0.0.1:3128`. Where the server may enter its sandboxes' network namespaces
(root: `bot.network.netns`), the proxy listens there itself, on a socket made while the
sandbox's first process is held at its gate (`Confinement.on_start`): nothing of ours runs in
the sandbox. Elsewhere the proxy listens on a Unix socket in a folder bind-mounted read-only into
the sandbox, and a small forwarder (`bot.network.forwarder`: perl, or python3, from the tool
PATH), started before setup's commands (or the agent's command), relays `127.0.0.1:3128` to it.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bot.network import netns
from bot.network.forwarder import PROXY_PORT, forwarder_command
from bot.network.proxy import IDLE_TIMEOUT, EgressProxy
from bot.network.rules import DEFAULT_SETUP_EGRESS, Allowlist, mcp_allowlist, parse_egress

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


@dataclass
class EgressRoute:
    """What one confined setup run (or agent run, or MCP server) needs to go out through the proxy:
    its command through `command`, its confinement through `Confinement.going_out`, and `env`."""

    proxy: EgressProxy
    folder: Path | None = None
    """With a forwarder: holds the proxy's socket (bound read-only into the sandbox). None: the
    proxy listens in the sandbox's own network namespace, from its start."""
    who: str = "setup"
    env: dict[str, str] = field(default_factory=proxy_env)

    @property
    def prelude(self) -> str:
        """The shell line run before the command: the forwarder's start (none without one)."""
        return "" if self.folder is None else forwarder_command(self.folder, who=self.who)

    def command(self, command: str) -> str:
        """`command` (a shell line) as the sandbox runs it: after the forwarder's start, if any."""
        return self.prelude + command

    async def listen(self, pid: int) -> None:
        """Make the proxy's socket in the network namespace of the sandbox whose first process is
        `pid` (held before it runs: `Confinement.on_start`). Raises OSError."""
        self.proxy.adopt(netns.listen_in(pid, PROXY_PORT))


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
    # A folder for the socket a forwarder relays to, unless the proxy can listen in the sandbox.
    folder = None if netns.available() else Path(tempfile.mkdtemp(prefix="plan-cascade-egress-"))
    try:
        proxy = EgressProxy(
            None if folder is None else folder / "proxy.sock",
            rules,
            idle_timeout=idle,
            bodies=bodies,
            on_blocked=on_blocked,
        )
        async with proxy:
            yield EgressRoute(proxy, folder=folder, who=rules.who)
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
