"""`agent.mcp_servers`: the MCP servers a repository gives its agents, and what may reach them.

A server is either local (`command`: a program of the repository, started in the sandbox with
`env`) or remote (`url`, reached from the bot's process with `headers`); `tools` lists the tool
names agents are offered (required: nothing is offered by default). Values in `env` and
`headers` may name the operator's variables whose names start with `PLAN_CASCADE_MCP_`, as
`${PLAN_CASCADE_MCP_JIRA_TOKEN}`, and nothing else of the server's environment.

Pure: the model, the checks that need the whole block (they name each key), the checks that need
the operator's settings (`operator_problems`), and how a value's references are filled in.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from bot.config.egress import HOST
from bot.config.errors import Expect, format_key

VARIABLE_PREFIX = "PLAN_CASCADE_MCP_"
"""Only the operator's variables with this prefix may be named in `env` and `headers`."""
SETTINGS = ("PLAN_CASCADE_MCP_EGRESS", "PLAN_CASCADE_MCP_ALLOW_ALL_TOOLS")
"""Variables with the prefix that are the operator's settings, not values for a server."""
ALL_TOOLS = "*"
MAX_TOOL_NAME = 64
"""Longest tool name the model APIs accept (Anthropic and OpenAI: 64)."""

_REFERENCE = re.compile(r"\$\{([^}]*)\}")
_VARIABLE = re.compile(rf"{VARIABLE_PREFIX}[A-Z0-9_]+")
_OFFERED = re.compile(r"[^A-Za-z0-9_-]")
_SERVER_NAME = re.compile(r"[a-z][a-z0-9_]{0,19}")

ToolName = Annotated[
    str,
    Field(pattern=r"^(?:\*|[A-Za-z0-9_.-]{1,64})$"),
    Expect('a tool name (letters, digits, "_", "-" and ".") or "*"'),
]
EnvName = Annotated[
    str,
    Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,99}$"),
    Expect('a variable name (letters, digits and "_", not starting with a digit)'),
]
HeaderName = Annotated[
    str, Field(pattern=r"^[A-Za-z0-9-]{1,100}$"), Expect('a header name (letters, digits and "-")')
]
Value = Annotated[str, Field(max_length=4000)]
Argument = Annotated[str, Field(min_length=1, max_length=1000)]
Url = Annotated[
    str,
    Field(pattern=r"^https?://[^\s/?#@]+(?:[/?#]\S*)?$", max_length=2000),
    Expect("an http(s) URL without credentials, like https://mcp.example.com/mcp"),
]
EgressHost = Annotated[
    str,
    Field(pattern=rf"^{HOST}(?::[0-9]{{1,5}})?$"),  # the port's range: `mcp_problems` names it
    Expect('a host, "host:port", "*.domain" or "[v6 address]:port" (no scheme, no path)'),
]


class McpServer(BaseModel):
    """One MCP server: local (`command`) or remote (`url`), and the tools agents may call."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: list[Argument] | None = Field(
        None,
        min_length=1,
        max_length=50,
        description="Local server: program and arguments, run in the sandbox at the repository root.",
    )
    env: dict[EnvName, Value] = Field(
        {}, description="Local server: its variables; values may use ${PLAN_CASCADE_MCP_...}."
    )
    url: Url | None = Field(None, description="Remote server: its streamable HTTP endpoint.")
    headers: dict[HeaderName, Value] = Field(
        {}, description="Remote server: request headers; values may use ${PLAN_CASCADE_MCP_...}."
    )
    tools: list[ToolName] = Field(min_length=1, max_length=100, description="Tool names agents are offered.")
    read_only: bool = Field(False, description="Its tools change nothing: planning exploration may use them.")
    egress: list[EgressHost] | None = Field(
        None,
        max_length=100,
        description="Local server: hosts it may reach, within PLAN_CASCADE_MCP_EGRESS; null = all of those.",
    )

    @property
    def local(self) -> bool:
        return self.command is not None


def offered_name(server: str, tool: str) -> str:
    """The name agents call a server's tool by: `<server>__<tool>`, other characters as `_`."""
    return f"{server}__{_OFFERED.sub('_', tool)}"


