"""What a sandbox sees of its worktree's git: the history to read, and a repository of its own to write.

A worktree's `.git` file names its admin dir in the bare mirror (`<mirror>/worktrees/<id>`: HEAD,
index, logs, `commondir`, `gitdir`), and `commondir` leads to the mirror (objects, refs, tags,
packed-refs, config). Confined, a process sees at those paths a **private copy** of them, made
from the real ones:

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

The copy is made in one of two places, from the same list of files (`GitView.entries`):

- **in the sandbox's memory** (`GitView.snapshot`, the usual way): the files are read once per
  confinement; each process it starts gets a tmpfs at the mirror's path, sized like its `/tmp`
  (its memory), that bubblewrap fills from one memfd per file (`--dir`, `--file FD`). Nothing is
  written to disk, each process starts from the bot's git, and its writes vanish with it;
- **on disk** (`GitView.refresh`), under the data dir where no sandbox reaches it by any other
  path, bound at the mirror's path: for a confinement whose processes are one session and must
  see each other's git writes (the built-in agent's commands: `git add`, then `git commit`), and
  for a bubblewrap that cannot make files. It is made again for each such confinement; about
  twenty files and folders to remove and make again, each waiting for the disk's journal, with
  as few as can be (all refs in one file, no reflog, no modes or times copied, plain `os` calls).

Reading the bot's git (and making the copy on disk) is file I/O, so it runs in a thread, never on
the event loop (see `Sandbox.confinement`); the memfds, memory alone, are made as each process starts.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
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

Entry = tuple[str, bytes | None]
"""A path of the copy, relative to the mirror, and its contents (None: a folder)."""


def scratch_for(*, root: Path, mirror: Path, admin_id: str) -> Path:
    """Where the on-disk private copy for the worktree `admin_id` of `mirror` lives (the bot's alone)."""
    return root / SCRATCH_DIR / mirror.name / admin_id


def _failed(exc: OSError) -> WorkspaceError:
    why = exc.strerror or type(exc).__name__  # the message reaches the plan comment: no server path
    return WorkspaceError(f"the sandbox's copy of the repository could not be made ({why})")


@dataclass(frozen=True)
class GitView:
    """A worktree's git as its sandbox sees it; all paths are real (symlink-free) host paths.
    Mounted as is, it shows the copy on disk (`refresh`); `snapshot` gives the copy in memory."""

    mirror: Path
    """The bare mirror: the private copy shows at its path, its real objects read-only inside."""
    admin_id: str
    """The worktree's admin dir in the mirror is `worktrees/<admin_id>` (what its `.git` file names)."""
    scratch: Path
    """The copy on disk (a bare repository with the worktree's admin dir and no objects of its own)."""

    def entries(self) -> list[Entry]:
        """The private copy's folders and files as the bot's git sees them now, parents first."""
        mirror = str(self.mirror)
        tree = _Tree(["objects/info", "refs", "worktrees"])  # git makes refs/heads and the rest itself
        tree.file("objects/info/alternates", f"{mirror}/objects/{SHARED}\n".encode())
        for name in COPIED:
            with contextlib.suppress(FileNotFoundError):
                tree.file(name, _read(f"{mirror}/{name}"))
        tree.file("config", _read(f"{mirror}/config") + PRIVATE_CONFIG.encode())
        if os.path.isdir(f"{mirror}/info"):
            _copy_files(mirror, "info", tree)
        _copy_refs(mirror, tree)
        admin = f"worktrees/{self.admin_id}"  # without the bot's own reflog and ORIG_HEAD
        _copy_files(mirror, admin, tree, skip=("logs", "ORIG_HEAD"))
        return tree.entries

    def refresh(self) -> None:
        """Make the copy on disk again from what the bot's git sees now."""
        try:
            entries = self.entries()
            remove_scratch(self.scratch)
            os.makedirs(self.scratch)
            for path, data in entries:
                if data is None:
                    os.mkdir(f"{self.scratch}/{path}")
                else:
                    _write(f"{self.scratch}/{path}", data)
            os.mkdir(f"{self.scratch}/objects/{SHARED}")
        except OSError as exc:
            raise _failed(exc) from exc

    def snapshot(self) -> GitSnapshot:
        """The copy in memory, read from what the bot's git sees now: each process starts from it."""
        try:
            return GitSnapshot(mirror=self.mirror, entries=tuple(self.entries()))
        except OSError as exc:
            raise _failed(exc) from exc

    def files(self) -> list[int]:
        """No descriptors: the copy is on disk."""
        return []

    def mounts(self, files: Sequence[int] = (), *, size: int = 0) -> list[str]:
        """The bubblewrap options that show the copy on disk (after the worktree's own binds)."""
        return [
            "--bind", str(self.scratch), str(self.mirror),
            "--ro-bind", str(self.mirror / "objects"), str(self.mirror / "objects" / SHARED),
        ]  # fmt: skip


@dataclass(frozen=True)
class GitSnapshot:
    """The private copy in memory: made anew in each sandbox, in a tmpfs of its own."""

    mirror: Path
    entries: tuple[Entry, ...] = field(repr=False)
    """What `GitView.entries` read (the index among them: not for logs)."""

    def files(self) -> list[int]:
        """One memfd per file of the copy, in order, at its start: for one process's bubblewrap,
        which reads them to the end; the caller closes them once it started."""
        made: list[int] = []
        try:
            for path, data in self.entries:
                if data is not None:
                    made.append(fd := os.memfd_create(path.rpartition("/")[2]))
                    _write_all(fd, data)
                    os.lseek(fd, 0, os.SEEK_SET)
        except BaseException as exc:
            for fd in made:
                os.close(fd)
            if isinstance(exc, OSError):  # e.g. out of descriptors
                raise _failed(exc) from exc
            raise
        return made

    def mounts(self, files: Sequence[int], *, size: int = 0) -> list[str]:
        """The bubblewrap options that make the copy from `files` (see `files`) in a tmpfs at the
        mirror's path, at most `size` bytes (0: not sized), after the worktree's own binds."""
        args = ["--size", str(size)] if size else []
        args += ["--tmpfs", str(self.mirror)]
        fds = iter(files)
        for path, data in self.entries:
            where = f"{self.mirror}/{path}"
            args += ["--dir", where] if data is None else ["--file", str(next(fds)), where]
        return [*args, "--ro-bind", str(self.mirror / "objects"), str(self.mirror / "objects" / SHARED)]


class _Tree:
    """The copy's entries, each folder listed once, before what it holds."""

    def __init__(self, folders: Sequence[str]) -> None:
        self.entries: list[Entry] = []
        self._folders = {""}
        for folder in folders:
            self.folder(folder)

    def folder(self, path: str) -> None:
        if path not in self._folders:
            self.folder(path.rpartition("/")[0])
            self._folders.add(path)
            self.entries.append((path, None))

    def file(self, path: str, data: bytes) -> None:
        self.folder(path.rpartition("/")[0])
        self.entries.append((path, data))


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
        _write_all(fd, data)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _copy_files(mirror: str, folder: str, tree: _Tree, *, skip: tuple[str, ...] = ()) -> None:
    """The folder `folder` of `mirror` into `tree`, without its files being written (`*.lock`)
    or what `skip` names; files that vanish meanwhile (the bot's git works on other worktrees
    of the mirror at the same time) are skipped. Contents only: no modes or times."""
    tree.folder(folder)
    with os.scandir(f"{mirror}/{folder}") as entries:
        for entry in entries:
            if entry.name in skip or entry.name.endswith(".lock"):
                continue
            if entry.is_dir(follow_symlinks=False):
                _copy_files(mirror, f"{folder}/{entry.name}", tree)
            elif entry.is_file(follow_symlinks=False):
                try:
                    tree.file(f"{folder}/{entry.name}", _read(entry.path))
                except FileNotFoundError:
                    continue


def _copy_refs(source: str, tree: _Tree) -> None:
    """The branches and tags of `source` into `tree` as one `packed-refs`: one file to make
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
            tree.file(os.fsdecode(ref), value)
    tree.file("packed-refs", b"".join(entries[ref] for ref in sorted(entries)))


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
    """Delete a copy on disk, whatever a sandbox left in it: symlinks are removed, never
    followed, and directories it made unwritable are opened up first (for a bot that is not root).
    Its sandboxes are gone by then (each dies with its command), so nothing changes it meanwhile."""
    remove_tree(path)
