"""What a sandbox sees of its worktree's git: the history to read, and a repository of its own to write.

A worktree's `.git` file names its admin dir in the bare mirror (`<mirror>/worktrees/<id>`: HEAD,
index, logs, `commondir`, `gitdir`), and `commondir` leads to the mirror (objects, refs, tags,
packed-refs, config). Confined, a process sees at those paths a **private copy** of them, made
from the real ones each time a confinement is made and kept under the data dir, where no sandbox
reaches it by any other path:

- `<mirror>`: the mirror's HEAD, config, `info/` and refs (branches and tags, all in one
  `packed-refs`), read-write;
- `<mirror>/worktrees/<id>`: its own worktree's admin dir (HEAD, index, … but not the bot's reflog
  or ORIG_HEAD there), read-write; no other worktree's;
- `<mirror>/objects`: an empty object store, read-write, whose `info/alternates` names the
  mirror's real objects, bound read-only at `<mirror>/objects/shared`.

So every git command works inside, `git log`/`diff`/`status`/`describe --tags` as well as `add`,
`stash`, `commit` and `switch -c`, and a project that takes its version from its tags installs
with it; but what a process writes (objects, refs, HEAD, index, config) lands in its private copy:
it never reaches the bot's git, and the next confinement starts again from what the bot's git sees.
The work that counts is the worktree's files, which the bot commits itself. Nothing else of the
data dir shows: not the other mirrors, the caches, the database or the key, nor the mirror's
reflogs, hooks or `FETCH_HEAD`. The mirror holds no secret anyway (the installation token only
ever travels in git's environment).

Making the copy is file I/O: about twenty files and folders to remove and to make again, so
`refresh` runs in a thread, never on the event loop (see `Sandbox.confinement`). There each system
call gives up the GIL and waits to get it back while the loop runs Python, and each file or folder
made waits for the disk's journal (~1.5 ms each while stories commit beside it): the copy makes as
few as it can (all refs in one file, no reflog, no modes or times copied, plain `os` calls).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from bot.errors import WorkspaceError
from bot.sandbox.removal import remove_tree

SCRATCH_DIR = "sandbox-git"
"""Under the data dir: `<data>/sandbox-git/<mirror>/<worktree id>`, one private repository each."""
SHARED = "shared"
"""Where the mirror's real objects show inside the private object store (read-only)."""
COPIED = ("HEAD", "shallow")
"""The mirror's own files a repository needs (its config, refs and `info/` are copied besides)."""
PRIVATE_CONFIG = "\n[core]\n\tcheckStat = minimal\n"
"""Added to the copy's config: inside, the worktree's files belong to another uid than the one
the bot's git recorded in the index, and with the default check every `git status` would read
every file again to compare it."""
_SHA = re.compile(rb"[0-9a-f]{40}([0-9a-f]{24})?")
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC


def scratch_for(*, root: Path, mirror: Path, admin_id: str) -> Path:
    """Where the private copy for the worktree `admin_id` of `mirror` lives (the bot's alone)."""
    return root / SCRATCH_DIR / mirror.name / admin_id


@dataclass(frozen=True)
class GitView:
    """A worktree's git as its sandbox sees it; all paths are real (symlink-free) host paths."""

    mirror: Path
    """The bare mirror: the private copy shows at its path, its real objects read-only inside."""
    admin_id: str
    """The worktree's admin dir in the mirror is `worktrees/<admin_id>` (what its `.git` file names)."""
    scratch: Path
    """The private copy (a bare repository with the worktree's admin dir and no objects of its own)."""

    def refresh(self) -> None:
        """Make the private copy again from what the bot's git sees now."""
        try:
            self._copy(str(self.mirror), str(self.scratch))
        except OSError as exc:  # the message reaches the plan comment: no server path in it
            why = exc.strerror or type(exc).__name__
            raise WorkspaceError(f"the sandbox's copy of the repository could not be made ({why})") from exc

    def _copy(self, mirror: str, scratch: str) -> None:
        remove_scratch(self.scratch)
        os.makedirs(f"{scratch}/objects/{SHARED}")
        for folder in ("objects/info", "refs", "worktrees"):  # git makes refs/heads and the rest itself
            os.mkdir(f"{scratch}/{folder}")
        _write(f"{scratch}/objects/info/alternates", f"{mirror}/objects/{SHARED}\n".encode())
        for name in COPIED:
            try:
                _write(f"{scratch}/{name}", _read(f"{mirror}/{name}"))
            except FileNotFoundError:
                continue
        _write(f"{scratch}/config", _read(f"{mirror}/config") + PRIVATE_CONFIG.encode())
        if os.path.isdir(f"{mirror}/info"):
            _copy_files(f"{mirror}/info", f"{scratch}/info")
        _copy_refs(mirror, scratch)
        admin = f"worktrees/{self.admin_id}"  # without the bot's own reflog and ORIG_HEAD
        _copy_files(f"{mirror}/{admin}", f"{scratch}/{admin}", skip=("logs", "ORIG_HEAD"))

    def mounts(self) -> list[str]:
        """The bubblewrap options that show this view (after the worktree's own binds)."""
        return [
            "--bind", str(self.scratch), str(self.mirror),
            "--ro-bind", str(self.mirror / "objects"), str(self.mirror / "objects" / SHARED),
        ]  # fmt: skip