def references(value: str) -> list[str]:
    """The names a value refers to as `${NAME}`, in order."""
    return _REFERENCE.findall(value)


def fill(value: str, variables: Mapping[str, str]) -> str:
    """`value` with each `${NAME}` replaced by the operator's variable (KeyError when unset)."""
    return _REFERENCE.sub(lambda m: variables[m.group(1)], value)


def mcp_problems(servers: Mapping[str, McpServer]) -> list[str]:
    """What is wrong in `agent.mcp_servers` beyond each field's type, one line per key."""
    problems: list[str] = []
    offered: dict[str, str] = {}
    for name, server in servers.items():
        at = ("agent", "mcp_servers", name)
        if not _SERVER_NAME.fullmatch(name) or "__" in name:
            problems.append(
                f'{format_key(at)}: a server name is 1–20 lowercase letters, digits and single "_", '
                "starting with a letter (its tools are offered as <name>__<tool>)"
            )
        if (server.command is None) == (server.url is None):
            problems.append(
                f"{format_key(at)}: give either `command` (a local server) or `url` (a remote one)"
            )
        for key, present in (("env", server.env), ("egress", server.egress is not None)):
            if present and not server.local:
                problems.append(f"{format_key((*at, key))}: only a local server (`command`) has `{key}`")
        if server.headers and server.local:
            problems.append(f"{format_key((*at, 'headers'))}: only a remote server (`url`) has `headers`")
        for key, values in (("env", server.env), ("headers", server.headers)):
            for item, value in values.items():
                problems += _reference_problems(format_key((*at, key, item)), value)
        for index, tool in enumerate(server.tools):
            if tool == ALL_TOOLS:
                continue
            key, full = format_key((*at, "tools", index)), offered_name(name, tool)
            if len(full) > MAX_TOOL_NAME:
                problems.append(
                    f'{key}: "{full}" is longer than {MAX_TOOL_NAME} characters — shorten the server name'
                )
            elif full in offered:
                problems.append(
                    f'{key}: "{tool}" is offered as "{full}", like {offered[full]} — list it once'
                )
            offered.setdefault(full, key)
        for index, entry in enumerate(server.egress or []):
            port = entry.rpartition(":")[2] if entry.count(":") == 1 or "]:" in entry else ""
            if port and not 0 < int(port) < 65536:
                key = format_key((*at, "egress", index))
                problems.append(f'{key}: port {port} of "{entry}" is not 1–65535')
    return problems


def _reference_problems(key: str, value: str) -> list[str]:
    problems = []
    for name in references(value):
        if not _VARIABLE.fullmatch(name) or name in SETTINGS:
            problems.append(
                f"{key}: ${{{name}}} is not one of the operator's PLAN_CASCADE_MCP_* variables — only "
                "those may be named (the operator sets PLAN_CASCADE_MCP_<NAME> on the server)"
            )
    if "${" in _REFERENCE.sub("", value):
        problems.append(f"{key}: an unclosed ${{ — write ${{PLAN_CASCADE_MCP_<NAME>}}")
    return problems


def operator_problems(
    servers: Mapping[str, McpServer], *, allow_all_tools: bool, variables: Collection[str]
) -> list[str]:
    """What the operator's settings refuse: `"*"` without PLAN_CASCADE_MCP_ALLOW_ALL_TOOLS, and
    references to variables the operator has not set (by name only: no value is shown)."""
    problems = []
    for name, server in servers.items():
        at = ("agent", "mcp_servers", name)
        for index, tool in enumerate(server.tools):
            if tool == ALL_TOOLS and not allow_all_tools:
                problems.append(
                    f'{format_key((*at, "tools", index))}: "*" offers every tool the server has, which the '
                    "operator does not allow (PLAN_CASCADE_MCP_ALLOW_ALL_TOOLS) — list the tools by name"
                )
        for key, values in (("env", server.env), ("headers", server.headers)):
            for item, value in values.items():
                for missing in [n for n in references(value) if n not in variables]:
                    problems.append(
                        f"{format_key((*at, key, item))}: ${{{missing}}} is not set on the Plan Cascade "
                        "server — ask its operator to set it, or remove the reference"
                    )
    return problems
