"""Starting one MCP server for one agent run: a local one in the sandbox, a remote one checked.

A local server (`command`) is the repository's code: it runs confined like setup, with the
repository's worktree read-only, an empty HOME of its own (removed afterwards), the agent's tool
PATH and setup's variables, the variables its `env` names, and nothing else of the server's
environment. Its network is its own namespace with nothing in it; when the operator allows
hosts (`PLAN_CASCADE_MCP_EGRESS`, narrowed by the server's `egress`), its only way out is an
egress proxy of the bot's own started for it (`bot.network.route.mcp_route`, as for setup).

A remote server (`url`) is reached from the bot's process, only at the hosts of
`PLAN_CASCADE_MCP_EGRESS` (`bot.mcp.http`), with the headers its config names.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import shutil
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mcp.client.streamable_http import streamable_http_client

from bot.config.mcp import McpServer, fill
from bot.config.mcp_policy import McpPolicy
from bot.errors import PlanCascadeError
from bot.mcp.http import checked_client
from bot.mcp.stdio import ServerProcess, confined_stdio
from bot.network.route import mcp_route
from bot.network.rules import DEFAULT_PORTS, Entry, Resolver, parse_egress, system_resolver
from bot.sandbox.confinement import Sandbox


class McpUnavailable(PlanCascadeError):
    """An MCP server cannot be used in this run (the agent goes on without its tools)."""


@dataclass(frozen=True)
class McpPlace:
    """Where the local servers of one agent run start."""

    worktree: Path
    """The repository checkout: the servers' working directory, read-only to them."""
    env: Mapping[str, str]
    """The scrubbed environment of the agent's tools (PATH, locale, setup's variables)."""
    sandbox: Sandbox
    repo_setting: str = "auto"
    readonly: tuple[Path, ...] = ()
    """More directories the servers see read-only (the repository's package caches)."""
    resolve: Resolver = system_resolver


def _covers(outer: Entry, inner: Entry) -> bool:
    """Whether every destination `inner` allows is one `outer` allows too."""
    ports = DEFAULT_PORTS if inner.port is None else (inner.port,)
    if not all(outer.port == p if outer.port is not None else p in DEFAULT_PORTS for p in ports):
        return False
    if outer.host == inner.host:
        return True
    return outer.host.startswith("*.") and inner.host.lstrip("*").endswith(outer.host[1:])


def narrowed_egress(operator: Sequence[str], repository: Sequence[str] | None) -> list[str]:
    """The hosts a local server may reach: the operator's, or those of the repository's list
    the operator's covers (a repository narrows, never widens)."""
    if repository is None:
        return list(operator)
    allowed = parse_egress(operator)
    return [
        item
        for item, entry in zip(repository, parse_egress(repository), strict=True)
        if any(_covers(o, entry) for o in allowed)
    ]


def _values(values: Mapping[str, str], policy: McpPolicy, what: str) -> dict[str, str]:
    try:
        return {name: fill(value, policy.variables) for name, value in values.items()}
    except KeyError as exc:
        raise McpUnavailable(f"its {what} name {exc.args[0]}, which the operator has not set") from None


@contextlib.asynccontextmanager
async def local_server(
    name: str, config: McpServer, *, policy: McpPolicy, place: McpPlace
) -> AsyncIterator[tuple[Any, Any, ServerProcess]]:
    """Start a local server for one run; yield (messages in, messages out, its process)."""
    assert config.command is not None
    env = {**place.env, **_values(config.env, policy, "env")}
    home = Path(tempfile.mkdtemp(prefix=f"plan-cascade-mcp-{name}-"))
    try:
        env["HOME"] = str(home)
        # The worktree is the working directory, outside the writable "worktree" (its own HOME):
        # the sandbox binds it read-only.
        confinement = await asyncio.to_thread(
            place.sandbox.confinement,
            worktree=home,
            home=home,
            repo_setting=place.repo_setting,
            readonly=place.readonly,
        )
        argv = list(config.command)
        allowed = narrowed_egress(policy.egress, config.egress)
        async with contextlib.AsyncExitStack() as stack:
            if confinement.confined and allowed:  # unconfined (PLAN_CASCADE_SANDBOX=off): the host's network
                route = await stack.enter_async_context(mcp_route(allowed))
                if route.prelude:  # its forwarder starts first
                    argv = ["/bin/bash", "-c", route.command('exec "$@"'), name, *argv]
                env.update(route.env)
                confinement = confinement.going_out(route)
            streams = await stack.enter_async_context(
                confined_stdio(argv, cwd=place.worktree, env=env, confinement=confinement)
            )
            yield streams
    finally:
        await asyncio.to_thread(shutil.rmtree, home, True)


def _remote_url(config: McpServer) -> str:
    assert config.url is not None
    parts = urlsplit(config.url)
    if parts.scheme != "https" and not _is_address(parts.hostname or ""):
        raise McpUnavailable(
            "its url is plain http: only https carries its headers (http only to an IP address)"
        )
    return config.url


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@contextlib.asynccontextmanager
async def remote_server(
    config: McpServer, *, policy: McpPolicy, resolve: Resolver
) -> AsyncIterator[tuple[Any, Any]]:
    """Connect to a remote server for one run; yield (messages in, messages out)."""
    url = _remote_url(config)
    headers = _values(config.headers, policy, "headers")
    client, _ = checked_client(parse_egress(policy.egress), headers=headers, resolve=resolve)
    async with client, streamable_http_client(url, http_client=client) as streams:
        yield streams
