"""What a confined process may use of the host: processes, open files, memory.

Untrusted code in the sandbox cannot see the server, but without limits it could still exhaust
the host: a fork bomb, millions of open files, all the memory (also through its `/tmp`, which is
memory). The operator sets the limits (`PLAN_CASCADE_SANDBOX_PROCESSES`, `_OPEN_FILES`,
`_MEMORY_MB`); each confined process gets them before it runs anything (see `apply`), and they
hold for everything it starts:

- open files: `RLIMIT_NOFILE` per process (soft and hard: it cannot raise them);
- processes and threads: a pids cgroup per confined process when the server can make one
  (`bot.sandbox.cgroups`), and `RLIMIT_NPROC`, which counts the sandbox's own user namespace
  and so binds per sandbox, but which the kernel does not enforce for a server running as root;
- memory: a memory cgroup per confined process when the server can make one (it counts `/tmp`
  too), the size of its `/tmp`, and the kernel's OOM killer told to take sandboxed processes
  first (`oom_score_adj` 1000). There is no per-process address-space limit: `RLIMIT_AS` and
  `RLIMIT_DATA` break Node, Go's race detector and sanitizers, which reserve terabytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.errors import WorkspaceError
from bot.sandbox.cgroups import Cgroups, Group

DEFAULT_PROCESSES = 1024
DEFAULT_OPEN_FILES = 8192
OOM_FIRST = 1000
"""`oom_score_adj` of confined processes: the kernel kills them before anything of the server."""


def machine_memory() -> int:
    """Bytes of memory this machine has."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


@dataclass(frozen=True)
class Limits:
    """The operator's limits for every confined process (0: that one is not limited)."""

    processes: int = DEFAULT_PROCESSES
    """Processes and threads one confined process may have running at once, itself included."""
    open_files: int = DEFAULT_OPEN_FILES
    """Open files per process."""
    memory: int = 0
    """Bytes of memory (and of `/tmp`) for one confined process and all it starts."""
    cgroups: Cgroups | None = None
    """Where processes and memory are counted (None: nowhere, rlimits alone)."""

    @property
    def any(self) -> bool:
        return bool(self.processes or self.open_files or self.memory)


def apply(limits: Limits, pid: int, *, joined: Group | None = None) -> Group | None:
    """Put `pid` (a sandbox's first process, not yet running its command) under `limits`; the
    cgroup made for it, if any (the caller removes it when the process is done). A process that
    `joined` its cgroup itself (`Group.joined`) gets its rlimits here, and that cgroup back.

    Raises OSError when a limit cannot be set: the caller must not let the process run then.
    """
    made = None
    if joined is None and limits.cgroups is not None:
        made = limits.cgroups.make(processes=limits.processes, memory=limits.memory)
    try:
        if made is not None:
            made.add(pid)
        for kind, value in (
            (resource.RLIMIT_NOFILE, limits.open_files),
            (resource.RLIMIT_NPROC, limits.processes),
        ):
            if value:
                _lower(pid, kind, value)
        with contextlib.suppress(OSError):  # best effort: a server that is not root may not write it
            with open(f"/proc/{pid}/oom_score_adj", "w") as adj:
                adj.write(str(OOM_FIRST))
    except BaseException:
        if made is not None:
            made.remove()
        raise
    return made or joined