def _read(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _write(path: str, data: bytes) -> None:
    fd = os.open(path, _CREATE, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _copy_files(source: str, target: str, *, skip: tuple[str, ...] = ()) -> None:
    """Copy the folder `source` to `target` (made here), without its files being written (`*.lock`)
    or what `skip` names; files that vanish meanwhile (the bot's git works on other worktrees
    of the mirror at the same time) are skipped. Contents only: no modes or times to set afterwards."""
    os.mkdir(target)
    with os.scandir(source) as entries:
        for entry in entries:
            if entry.name in skip or entry.name.endswith(".lock"):
                continue
            if entry.is_dir(follow_symlinks=False):
                _copy_files(entry.path, f"{target}/{entry.name}")
            elif entry.is_file(follow_symlinks=False):
                try:
                    _write(f"{target}/{entry.name}", _read(entry.path))
                except FileNotFoundError:
                    continue


def _copy_refs(source: str, target: str) -> None:
    """The branches and tags of `source` into `target` as one `packed-refs`: one file to make
    instead of one per loose ref and per folder of them. A loose ref wins over its packed entry,
    as in git; the loose ones are read first (`pack-refs` may be moving them into `packed-refs`
    meanwhile: read in this order, none is missed). What is no plain commit id (a symbolic ref)
    stays a loose file. No `pack-refs with:` traits are claimed: git peels what has no `^` line."""
    loose: dict[bytes, bytes] = {}
    _read_loose(f"{source}/refs", b"refs", loose)
    try:
        packed = _read(f"{source}/packed-refs")
    except FileNotFoundError:
        packed = b""
    entries: dict[bytes, bytes] = {}  # refname → its lines in packed-refs (with a tag's `^` line)
    owner: bytes | None = None
    for line in packed.splitlines():
        if line.startswith(b"^"):
            if owner is not None:
                entries[owner] += line + b"\n"
        elif not line.startswith(b"#") and b" " in line:
            owner = line.partition(b" ")[2]
            entries[owner] = line + b"\n"
    for ref, value in loose.items():
        if _SHA.fullmatch(value.strip()):
            entries[ref] = b"%s %s\n" % (value.strip(), ref)
        else:
            path = f"{target}/{os.fsdecode(ref)}"
            os.makedirs(os.path.dirname(path), exist_ok=True)
            _write(path, value)
    _write(f"{target}/packed-refs", b"".join(entries[ref] for ref in sorted(entries)))


def _read_loose(folder: str, prefix: bytes, found: dict[bytes, bytes]) -> None:
    with os.scandir(folder) as entries:
        for entry in entries:
            name = prefix + b"/" + os.fsencode(entry.name)
            if entry.is_dir(follow_symlinks=False):
                _read_loose(entry.path, name, found)
            elif not entry.name.endswith(".lock"):
                try:
                    found[name] = _read(entry.path)
                except FileNotFoundError:
                    continue  # deleted, or moved into packed-refs, meanwhile


def remove_scratch(path: Path) -> None:
    """Delete a private copy, whatever a sandbox left in it: symlinks are removed, never
    followed, and directories it made unwritable are opened up first (for a bot that is not root).
    Its sandboxes are gone by then (each dies with its command), so nothing changes it meanwhile."""
    remove_tree(path)
