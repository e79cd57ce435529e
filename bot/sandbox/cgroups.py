"""Control groups for confined processes: a cap on their processes and memory, all counted.

An rlimit counts per process (or, for processes, per user, and never for root); a cgroup counts
a confined process and everything it starts, whoever runs the server. When the server may make
cgroups, each confined process gets its own, with `pids.max` and its memory limit, and the
cgroup is emptied and removed when the process is done.

Where (`PLAN_CASCADE_SANDBOX_CGROUP`): `auto` finds a place the server may write: with cgroup v1,
the server's own groups in the `pids` and `memory` hierarchies; with cgroup v2, the root group,
or the service's group that systemd delegated to the server (`Delegate=yes` with
`DelegateSubgroup=`, so that the server itself sits one level down). A path names a cgroup v2
folder the operator delegated. `off` uses none. Where none can be made, processes and memory are
limited as far as rlimits go (and the start-up log and `doctor` say what is not).
Synchronous file I/O on the cgroup file system: async code calls it through `asyncio.to_thread`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import re
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)
CONTROLLERS = ("pids", "memory")
_LIMIT_FILES = {
    ("v1", "pids"): "pids.max",
    ("v1", "memory"): "memory.limit_in_bytes",
    ("v2", "pids"): "pids.max",
    ("v2", "memory"): "memory.max",
}
_EMPTY_WAIT = 5.0
_counter = itertools.count(1)
_OWN_NAME = re.compile(r"plan-cascade-(\d+)-\d+")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


JOIN = 'echo 0 >"$1" && shift && {more}exec "$@" || {{ echo "{failed}" >&2; exit {status}; }}'
JOIN_FAILED = 125
"""The exit status of a process that could not join its cgroup (`Group.joined`): nothing ran."""


@dataclass
class Group:
    """One confined process's cgroup: a folder per hierarchy (one with cgroup v2)."""

    folders: list[Path]
    joins: bool = False
    """Whether its process joins it itself, before it runs anything (`joined`: cgroup v1), instead
    of being moved in from outside (`add`)."""

    def add(self, pid: int) -> None:
        """Move `pid` in (before it starts anything: its children are born inside)."""
        for folder in self.folders:
            (folder / "cgroup.procs").write_text(str(pid))

    def joined(self, argv: Sequence[str]) -> list[str]:
        """`argv`, started by a shell that first moves itself in, then becomes `argv` (`exec`):
        everything `argv` starts is born inside. With cgroup v1 a thread may move itself by writing
        0 to a group's `tasks` (the shell has one thread), which takes no system-wide lock; moving
        another process in (`add`) takes the kernel's lock on every thread group's cgroup for
        writing, and the first such move after a quiet moment waits for an RCU grace period, 5 to
        15 ms, while every fork on the machine waits behind it. The shell runs our own words (its
        arguments are the `tasks` files and `argv`, never read as code), privileged (`-p`: no
        functions or start-up files from the environment it passes on); if a move fails it says so
        and exits `JOIN_FAILED` before `argv` runs."""
        more = "".join('echo 0 >"$1" && shift && ' for _ in self.folders[1:])
        failed = "plan-cascade: could not join the sandbox's cgroup; nothing ran"
        script = JOIN.format(more=more, failed=failed, status=JOIN_FAILED)
        tasks = [str(folder / "tasks") for folder in self.folders]
        return ["/bin/sh", "-p", "-c", script, "plan-cascade-cgroup", *tasks, *argv]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for folder in self.folders:
            try:
                found.update(int(p) for p in (folder / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                continue
        return found

    def remove_later(self) -> None:
        """`remove`, in a thread, not waited for (`removals_settled` waits): for a cgroup that is
        empty already, whose removal nothing needs to wait for."""
        removal = asyncio.ensure_future(asyncio.to_thread(self.remove))
        _REMOVALS.add(removal)
        removal.add_done_callback(_removed)

    def remove(self) -> None:
        """Kill what is still inside and remove the cgroup (a no-op for what is already gone)."""
        deadline = time.monotonic() + _EMPTY_WAIT
        while (inside := self.pids()) and time.monotonic() < deadline:
            for pid in inside:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    continue
            time.sleep(0.01)
        for folder in self.folders:
            for _ in range(100):  # the last exits are counted out a moment after they are reaped
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
            else:
                log.warning("cgroup %s could not be removed (processes still inside)", folder)


_REMOVALS: set[asyncio.Future[None]] = set()
"""Cgroups being removed (`Group.remove_later`), held until they are: a task nobody holds may be
collected before it ends."""


def _removed(removal: asyncio.Future[None]) -> None:
    _REMOVALS.discard(removal)
    if not removal.cancelled() and removal.exception() is not None:
        log.warning("a sandbox's cgroup could not be removed: %s", removal.exception())


async def removals_settled() -> None:
    """Wait until the cgroups being removed in the background are gone."""
    while _REMOVALS:
        await asyncio.wait(set(_REMOVALS))


@dataclass
class Cgroups:
    """Where this server makes its confined processes' cgroups; `make` one per process."""

    version: str
    """`v1` (a folder per controller) or `v2` (one folder for all)."""
    parents: dict[str, Path]
    """The folder new groups go in, per controller (`pids`, `memory`)."""
    _broken: str | None = field(default=None, repr=False)

    def make(self, *, processes: int, memory: int) -> Group | None:
        """A new cgroup with these limits (0: not limited), or None when none can be made here
        (then said once in the log, and never tried again)."""
        if self._broken is not None:
            return None
        wanted = {"pids": processes, "memory": memory}
        name = f"plan-cascade-{os.getpid()}-{next(_counter)}"
        group = Group(folders=[], joins=self.version == "v1")
        try:
            for parent in dict.fromkeys(self.parents.values()):  # one folder per distinct parent
                folder = parent / name
                folder.mkdir()
                group.folders.append(folder)
                for controller, limit in wanted.items():
                    if limit and self.parents.get(controller) == parent:
                        (folder / _LIMIT_FILES[(self.version, controller)]).write_text(str(limit))
        except OSError as exc:
            group.remove()
            self._broken = f"{type(exc).__name__}: {exc}"
            log.warning(
                "no cgroup can be made for confined processes (%s): their processes and memory are "
                "limited by rlimits alone (see PLAN_CASCADE_SANDBOX_CGROUP)",
                self._broken,
            )
            return None
        return group

    def sweep(self) -> int:
        """Remove the empty cgroups a dead server process left (SIGKILL gives it no time to); how
        many. Its confined processes died with it; nothing is killed here, and another live bot
        process's cgroups are never touched (nor one of another PID namespace that still holds
        processes: a cgroup with processes cannot be removed)."""
        removed = 0
        for parent in dict.fromkeys(self.parents.values()):
            try:
                names = [entry.name for entry in os.scandir(parent) if entry.is_dir(follow_symlinks=False)]
            except OSError:
                continue
            for name in names:
                owner = _OWN_NAME.fullmatch(name)
                if owner is not None and not _alive(int(owner.group(1))):
                    try:
                        (parent / name).rmdir()
                    except OSError:
                        continue
                    removed += 1
        return removed

    @property
    def counts(self) -> tuple[str, ...]:
        """The controllers in use (`pids`, `memory`)."""
        return () if self._broken is not None else tuple(self.parents)


def find_cgroups(setting: str = "auto") -> Cgroups | None:
    """Where confined processes' cgroups go, by `PLAN_CASCADE_SANDBOX_CGROUP` (None: nowhere)."""
    if setting == "off":
        return None
    try:
        if setting != "auto":
            return _delegated(Path(setting))
        return _found()
    except OSError as exc:
        log.warning("cgroups for confined processes: %s", exc)
        return None


def _found() -> Cgroups | None:
    mounts = _mounts()
    own = _own_groups()
    v1 = {}
    for controller in CONTROLLERS:
        mount = mounts.get(controller)
        path = own.get(controller)
        if mount is not None and path is not None:
            folder = mount / path.lstrip("/")
            if os.access(folder, os.W_OK):
                v1[controller] = folder
    if v1:
        return Cgroups(version="v1", parents=v1)
    unified, path = mounts.get(""), own.get("")
    if unified is None or path is None:
        return None
    mine = unified / path.lstrip("/")
    if mine == unified:
        return _delegated(unified)
    parent = mine.parent  # systemd's `Delegate=yes` + `DelegateSubgroup=`: the service's group
    if _delegated_by_systemd(parent) and not (parent / "cgroup.procs").read_text().split():
        return _delegated(parent)
    return None


def _delegated_by_systemd(folder: Path) -> bool:
    """Whether systemd delegated `folder` (its `Delegate=yes` marks it): a group made anywhere
    else in its tree would be one it does not know."""
    for name in ("trusted.delegate", "user.delegate"):
        try:
            if os.getxattr(folder, name).strip(b"\0") == b"1":
                return True
        except OSError:
            continue
    return False


def _delegated(folder: Path) -> Cgroups | None:
    """A cgroup v2 folder where groups with `pids` (and `memory`) can be made; None otherwise."""
    available = (folder / "cgroup.controllers").read_text().split()
    enabled = (folder / "cgroup.subtree_control").read_text().split()
    missing = [c for c in CONTROLLERS if c in available and c not in enabled]
    if missing:
        (folder / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in missing))
        enabled = (folder / "cgroup.subtree_control").read_text().split()
    parents = {c: folder for c in CONTROLLERS if c in enabled}
    return Cgroups(version="v2", parents=parents) if "pids" in parents else None


def _mounts() -> dict[str, Path]:
    """Mount points: per cgroup v1 controller, and "" for the cgroup v2 hierarchy."""
    found: dict[str, Path] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        dash = fields.index("-")
        kind, options = fields[dash + 1], fields[dash + 3].split(",") if len(fields) > dash + 3 else []
        if fields[3] != "/":
            continue  # a bind mount of part of a hierarchy: paths in /proc/self/cgroup do not fit it
        if kind == "cgroup2":
            found.setdefault("", Path(fields[4]))
        elif kind == "cgroup":
            for controller in CONTROLLERS:
                if controller in options:
                    found.setdefault(controller, Path(fields[4]))
    return found


def _own_groups() -> dict[str, str]:
    """This process's cgroup path, per v1 controller, and "" for cgroup v2."""
    found: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _id, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            found[controller] = path
    return found