def _lower(pid: int, kind: int, value: int) -> None:
    """Set a limit of `pid`, soft and hard, to `value` (never above its current hard limit)."""
    _soft, hard = resource.prlimit(pid, kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.prlimit(pid, kind, (value, value))


async def joining(limits: Limits | None) -> Group | None:
    """A cgroup for a confined process to join itself as it starts (`Group.joined`), made in a
    thread (folders and files on the cgroup file system) before it is started; None where its
    process is moved in at its gate instead (cgroup v2), or where no cgroup is made."""
    if limits is None or not limits.any or limits.cgroups is None or limits.cgroups.version != "v1":
        return None
    making = asyncio.ensure_future(
        asyncio.to_thread(limits.cgroups.make, processes=limits.processes, memory=limits.memory)
    )
    try:
        group = await asyncio.shield(making)
    except asyncio.CancelledError:  # made all the same: removed once it is
        making.add_done_callback(_unwanted)
        raise
    return group if group is not None and group.joins else None


def _unwanted(making: asyncio.Future[Group | None]) -> None:
    if not making.cancelled() and making.exception() is None and (group := making.result()) is not None:
        group.remove_later()


async def _applied(limits: Limits, pid: int, joined: Group | None) -> Group | None:
    """`apply`, on the loop when there is no cgroup to make (none, or one its process joined
    itself): a few `prlimit` calls and a write to `/proc`, tens of µs, less than a hand-off to a
    thread and back costs under load; in a thread when a cgroup is made (folders and files on the
    cgroup file system)."""
    if limits.cgroups is None or joined is not None:
        return apply(limits, pid, joined=joined)
    setting = asyncio.ensure_future(asyncio.to_thread(apply, limits, pid))
    try:
        return await asyncio.shield(setting)
    except asyncio.CancelledError:  # let it finish, then undo it: its cgroup is not left behind
        with contextlib.suppress(Exception):
            made = await setting
            if made is not None:
                await asyncio.to_thread(made.remove)
        raise


async def _read_to_end(fd: int, *, limit: int) -> bytes:
    """What the pipe `fd` gives until its writer closes it (about `limit` bytes at most), read
    as it comes: a hundred bytes, not worth a transport set up and taken down on the loop."""
    os.set_blocking(fd, False)
    said = b""
    while len(said) < limit:
        try:
            more = os.read(fd, limit)
        except BlockingIOError:
            await _readable(fd)
            continue
        if not more:
            break
        said += more
    return said


async def _readable(fd: int) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


class LimitGate:
    """How limits reach a confined process before it runs anything: bubblewrap writes the
    sandbox's first process id to `--info-fd` and waits on `--block-fd` until `release` has put
    that process under the limits (everything it starts afterwards inherits them)."""

    def __init__(self, joined: Group | None = None) -> None:
        self.joined = joined
        """The cgroup its process joins itself as it starts (`Group.joined`), if any."""
        self._info, self._info_child = os.pipe()
        self._block_child, self._block = os.pipe()
        self._open = {self._info, self._info_child, self._block_child, self._block}

    @property
    def child_fds(self) -> tuple[int, int]:
        """(info fd, block fd), the child's ends: passed to bubblewrap at these numbers."""
        return self._info_child, self._block_child

    def started(self) -> None:
        """The child holds its ends now: close ours of them."""
        self._close(*self.child_fds)

    async def release(
        self, limits: Limits | None, *, then: Callable[[int], Awaitable[None]] | None = None
    ) -> Group | None:
        """Wait for the sandbox's first process, put it under `limits`, do `then` with its id, let
        it run; its cgroup.

        Nothing is released when bubblewrap failed before making the sandbox (nothing runs then),
        when a limit cannot be set or when `then` fails (WorkspaceError: the caller kills it,
        nothing has run)."""
        try:
            said = await _read_to_end(self._info, limit=65_536)
        finally:
            self._close(self._info)
        if not said.strip():
            return self.joined  # nothing ran; a cgroup made for it is still the caller's to remove
        try:
            pid = int(json.loads(said)["child-pid"])
        except (ValueError, KeyError, TypeError) as exc:
            raise WorkspaceError(f"bubblewrap did not say which process to limit ({exc})") from exc
        try:
            group = await _applied(limits, pid, self.joined) if limits is not None and limits.any else None
        except OSError as exc:
            raise WorkspaceError(f"the sandbox's resource limits could not be set ({exc})") from exc
        if then is not None:
            try:
                await then(pid)
            except BaseException as exc:
                if group is not None and group is not self.joined:
                    await asyncio.to_thread(group.remove)
                if isinstance(exc, OSError):
                    raise WorkspaceError(f"the sandbox could not be made ready ({exc})") from exc
                raise
        os.write(self._block, b"1")
        return group

    def close(self) -> None:
        """After the process ended (or was killed): a sandbox never released never runs."""
        self._close(*list(self._open))

    def _close(self, *fds: int) -> None:
        for fd in fds:
            if fd in self._open:
                self._open.discard(fd)
                with contextlib.suppress(OSError):
                    os.close(fd)


def describe(limits: Limits, *, tmp_sized: bool, root: bool) -> tuple[str, list[str]]:
    """What is limited, in words, and what is not (for `doctor` and the start-up log)."""
    counted = limits.cgroups.counts if limits.cgroups is not None else ()
    said, gaps = [], []
    if not limits.processes:
        gaps.append("processes are not limited (PLAN_CASCADE_SANDBOX_PROCESSES=0)")
    elif "pids" in counted:
        said.append(f"{limits.processes} processes (a cgroup each)")
    elif root:
        gaps.append(
            "processes are not limited: the server runs as root (exempt from RLIMIT_NPROC) and can make "
            "no pids cgroup (PLAN_CASCADE_SANDBOX_CGROUP)"
        )
    else:
        said.append(f"{limits.processes} processes (RLIMIT_NPROC, per sandbox)")
    if limits.open_files:
        said.append(f"{limits.open_files} open files per process")
    else:
        gaps.append("open files are not limited (PLAN_CASCADE_SANDBOX_OPEN_FILES=0)")
    mib = limits.memory // (1024 * 1024)
    if not limits.memory:
        gaps.append("memory is not limited (PLAN_CASCADE_SANDBOX_MEMORY_MB=0)")
    elif "memory" in counted:
        said.append(f"{mib} MiB of memory (a cgroup each, /tmp included)")
    else:
        gaps.append("memory is not limited per sandbox (no memory cgroup); the OOM killer takes it first")
    if limits.memory and tmp_sized:
        said.append(f"/tmp at most {mib} MiB")  # noqa: S108 - words, no file
    elif limits.memory:
        gaps.append("/tmp is not sized (this bubblewrap has no --size)")  # noqa: S108
    return ", ".join(said) or "nothing", gaps
