"""Run one command in a fresh subprocess, in its own process group, with a scrubbed env.

Each command gets ``start_new_session=True``, so it leads its own process group. On a
timeout, on cancellation, and after the command exits (background children left behind
are orphans), the whole group is killed with ``SIGKILL`` and the leader reaped.

A :class:`~bot.sandbox.confinement.Confinement` says how: inside bubblewrap (its own namespaces,
nothing of the server visible, the operator's resource limits set before anything runs; see
`bot.sandbox.confinement` and `bot.sandbox.limits`) or not, and where the process group is
recorded so a bot killed with SIGKILL can kill it at its next start.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import shutil
import signal
import sys
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.sandbox.cgroups import Group
from bot.sandbox.limits import LimitGate, Limits, joining

if TYPE_CHECKING:
    from bot.sandbox.confinement import Confinement

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
"""PATH of a scrubbed env. Deliberately without the bot's own virtualenv: commands run the
repository's tools, not ours. Callers that need more pass ``extra={"PATH": ...}``."""

SECRET_MARKERS = ("TOKEN", "KEY", "SECRET", "PASSWORD")
"""Substrings that make an env variable name a secret; such names are refused in ``extra``."""

EXIT_GRACE_S = 0.2
"""How long to wait for the output pipe to close after the command exited."""

_READ_CHUNK = 65536


class ProcessResult(BaseModel):
    """What a command did."""

    model_config = ConfigDict(frozen=True)

    exit_code: int | None = Field(description="Exit status; negative for a signal; None when timed out.")
    output: str = Field(description="stdout and stderr merged, capped to head and tail around a marker.")
    timed_out: bool = Field(description="The command hit its timeout and its process group was killed.")
    truncated: bool = Field(description="Part of the output was cut out to respect the limit.")
    duration_s: float = Field(description="Wall-clock seconds from start to the last byte of output.")


def fast_child_watcher() -> None:
    """Wait for this loop's child processes with pidfds instead of a thread each.

    Python 3.11 on Linux only (3.12 and later do this by themselves); call it inside the
    running loop that will start the processes (the server's lifespan, the worker's main).
    The engine starts a few processes per story (git, agents, gates): this is worth ~7 % of an
    orchestration's time there.
    """
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        return
    try:
        loop = asyncio.get_running_loop()
        os.close(os.pidfd_open(os.getpid()))
    except (RuntimeError, OSError):  # no running loop, or a kernel without pidfds
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        watcher = asyncio.PidfdChildWatcher()
        watcher.attach_loop(loop)
        asyncio.set_child_watcher(watcher)


def tool_program(name: str, tool_path: str | None) -> str | None:
    """`name` on the tool PATH (the scrubbed PATH without one), or None."""
    return shutil.which(name, path=tool_path or SAFE_PATH)


def tools_on_path(names: Iterable[str], tool_path: str | None) -> frozenset[str]:
    """Which of the programs `names` are on the tool PATH."""
    return frozenset(name for name in names if tool_program(name, tool_path) is not None)


def uv_program(tool_path: str | None) -> str | None:
    """uv on the tool PATH or beside the bot's own Python (it is installed with Plan Cascade)."""
    return shutil.which("uv", path=f"{tool_path or SAFE_PATH}:{Path(sys.executable).parent}")


def scrubbed_env(
    *, home: Path, extra: Mapping[str, str] | None = None, passthrough: Mapping[str, str] | None = None
) -> dict[str, str]:
    """An environment with nothing from ``os.environ``: safe PATH, HOME, UTF-8 locale, dumb TERM.

    ``extra`` adds or overrides variables; a name containing TOKEN, KEY, SECRET or PASSWORD
    raises :class:`ValueError` so no credential reaches a tool command by accident.
    ``passthrough`` is the operator's explicit allow-list for external agents
    (``PLAN_CASCADE_AGENT_ENV``): added as is, visible to that agent.
    """
    env = {"PATH": SAFE_PATH, "HOME": str(home), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "dumb"}
    for name, value in (extra or {}).items():
        if any(marker in name.upper() for marker in SECRET_MARKERS):
            raise ValueError(f"refusing to pass {name!r} to a tool command: it looks like a secret")
        env[name] = value
    env.update(passthrough or {})
    return env


