"""Confining untrusted processes: agents' commands, CLI agents, gates, setup commands.

Every process the bot starts on code it did not write goes through one `Sandbox` policy,
set by the operator (`PLAN_CASCADE_SANDBOX`), and one `Confinement` per call. Confined, a
process runs under bubblewrap with:

- its own user, PID, IPC, UTS, cgroup and network namespaces (no network unless the call
  allows it), an unprivileged uid/gid (65534) and no capabilities, dying with the bot;
- read-only system directories (/usr, /bin, /lib*, /sbin, /etc, /opt) and the directories of
  its tools (`bot.sandbox.tooldirs`), a fresh /proc (nothing of the server is visible), a
  minimal /dev, a private /tmp;
- its worktree and its HOME read-write; the worktree's `.git` file and existing `paths.deny`
  matches read-only on top;
- its worktree's git (`GitView`): the mirror's objects read-only, a private copy of its refs,
  tags and the worktree's HEAD and index read-write (see `bot.workspace.gitview`), read again for
  each confinement (async code asks for one through `asyncio.to_thread`, never on the event loop)
  and made in each process's own memory, or on disk for a confinement whose processes are one
  session (`git_session`: the built-in agent's commands);
- nothing else: not the rest of the data dir, the App's key, other mirrors, other worktrees, the
  server's HOME or working directory;
- the operator's resource limits (`bot.sandbox.limits`): processes, open files, memory and the
  size of its /tmp, set on its first process before it runs anything (`--block-fd`).

The environment is given to bubblewrap itself (never as arguments, which `/proc` shows).
"""

from __future__ import annotations

import asyncio
import errno
import functools
import os
import shutil
import stat
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, Protocol

from bot.config.mcp_policy import McpPolicy
from bot.errors import WorkspaceError
from bot.network.route import EgressRoute
from bot.network.rules import DEFAULT_AGENT_EGRESS
from bot.sandbox.limits import Limits, describe
from bot.sandbox.reaper import ProcessRegistry
from bot.sandbox.tooldirs import SYSTEM_DIRS, tool_dirs, under_system, within

SandboxMode = Literal["required", "auto", "off"]
MASKED = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh", "/etc/sudoers.d")
"""Host files that stay out of sight even though /etc is visible."""
_ABSENT = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)
"""Errors `Path.exists` takes for a path that is not there (it raises the others)."""
NOBODY = 65534
STRICTNESS: dict[str, int] = {"off": 0, "none": 0, "auto": 1, "required": 2}


class GitMounts(Protocol):
    """A worktree's git as a confined process sees it, made for one confinement: a copy on disk
    (`bot.workspace.gitview.GitView`) or in memory (`GitSnapshot`), mounted for each process."""

    def files(self) -> list[int]:
        """Descriptors one process's bubblewrap reads its files from (closed once it started)."""
        ...

    def mounts(self, files: Sequence[int], *, size: int) -> list[str]:
        """Bubblewrap's options that show it, from those `files`; a tmpfs at most `size` bytes."""
        ...


class GitSource(GitMounts, Protocol):
    """A worktree's git as the bot's git sees it now (`bot.workspace.gitview.GitView`)."""

    def refresh(self) -> None:
        """Make its copy on disk again (then it mounts that copy, shared by its processes)."""
        ...

    def snapshot(self) -> GitMounts:
        """Read it into memory: each process then gets a copy of its own, in its own memory."""
        ...


class SandboxUnavailable(WorkspaceError):
    """The sandbox is required but bubblewrap cannot build one here: nothing untrusted runs."""

    retryable = False


