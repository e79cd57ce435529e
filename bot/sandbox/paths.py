"""Path confinement for agent tools: every path an agent names must stay in its worktree.

Pure apart from resolving symlinks on disk. Refused, with a message the agent can act on:
absolute paths, ``..`` leaving the root, symlinks (anywhere along the path) resolving
outside, writes into ``.git`` (a directory or the worktree's ``.git`` file), and writes
matching a deny glob. Deny globs never restrict reads.

Glob syntax: ``*`` and ``?`` stay within one path segment, ``**`` crosses directories
(``.github/workflows/**``); a glob without ``/`` matches a name at any depth (``*.pem``);
a glob that matches a directory also covers everything below it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from bot.config.globs import is_denied
from bot.errors import SandboxViolation


def _normalised(user_path: str) -> PurePosixPath:
    """Lexically normalise ``user_path``; raise if it is absolute or ``..`` climbs above the root."""
    if "\0" in user_path:
        raise SandboxViolation(f"path {user_path!r} contains a NUL byte")
    path = PurePosixPath(user_path)
    if path.is_absolute() or user_path == "~" or user_path.startswith("~/"):
        raise SandboxViolation(f"path {user_path!r} is absolute: use a path relative to the repository root")
    parts: list[str] = []
    for part in path.parts:
        if part == "..":
            if not parts:
                raise SandboxViolation(f"path {user_path!r} uses '..' to leave the repository")
            parts.pop()
        elif part != ".":
            parts.append(part)
    return PurePosixPath(*parts)


def _check_write(rel: PurePosixPath, *, user_path: str, deny: Sequence[str]) -> None:
    if any(part.lower() == ".git" for part in rel.parts):
        raise SandboxViolation(f"path {user_path!r} is inside .git: git metadata is read-only for agents")
    if is_denied(rel.as_posix(), deny):
        raise SandboxViolation(f"path {user_path!r} is read-only here (it matches a denied path pattern)")


def resolve_path(root: Path, user_path: str, *, write: bool, deny: Sequence[str] = ()) -> Path:
    """The real path ``user_path`` names inside ``root``, or :class:`SandboxViolation`."""
    real_root = root.resolve()
    rel = _normalised(user_path)
    # resolve() follows every symlink along the way, in order, before applying '..'.
    resolved = (real_root / user_path).resolve()
    if not resolved.is_relative_to(real_root):
        raise SandboxViolation(f"path {user_path!r} resolves outside the repository (through a symlink)")
    if write:
        _check_write(rel, user_path=user_path, deny=deny)
        real_rel = PurePosixPath(resolved.relative_to(real_root).as_posix())
        if real_rel != rel:
            _check_write(real_rel, user_path=user_path, deny=deny)
        if resolved == real_root:
            raise SandboxViolation(f"path {user_path!r} is the repository root itself, not a file")
    return resolved
