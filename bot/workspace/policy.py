"""What no agent may change, whatever tool it used: checked after every agent run, for every agent.

The builtin agent's file tools refuse such paths up front, but `bash` and external agents can
write anything their sandbox lets them. After each run the bot (with its own git, which never
reads the worktree's `.git` file) lists what changed and refuses:

- anything under a `.git` path component, and a changed `.git` file of the worktree itself;
- paths matching `paths.deny`;
- symlinks that point outside the worktree (or anywhere absolute).

Offending changes are reverted before anything is committed; the caller fails the attempt
with their list (fed back to the agent) and the story when attempts run out.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from bot.config.globs import is_denied
from bot.sandbox.removal import remove_tree
from bot.workspace.worktree import Worktree, git_file


async def protected_paths(wt: Worktree, deny: Sequence[str]) -> list[Path]:
    """What the sandbox binds read-only inside the worktree: its `.git` file, tracked deny matches."""
    found = [wt.path / ".git"]
    if not deny or not _may_match(wt.path, deny):
        return found
    listed = await wt.git("ls-files", "-z")
    seen: set[str] = set()
    for name in listed.stdout.split("\0"):
        parts = PurePosixPath(name).parts
        for depth in range(1, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            if prefix in seen:
                break
            if is_denied(prefix, deny):
                seen.add(prefix)
                found.append(wt.path / prefix)
                break
    return found


def _may_match(root: Path, deny: Sequence[str]) -> bool:
    """False only when no file of the worktree can match: every glob starts with a literal
    directory (``.github/workflows/**``) that does not exist (then git need not list the files)."""
    for glob in deny:
        parts = glob.strip().removeprefix("./").lstrip("/").split("/")
        literal = []
        for part in parts[:-1]:
            if any(c in part for c in "*?["):
                break
            literal.append(part)
        if not literal or (root / "/".join(literal)).exists() or (root / "/".join(literal)).is_symlink():
            return True
    return False


async def policy_violations(
    wt: Worktree, *, deny: Sequence[str], changed: Sequence[str] | None = None
) -> list[str]:
    """Changed paths the agent must not change (empty when the run kept to the rules). `changed`:
    every path that differs from HEAD, staged and not, when the caller read them already (the
    change of the index after `git add -A`); else git lists them, the same staged or not (the
    caller may stage them meanwhile)."""
    problems: list[str] = []
    link = wt.path / ".git"
    if link.is_symlink() or not link.is_file() or link.read_text(errors="replace") != git_file(wt.admin):
        problems.append(".git")
    if changed is None:
        changed = await _changed(wt)
    root = wt.path.resolve()
    for name in changed:
        parts = PurePosixPath(name.rstrip("/")).parts
        full = wt.path / name
        if any(part.lower() == ".git" for part in parts) or (full.is_dir() and (full / ".git").exists()):
            problems.append(name)
        elif is_denied(name.rstrip("/"), deny):
            problems.append(name)
        elif full.is_symlink():
            target = os.readlink(full)
            if os.path.isabs(target) or not (full.parent / target).resolve().is_relative_to(root):
                problems.append(f"{name} (a symlink to {target})")
    return problems


async def _changed(wt: Worktree) -> list[str]:
    """Every path that differs from HEAD, staged or not, untracked ones one by one."""
    # No optional lock: `git add -A` may stage the same changes meanwhile (`git status` would
    # otherwise take the index's lock to refresh it, and the add would fail on it).
    status = await wt.git(
        "--no-optional-locks", "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames"
    )
    return [entry[3:] for entry in status.stdout.split("\0") if len(entry) >= 4]


async def revert(wt: Worktree, problems: Sequence[str]) -> None:
    """Undo the offending changes, staged or not: restore committed paths, delete (and unstage) new
    ones, rewrite the `.git` file."""
    link = wt.path / ".git"
    for problem in problems:
        name = problem.split(" (", 1)[0]
        if name == ".git":
            await asyncio.to_thread(remove_tree, link)
            link.write_text(git_file(wt.admin))
            continue
        committed = await wt.git("ls-tree", "-z", "--name-only", "HEAD", "--", name)
        full = wt.path / name
        if committed.stdout:  # as HEAD has it, in the index and the worktree
            await wt.git("checkout", "HEAD", "--", name)
        else:  # a folder the agent made may be unreadable, or deep: removed off the event loop
            await asyncio.to_thread(remove_tree, full)
            await wt.git("rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", name)  # if staged


def violation_feedback(problems: Sequence[str]) -> str:
    """What the agent is told when its changes broke the rules."""
    listed = "\n".join(f"- {p}" for p in problems[:50])
    return (
        "Your changes touched paths you may not change, and were undone:\n"
        f"{listed}\n\nGit metadata (.git), the repository's denied paths (paths.deny) and symlinks "
        "that lead outside the repository are off limits. Make the change without them."
    )
