"""Worktrees of a :class:`Mirror`: one checkout per branch, several at once.

Commits and merges use the identity passed in (``GIT_AUTHOR_*``/``GIT_COMMITTER_*``),
never the host's git config; the mirror sets ``user.useConfigOnly`` so git never guesses.

A worktree is agent-writable, its ``.git`` file included. The bot's git therefore never
reads that file: every command names the worktree's git dir inside the mirror (found from
the mirror's own records) and the work tree explicitly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from bot.errors import WorkspaceError
from bot.sandbox.removal import discard, remove_tree
from bot.workspace.git import OUTPUT_LIMIT, GitResult, run_git
from bot.workspace.gitview import GitView, remove_scratch, scratch_for
from bot.workspace.mirror import Mirror, file_bytes, read_ref

log = logging.getLogger(__name__)


def admin_dir(mirror: Mirror, path: Path) -> Path | None:
    """The mirror's directory for the worktree at ``path`` (``<mirror>/worktrees/<id>``), if any.

    The entry found last for ``path`` is tried first: it stands if its ``gitdir`` (the mirror's
    record, never the worktree's own ``.git``) still names the worktree, as git keeps one entry
    per worktree path; otherwise (the worktree removed, its entry reused) every entry is read.
    """
    wanted = str(path / ".git")
    known = mirror.worktree_admins.get(path)
    if known is not None:
        with contextlib.suppress(OSError):
            if file_bytes(os.path.join(known, "gitdir")).strip() == os.fsencode(wanted):
                return known
    root = mirror.path / "worktrees"
    for entry in sorted(root.iterdir()) if root.is_dir() else []:
        try:
            if (entry / "gitdir").read_text().strip() == wanted:
                mirror.worktree_admins[path] = entry
                return entry
        except OSError:
            continue
    mirror.worktree_admins.pop(path, None)
    return None


def git_file(admin: Path) -> str:
    """What the worktree's ``.git`` file must say."""
    return f"gitdir: {admin}\n"


@dataclass(frozen=True)
class Worktree:
    """A checkout of ``branch`` at ``path``, sharing the objects of ``mirror``."""

    path: Path
    branch: str
    mirror: Mirror

    @property
    def admin(self) -> Path:
        """The worktree's git dir in the mirror (raises when the mirror does not know the worktree)."""
        found = admin_dir(self.mirror, self.path)
        if found is None:
            raise WorkspaceError(f"{self.path} is not a worktree of mirror {self.mirror.path.name}")
        return found

    async def git(
        self,
        *args: str,
        check: bool = True,
        identity: tuple[str, str] | None = None,
        max_output: int = OUTPUT_LIMIT,
    ) -> GitResult:
        """Run a local git command in the worktree, optionally as ``(name, email)`` (``max_output``:
        see `run_git`)."""
        extra = {}
        if identity is not None:
            name, email = identity
            extra = {
                "GIT_AUTHOR_NAME": name,
                "GIT_AUTHOR_EMAIL": email,
                "GIT_COMMITTER_NAME": name,
                "GIT_COMMITTER_EMAIL": email,
            }
        explicit = ("--git-dir", str(self.admin), "--work-tree", str(self.path))
        env = self.mirror.local_env(extra)
        return await run_git([*explicit, *args], cwd=self.path, env=env, check=check, max_output=max_output)


def sandbox_view(wt: Worktree) -> GitView:
    """How `wt`'s git looks from inside its sandbox: a private copy, over the mirror's objects."""
    return _view(wt.mirror, wt.admin)


def _view(mirror: Mirror, admin: Path) -> GitView:
    real = mirror.path.resolve()
    scratch = scratch_for(root=mirror.root.resolve(), mirror=real, admin_id=admin.name)
    return GitView(mirror=real, admin_id=admin.name, scratch=scratch)


class MergeOutcome(BaseModel):
    """What :func:`merge_branches` did."""

    merged: list[str] = Field(default_factory=list, description="Branches merged, in order.")
    conflicts: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Branches left out because of conflicts, with the conflicting paths.",
    )


async def _current_branch(path: Path, mirror: Mirror) -> str | None:
    admin = admin_dir(mirror, path)
    if admin is None:
        return None
    result = await run_git(
        ["--git-dir", str(admin), "symbolic-ref", "--short", "-q", "HEAD"],
        cwd=mirror.path,
        env=mirror.local_env(),
        check=False,
    )
    return result.stdout.strip() or None