async def kill_process_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the process group led by ``proc`` (started with a new session) and reap ``proc``.

    ``proc.wait()`` also waits for pipes asyncio created for the process to close; git's
    pipes close when its group dies. :func:`run_process` uses its own pipe, so it never waits
    on a child that left the group.
    """
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    await proc.wait()


class _Capture:
    """Keeps the head and the tail of a stream of text, counting what falls in between."""

    def __init__(self, limit: int) -> None:
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.head = ""
        self.tail = ""
        self.total = 0
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes, *, final: bool = False) -> None:
        text = self.decoder.decode(data, final=final)
        self.total += len(text)
        if len(self.head) < self.head_limit:
            room = self.head_limit - len(self.head)
            self.head, text = self.head + text[:room], text[room:]
        if text and self.tail_limit:
            self.tail = (self.tail + text)[-self.tail_limit :]

    def result(self) -> tuple[str, bool]:
        cut = self.total - len(self.head) - len(self.tail)
        if cut <= 0:
            return self.head + self.tail, False
        return f"{self.head}\n[... {cut} characters cut ...]\n{self.tail}", True


async def _pump(stream: asyncio.StreamReader, capture: _Capture) -> None:
    while chunk := await stream.read(_READ_CHUNK):
        capture.feed(chunk)
    capture.feed(b"", final=True)


async def open_pipe() -> tuple[int, asyncio.StreamReader, asyncio.ReadTransport]:
    """A pipe for a command's output: the write fd for the child, a reader for us.

    Our own pipe, not ``asyncio.subprocess.PIPE``: then ``proc.wait()`` returns when the
    command exits, even while a background child still holds the write end, and closing the
    transport stops reading whenever we choose (asyncio's own pipes must be read to the end).
    The caller closes the write fd once the child has it, and the transport when done.
    """
    read_fd, write_fd = os.pipe()
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    try:
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb", buffering=0)
        )
    except BaseException:
        os.close(write_fd)
        raise
    return write_fd, reader, transport


async def _finish(
    proc: asyncio.subprocess.Process, pump: asyncio.Future[None], out: asyncio.BaseTransport
) -> None:
    """Kill what is left of the group, reap the leader and drain the pipe (bounded)."""
    await kill_process_group(proc)
    await _drained(pump, timeout=1.0)
    if not pump.done():  # a child left the group (setsid) and still holds the pipe: stop listening
        pump.cancel()
    out.close()


async def _drained(pump: asyncio.Future[None], *, timeout: float) -> None:  # noqa: ASYNC109 - a grace
    """Wait up to `timeout` for the output to end; not at all when it has (`asyncio.wait` would
    still take two turns of the loop)."""
    if not pump.done():
        await asyncio.wait({pump}, timeout=timeout)


Streams = Literal["output", "stdio"]
"""How a child's streams are wired: `output`, stdout and stderr both to `Child.output` and no
stdin; `stdio`, stdin and stdout piped (`proc.stdin`, `proc.stdout`) and stderr to `Child.output`."""


@dataclass
class Child:
    """A process `confined_child` started: held at its limit gate until `release`."""

    proc: asyncio.subprocess.Process
    output: asyncio.StreamReader
    """What it writes to stderr (and, `output` streams, to stdout), through our own pipe."""
    transport: asyncio.ReadTransport
    """That pipe's transport: closing it stops reading (when `confined_child` is left, at the latest)."""
    gate: LimitGate | None
    limits: Limits | None
    group: Group | None = None
    on_start: Callable[[int], Awaitable[None]] | None = None

    async def release(self) -> None:
        """Put the process under its limits and do its confinement's `on_start`, then let it run
        (nothing runs before); its cgroup is removed when `confined_child` is left. Without
        either, nothing to do."""
        if self.gate is not None:
            self.group = await self.gate.release(self.limits, then=self.on_start)  # or the one it joined


@contextlib.asynccontextmanager
async def confined_child(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    confinement: Confinement | None,
    streams: Streams = "output",
    limit: int = 2**16,
) -> AsyncIterator[Child]:
    """Start `argv` in `cwd` with exactly `env`: the one spawn of agents' commands, gates, setup
    and local MCP servers. It leads its own process group, is recorded in the confinement's
    registry while it runs (unconfined ones have one) and, confined, runs in bubblewrap (which
    gets `env` and passes it on) held at the limit gate until `Child.release`. `limit`:
    asyncio's line limit of `stdio` pipes.

    The caller kills the group before leaving (its own way: bounded, draining the output);
    leaving then stops reading, closes the gate (a sandbox never released never runs), removes
    the cgroup with whatever is left in it (meanwhile when bubblewrap ended on its own: nothing
    is left in it then), and forgets the record.
    """
    confined = confinement is not None and confinement.confined
    limits = confinement.limits if confinement is not None and confined else None
    on_start = confinement.on_start if confinement is not None and confined else None
    joined = await joining(limits)  # cgroup v1: it joins its cgroup itself as it starts
    gate = LimitGate(joined) if (limits is not None and limits.any) or on_start is not None else None
    files: list[int] = []  # what bubblewrap makes the git view from, in memory: ours closed once it started
    try:
        if confinement is not None and confinement.confined:
            files = confinement.files()
            handshake = gate.child_fds if gate is not None else None
            # From what is kept of its tool directories, on the loop (~0.15 ms of stats: a thread's
            # hand-off costs more under load); in a thread when one must be listed first.
            wrapped = confinement.known_argv(argv, cwd=cwd, env=env, gate=handshake, files=files)
            if wrapped is None:
                wrapped = await asyncio.to_thread(
                    confinement.argv, argv, cwd=cwd, env=env, gate=handshake, files=files
                )
            argv = wrapped if joined is None else joined.joined(wrapped)
        write_fd, output, transport = await open_pipe()
    except BaseException:
        _close(files)
        _abandon(gate)
        raise
    piped = streams == "stdio"
    spawn = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.PIPE if piped else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE if piped else write_fd,
            stderr=write_fd,
            start_new_session=True,
            pass_fds=(*(gate.child_fds if gate is not None else ()), *files),
            limit=limit,
        )
    )
    try:
        proc = await asyncio.shield(spawn)
    except asyncio.CancelledError:
        # Cancelled while the process was starting: asyncio would kill only the leader and
        # leave what it already forked. Let the start finish, then kill the whole group.
        try:
            started_proc = await spawn
        except BaseException:
            transport.close()
            _abandon(gate)
            raise
        await kill_process_group(started_proc)
        transport.close()
        _abandon(gate)
        raise
    except BaseException:
        transport.close()
        _abandon(gate)
        raise
    finally:
        os.close(write_fd)
        _close(files)
        if gate is not None:
            gate.started()
    registry = confinement.registry if confinement is not None else None
    if registry is not None:
        registry.record(proc.pid)
    child = Child(  # its cgroup (one it joined) is removed when it is left, released or not
        proc=proc,
        output=output,
        transport=transport,
        gate=gate,
        limits=limits,
        group=joined,
        on_start=on_start,
    )
    try:
        yield child
    finally:
        transport.close()
        if gate is not None:
            gate.close()  # after the kill: a sandbox still waiting to be released dies unreleased
        if child.group is not None and proc.returncode is not None and proc.returncode >= 0:
            # Bubblewrap ended on its own, so after its sandbox's last process (the sandbox's
            # process namespace ends with its first): the cgroup is empty, removed meanwhile.
            child.group.remove_later()
        elif child.group is not None:  # killed: whatever is left inside, killed; the cgroup gone
            await asyncio.to_thread(child.group.remove)
        if registry is not None:
            registry.forget(proc.pid)


