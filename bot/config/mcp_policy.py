"""The operator's word on MCP servers: where they may connect, `"*"`, and the values they may get.

Read from the server's settings (`PLAN_CASCADE_MCP_EGRESS`, `PLAN_CASCADE_MCP_ALLOW_ALL_TOOLS`)
and environment (every other `PLAN_CASCADE_MCP_*` variable); carried to agents by the `Sandbox`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from bot.config.mcp import SETTINGS, VARIABLE_PREFIX


@dataclass(frozen=True)
class McpPolicy:
    """What the operator allows the repositories' MCP servers."""

    egress: tuple[str, ...] = ()
    """Hosts a local server may reach through the egress proxy, and the only hosts of remote
    servers the bot connects to (`PLAN_CASCADE_MCP_EGRESS`; default none)."""
    allow_all_tools: bool = False
    """Whether a server's `tools` may be `"*"` (`PLAN_CASCADE_MCP_ALLOW_ALL_TOOLS`)."""
    variables: Mapping[str, str] = field(default_factory=dict, repr=False)
    """The operator's `PLAN_CASCADE_MCP_*` variables: a server gets those its config names, no other."""


def mcp_variables(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of `environ` a server's `env` or `headers` may name."""
    return {
        name: value
        for name, value in environ.items()
        if name.startswith(VARIABLE_PREFIX) and name not in SETTINGS and value
    }
