"""`agent.egress`: the hosts a repository lets its external agents reach, a subset of the operator's. Pure.

The syntax is the operator's (`PLAN_CASCADE_AGENT_EGRESS`): `host` (ports 443 and 80), `host:port`,
`*.domain`, `[v6 address]:port`, an IPv4 address with its port. What the entries mean, and that they
only narrow the operator's list, is the egress proxy's business (`bot.network.rules`).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from bot.config.errors import Expect

PORT = r"(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})"
"""1 to 65535."""
NAME = r"(?:\*\.)?[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?"
HOST = rf"(?:{NAME}|\[[0-9A-Fa-f:.]+\])"
"""A name (`*.domain` too) or a bracketed IPv6 address, as egress lists write hosts."""
EgressHost = Annotated[
    str,
    Field(pattern=rf"^{HOST}(?::{PORT})?$"),
    Expect('a host, "host:port" (port 1–65535), "*.domain" or "[v6 address]:port" (no scheme, no path)'),
]
AgentEgress = Annotated[
    Annotated[list[EgressHost], Field(max_length=100)] | None,
    Field(
        description="Hosts external agents may reach, narrowing the operator's PLAN_CASCADE_AGENT_EGRESS "
        "(never widening it); null = the operator's list."
    ),
]
"""The type of `agent.egress`: at most 100 hosts, or null."""