async def add_worktree(
    mirror: Mirror, *, branch: str, base_ref: str, path: Path, reset: bool = False
) -> Worktree:
    """Check out ``branch`` at ``path``.

    A new branch (or any branch with ``reset``) starts at ``base_ref``; an existing local
    branch is checked out as it is, so work can resume from it. A worktree already at
    ``path`` on ``branch`` is reused unless ``reset``.
    """
    async with mirror.worktree_lock:
        wt = await _add_locked(mirror, branch=branch, base_ref=base_ref, path=path, reset=reset)
    await _check_out(wt)
    return wt


async def _check_out(wt: Worktree) -> None:
    """Fill a worktree registered without its files (`--no-checkout`), outside the worktree
    lock: a large tree's checkout would hold every other story's worktree back. It is the
    command `git worktree add` runs itself; a worktree with an index has its files already
    (reused, or checked out before a crash), and is left as it is."""
    if not (wt.admin / "index").exists():
        await wt.git("reset", "--hard", "--no-recurse-submodules", "-q")


async def _add_locked(mirror: Mirror, *, branch: str, base_ref: str, path: Path, reset: bool) -> Worktree:
    mirror.exclude_environments()
    if (path / ".git").exists():
        if not reset and await _current_branch(path, mirror) == branch:
            return Worktree(path=path, branch=branch, mirror=mirror)
        await _remove_locked(Worktree(path=path, branch=branch, mirror=mirror))
    path.parent.mkdir(parents=True, exist_ok=True)
    args: tuple[str, ...]
    if reset or not await _branch_exists(mirror, branch):
        args = ("worktree", "add", "--no-checkout", "--no-track", "-B", branch, str(path), base_ref)
    else:
        args = ("worktree", "add", "--no-checkout", str(path), branch)
    try:
        await mirror.git(*args)
    except WorkspaceError:
        # A worktree left registered by a crash (its folder gone) blocks the add: prune, retry.
        await mirror.git("worktree", "prune")
        await mirror.git(*args)
    return Worktree(path=path, branch=branch, mirror=mirror)


async def add_detached(mirror: Mirror, *, path: Path, ref: str) -> Worktree:
    """A worktree at ``path`` on no branch, at ``ref``: history is rebuilt in it commit by
    commit, and the caller moves whatever branch it rebuilt once it is whole."""
    async with mirror.worktree_lock:
        mirror.exclude_environments()
        if (path / ".git").exists():
            await _remove_locked(Worktree(path=path, branch="", mirror=mirror))
        path.parent.mkdir(parents=True, exist_ok=True)
        args = ("worktree", "add", "--no-checkout", "--detach", str(path), ref)
        try:
            await mirror.git(*args)
        except WorkspaceError:
            await mirror.git("worktree", "prune")
            await mirror.git(*args)
    wt = Worktree(path=path, branch="", mirror=mirror)
    await _check_out(wt)
    return wt


async def _branch_exists(mirror: Mirror, branch: str) -> bool:
    found = await mirror.git("show-ref", "--verify", "--quiet", f"refs/heads/{branch}", check=False)
    return found.returncode == 0


async def remove_worktree(wt: Worktree) -> None:
    """Remove the worktree and its registration; idempotent, fine if the dir is already gone.

    Whatever its processes left in it (folders made unreadable, trees thousands of levels deep)
    goes too, off the event loop; OSError when the file system refuses. Nothing waits for a
    removal the way a story or a merge waits for its worktree: any add waiting goes first."""
    async with wt.mirror.worktree_lock.when_free():
        await _remove_locked(wt)


async def cleanup(worktree: Worktree, home: Path) -> None:
    """Remove a worktree (if it got created) and its HOME; runs to the end even when cancelled."""

    async def remove() -> None:
        try:
            if worktree.path.exists():
                await remove_worktree(worktree)
        except WorkspaceError as exc:
            log.warning("could not remove worktree %s: %s", worktree.path, exc.message)
        except OSError as exc:  # the file system refused (permissions are given back first)
            log.warning("could not remove worktree %s: %s", worktree.path, exc)
        await discard(home)

    task = asyncio.ensure_future(remove())
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await task
        raise


