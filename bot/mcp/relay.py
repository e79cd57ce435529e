"""MCP for CLI agents: the bot's own MCP server, relaying the allowed tools of one agent run.

A CLI agent (Claude Code, Codex, a command template with `{mcp_config}`) is never handed the
repository's servers themselves: it gets one stdio server, `plan_cascade`, whose command is a
small relay (`RELAY`, python3 of the agent's PATH) that joins its stdin and stdout to a Unix
socket of the bot's, in a folder bind-mounted read-only into the agent's sandbox. Behind the
socket the bot answers MCP itself, offering exactly the tools `bot.mcp.tools` opened for the run
(the allowlist holds), and each call goes through `McpTools.call`: the same timeout, size cap,
fence, transcript record and count as the builtin agent's. Only `initialize`, `ping`,
`tools/list` and `tools/call` are answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import shutil
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

from bot.mcp.tools import McpTools

SERVER_NAME = "plan_cascade"
"""The one MCP server a CLI agent sees (Claude Code names its tools `mcp__plan_cascade__…`)."""
MAX_LINE = 4 * 2**20
RELAY = """\
import socket, sys, threading
conn = socket.socket(socket.AF_UNIX)
conn.connect(sys.argv[1])


def up():
    while True:
        data = sys.stdin.buffer.read1(65536)
        if not data:
            break
        conn.sendall(data)
    conn.shutdown(socket.SHUT_WR)


threading.Thread(target=up, daemon=True).start()
while True:
    data = conn.recv(65536)
    if not data:
        break
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
"""
"""Runs as the agent's MCP server (python3 of its PATH): stdin and stdout to the bot's socket."""


@dataclass(frozen=True)
class McpRelay:
    """What one CLI agent run is given: the folder to bind read-only, and how to start the relay."""

    folder: Path
    config_file: Path
    """`{"mcpServers": {"plan_cascade": {"command": …, "args": […]}}}` (Claude Code's format)."""
    command: tuple[str, ...]

    def codex_flags(self) -> str:
        """Codex's `-c` overrides that add the relay as its MCP server."""
        program, *args = self.command
        return (
            f"-c {shlex.quote(f'mcp_servers.{SERVER_NAME}.command={json.dumps(program)}')} "
            f"-c {shlex.quote(f'mcp_servers.{SERVER_NAME}.args={json.dumps(args)}')} "
        )


def empty_config(folder: Path) -> Path:
    """An MCP configuration without servers, for a template's `{mcp_config}` in a run without tools."""
    path = folder / "mcp-config.json"
    path.write_text(json.dumps({"mcpServers": {}}))
    return path


def _reply(ident: Any, result: dict[str, Any] | None = None, error: str | None = None) -> dict[str, Any]:
    if error is not None:
        return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": error}}
    return {"jsonrpc": "2.0", "id": ident, "result": result or {}}


async def _answer(tools: McpTools, message: dict[str, Any]) -> dict[str, Any] | None:
    method, ident = message.get("method"), message.get("id")
    given = message.get("params")
    params: dict[str, Any] = given if isinstance(given, dict) else {}
    if ident is None:
        return None  # a notification (initialized, cancelled): nothing to say
    if method == "initialize":
        asked = params.get("protocolVersion")
        version = asked if asked in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
        info = {"name": "plan-cascade", "version": "1"}
        return _reply(ident, {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info})
    if method == "ping":
        return _reply(ident)
    if method == "tools/list":
        listed = [
            {"name": s.name, "description": s.description, "inputSchema": s.input_schema} for s in tools.specs
        ]
        return _reply(ident, {"tools": listed})
    if method == "tools/call":
        name, arguments = params.get("name"), params.get("arguments") or {}
        if not isinstance(name, str) or not tools.offers(name) or not isinstance(arguments, dict):
            text = f"error: unknown tool {name!r}; the tools are {', '.join(s.name for s in tools.specs)}"
        else:
            text = await tools.call(name, arguments)
        content = [{"type": "text", "text": text}]
        return _reply(ident, {"content": content, "isError": text.startswith("error:")})
    return _reply(ident, error=f"{method!r} is not served here (tools only)")


async def _serve(tools: McpTools, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while line := await reader.readline():
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict) and (reply := await _answer(tools, message)) is not None:
                writer.write(json.dumps(reply).encode() + b"\n")
                await writer.drain()
    except (ValueError, ConnectionError):  # a line over MAX_LINE, or the relay went away
        pass
    finally:
        writer.close()


@contextlib.asynccontextmanager
async def mcp_relay(tools: McpTools) -> AsyncIterator[McpRelay | None]:
    """The relay of `tools` while the context lasts; None when the run has no MCP tool."""
    if not tools.specs:
        yield None
        return
    folder = Path(tempfile.mkdtemp(prefix="plan-cascade-mcp-relay-"))
    try:
        script, socket_path = folder / "relay.py", folder / "mcp.sock"
        script.write_text(RELAY)
        command = ("python3", str(script), str(socket_path))
        config = folder / "mcp-config.json"
        entry = {"type": "stdio", "command": command[0], "args": list(command[1:])}
        config.write_text(json.dumps({"mcpServers": {SERVER_NAME: entry}}))
        server = await asyncio.start_unix_server(
            lambda r, w: _serve(tools, r, w), path=str(socket_path), limit=MAX_LINE
        )
        async with server:
            yield McpRelay(folder=folder, config_file=config, command=command)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