def _abandon(gate: LimitGate | None) -> None:
    """A child that never got going: its gate shut, the cgroup made for it removed meanwhile."""
    if gate is not None:
        gate.close()
        if gate.joined is not None:
            gate.joined.remove_later()


def _close(fds: Iterable[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


async def run_process(
    command: str | Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,  # noqa: ASYNC109 - a timeout is a result (timed_out), not an exception
    output_limit: int = 20000,
    confinement: Confinement | None = None,
) -> ProcessResult:
    """Run ``command`` (a string goes through ``/bin/bash -c``) in ``cwd`` with exactly ``env``.

    With a confinement that is confined, the command runs in bubblewrap (which gets ``env``
    and passes it on); its process group is recorded in the confinement's registry, if it has one,
    while it runs.
    """
    if output_limit < 0:
        raise ValueError("output_limit must be >= 0")
    argv = ["/bin/bash", "-c", command] if isinstance(command, str) else list(command)
    capture = _Capture(output_limit)
    started = time.monotonic()
    timed_out = False
    async with confined_child(argv, cwd=cwd, env=env, confinement=confinement) as child:
        proc = child.proc
        pump = asyncio.ensure_future(_pump(child.output, capture))
        try:
            async with asyncio.timeout(timeout):
                await child.release()  # nothing runs until its limits are set
                await proc.wait()
                # Children left in the background keep the pipe open: give them a moment, then kill.
                await _drained(pump, timeout=EXIT_GRACE_S)
        except TimeoutError:
            timed_out = True
        finally:
            await _finish(proc, pump, child.transport)
    output, truncated = capture.result()
    return ProcessResult(
        exit_code=None if timed_out else proc.returncode,
        output=output,
        timed_out=timed_out,
        truncated=truncated,
        duration_s=round(time.monotonic() - started, 3),
    )