async def _remove_locked(wt: Worktree) -> None:
    """What `git worktree remove --force --force` does, without a git process: the work tree
    goes, then its folder in the mirror (`worktrees/<id>`, git's whole record of it), even when
    the first fails; with the sandboxes' copy of its git, in one thread. A worktree the mirror
    has no record of for this path leaves its registration, if any, to `git worktree prune`."""
    known = wt.mirror.exists()
    admin = admin_dir(wt.mirror, wt.path) if known else None
    scratch = _view(wt.mirror, admin).scratch if admin is not None else None

    def remove() -> None:
        if scratch is not None:  # its sandboxes' git on disk (none when made in memory)
            with contextlib.suppress(OSError):  # goes with the next removal then
                remove_scratch(scratch)
        try:
            remove_tree(wt.path)  # whatever its processes left: unreadable folders, deep trees
        finally:
            if admin is not None:
                remove_tree(admin)

    try:
        await asyncio.to_thread(remove)
    finally:
        wt.mirror.worktree_admins.pop(wt.path, None)
    if known and admin is None:
        await wt.mirror.git("worktree", "prune")  # the folder was gone or not ours: drop its record


async def head_sha(wt: Worktree) -> str:
    """The commit the worktree's HEAD points at (read from git's files when it can be)."""
    try:
        head = (wt.admin / "HEAD").read_text().strip()
    except (OSError, WorkspaceError):
        head = ""
    found = read_ref(wt.mirror.path, head.removeprefix("ref: ")) if head.startswith("ref: ") else None
    if found:
        return found
    return (await wt.git("rev-parse", "HEAD")).stdout.strip()


def _with_trailers(message: str, trailers: dict[str, str], co_authors: Sequence[str] = ()) -> str:
    pairs = [*trailers.items(), *(("Co-authored-by", who) for who in co_authors)]
    for key, value in pairs:
        if not key or any(c in key for c in ":\n\r ") or any(c in value for c in "\n\r"):
            raise ValueError(f"invalid commit trailer {key!r}: {value!r}")
    lines = [f"{key}: {value}" for key, value in pairs]
    body = message.strip()
    return f"{body}\n\n" + "\n".join(lines) + "\n" if lines else f"{body}\n"


async def stage_all(wt: Worktree) -> None:
    """Stage every change of the worktree (`git add -A`)."""
    await wt.git("add", "-A")


async def commit_staged(
    wt: Worktree,
    *,
    message: str,
    author_name: str,
    author_email: str,
    trailers: dict[str, str],
    co_authors: Sequence[str] = (),
) -> str | None:
    """Commit what is staged (`stage_all` stages everything) as the given identity; None when
    nothing is. `co_authors` (`Name <address>`) are credited with `Co-authored-by:` trailers."""
    made = await wt.git(
        "commit",
        "--no-verify",
        "--no-gpg-sign",
        "--cleanup=whitespace",
        "-m",
        _with_trailers(message, trailers, co_authors),
        identity=(author_name, author_email),
        check=False,
    )
    if made.returncode != 0:
        said = made.stdout + made.stderr  # git speaks C.UTF-8 here (git_env)
        if "nothing to commit" in said or "no changes added to commit" in said:
            return None
        raise WorkspaceError(f"git commit failed in {wt.path.name}: {said.strip()[-500:]}")
    return await head_sha(wt)


async def changed_files(wt: Worktree, base_sha: str) -> list[str]:
    """Paths that differ from ``base_sha``: committed, staged, unstaged and untracked changes."""
    diff = await wt.git("diff", "--name-only", "--no-renames", "-z", base_sha, "--")
    untracked = await wt.git("ls-files", "--others", "--exclude-standard", "-z")
    names = {name for name in (diff.stdout + untracked.stdout).split("\0") if name}
    return sorted(names)


async def merge_branches(
    wt: Worktree,
    branches: list[str],
    *,
    author_name: str,
    author_email: str,
    message_for: Callable[[str], str],
) -> MergeOutcome:
    """Merge each branch with ``--no-ff``; a conflicting one is aborted, recorded and skipped."""
    outcome = MergeOutcome()
    identity = (author_name, author_email)
    for branch in branches:
        args = ["merge", "--no-ff", "--no-edit", "--no-verify", "--no-gpg-sign", "-m", message_for(branch)]
        # The branch itself, never a tag of the same name (the remote's tags are fetched).
        result = await wt.git(*args, "--", f"refs/heads/{branch}", check=False, identity=identity)
        if result.returncode == 0:
            outcome.merged.append(branch)
            continue
        in_merge = await wt.git("rev-parse", "-q", "--verify", "MERGE_HEAD", check=False)
        if in_merge.returncode != 0:
            raise WorkspaceError(f"merging {branch} into {wt.branch} failed: {result.stderr.strip()[-2000:]}")
        unmerged = await wt.git("diff", "--name-only", "--diff-filter=U", "-z")
        outcome.conflicts[branch] = sorted(name for name in unmerged.stdout.split("\0") if name)
        await wt.git("merge", "--abort")
    return outcome
