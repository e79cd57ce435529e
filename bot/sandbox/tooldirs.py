"""Which host directories a confined process sees besides the system's: those of its tools.

Each directory of its PATH (and of the tools a caller names) is bound read-only, with what its
programs need besides it (a virtualenv's root and its base Python's installation), unless it is
a system directory (already shown), lies inside the worktree (bound read-write anyway), or holds
or lies inside a path the server hides. Finding what a directory needs lists it (~1,000 entries
in /usr/bin, ~0.6 ms), so that is kept per directory while it is unchanged; everything else is a
few stats per directory, fine on an event loop (`tool_dirs` with `listing=False` says when a
directory would have to be listed, and a caller on the loop asks again from a thread).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
_SYSTEM_PATHS = tuple(Path(d) for d in SYSTEM_DIRS)

RUNTIME_KEEP = 60.0
"""Seconds what a tool directory needs (`runtime_of`) is kept while the directory and its
virtualenv's `pyvenv.cfg` are unchanged: every confined process asks, and finding it lists the
directory (~1,000 entries in /usr/bin); a symlink retargeted elsewhere (`/etc/alternatives`)
shows within the minute."""


KEPT_MAX = 256
kept_runtime: dict[tuple[object, ...], tuple[Path, ...]] = {}
"""What tool directories need, by directory and the state (and minute) it was found in: asked on
the event loop, which only takes what is kept, and from threads alike (a dict's reads and writes
are whole under the GIL); it starts over when `KEPT_MAX` are kept."""


def within(path: Path, folder: Path) -> bool:
    """`path.is_relative_to(folder)`, from the parts both already hold: a process's argv asks
    this dozens of times, and `is_relative_to` parses `folder` again each time."""
    depth = len(folder.parts)
    return path.parts[:depth] == folder.parts if depth else not path.root


def under_system(path: Path) -> bool:
    """Whether `path` is one of the system directories every sandbox shows, or inside one."""
    return any(within(path, d) for d in _SYSTEM_PATHS)


def tool_dirs(
    entries: Iterable[str], *, worktree: Path | None, hidden: Sequence[Path], listing: bool
) -> list[Path] | None:
    """The directories to show for PATH `entries`, with what their programs need; None when
    not `listing` and a directory would have to be listed first (not seen within `RUNTIME_KEEP`,
    or changed since)."""
    dirs: list[Path] = []
    seen: set[Path] = set()
    for entry in entries:
        given = Path(entry)
        if not entry or not given.is_absolute():
            continue
        real = given.resolve()
        if real in seen:  # `/bin` after `/usr/bin` (a merged /usr), a directory listed twice:
            continue  # what it needs depends on the real directory alone, already found
        seen.add(real)
        runtime = runtime_of(given, real=real, listing=listing)
        if runtime is None:
            return None
        for path in (real, *runtime):
            if path.is_dir() and not under_system(path):
                _add(dirs, path, worktree=worktree, hidden=hidden)
    return dirs


def _add(dirs: list[Path], path: Path, *, worktree: Path | None, hidden: Sequence[Path]) -> None:
    if worktree is not None and within(path, worktree):
        return
    if any(path == h or within(path, h) or within(h, path) for h in hidden):
        return  # never mount the data dir (or a parent of it) as a tool dir
    if path not in dirs and not any(within(path, d) for d in dirs):
        dirs[:] = [d for d in dirs if not within(d, path)] + [path]


def runtime_of(directory: Path, *, real: Path, listing: bool = True) -> list[Path] | None:
    """What the programs of a tool directory need besides it: a virtualenv's root and base Python.
    `real`: the directory resolved. Not `listing`: None when that is not kept, rather than list it."""
    try:
        listed = os.stat(directory).st_mtime_ns
    except OSError:  # nothing there to list; what it names is still looked at, off the loop
        return _find_runtime(directory) if listing else None
    try:
        config: int | None = os.stat(real.parent / "pyvenv.cfg").st_mtime_ns
    except OSError:
        config = None
    key = (str(directory), listed, config, int(time.monotonic() // RUNTIME_KEEP))
    found = kept_runtime.get(key)
    if found is None:
        if not listing:
            return None
        found = tuple(_find_runtime(directory))
        if len(kept_runtime) >= KEPT_MAX:
            kept_runtime.clear()
        kept_runtime[key] = found
    return list(found)


def _find_runtime(directory: Path) -> list[Path]:
    found = []
    venv = directory.resolve().parent
    config = venv / "pyvenv.cfg"
    if config.is_file():
        found.append(venv)
        for line in config.read_text(errors="replace").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                found.append(Path(value.strip()).resolve().parent)
    for program in sorted(_pythons(directory)):
        if program.is_symlink():
            found.append(program.resolve().parent.parent)
    return found


def _pythons(directory: Path) -> list[Path]:
    """`python*` in `directory`, listed without `glob` (which builds a path and runs a regex for
    each of the ~1,000 entries of /usr/bin, for every process a sandbox starts)."""
    try:
        with os.scandir(directory) as entries:
            return [Path(entry.path) for entry in entries if entry.name.startswith("python")]
    except (FileNotFoundError, NotADirectoryError):
        return []
