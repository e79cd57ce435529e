"""Removing folders that untrusted code wrote into: worktrees, HOMEs, environments, git copies.

Setup, gates and agents may leave a folder nobody can list or write (`chmod 000`, `chmod a-w`),
symlinks to anywhere, and trees thousands of levels deep. A server running as root removes the
first anyway; any other server cannot, and a worktree that cannot be removed blocks the next one
at the same path. `shutil.rmtree` also recurses once per level and stops with RecursionError
about a thousand levels down. `remove_tree` walks with a stack (one open descriptor per level),
opens every folder relative to its parent with `O_NOFOLLOW` (a symlink is removed, never
followed), gives the owner back its rights on a folder that lacks them (through that folder's own
descriptor, never a path) and removes everything. The writers are gone by then (each sandbox
dies with its command). Synchronous file I/O: async code calls it through `asyncio.to_thread`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from pathlib import Path

log = logging.getLogger(__name__)
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OWNER = stat.S_IRWXU


def remove_tree(path: Path) -> None:
    """Remove `path` and all it holds, whatever modes were left on it; a missing path is fine, a
    symlink (or a file) there is removed itself. OSError when the file system refuses."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(mode):
        os.unlink(path)
        return
    parent = os.open(path.parent, _DIRECTORY & ~os.O_NOFOLLOW)  # the caller's own folder
    try:
        _remove_folder(parent, path.name)
    finally:
        os.close(parent)


def _remove_folder(parent: int, name: str) -> None:
    """Remove the folder `name` of the open folder `parent`, depth first, without recursion."""
    stack = [(parent, name, *_open(parent, name))]
    try:
        while stack:
            above, folder_name, folder, entries = stack[-1]
            if entries:
                entry, is_folder = entries.pop()
                if is_folder:
                    stack.append((folder, entry, *_open(folder, entry)))
                else:
                    os.unlink(entry, dir_fd=folder)
                continue
            stack.pop()
            os.close(folder)
            os.rmdir(folder_name, dir_fd=above)
    finally:
        for _above, _name, folder, _entries_left in stack:
            os.close(folder)


def _open(parent: int, name: str) -> tuple[int, list[tuple[str, bool]]]:
    """The folder `name` of `parent` opened (see `_enter`), and what it holds."""
    fd = _enter(parent, name)
    try:
        return fd, _entries(fd)
    except BaseException:
        os.close(fd)
        raise


def _enter(parent: int, name: str) -> int:
    """The folder `name` of `parent`, opened, its owner's rights given back where they lacked."""
    try:
        fd = os.open(name, _DIRECTORY, dir_fd=parent)
    except PermissionError:  # unreadable: give rights back through a handle that reads nothing
        handle = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
        try:
            mode = os.fstat(handle).st_mode
            if not stat.S_ISDIR(mode):
                raise
            os.chmod(f"/proc/self/fd/{handle}", stat.S_IMODE(mode) | _OWNER)  # this inode, no path
        finally:
            os.close(handle)
        fd = os.open(name, _DIRECTORY, dir_fd=parent)
    mode = os.fstat(fd).st_mode
    if mode & _OWNER != _OWNER:  # listable but not writable (`chmod a-w`): nothing could go
        os.chmod(fd, stat.S_IMODE(mode) | _OWNER)
    return fd


def _entries(folder: int) -> list[tuple[str, bool]]:
    """(name, is a folder) of what `folder` holds; a symlink to a folder is no folder here."""
    with os.scandir(folder) as listed:
        return [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in listed]


async def discard(path: Path) -> None:
    """`remove_tree` off the event loop, for what only takes room (a story's HOME): a failure is
    logged, not raised."""
    try:
        await asyncio.to_thread(remove_tree, path)
    except OSError as exc:
        log.warning("could not remove %s: %s", path, exc)