@functools.cache
def bwrap_problem(bwrap: str) -> str | None:
    """Why `bwrap` cannot build our sandbox here (None when it can); probed once per path."""
    found = shutil.which(bwrap)
    if found is None:
        return f"bubblewrap ({bwrap}) is not installed"
    probe = [found, *_namespaces(network=False), *_system_mounts(), "--", "/bin/true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=20, check=False, env={})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap ({found}) did not start: {exc}"
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip()[-300:] or f"exit code {done.returncode}"
        return f"bubblewrap ({found}) cannot create namespaces here: {why}"
    return None


def _namespaces(*, network: bool) -> list[str]:
    args = ["--unshare-all", "--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY)]
    if network:
        args.append("--share-net")
    return [*args, "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--hostname", "sandbox"]


@functools.cache
def _bwrap_help(bwrap: str) -> bytes:
    try:
        done = subprocess.run([bwrap, "--help"], capture_output=True, timeout=20, check=False, env={})
    except (OSError, subprocess.TimeoutExpired):
        return b""
    return done.stdout + done.stderr


def bwrap_sizes_tmpfs(bwrap: str) -> bool:
    """Whether this bubblewrap can size a tmpfs (`--size`, bubblewrap 0.7 and later)."""
    return b"--size" in _bwrap_help(bwrap)


def bwrap_makes_files(bwrap: str) -> bool:
    """Whether this bubblewrap can make a sandbox's git view in its memory: folders and files from
    descriptors in a tmpfs (`--dir`, `--file`), filled from memfds (Linux 3.17 and later)."""
    options = (b"--tmpfs ", b"--dir ", b"--file ")
    return hasattr(os, "memfd_create") and all(option in _bwrap_help(bwrap) for option in options)


def _system_mounts(*, tmp_size: int = 0) -> list[str]:
    args: list[str] = []
    for path in SYSTEM_DIRS:
        args += ["--ro-bind-try", path, path]
    for path in MASKED:  # one stat each (every confined process asks), read as `Path.exists` does
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            if exc.errno not in _ABSENT:
                raise
            continue
        args += ["--tmpfs", path] if stat.S_ISDIR(mode) else ["--ro-bind", "/dev/null", path]
    size = ["--size", str(tmp_size)] if tmp_size else []  # /tmp is memory: it counts as such
    return [*args, "--dev", "/dev", "--proc", "/proc", *size, "--tmpfs", "/tmp"]  # noqa: S108


@dataclass(frozen=True)
class Confinement:
    """How one process is started: confined (bubblewrap argv) or not, and recorded either way."""

    confined: bool
    bwrap: str = "bwrap"
    worktree: Path | None = None
    home: Path | None = None
    network: bool = False
    readonly: tuple[Path, ...] = ()
    tools: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    registry: ProcessRegistry | None = None
    writable: tuple[Path, ...] = ()
    """More read-write directories (a repository's package caches, for setup only)."""
    git: GitMounts | None = None
    """The worktree's git as the process sees it (None: no git, e.g. a directory that is no worktree)."""
    limits: Limits | None = None
    """What the process may use of the host (None: unconfined, nothing is limited)."""
    on_start: Callable[[int], Awaitable[None]] | None = None
    """Done with the sandbox's first process id while it is held before it runs anything (the
    egress proxy's socket made in its network namespace, `bot.network.route`); raises OSError."""

    def going_out(self, route: EgressRoute) -> Confinement:
        """This confinement with its way to `route`'s proxy: the proxy's socket made in the
        sandbox before it runs, or the folder of the socket its forwarder relays to, read-only."""
        if route.folder is None:
            return replace(self, on_start=route.listen)
        return replace(self, readonly=(*self.readonly, route.folder))

    def files(self) -> list[int]:
        """The descriptors one process's bubblewrap makes its git view from (see `argv`); the
        caller passes them on and closes them once it started (none when not confined)."""
        return self.git.files() if self.confined and self.git is not None else []

    def argv(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        gate: tuple[int, int] | None = None,
        files: Sequence[int] = (),
    ) -> list[str]:
        """`argv` wrapped in bubblewrap (unchanged when not confined). `gate`: the (info, block)
        descriptors of a `bot.sandbox.limits.LimitGate`, which sets the limits before it runs;
        `files`: what `files` gave for this process."""
        wrapped = self._wrapped(argv, cwd=cwd, env=env, gate=gate, files=files, listing=True)
        assert wrapped is not None  # listing: every tool directory is read when it must be
        return wrapped

    def known_argv(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        gate: tuple[int, int] | None = None,
        files: Sequence[int] = (),
    ) -> list[str] | None:
        """`argv`, from what is kept of its tool directories (`bot.sandbox.tooldirs`: stats, no
        listing, ~0.15 ms, fine on an event loop); None when one of them would have to be listed
        first (not seen within the last minute, or changed): then ask `argv` in a thread."""
        return self._wrapped(argv, cwd=cwd, env=env, gate=gate, files=files, listing=False)

    def _wrapped(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        gate: tuple[int, int] | None,
        files: Sequence[int],
        listing: bool,
    ) -> list[str] | None:
        if not self.confined:
            return list(argv)
        entries = [*env.get("PATH", "").split(":"), *map(str, self.tools)]
        tools = tool_dirs(entries, worktree=self.worktree, hidden=self.hidden, listing=listing)
        if tools is None:
            return None
        program = shutil.which(self.bwrap) or self.bwrap
        memory = self.limits.memory if self.limits is not None else 0
        tmp_size = memory if memory and bwrap_sizes_tmpfs(program) else 0
        args = [program, *_namespaces(network=self.network)]
        if gate is not None:
            args += ["--info-fd", str(gate[0]), "--block-fd", str(gate[1])]
        args += _system_mounts(tmp_size=tmp_size)
        for directory in tools:
            args += ["--ro-bind", str(directory), str(directory)]
        for path in self.hidden:  # server paths that would otherwise show through a mounted tree
            if under_system(path) or any(within(path, t) for t in tools):
                args += ["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)]
        for writable in (self.worktree, self.home, *self.writable):
            if writable is not None:
                args += ["--bind", str(writable), str(writable)]
        if self.worktree is not None and not within(cwd, self.worktree):
            args += ["--ro-bind", str(cwd), str(cwd)]
        if self.git is not None:
            args += self.git.mounts(files, size=tmp_size)  # its memory, like /tmp
        for path in self.readonly:
            if path.exists() or path.is_symlink():
                args += ["--ro-bind", str(path), str(path)]
        return [*args, "--chdir", str(cwd), "--", *argv]


def _not_on_a_loop() -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return  # a worker thread (or no loop at all): the copy may take its time
    raise RuntimeError("a confinement with a git view makes a copy of it: call it through asyncio.to_thread")


@dataclass(frozen=True)
class Sandbox:
    """The operator's sandbox policy (`PLAN_CASCADE_SANDBOX`), shared by every untrusted process."""

    mode: SandboxMode = "required"
    bwrap: str = "bwrap"
    hidden: tuple[Path, ...] = ()
    """Server paths that must never be visible (the data dir, the key file, the `.env`)."""
    registry: ProcessRegistry | None = None
    agent_network: bool = True
    """External CLI agents may go out (confined: through the egress proxy to `agent_egress` alone);
    never builtin agents or gates."""
    agent_egress: tuple[str, ...] = DEFAULT_AGENT_EGRESS
    """Where confined external agents may connect, through the bot's proxy (`PLAN_CASCADE_AGENT_EGRESS`;
    the settings' default: the model APIs they are given keys for, and the public registries)."""
    agent_env: Mapping[str, str] = field(default_factory=dict)
    """Variables handed to external agents (`PLAN_CASCADE_AGENT_ENV`): visible to those agents."""
    setup_env: Mapping[str, str] = field(default_factory=dict)
    """Variables handed to setup commands (`PLAN_CASCADE_SETUP_ENV`, e.g. a private package index)."""
    server_env: Mapping[str, str] = field(default_factory=dict)
    """Settings of the server's environment handed to setup, agents and gates of a plan with setup,
    the paths they name mounted read-only: TLS trust (`bot.sandbox.certs`), rustup's home
    (`bot.sandbox.toolchains`)."""
    setup_egress: tuple[str, ...] | None = None
    """Where confined setup may connect, through the bot's proxy (`PLAN_CASCADE_SETUP_EGRESS`);
    None: the public registries (`bot.network.rules.DEFAULT_SETUP_EGRESS`)."""
    limits: Limits = field(default_factory=Limits)
    """What each confined process may use of the host (`PLAN_CASCADE_SANDBOX_PROCESSES`,
    `_OPEN_FILES`, `_MEMORY_MB`, `_CGROUP`)."""
    on_blocked: Callable[[str], None] | None = field(default=None, compare=False)
    """Told of each request an egress proxy refuses, with whose it was (`agent`, `setup`): the
    server's `/metrics` counter."""
    mcp: McpPolicy = field(default_factory=McpPolicy)
    """What the repositories' MCP servers may reach and be given (`PLAN_CASCADE_MCP_*`)."""

    def problem(self) -> str | None:
        """Why bubblewrap cannot confine processes here (None when it can)."""
        return bwrap_problem(self.bwrap)

    def limit_notes(self) -> tuple[str, list[str]]:
        """What confined processes may use of the host, in words, and what is not limited."""
        program = shutil.which(self.bwrap) or self.bwrap
        return describe(self.limits, tmp_sized=bwrap_sizes_tmpfs(program), root=os.geteuid() == 0)

    def effective(self, repo_setting: str = "auto") -> SandboxMode:
        """The operator's floor, tightened (never loosened) by the repository's `agent.sandbox`."""
        if repo_setting == "required":
            return "required"
        return self.mode

    def confinement(
        self,
        *,
        worktree: Path,
        home: Path,
        repo_setting: str = "auto",
        network: bool = False,
        readonly: Sequence[Path] = (),
        tools: Sequence[Path] = (),
        writable: Sequence[Path] = (),
        git: GitSource | None = None,
        git_session: bool = False,
    ) -> Confinement:
        """How to start one untrusted process in `worktree`; SandboxUnavailable when it must not run.

        Confined, the worktree's `git` view is read again now: its processes start from what the
        bot's git sees, and what earlier ones wrote to their copy of it is gone. Each process gets
        a copy of its own in its memory, unless the processes are one `git_session` (each sees
        what the earlier ones wrote: the built-in agent's commands) or this bubblewrap cannot make
        one: then they share one copy on disk, made now. Either is file I/O, so with a `git` view
        this refuses to run on an event loop's thread (it would hold up every story and webhook
        meanwhile): call it through `asyncio.to_thread`.
        """
        mode = self.effective(repo_setting)
        problem = self.problem() if mode != "off" else None
        if mode == "required" and problem is not None:
            raise SandboxUnavailable(
                f"the sandbox is required (PLAN_CASCADE_SANDBOX=required) but {problem}: install "
                "bubblewrap (e.g. `apt-get install bubblewrap`) or, on a runner you trust, set "
                "PLAN_CASCADE_SANDBOX=off"
            )
        confined = mode != "off" and problem is None
        mounted: GitMounts | None = None
        if confined and git is not None:
            _not_on_a_loop()
            if git_session or not bwrap_makes_files(shutil.which(self.bwrap) or self.bwrap):
                git.refresh()
                mounted = git
            else:
                mounted = git.snapshot()
        return Confinement(
            confined=confined,
            bwrap=self.bwrap,
            worktree=worktree,
            home=home,
            network=network,
            readonly=tuple(readonly),
            tools=tuple(tools),
            hidden=self.hidden,
            # Recorded when unconfined: a confined one dies with the bot (`--die-with-parent`, its
            # own PID namespace), and a record is a file written and removed on its start's path.
            registry=None if confined else self.registry,
            writable=tuple(writable),
            git=mounted,
            limits=self.limits if confined else None,
        )
