"""A local MCP server's transport: JSON-RPC lines over the pipes of a process in the sandbox.

The SDK's own `stdio_client` starts the server itself (`anyio.open_process`), with the bot's
`HOME`, `PATH`, `USER` and `SHELL` added to whatever it is given, its stderr on the bot's, and
no say in how it starts. A server from the repository is untrusted code, so it starts here the
way every confined process does (`bot.sandbox.process.confined_child`): under bubblewrap with
exactly the environment it is given, its own process group recorded in the registry, the
operator's resource limits set before it runs anything (`LimitGate`), stderr kept (bounded) for
the error message, and the whole group killed when the story's agent run ends. This module only
frames messages: one JSON-RPC message a line each way, a line longer than `MAX_MESSAGE_BYTES`
ends the connection. The SDK's `ClientSession` speaks MCP over the two streams it yields.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import mcp_types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from bot.sandbox.confinement import Confinement
from bot.sandbox.process import confined_child, kill_process_group

MAX_MESSAGE_BYTES = 4 * 2**20
"""The longest line (one message) read from a server; a longer one ends the connection."""
KILL_WAIT = 5.0
"""Seconds to wait for a killed server to be reaped."""
STDERR_CHARS = 4000
"""Characters of a server's stderr kept (its tail), shown when it fails."""


@dataclass
class ServerProcess:
    """The confined server while it runs: its stderr's tail and how it ended."""

    pid: int
    stderr: list[str] = field(default_factory=list)
    exit_code: int | None = None

    def stderr_tail(self) -> str:
        return "".join(self.stderr)[-STDERR_CHARS:].strip()


async def _read_stdout(
    stdout: asyncio.StreamReader, sink: MemoryObjectSendStream[SessionMessage | Exception]
) -> None:
    async with sink:
        while True:
            try:
                line = await stdout.readline()
            except ValueError:  # asyncio's LimitOverrunError: a line over MAX_MESSAGE_BYTES
                await sink.send(ValueError(f"the server sent a message over {MAX_MESSAGE_BYTES:,} bytes"))
                return
            if not line:
                return
            if not line.strip():
                continue
            try:
                message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            except ValueError as exc:
                await sink.send(ValueError(f"the server sent something that is not JSON-RPC: {exc}"))
                continue
            await sink.send(SessionMessage(message))


async def _write_stdin(
    stdin: asyncio.StreamWriter, source: MemoryObjectReceiveStream[SessionMessage]
) -> None:
    async with source:
        async for item in source:
            data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
            stdin.write(data.encode() + b"\n")
            try:
                await stdin.drain()
            except (ConnectionError, OSError):
                return


async def _keep_stderr(reader: asyncio.StreamReader, server: ServerProcess) -> None:
    while chunk := await reader.read(65536):
        server.stderr.append(chunk.decode(errors="replace"))
        text = "".join(server.stderr)
        server.stderr[:] = [text[-STDERR_CHARS:]]


async def _kill(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the server's process group and reap it (bounded: a pipe some leftover holds open
    never keeps the story waiting)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(KILL_WAIT):
            await kill_process_group(proc)


@contextlib.asynccontextmanager
async def confined_stdio(
    argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], confinement: Confinement
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
        ServerProcess,
    ]
]:
    """Start `argv` in `cwd` with exactly `env`, confined; yield (messages in, messages out, the
    process). Leaving kills its process group, whatever it is doing."""
    async with confined_child(
        argv, cwd=cwd, env=env, confinement=confinement, streams="stdio", limit=MAX_MESSAGE_BYTES
    ) as child:
        proc = child.proc
        server = ServerProcess(pid=proc.pid)
        assert proc.stdout is not None and proc.stdin is not None
        incoming_sink, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        outgoing, outgoing_source = anyio.create_memory_object_stream[SessionMessage](0)
        tasks = [
            asyncio.ensure_future(_read_stdout(proc.stdout, incoming_sink)),
            asyncio.ensure_future(_write_stdin(proc.stdin, outgoing_source)),
            asyncio.ensure_future(_keep_stderr(child.output, server)),
        ]
        try:
            await child.release()  # nothing runs until its limits are set
            yield incoming, outgoing, server
        finally:
            for stream in (incoming, outgoing):
                stream.close()
            proc.stdin.close()
            await _kill(proc)
            server.exit_code = proc.returncode
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
